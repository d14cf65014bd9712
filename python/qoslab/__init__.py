"""qoslab: NVMe and Linux block-layer quality of service, simulated and measured.

In a notebook: `qoslab.sim(...)` runs the simulator and returns a pandas DataFrame,
`qoslab.sim_json(...)` its fio JSON report, `qoslab.nvmelite.matrix(...)` the NVMe-lite study's
runs, `qoslab.lab.results(...)` a lab study's table (docs/python.md).
"""

from qoslab import lab, nvmelite, sim
from qoslab._core import __version__
from qoslab.sim import sim_json

__all__ = ["__version__", "lab", "nvmelite", "sim", "sim_json"]
