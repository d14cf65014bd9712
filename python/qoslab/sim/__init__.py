"""The timed simulator from Python.

    import qoslab
    df = qoslab.sim("job.fio", device="mqsim-default", set={"media.ftl.mapping": "dram"})
    report = qoslab.sim_json("job.fio")           # fio's JSON report as a dict

`qoslab.sim(...)` (this package, callable) returns a pandas DataFrame with one row per job and
direction (see `qoslab.sim.api.sim_frame`); `run()` is `qoslab sim` without the command line.
The model is Rust (`crates/sim`); this package only validates arguments, converts inputs,
writes files and turns the simulator's input errors into `qoslab.errors.InputError`.
"""

import sys
import types

from qoslab.sim.api import DEFAULT_DEVICE, parse_jobs, presets, run, sim_frame, sim_json, tunables


class _CallablePackage(types.ModuleType):
    """`qoslab.sim` is both this package and the function `qoslab.sim(...)`: a function of
    that name in `qoslab` would be replaced by the package as soon as anything imports
    `qoslab.sim.*`, so the package itself is made callable."""

    def __call__(self, *args, **kwargs):
        return sim_frame(*args, **kwargs)


sys.modules[__name__].__class__ = _CallablePackage

__all__ = [
    "DEFAULT_DEVICE",
    "parse_jobs",
    "presets",
    "run",
    "sim_frame",
    "sim_json",
    "tunables",
]
