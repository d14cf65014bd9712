"""`qoslab nvmelite run | replay | matrix`."""

from __future__ import annotations

import shlex
import sys
from pathlib import Path

import typer

from qoslab import nvmelite
from qoslab._core import nvmelite as _core
from qoslab.errors import InputError
from qoslab.nvmelite import search
from qoslab.nvmelite.config import read_input
from qoslab.nvmelite.study import run_study
from qoslab.outputs import earlier_output, staged_dir, write_files

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
    exact_nodes: int | None = typer.Option(
        None,
        "--exact-nodes",
        min=0,
        help="States the worst-case search may visit per workload, fault and k for "
        "exact_worst.csv (0: no exact column).",
        show_default="5000",
    ),
) -> None:
    """Run the study matrix: runs.csv, logs, tables, figures and report.html in --out."""
    report = run_study(
        config,
        out,
        submit_window=submit_window,
        logs=not no_logs,
        jobs=jobs,
        top_k=top_k,
        exact_nodes=exact_nodes,
        command=shlex.join(["qoslab", *sys.argv[1:]]),
    )
    print(report)


METRIC_HELP = "Metric to maximise: " + "; ".join(f"{n} ({h})" for n, h in _core.METRICS) + "."


def _describe(r, what: str) -> str:
    if r.value is None:
        return f"{what}: no schedule above the floor"
    if r.certificate == "optimal":
        return f"{what}: {r.value:g} (optimal)"
    return f"{what}: {r.value:g} (best found, upper bound {r.upper_bound:g}; {r.stop})"


def _speed(r) -> str:
    rate = r.nodes / r.elapsed_s if r.elapsed_s > 0 else float("inf")
    return f"{r.nodes:,} states in {r.elapsed_s:.2f} s ({rate:,.0f} states/s)"


@app.command()
def worst(
    workload: Path = typer.Argument(..., help="Workload JSON file (up to 64 commands)."),
    bound: str = typer.Option(..., "--bound", help="Reordering bound k: an integer or inf."),
    metric: str = typer.Option("p95", "--metric", help=METRIC_HELP),
    fault: str = typer.Option("NONE", "--fault", help="Fault mode: NONE, TIMEOUT or RESET."),
    submit_window: str = typer.Option(
        "inf", "--submit-window", help="Most commands pending at once: an integer or inf."
    ),
    time_limit: str = typer.Option(
        "60s", "--time-limit", help="Stop the search after this long (60s, 500ms, 2m, none)."
    ),
    node_limit: int | None = typer.Option(
        None,
        "--node-limit",
        min=1,
        help="Stop after this many states (reproducible).",
        show_default="no limit",
    ),
    schedule_out: Path | None = typer.Option(
        None,
        "--schedule-out",
        help="Write the worst schedule here (replay it with `replay`).",
        show_default="not written",
    ),
    log: Path | None = typer.Option(
        None, "--log", help="Write the worst run's log here.", show_default="not written"
    ),
    race: int = typer.Option(
        0, "--race", min=0, help="Also sample each policy and GUIDED over this many seeds."
    ),
) -> None:
    """The schedule with the largest metric under bound k, with a certificate: "optimal" when
    the search closed every branch, else "best found" with an upper bound."""
    w = nvmelite.load_workload(workload)
    r = search.worst(
        w,
        metric=metric,
        bound_k=bound,
        fault_mode=fault,
        submit_window=submit_window,
        time_limit_s=search.parse_time_limit(time_limit),
        node_limit=node_limit,
    )
    run_result = r.run
    files = {}
    if schedule_out is not None and run_result is not None:
        files[schedule_out] = run_result.schedule.encode()
    if log is not None and run_result is not None:
        files[log] = run_result.log
    write_files(files)
    what = f"worst {metric} of {w.seed_id} at k={bound}, fault {fault.upper()}"
    print(_describe(r, what))
    print(f"searched {_speed(r)}")
    if schedule_out is not None:
        print(f"schedule: {schedule_out} (qoslab nvmelite replay {workload} {schedule_out})")
    if race:
        target = r.value if r.value is not None else r.upper_bound
        rows = _core.race(w, metric, bound, fault, submit_window, race, target)
        print(f"sampling seeds 0-{race - 1}: best value, and runs until it reached {target:g}")
        for row in rows:
            reached = row["reached_after"]
            after = f"after {reached} runs" if reached else "not reached"
            print(
                f"  {row['strategy']:<12} best {row['best']:g} (seed {row['best_seed']}), {after}"
            )


@app.command()
def cliffs(
    workload: Path = typer.Argument(..., help="Workload JSON file (up to 64 commands)."),
    fault: str = typer.Option("NONE", "--fault", help="Fault mode: NONE, TIMEOUT or RESET."),
    submit_window: str = typer.Option(
        "inf", "--submit-window", help="Most commands pending at once: an integer or inf."
    ),
    threshold_pct: int = typer.Option(
        20, "--threshold-pct", min=0, help="A cliff is a rise of more than this many percent."
    ),
    time_limit: str = typer.Option(
        "60s", "--time-limit", help="Limit of each search (60s, 500ms, 2m, none)."
    ),
    out: Path | None = typer.Option(
        None,
        "--out",
        help="Write each cliff's worst schedules and cliffs.csv into this folder.",
        show_default="not written",
    ),
) -> None:
    """The bounds k at which the exact worst-case p95 jumps, by bisection over k: the smallest
    k whose worst case exceeds k=0's by more than the threshold, then the same from there."""
    w = nvmelite.load_workload(workload)
    found = search.find_cliffs(
        w,
        fault_mode=fault,
        submit_window=submit_window,
        threshold_pct=threshold_pct,
        time_limit_s=search.parse_time_limit(time_limit),
    )
    print(f"{w.seed_id}, fault {fault.upper()}: worst-case p95 at the bounds searched")
    # No times in the file: the same inputs write the same bytes.
    rows = ["k,worst_p95,certificate,upper_bound,states"]
    for k, r in sorted(found.results.items()):
        label = "inf" if k == found.k_max else str(k)
        print(f"  {_describe(r, f'k={label}')}; {_speed(r)}")
        rows.append(f"{label},{r.value:g},{r.certificate},{r.upper_bound:g},{r.nodes}")
    files = {"cliffs.csv": ("\n".join(rows) + "\n").encode()}
    for c in found.cliffs:
        rise = 100 * (c.worst.value / c.base.value - 1) if c.base.value else float("inf")
        print(
            f"cliff at k={c.k}: worst p95 {c.worst.value:g} against {c.base.value:g} at "
            f"k={c.base_k} (+{rise:.1f} %; k={c.k - 1}: {c.below.value:g})"
        )
        files[f"cliff_k{c.k}.sched"] = c.worst.run.schedule.encode()
        files[f"below_k{c.k - 1}.sched"] = c.below.run.schedule.encode()
    for what in found.undecided:
        print(f"undecided: {what} (a search hit its time limit; raise --time-limit)")
    if not found.cliffs and not found.undecided:
        print(f"no cliff: the worst case never rises more than {threshold_pct} % above k=0's")
    if out is not None:
        with staged_dir(
            out,
            is_earlier_output=earlier_output("cliffs.csv"),
            refusal="exists, is not empty and holds no cliffs.csv; choose another directory",
        ) as tmp:
            write_files({tmp / name: data for name, data in files.items()})
