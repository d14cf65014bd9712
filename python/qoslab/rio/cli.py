"""`qoslab rio crash-check | replay | fit | study | run`."""

from __future__ import annotations

import dataclasses
import json
import sys
from pathlib import Path

import typer

from qoslab._core import rio as _core
from qoslab.errors import InputError, did_you_mean
from qoslab.options import set_options
from qoslab.outputs import earlier_output, staged_dir, write_files

STACK_NAMES = [name for name, _ in _core.STACKS]
DEFAULTS = _core.CHECK_DEFAULTS
STACK_HELP = "Ordered-write stack: " + "; ".join(f"{n} ({h})" for n, h in _core.STACKS) + "."
SET_HELP = "A \\[fabric] tunable, KEY=VALUE (repeatable): " + "; ".join(
    f"{name} ({unit}, default {default}): {help_}" for name, unit, default, help_ in _core.TUNABLES
)
RUN_SET_HELP = (
    "A tunable of the device, KEY=VALUE (repeatable): a bare KEY is one of \\[fabric] (targets, "
    "merge_batch, pmr_bytes, cores, ...), recovery.KEY one of \\[fabric.recovery], plp the "
    "drive's, a dotted KEY any of qoslab sim's (path.transport=tcp, media.units=4, ...); "
    "`qoslab sim --list-tunables` lists them."
)

app = typer.Typer(
    name="rio",
    help="Order-preserving NVMe-oF writes (study 4): Rio, Linux FLUSH ordering and HORAE under "
    "a crash checker.",
    no_args_is_help=True,
)


def _positive(name: str, value: int) -> None:
    if value < 1:
        raise InputError(f"{name}: expected at least 1, got {value}")


@app.command("crash-check")
def crash_check(
    stack: str = typer.Option("rio", "--stack", help=STACK_HELP),
    workloads: int = typer.Option(
        DEFAULTS["workloads"],
        "--workloads",
        help="Seeded random workloads to run (the default catches every known mutant: "
        "orderless, Rio without in-order completion or without replay, Linux without FLUSH).",
    ),
    seed: int = typer.Option(
        DEFAULTS["seed"], "--seed", min=0, help="Seed of the workloads and schedules."
    ),
    streams: int = typer.Option(
        DEFAULTS["streams"], "--streams", help="Ordered streams per workload."
    ),
    writes: int = typer.Option(DEFAULTS["writes"], "--writes", help="Ordered writes per stream."),
    max_blocks: int = typer.Option(
        DEFAULTS["max_blocks"],
        "--max-blocks",
        help=f"Largest write, in 4 KiB blocks (at most {_core.MAX_BLOCKS}).",
    ),
    exhaustive_limit: int = typer.Option(
        DEFAULTS["exhaustive_limit"],
        "--exhaustive-limit",
        help="A workload with fewer events than this is crashed after every event; a longer "
        "one at --samples seeded points.",
    ),
    samples: int = typer.Option(
        DEFAULTS["samples"], "--samples", help="Crash points drawn from a long workload."
    ),
    crash: str = typer.Option(
        "power",
        "--crash",
        help="What fails at each crash point: power (the whole system: every volatile cache and "
        "every command in flight) or target (one target server crashes and restarts while the "
        "initiator and the other targets stay up; recovery as document 4.4.1 'Target recovery').",
    ),
    target: int | None = typer.Option(
        None,
        "--target",
        help="With --crash target: the target server that crashes (0 is the first).",
        show_default="each target in turn at every crash point",
    ),
    reproducers: int = typer.Option(
        DEFAULTS["reproducers"], "--reproducers", help="Most minimal reproducers kept."
    ),
    sets: list[str] = typer.Option([], "--set", help=SET_HELP, show_default="none"),
    out: Path | None = typer.Option(
        None, "--out", help="Write summary.json and reproducers.", show_default="not written"
    ),
) -> None:
    """Cut power (or crash one target server) after every event (or a seeded sample) of seeded
    ordered workloads, recover, and check that each stream survives as a prefix and no
    acknowledged FLUSH lost a write. Exit status 1 when a violation is found."""
    if stack not in STACK_NAMES:
        raise InputError(
            f"--stack: expected one of {', '.join(STACK_NAMES)}, got '{stack}'"
            + did_you_mean(stack, STACK_NAMES)
        )
    if crash not in ("power", "target"):
        raise InputError(
            f"--crash: expected power or target, got '{crash}'"
            + did_you_mean(crash, ["power", "target"])
        )
    if target is not None and crash != "target":
        raise InputError("--target: only with --crash target")
    if target is not None and target < 0:
        raise InputError(f"--target: expected 0 or more, got {target}")
    for name, value in (
        ("--workloads", workloads),
        ("--streams", streams),
        ("--writes", writes),
        ("--max-blocks", max_blocks),
        ("--exhaustive-limit", exhaustive_limit),
    ):
        _positive(name, value)
    try:
        text = _core.crash_check(
            stack,
            set_options(sets),
            workloads,
            seed,
            streams,
            writes,
            max_blocks,
            exhaustive_limit,
            max(samples, 0),
            max(reproducers, 0),
            crash,
            target,
        )
    except ValueError as err:
        raise InputError(str(err)) from None
    summary = json.loads(text)
    bad = summary["prefix_violations"] + summary["acked_lost"]
    if out is not None:
        files = {Path("summary.json"): text + "\n"}
        for i, r in enumerate(summary["reproducers"]):
            files[Path(f"reproducer-{i}.json")] = json.dumps(r, indent=2) + "\n"
        with staged_dir(
            out,
            is_earlier_output=earlier_output("summary.json"),
            refusal="exists, is not empty and holds no summary.json; choose another directory",
        ) as tmp:
            write_files({tmp / name: data for name, data in files.items()})
    crashed = ""
    if summary["crash"] == "target":
        ts = summary["crashed_targets"]
        which = f"targets {', '.join(map(str, ts))} in turn" if len(ts) > 1 else f"target {ts[0]}"
        crashed = (
            f" (crash of {which}; {summary['cache_losses']} crashes lost a completed write "
            "from the target's cache)"
        )
    print(
        f"{summary['stack']}{crashed}: {summary['workloads']} workloads "
        f"({summary['exhaustive_workloads']} exhaustive, {summary['sampled_workloads']} sampled), "
        f"{summary['crash_points']} crash points, "
        f"{summary['prefix_violations']} prefix violations, {summary['acked_lost']} acknowledged "
        "writes lost"
    )
    for i, r in enumerate(summary["reproducers"]):
        v = r["violations"][0]
        where = f" ({out / f'reproducer-{i}.json'})" if out is not None else ""
        writes = sum(len(s) for s in r["workload"]["streams"])
        which = f" of target {r['crashed_target']}" if r["crash"] == "target" else ""
        print(
            f"  reproducer {i}{where}: {writes} writes, crash{which} after "
            f"{r['crash_after_events']} events: {v['kind']} in stream {v['stream']}: {v['detail']}"
        )
    if bad:
        raise typer.Exit(1)


@app.command()
def replay(
    reproducer: Path = typer.Argument(..., help="A reproducer-N.json written by crash-check."),
) -> None:
    """Run a reproducer to its crash point and print what recovery left broken (exit 1 if
    anything)."""
    try:
        text = reproducer.read_text()
    except OSError as err:
        raise InputError(f"cannot read: {err.strerror}", path=reproducer) from None
    try:
        violations = json.loads(_core.replay(text))
    except ValueError as err:
        raise InputError(str(err), path=reproducer) from None
    for v in violations:
        print(f"{v['kind']} in stream {v['stream']}: {v['detail']}")
    if not violations:
        print("no violation", file=sys.stderr)
    else:
        raise typer.Exit(1)


@app.command()
def fit() -> None:
    """Fit the rio presets' CPU costs to the document's Figure 2 (docs/rio.md, "Fitted CPU
    costs") and print the procedure's numbers and values; exit 1 if a preset holds others."""
    from qoslab.rio import fit as f

    result = f.fit()
    for line in f.report_lines(result):
        print(line)
    want = f.fitted_values(result)
    stale = False
    for device in f.DRIVES:
        have = f.preset_values(device)
        if have == want:
            print(f"{device}: holds these values")
            continue
        stale = True
        for key, value in want.items():
            if have.get(key) != value:
                print(f"{device}: {key} = {have.get(key)}, the fit gives {value}")
    if stale:
        raise typer.Exit(1)


@app.command()
def study(
    out: Path = typer.Option(
        ..., "--out", help="Directory for report.html, study.json and the figures."
    ),
    quick: bool = typer.Option(
        False,
        "--quick",
        help="2 thread counts, 2 sizes, 2 batches, 32 writes per thread, 3 power cuts per "
        "recovery point, 64 writes per thread on the document's recovery setup (seconds).",
    ),
    writes: int = typer.Option(128, "--writes", help="Ordered writes per thread (full study)."),
    seed: int = typer.Option(
        1, "--seed", min=0, help="Seed of the first repetition (the write placement, the cuts)."
    ),
    seeds: int = typer.Option(
        3,
        "--seeds",
        min=1,
        max=100,
        help="Repetitions of every point, seeds --seed, --seed + 1, ...; the table gives the "
        "mean over them with its 95 % t interval, and a verdict only from 3 or more. The "
        "power cuts of a recovery point (30, --quick 3) are shared out among them.",
    ),
    cuts: int | None = typer.Option(
        None,
        "--cuts",
        min=1,
        max=3000,
        help="Power cuts per recovery point over all its seeds, shared out evenly among the seeds.",
        show_default="the document's 30, --quick 3",
    ),
    jobs: int = typer.Option(2, "--jobs", min=1, max=64, help="Simulations run at once."),
    sets: list[str] = typer.Option(
        [],
        "--set",
        help=RUN_SET_HELP,
        show_default="none",
    ),
    background_cycles_per_s: float = typer.Option(
        0.0,
        "--background-cycles-per-s",
        min=0.0,
        help="Cycles each server spends per second of a run outside the I/O path, added to "
        "the cycles CPU efficiency divides by (the time-based part of the document's top "
        "utilisation; an experiment, the document gives no figure).",
    ),
    quiet: bool = typer.Option(False, "--quiet", help="No progress bar."),
) -> None:
    """Rio's block-device experiments (document Figures 10-12) on the simulator's path (qoslab
    sim with the stacks' ordering plug-ins and the rio-flash and rio-optane target servers): the
    four stacks' throughput, latency and CPU efficiency over threads, write sizes and batch sizes,
    Rio's and HORAE's recovery time against the requests in flight (30 power cuts per thread
    count) and on the document's setup (6.5: 36 threads issuing without waiting, two flash
    targets, 30 power cuts), and a "document vs qoslab" table: each claim's mean over the seeds,
    its interval and the verdict the interval gives."""
    from qoslab.progress import Count, progress_bar
    from qoslab.rio import study as st

    _positive("--writes", writes)
    plan = st.Plan.quick() if quick else st.Plan(writes=writes)
    plan = dataclasses.replace(
        plan,
        seed=seed,
        seeds=seeds,
        background_cycles_per_s=background_cycles_per_s,
        repeats=plan.repeats if cuts is None else cuts,
    )
    with progress_bar(quiet) as bar:
        done = Count(bar, "rio study", total=st.runs(plan))
        results = st.run_all(plan, set_options(sets), done.advance, jobs=jobs)
    table = st.compare(results.points, results.cuts, results.setup)
    with staged_dir(
        out,
        is_earlier_output=earlier_output("study.json"),
        refusal="exists, is not empty and holds no study.json; choose another directory",
    ) as tmp:
        st.write_report(results, table, tmp, plan)
    marks = {"inside": "ok ", "outside": "off", "undecided": "?  "}
    if background_cycles_per_s:
        print(
            f"CPU efficiency counts {background_cycles_per_s:,.0f} background cycles per second "
            "of each run at each server (--background-cycles-per-s)"
        )
    for r in table:
        print(
            f"{marks.get(r['verdict'], '-  ')} {r['claim']}: qoslab {st.shown(r)}, document "
            f"{r['document']} (target {r['target']}; {r['verdict']})"
        )
    print(f"report: {out / 'report.html'}")


@app.command("run")
def run_chain(
    stack: str = typer.Option("rio", "--stack", help=STACK_HELP),
    threads: int = typer.Option(4, "--threads", help="Threads, one ordered stream each."),
    writes: int = typer.Option(64, "--writes", help="Ordered writes per thread."),
    size_kib: int = typer.Option(4, "--size-kib", help="Write size, a multiple of 4 KiB."),
    batch: int = typer.Option(1, "--batch", help="Consecutive writes per batch (1: random)."),
    flush_every: int = typer.Option(
        0,
        "--flush-every",
        help="fio's fsync=N: a FLUSH after every Nth write of a thread, once one was reaped "
        "since the last (libaio's rule; 0: none).",
    ),
    iodepth: int = typer.Option(32, "--iodepth", help="Ordered writes a thread keeps outstanding."),
    device: str = typer.Option(
        "rio-flash",
        "--device",
        help="The target servers' preset (rio-flash: no PLP; rio-optane: PLP) or device file.",
    ),
    seed: int = typer.Option(1, "--seed", min=0, help="Seed of the write placement."),
    power_fail_at: str | None = typer.Option(
        None,
        "--power-fail-at",
        help="Cut the power at this simulated time (e.g. 150us, 2ms), recover and check.",
        show_default="runs to the end",
    ),
    crash_target: int | None = typer.Option(
        None,
        "--crash-target",
        help="With --power-fail-at: only this target server (0 is the first) crashes; the "
        "initiator and the other targets stay up, and the stack's target recovery runs "
        "(document 4.4.1).",
        show_default="every server loses power",
    ),
    sets: list[str] = typer.Option(
        [],
        "--set",
        help=RUN_SET_HELP,
        show_default="targets=2",
    ),
    show_job: bool = typer.Option(
        False, "--show-job", help="Print the fio job file the run is made of, and stop."
    ),
) -> None:
    """One run of ordered writes on the simulator's path (qoslab sim with the stack's
    ordering plug-in, the fan-out and the target servers): throughput, latency and CPU cycles
    of each side, as JSON; with --power-fail-at, what the stack's recovery kept and how long it
    took (with --crash-target, what the crash of that target alone lost and the recovery
    replayed; exit 1 if it is not a prefix of every stream or an acknowledged FLUSH lost a
    write). A job file of ordered jobs runs as `qoslab sim FILE --device rio-flash`."""
    from qoslab.rio import chain

    if stack not in STACK_NAMES:
        raise InputError(
            f"--stack: expected one of {', '.join(STACK_NAMES)}, got '{stack}'"
            + did_you_mean(stack, STACK_NAMES)
        )
    if crash_target is not None:
        if power_fail_at is None:
            raise InputError("--crash-target: only with --power-fail-at")
        if crash_target < 0:
            raise InputError(f"--crash-target: expected 0 or more, got {crash_target}")
    for name, value in (
        ("--threads", threads),
        ("--writes", writes),
        ("--batch", batch),
        ("--iodepth", iodepth),
    ):
        _positive(name, value)
    if size_kib < 4 or size_kib % 4:
        raise InputError(f"--size-kib: expected a multiple of 4, got {size_kib}")
    if flush_every < 0:
        raise InputError(f"--flush-every: expected 0 or more, got {flush_every}")
    job = chain.job_text(stack, threads, writes, size_kib, batch, flush_every, iodepth)
    if show_job:
        print(job, end="")
        return
    report = chain.run(
        job,
        device=device,
        sets=set_options(sets),
        seed=seed,
        power_fail_at=power_fail_at,
        crash_target=crash_target,
    )
    result = chain.measured(stack, report) if power_fail_at is None else chain.cut(stack, report)
    print(json.dumps(result, indent=2))
    if result.get("violations") or result.get("acked_lost"):
        raise typer.Exit(1)
