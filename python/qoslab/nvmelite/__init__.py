"""NVMe-lite (study 1): the exact step model of completion reordering under a bound k.

The model runs in Rust (`qoslab._core.nvmelite`); this package turns files into its inputs
and its errors into `InputError`. "spec section N" is section N of the NVMe-lite specification,
docs/nvme-lite-spec.md. The API other parts build on:

- `load_workload(path)` -> `Workload` (strict JSON, spec section 1.2)
- `run(workload, policy=..., bound_k=..., fault_mode=..., schedule_seed=...)` -> `RunResult`
  with `run_id`, `log` (bytes), `log_sha256`, `schedule` (qoslab schedule file text),
  `reference_schedule`, `row` (the runs.csv row) and `metrics` (dict)
- `replay(workload, schedule_text, strict=True)` -> `RunResult`; `strict=False` repairs an
  infeasible schedule and returns the schedule actually followed in `.schedule`
- `load_matrix(config_path, submit_window="inf")` -> `Matrix`: `len(m)`,
  `m.iter_runs(log=True, schedule=True)` yields every run's `RunResult` in runs.csv order
- `matrix(config_path, ...)` -> the study's runs as a pandas DataFrame (runs.csv)
"""

from __future__ import annotations

from pathlib import Path

from qoslab._core import nvmelite as _core
from qoslab.nvmelite.config import load_matrix, load_workload, project_commit

Workload = _core.Workload
RunResult = _core.RunResult
Matrix = _core.Matrix
ScheduleError = _core.ScheduleError
ParamsError = _core.ParamsError
RUNS_CSV_HEADER = _core.RUNS_CSV_HEADER


def run(
    workload: Workload,
    *,
    policy: str,
    bound_k: str | int,
    fault_mode: str = "NONE",
    schedule_seed: str | int = 0,
    submit_window: str | int = "inf",
    scheduler_version: str = "v1.0",
    git_commit: str = "",
    log: bool = True,
    schedule: bool = False,
    reference_schedule: bool = False,
) -> RunResult:
    """One run. Parameters take the spellings of the spec (section 2); raises ParamsError."""
    return _core.run(
        workload,
        policy,
        str(bound_k),
        fault_mode,
        str(schedule_seed),
        str(submit_window),
        scheduler_version,
        git_commit,
        log,
        schedule,
        reference_schedule,
    )


def replay(
    workload: Workload,
    schedule_text: str,
    strict: bool = True,
    *,
    log: bool = True,
    reference_schedule: bool = False,
) -> RunResult:
    """Re-executes a schedule file; raises ScheduleError(message, line) when strict."""
    return _core.replay(workload, schedule_text, strict, log, reference_schedule)


def matrix(
    config: str | Path,
    *,
    submit_window: str | int = "inf",
    jobs: int | None = None,
    out: str | Path | None = None,
):
    """`qoslab nvmelite matrix` from Python: every run of the matrix as a pandas DataFrame,
    one row per run with the columns of runs.csv (run_id, then each metric with its unit in
    its name). With `out`, the study's files (tables, poison schedules, report) are kept
    there too."""
    import tempfile

    import pandas as pd

    from qoslab.nvmelite.study import run_study

    with tempfile.TemporaryDirectory(prefix="qoslab-nvmelite-") as scratch:
        folder = Path(out) if out is not None else Path(scratch) / "matrix"
        run_study(
            Path(config),
            folder,
            submit_window=str(submit_window),
            logs=out is not None,
            jobs=jobs,
            report=out is not None,
        )
        # run_id may hold anything (a seed_id is free text): read every column as written.
        return pd.read_csv(folder / "runs.csv", dtype={"run_id": str})


__all__ = [
    "RUNS_CSV_HEADER",
    "Matrix",
    "ParamsError",
    "RunResult",
    "ScheduleError",
    "Workload",
    "load_matrix",
    "load_workload",
    "matrix",
    "project_commit",
    "replay",
    "run",
]
