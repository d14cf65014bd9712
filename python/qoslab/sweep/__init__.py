"""Sweeps: one spec names many points of a study; each point runs once into a results store.

    from qoslab.sweep import load_spec, run_sweep
    spec = load_spec("configs/sweeps/nvmelite-cliff.yaml")   # checked; nothing runs
    outcome = run_sweep(spec, "out/store", jobs=2)           # or scheduler="tcp://HOST:8786"

`spec` reads specs, `keys` defines a point's key, `runner` sends batches to workers and stores
them (`qoslab.store`), `study` is the adapter contract and `studies` the registry.
"""

from qoslab.sweep.runner import Outcome, run_sweep
from qoslab.sweep.spec import Spec, load_spec

__all__ = ["Outcome", "Spec", "load_spec", "run_sweep"]
