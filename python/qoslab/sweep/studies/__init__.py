"""The studies a sweep can run: one adapter module each, one line each in `ADAPTERS`.

To add a study, write `python/qoslab/sweep/studies/<module>.py` defining `STUDY = Study(...)`
(the hooks and tables are in `qoslab.sweep.study`, the parameters' kinds in `qoslab.sweep.kinds`;
`selftest.py` is a small complete example)
and add the module's name below. Nothing else in qoslab changes: specs, the store, workers and
the report take the study's parameter and metric tables from its adapter.
"""

from __future__ import annotations

import importlib

from qoslab.sweep.study import Study, check_study

ADAPTERS = (
    "nvmelite_run",
    "nvmelite_matrix",
    "sim",
    "sched",
    "fs",
    "lab",
    "plm",
    "selftest",
)


def _register(modules: tuple[str, ...]) -> dict[str, Study]:
    registry: dict[str, Study] = {}
    for module in modules:
        study = check_study(importlib.import_module(f"{__name__}.{module}").STUDY)
        if study.name in registry:
            raise TypeError(f"study '{study.name}' is registered twice")
        registry[study.name] = study
    return registry


STUDIES = _register(ADAPTERS)
