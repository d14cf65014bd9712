"""`nvmelite matrix` in a sweep: a point is a whole run matrix (a config file of workloads,
policies, bounds, faults and schedule seeds), as `qoslab nvmelite matrix` runs it.

The summary row gives the matrix's totals; the per-cell table (`cells.csv`) and the risk
cliffs are detail tables, stored by default. The config's schedule seeds are the matrix's own,
so this study takes no sweep seed.
"""

from __future__ import annotations

import tempfile
from pathlib import Path

from qoslab.sweep.kinds import count_or_inf, file
from qoslab.sweep.study import CONTRACT_VERSION, REQUIRED, Detail, Metric, Param, PointResult, Study


def config_digest(path: str) -> str:
    """The config's content and every workload file it names: editing any of them makes
    the point a new one."""
    import hashlib

    from qoslab.nvmelite.config import workload_paths
    from qoslab.sweep.spec import file_digest

    parts = [file_digest(path), *(file_digest(w) for w, _ in workload_paths(path))]
    return "sha256:" + hashlib.sha256("\n".join(parts).encode()).hexdigest()


PARAMS = (
    Param(
        "config",
        file(digest=config_digest),
        "",
        REQUIRED,
        "matrix config YAML (workload paths relative to it)",
    ),
    Param("submit_window", count_or_inf(1), "commands", "inf", "most commands pending at once"),
)

METRICS = (
    Metric("runs", "int64", "runs", "runs in the matrix"),
    Metric("cells", "int64", "cells", "(workload, policy, bound, fault) cells"),
    Metric("risk_cliffs", "int64", "cliffs", "bound steps whose mean p95 rises by over 20 %"),
    Metric("p95_mean", "float64", "steps", "mean over all runs of the run's p95 latency"),
    Metric("p95_max", "float64", "steps", "largest p95 latency of any run"),
    Metric("RD_mean", "float64", "", "mean reordering degree over all runs"),
    Metric("completion_rate_mean", "float64", "", "mean completion rate over all runs"),
)

DETAILS = (
    Detail("cells", "cells.csv: per-cell means and spreads over the schedule seeds", True),
    Detail("risk_cliffs", "risk_cliffs.csv: the cells' risk cliffs", True),
)


def run_point(params, seed, details) -> PointResult:
    import pandas as pd

    from qoslab.nvmelite import load_matrix

    matrix = load_matrix(params["config"], str(params["submit_window"]))
    with tempfile.TemporaryDirectory(prefix="qoslab-sweep-matrix-") as d:
        # One thread: the sweep's workers are the parallelism.
        summary = matrix.write(d, logs=False, top_k=0, jobs=1)
        cells = pd.read_csv(Path(d) / "cells.csv")
        cliffs = pd.read_csv(Path(d) / "risk_cliffs.csv")
    weights = cells["runs"] / cells["runs"].sum()
    metrics = {
        "runs": int(summary["runs"]),
        "cells": len(cells),
        "risk_cliffs": int(summary["cliffs"]),
        # Every cell's mean is over its runs, so the run-weighted mean of the cell means is
        # the mean over all runs.
        "p95_mean": float((cells["p95_mean"] * weights).sum()),
        "p95_max": float(cells["p95_max"].max()),
        "RD_mean": float((cells["RD_mean"] * weights).sum()),
        "completion_rate_mean": float((cells["completion_rate_mean"] * weights).sum()),
    }
    tables = {"cells": cells, "risk_cliffs": cliffs}
    return PointResult(metrics, {k: v for k, v in tables.items() if k in details})


STUDY = Study(
    name="nvmelite matrix",
    help="A whole NVMe-lite run matrix from a config file (`qoslab nvmelite matrix`).",
    params=PARAMS,
    metrics=METRICS,
    headline=("p95_mean", "risk_cliffs"),
    version=CONTRACT_VERSION,
    run_point=run_point,
    details=DETAILS,
    seeded=False,
)
