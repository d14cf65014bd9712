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
- `matrix(config_path, ...)` -> the study's runs as a pandas DataFrame: runs.csv's columns,
  with each run's cell (seed_id, policy, bound_k, schedule_seed, fault_mode) after run_id
"""

from __future__ import annotations

from pathlib import Path

from qoslab._core import nvmelite as _core
from qoslab.errors import InputError
from qoslab.nvmelite.config import load_matrix, load_workload, project_commit

Workload = _core.Workload
RunResult = _core.RunResult
Matrix = _core.Matrix
ScheduleError = _core.ScheduleError
ParamsError = _core.ParamsError
RUNS_CSV_HEADER = _core.RUNS_CSV_HEADER


class ParamsInputError(InputError, ParamsError):
    """What `run` raises for a bad parameter: a `ParamsError` (args (message, field, index))
    whose text is the one line the command prints, and an `InputError` like every library
    error a user sees."""

    def __init__(self, *args):
        Exception.__init__(self, *args)

    def __str__(self) -> str:
        message, field, index = self.args
        return f"{field if index is None else f'{field}[{index}]'}: {message}"


class ScheduleInputError(InputError, ScheduleError):
    """What `replay` raises for a schedule it cannot follow: a `ScheduleError` (args (message,
    line)) whose text is one line naming the schedule's line, and an `InputError`."""

    def __init__(self, *args):
        Exception.__init__(self, *args)

    def __str__(self) -> str:
        message, line = self.args
        return f"schedule line {line}: {message}" if line else f"schedule: {message}"


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
    """One run. Parameters take the spellings of the spec (section 2); raises ParamsError
    (an InputError too)."""
    try:
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
    except ParamsError as err:
        raise ParamsInputError(*err.args) from None


def replay(
    workload: Workload,
    schedule_text: str,
    strict: bool = True,
    *,
    log: bool = True,
    reference_schedule: bool = False,
) -> RunResult:
    """Re-executes a schedule file; raises ScheduleError(message, line) (an InputError too)
    when strict."""
    try:
        return _core.replay(workload, schedule_text, strict, log, reference_schedule)
    except ScheduleError as err:
        raise ScheduleInputError(*err.args) from None


def matrix(
    config: str | Path,
    *,
    submit_window: str | int = "inf",
    jobs: int | None = None,
    out: str | Path | None = None,
):
    """`qoslab nvmelite matrix` from Python: every run of the matrix as a pandas DataFrame,
    one row per run with the columns of runs.csv (run_id, then each metric with its unit in
    its name) and, after run_id, the run's cell as the spec names its parts (section 10.2):
    seed_id, policy, bound_k (text: `3` or `inf`), schedule_seed and fault_mode. With `out`,
    the study's files (tables, poison schedules, report) are kept there too."""
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
        runs = pd.read_csv(folder / "runs.csv", dtype={"run_id": str})
    return _with_cells(runs)


# The parts of a run id (spec section 7.1: `<seed_id>_<POLICY>_<bound_k>_<schedule_seed>_<FAULT>`),
# named as the spec's full results file (section 10.2) and cells.csv name them.
CELL_COLUMNS = ("seed_id", "policy", "bound_k", "schedule_seed", "fault_mode")


def _with_cells(runs):
    """`runs` with each run's cell after run_id. Only a seed_id may hold `_` (the policy,
    bound, seed and fault are words, numbers or `inf`), so a run id splits from the right."""
    import pandas as pd

    cells = runs["run_id"].str.rsplit("_", n=4, expand=True)
    cells.columns = list(CELL_COLUMNS)
    cells = cells.astype({"schedule_seed": "uint64"})
    cells["bound_k"] = cells["bound_k"].astype(str)
    return pd.concat([runs[["run_id"]], cells, runs.drop(columns="run_id")], axis=1)


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
