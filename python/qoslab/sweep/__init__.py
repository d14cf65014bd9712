"""Sweeps: one spec names many points of a study; each point runs once into a results store.

    from qoslab.sweep import load_spec, run_sweep
    spec = load_spec("configs/sweeps/nvmelite-cliff.yaml")   # checked; nothing runs
    outcome = run_sweep(spec, "out/store", jobs=2)           # or scheduler="tcp://HOST:8786"

`spec` reads specs, `keys` defines a point's key, `runner` sends batches to workers and stores
them (`qoslab.store`), `study` is the adapter contract and `studies` the registry.
"""

import importlib

# Imported on first use: the runner brings numpy, pandas and Dask, which every other command
# (`qoslab sim`, whose CLI registers this package's) would otherwise pay for at start.
_HOMES = {"Outcome": "runner", "run_sweep": "runner", "Spec": "spec", "load_spec": "spec"}
__all__ = ["Outcome", "Spec", "load_spec", "run_sweep"]


def __getattr__(name: str):
    if name not in _HOMES:
        raise AttributeError(f"module 'qoslab.sweep' has no attribute {name!r}")
    return getattr(importlib.import_module(f"qoslab.sweep.{_HOMES[name]}"), name)
