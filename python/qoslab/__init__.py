"""qoslab: NVMe and Linux block-layer quality of service, simulated and measured.

In a notebook: `qoslab.sim(...)` runs the simulator and returns a pandas DataFrame,
`qoslab.sim_json(...)` its fio JSON report, `qoslab.nvmelite.matrix(...)` the NVMe-lite study's
runs, `qoslab.lab.results(...)` a lab study's table (docs/python.md).
"""

import importlib

from qoslab._core import __version__

__all__ = ["__version__", "lab", "nvmelite", "sim", "sim_json"]


def __getattr__(name: str):
    # Imported on first use: a command of one study (`qoslab nvmelite ...`) then loads that
    # study only, not the simulator's and the lab's Python modules too.
    if name in ("lab", "nvmelite", "sim"):
        return importlib.import_module(f"qoslab.{name}")
    if name == "sim_json":
        return importlib.import_module("qoslab.sim").sim_json
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
