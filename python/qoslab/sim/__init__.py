"""The timed simulator from Python: `run()` is `qoslab sim` without the command line.

    from qoslab.sim import run
    result = run("job.fio", device="ideal", output_format="json")
    report = json.loads(result["text"])

The model is Rust (`crates/sim`); this package only validates arguments, writes files and
turns the simulator's input errors into `qoslab.errors.InputError`.
"""

from qoslab.sim.api import DEFAULT_DEVICE, presets, run, tunables

__all__ = ["DEFAULT_DEVICE", "presets", "run", "tunables"]
