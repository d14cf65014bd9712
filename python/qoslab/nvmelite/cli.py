"""`qoslab nvmelite run | replay | matrix`."""

from __future__ import annotations

import shlex
import sys
from pathlib import Path

import typer

from qoslab._core import nvmelite as _core
from qoslab.errors import InputError
from qoslab.outputs import write_files

# The policy registry of the Rust core is the one list of policies.
POLICY_HELP = "Completion policy: " + "; ".join(f"{n} ({h})" for n, h in _core.POLICIES) + "."

app = typer.Typer(
    name="nvmelite",
    help="NVMe-lite: completion-reordering risk cliffs (study 1): one run, replay, the matrix, "
    "and differential validation of an implementation.",
    no_args_is_help=True,
)

METRIC_NAMES = tuple(_core.RUNS_CSV_HEADER.split(","))[1:]  # runs.csv after run_id


def _print_metrics(result) -> None:
    # The run id may contain commas (any seed_id is allowed): split only what follows it.
    fields = result.row.rsplit(",", len(METRIC_NAMES))[1:]
    print(f"run_id: {result.run_id}", file=sys.stderr)
    for name, value in zip(METRIC_NAMES, fields, strict=True):
        print(f"{name}: {value}", file=sys.stderr)


def _emit(result, log_file: Path | None, extra: dict[Path, bytes]) -> None:
    files = dict(extra)
    if log_file is not None:
        files[log_file] = result.log
    write_files(files)
    if log_file is None:
        sys.stdout.buffer.write(result.log)
        sys.stdout.flush()
    _print_metrics(result)


@app.command()
def run(
    workload: Path = typer.Argument(..., help="Workload JSON file (seed_id + commands)."),
    policy: str = typer.Option(..., "--policy", help=POLICY_HELP),
    bound: str = typer.Option(..., "--bound", help="Reordering bound k: an integer or inf."),
    fault: str = typer.Option("NONE", "--fault", help="Fault mode: NONE, TIMEOUT or RESET."),
    seed: str = typer.Option(..., "--seed", help="Schedule seed (0..2^64-1)."),
    submit_window: str = typer.Option(
        "inf", "--submit-window", help="Most commands pending at once: an integer or inf."
    ),
    log: Path | None = typer.Option(
        None, "--log", help="Write the log to this file.", show_default="stdout"
    ),
    schedule_out: Path | None = typer.Option(
        None,
        "--schedule-out",
        help="Write qoslab's replayable schedule file here.",
        show_default="not written",
    ),
    reference_schedule: Path | None = typer.Option(
        None,
        "--reference-schedule",
        help="Write the reference's JSON schedule record here.",
        show_default="not written",
    ),
    scheduler_version: str = typer.Option(
        "v1.0", "--scheduler-version", help="Header string scheduler_version."
    ),
    git_commit: str = typer.Option(
        "", "--git-commit", help="Header string git_commit; 'auto' = qoslab's own commit."
    ),
) -> None:
    """Run one schedule: the log goes to stdout (or --log), the metrics to stderr."""
    from qoslab import nvmelite

    w = nvmelite.load_workload(workload)
    if git_commit == "auto":
        git_commit = nvmelite.project_commit()
    try:
        result = nvmelite.run(
            w,
            policy=policy,
            bound_k=bound,
            fault_mode=fault,
            schedule_seed=seed,
            submit_window=submit_window,
            scheduler_version=scheduler_version,
            git_commit=git_commit,
            schedule=schedule_out is not None,
            reference_schedule=reference_schedule is not None,
        )
    except nvmelite.ParamsError as err:
        message, field, _ = err.args
        raise InputError(f"--{field}: {message}") from None
    extra = {}
    if schedule_out is not None:
        extra[schedule_out] = result.schedule.encode()
    if reference_schedule is not None:
        extra[reference_schedule] = result.reference_schedule.encode()
    _emit(result, log, extra)


@app.command()
def replay(
    workload: Path = typer.Argument(..., help="Workload JSON file the schedule was made for."),
    schedule: Path = typer.Argument(..., help="qoslab schedule file (--schedule-out)."),
    log: Path | None = typer.Option(
        None, "--log", help="Write the log to this file.", show_default="stdout"
    ),
    reference_schedule: Path | None = typer.Option(
        None,
        "--reference-schedule",
        help="Also write the reference's JSON schedule record.",
        show_default="not written",
    ),
) -> None:
    """Re-execute a recorded schedule: the byte-identical log to stdout, metrics to stderr."""
    from qoslab import nvmelite
    from qoslab.nvmelite.config import read_input

    w = nvmelite.load_workload(workload)
    try:
        text = read_input(schedule).decode("utf-8")
    except UnicodeDecodeError:
        raise InputError("not UTF-8 text", path=schedule) from None
    try:
        result = nvmelite.replay(w, text, True, reference_schedule=reference_schedule is not None)
    except nvmelite.ScheduleError as err:
        message, line = err.args
        raise InputError(message, path=schedule, line=line) from None
    extra = {}
    if reference_schedule is not None:
        extra[reference_schedule] = result.reference_schedule.encode()
    _emit(result, log, extra)


@app.command()
def matrix(
    config: Path = typer.Argument(..., help="Matrix config YAML (paths relative to it)."),
    out: Path = typer.Option(..., "--out", help="Output directory (replaced atomically)."),
    submit_window: str = typer.Option(
        "inf", "--submit-window", help="Most commands pending at once: an integer or inf."
    ),
    no_logs: bool = typer.Option(False, "--no-logs", help="Do not write logs/<run_id>.log."),
    jobs: int | None = typer.Option(
        None, "--jobs", min=1, help="Worker threads.", show_default="all cores"
    ),
    top_k: int = typer.Option(10, "--top-k", min=0, help="Poison schedules to keep."),
) -> None:
    """Run the study matrix: runs.csv, logs, tables, figures and report.html in --out."""
    from qoslab.nvmelite.study import run_study

    report = run_study(
        config,
        out,
        submit_window=submit_window,
        logs=not no_logs,
        jobs=jobs,
        top_k=top_k,
        command=shlex.join(["qoslab", *sys.argv[1:]]),
    )
    print(report)


# `qoslab nvmelite diff` lives with the differential-testing harness (python/qoslab/dut).
from qoslab.dut.cli import diff as _diff  # noqa: E402

app.command(name="diff")(_diff)
