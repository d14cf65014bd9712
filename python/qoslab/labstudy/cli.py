"""`qoslab lab`: the real-device fio lab (devices, studies, kernel schedulers, calibration).

Only typer is imported here; each command imports its machinery when it runs, so that
`qoslab --help` stays fast.
"""

from __future__ import annotations

from pathlib import Path

import typer

from qoslab.errors import InputError, did_you_mean
from qoslab.interrupts import terminable
from qoslab.options import duration_option, int_list_option, size_option, store_option
from qoslab.outputs import staged_file

app = typer.Typer(
    name="lab",
    help="The real-device lab (study 3) and kernel schedulers (study 5, kernel half): loop "
    "devices, characterisation studies, scheduler runs, calibration of a simulated device.",
    no_args_is_help=True,
)
device_app = typer.Typer(
    help="Loop devices over fully written files, made and removed by qoslab.",
    no_args_is_help=True,
)
app.add_typer(device_app, name="device")

STUDY_NAMES = ("baseline", "bs-sweep", "mix-sweep", "qd-sweep", "tails", "all")


@app.callback()
def _undo_what_a_killed_command_left(ctx: typer.Context) -> None:
    # Every lab command first undoes what a lab command killed with `kill -9` left behind:
    # a switched scheduler, fio still running, a half-made file or device, a partial output
    # (qoslab.lab.journal). `lab restore` does only that, and says so.
    if ctx.invoked_subcommand == "restore" or ctx.resilient_parsing:
        return
    from qoslab.lab.journal import Journal

    try:
        done = Journal().recover()
    except InputError as err:
        typer.echo(f"qoslab: warning: cannot read the lab's journal: {err}", err=True)
        return
    for line in done:
        typer.echo(f"qoslab: warning: undone after a killed qoslab lab command: {line}", err=True)


def _mixes(text: str) -> tuple[int, ...]:
    try:
        values = tuple(int(v) for v in text.split(","))
    except ValueError:
        values = ()
    if not values or any(not 0 <= v <= 100 for v in values):
        raise InputError(f"--mixes: expected read percentages 0..100, got {text!r}")
    return tuple(sorted(set(values), reverse=True))


# The lab's store keeps measurements, which a new study takes again: only an interrupted
# study's runs are worth keeping by default.
LAB_STORE = (
    "The sweep store that keeps every run's files as it is measured, kept afterwards: the "
    "command started again measures only what it lacks.",
    "<out>.store, removed once the output is written",
)


# ---- devices ---------------------------------------------------------------------------------


@device_app.command("create")
def device_create(
    size: str = typer.Option(..., "--size", help="Device size, e.g. 4G or 256M (binary units)."),
    backing: Path | None = typer.Option(
        None,
        "--backing",
        help="New backing file.",
        show_default="/var/tmp/qoslab/loop-*.img",
    ),
    quiet: bool = typer.Option(False, "--quiet", help="No progress bar."),
) -> None:
    """Create a loop device (direct I/O on) over a new backing file written in full."""
    from qoslab.lab.device import create_loop_device
    from qoslab.lab.registry import Registry
    from qoslab.progress import progress_bar

    nbytes = size_option(size, "--size")
    with terminable(), progress_bar(quiet) as progress:
        entry = create_loop_device(nbytes, backing, Registry(), progress)
    typer.echo(entry.loop)


@device_app.command("remove")
def device_remove(
    what: str | None = typer.Argument(
        None,
        help="Loop device or file qoslab created.",
        show_default="everything qoslab created",
    ),
) -> None:
    """Detach qoslab's loop devices and delete the files it wrote; nothing else."""
    import os

    from qoslab.lab.registry import Registry, remove

    registry = Registry()
    entries = registry.entries()
    if what is not None:
        real = os.path.realpath(what)
        entries = [
            e
            for e in entries
            if os.path.realpath(e.file) == real or (e.loop and os.path.realpath(e.loop) == real)
        ]
        if not entries:
            raise InputError(
                "qoslab did not create this; it removes only what it created", path=what
            )
    with terminable():
        for entry in entries:
            for line in remove(entry, registry):
                typer.echo(line)


@device_app.command("list")
def device_list() -> None:
    """List the loop devices and files qoslab created and has not removed."""
    from qoslab.lab.registry import Registry, loops_on
    from qoslab.units import human_bytes

    for e in Registry().entries():
        loops = ", ".join(loops_on(e)) or "-"
        typer.echo(f"{loops}\t{e.file}\t{human_bytes(e.size_bytes)}\t{e.purpose}")


# ---- fio output as tables --------------------------------------------------------------------


@app.command("tidy")
def tidy(
    files: list[Path] = typer.Argument(..., help="fio JSON or json+ outputs (any fio version)."),
    out: Path = typer.Option(..., "--out", help="Table to write: .parquet or .csv."),
    bins: Path | None = typer.Option(
        None, "--bins", help="Also write json+ latency bins here.", show_default="not written"
    ),
) -> None:
    """Convert fio JSON outputs to one tidy table: a row per file, job and direction."""
    from qoslab.fio import bins_table, jobs_table, read_fio_json

    outputs = [read_fio_json(f) for f in files]
    for path in (out, bins):
        if path is not None and path.suffix not in (".parquet", ".csv"):
            raise InputError("expected a .parquet or .csv file name", path=path)
    _write_table(jobs_table(outputs), out)
    if bins is not None:
        _write_table(bins_table(outputs), bins)
    typer.echo(f"wrote {out}")


def _write_table(frame, path: Path) -> None:
    with staged_file(path) as tmp:
        if path.suffix == ".csv":
            frame.to_csv(tmp, index=False, float_format="%.6g")
        else:
            frame.to_parquet(tmp, index=False)


# ---- studies ---------------------------------------------------------------------------------


@app.command("study")
def study(
    name: str = typer.Argument(..., help=f"One of: {', '.join(STUDY_NAMES)}."),
    target: str = typer.Option(..., "--target", help="Loop device qoslab made, or a file."),
    runtime: str = typer.Option("30s", "--runtime", help="Measured time per data point."),
    ramp: str = typer.Option("5s", "--ramp", help="Warm-up per data point, not measured."),
    size: str = typer.Option("10G", "--size", help="Region addressed (file size for files)."),
    out: Path | None = typer.Option(
        None, "--out", help="Output directory.", show_default="out/lab/NAME"
    ),
    ioengine: str = typer.Option("libaio", "--ioengine", help="fio ioengine."),
    iodepth: int = typer.Option(16, "--iodepth", min=1, help="Queue depth of bs- and mix-sweep."),
    depths: str = typer.Option("1,2,4,8,16,32,64,128", "--depths", help="qd-sweep depths."),
    block_sizes: str = typer.Option(
        "4k,8k,16k,32k,64k,128k,256k", "--block-sizes", help="bs-sweep block sizes."
    ),
    mixes: str = typer.Option("100,70,50,0", "--mixes", help="mix-sweep read percentages."),
    knee_gain: float = typer.Option(
        0.10, "--knee-gain", help="Knee: IOPS gain per doubling of depth below which it is near."
    ),
    knee_tail_ratio: float = typer.Option(
        1.0, "--knee-tail-ratio", help="Knee: p99 must grow this many times faster than IOPS."
    ),
    mid_depth: int | None = typer.Option(
        None,
        "--mid-depth",
        min=1,
        help="Tails: the middle depth.",
        show_default="the power of two nearest sqrt(knee depth)",
    ),
    knee_depth: int | None = typer.Option(
        None,
        "--knee-depth",
        min=1,
        help="Tails: the knee depth.",
        show_default="the qd-sweep's knee, else its deepest point",
    ),
    destructive_ok: str | None = typer.Option(
        None,
        "--destructive-ok",
        help="Allow overwriting this one device or file (exact path).",
        show_default="only what qoslab created",
    ),
    precondition: bool = typer.Option(
        True, "--precondition/--no-precondition", help="Write a foreign device's region first."
    ),
    keep_target: bool = typer.Option(False, "--keep-target", help="Keep a file target made here."),
    quiet: bool = typer.Option(False, "--quiet", help="No progress bar."),
    report: bool = typer.Option(
        True, "--report/--no-report", help="Figures and report.html, or the tables alone."
    ),
    store: Path | None = store_option(*LAB_STORE),
) -> None:
    """Run a characterisation study: one fio run per data point, tables, figures, report."""
    from qoslab.lab.analysis import KneeRule
    from qoslab.lab.plans import StudyOptions
    from qoslab.labstudy.study import run_study

    if name not in STUDY_NAMES:
        raise InputError(
            f"study: expected one of {', '.join(STUDY_NAMES)}, got {name!r}"
            + did_you_mean(name, STUDY_NAMES)
        )
    opts = StudyOptions(
        runtime_s=duration_option(runtime, "--runtime"),
        ramp_s=duration_option(ramp, "--ramp"),
        ioengine=ioengine,
        sweep_iodepth=iodepth,
        depths=tuple(sorted(set(int_list_option(depths, "--depths")))),
        block_sizes=tuple(
            sorted({size_option(b, "--block-sizes") for b in block_sizes.split(",")})
        ),
        read_mixes=_mixes(mixes),
        knee=KneeRule(min_gain=knee_gain, tail_ratio=knee_tail_ratio),
        mid_depth=mid_depth,
        knee_depth=knee_depth,
    )
    if opts.runtime_s < 0.1:
        raise InputError(f"--runtime: expected at least 100ms, got {runtime!r}")
    with terminable():
        path = run_study(
            name,
            target,
            size=size_option(size, "--size"),
            out=out or Path("out/lab") / name,
            opts=opts,
            destructive_ok=destructive_ok,
            precondition=precondition,
            keep_target=keep_target,
            quiet=quiet,
            report=report,
            store=store,
        )
    typer.echo(f"wrote {path}/report.html" if report else f"wrote {path}/results.csv")


# ---- kernel schedulers -----------------------------------------------------------------------


@app.command("sched")
def sched(
    target: str = typer.Option(..., "--target", help="Loop device qoslab made (block device)."),
    schedulers: str = typer.Option(
        "none,mq-deadline,kyber,bfq", "--schedulers", help="Comma-separated schedulers."
    ),
    reps: int = typer.Option(5, "--reps", min=1, help="Repetitions per scheduler."),
    runtime: str = typer.Option("10s", "--runtime", help="Measured time per run."),
    ramp: str = typer.Option("1s", "--ramp", help="Warm-up per run, not measured."),
    ioengine: str = typer.Option("libaio", "--ioengine", help="fio ioengine."),
    db_prio: str = typer.Option("be1", "--db-prio", help="database_sim: rt0-7, be0-7 or idle."),
    backup_prio: str = typer.Option("be7", "--backup-prio", help="backup_sim: be0-7 or idle."),
    db_iodepth: int = typer.Option(4, "--db-iodepth", min=1, help="database_sim queue depth."),
    backup_iodepth: int = typer.Option(16, "--backup-iodepth", min=1, help="backup_sim depth."),
    log_msec: int = typer.Option(100, "--log-msec", min=1, help="Latency log window (ms)."),
    size: str = typer.Option("10G", "--size", help="Region both jobs address."),
    out: Path = typer.Option(Path("out/lab/sched"), "--out", help="Output directory."),
    destructive_ok: str | None = typer.Option(
        None,
        "--destructive-ok",
        help="Allow this one device qoslab did not create (exact path).",
        show_default="only what qoslab created",
    ),
    precondition: bool = typer.Option(
        True, "--precondition/--no-precondition", help="Write a foreign device first."
    ),
    quiet: bool = typer.Option(False, "--quiet", help="No progress bar."),
    store: Path | None = store_option(*LAB_STORE),
) -> None:
    """Two jobs of different I/O priority on each kernel scheduler: IOPS, p99, CPU, time series."""
    import os

    from qoslab.labstudy.sched import SchedOptions, run_sched

    if os.geteuid() != 0:
        raise InputError("switching I/O schedulers needs root (sysfs queue/scheduler)")
    names = tuple(s.strip() for s in schedulers.split(",") if s.strip())
    if not names or len(set(names)) != len(names):
        raise InputError(f"--schedulers: expected distinct names, got {schedulers!r}")
    opts = SchedOptions(
        schedulers=names,
        reps=reps,
        runtime_s=duration_option(runtime, "--runtime"),
        ramp_s=duration_option(ramp, "--ramp"),
        ioengine=ioengine,
        db_prio=db_prio,
        backup_prio=backup_prio,
        db_iodepth=db_iodepth,
        backup_iodepth=backup_iodepth,
        log_msec=log_msec,
    )
    with terminable():
        path = run_sched(
            target,
            out=out,
            opts=opts,
            size=size_option(size, "--size"),
            destructive_ok=destructive_ok,
            precondition=precondition,
            quiet=quiet,
            store=store,
        )
    typer.echo(f"wrote {path}/report.html")


# ---- calibration -----------------------------------------------------------------------------


@app.command("calibrate")
def calibrate(
    results_dirs: list[Path] = typer.Argument(
        ..., help="Output directories of studies with a qd-sweep (merged per depth)."
    ),
    out: Path = typer.Option(..., "--out", help="Device file to write (e.g. device.toml)."),
    holdout: str | None = typer.Option(
        None,
        "--holdout",
        help="Depths left out of the fit.",
        show_default="every second inner depth",
    ),
    sim_runtime: str = typer.Option("2s", "--sim-runtime", help="Simulated time per depth."),
    seed: int = typer.Option(1, "--seed", help="Seed of the simulation."),
) -> None:
    """Fit the simulator's empirical device to a measured qd-sweep and check its predictions."""
    from qoslab.lab.calibrate import calibrate as run_calibration

    for d in results_dirs:
        if not d.is_dir():
            raise InputError("no such directory", path=d)
    held = None if holdout is None else list(int_list_option(holdout, "--holdout"))
    table = run_calibration(
        results_dirs,
        out,
        holdout=held,
        sim_runtime_s=duration_option(sim_runtime, "--sim-runtime"),
        seed=seed,
    )
    typer.echo(
        f"{'QD':>4}  {'role':<8}  {'p50 meas':>9} {'pred':>9} {'err':>6}  "
        f"{'p99 meas':>9} {'pred':>9} {'err':>6}   (µs)"
    )
    for r in table.itertuples():
        typer.echo(
            f"{r.iodepth:>4}  {r.role:<8}  {r.measured_p50_us:>9.1f} {r.predicted_p50_us:>9.1f} "
            f"{r.p50_error:>+6.1%}  {r.measured_p99_us:>9.1f} {r.predicted_p99_us:>9.1f} "
            f"{r.p99_error:>+6.1%}"
        )
    typer.echo(f"wrote {out}, {out.stem}.profile.toml, {out.stem}.calibration.csv/.html")


@app.command("restore")
def restore() -> None:
    """Put the machine back as it was before lab commands that were killed (kill -9, a crash):
    end the fio they left running, restore the I/O schedulers they switched, remove the files
    and loop devices they were making and their partial outputs. Every lab command does this
    first; changes of lab commands still running are left alone."""
    from qoslab.lab.journal import Journal

    journal = Journal()
    with terminable():
        done = journal.recover()
    for line in done:
        typer.echo(line)
    running = journal.entries()
    for e in running:
        typer.echo(f"left alone: a {e['kind']} change of qoslab lab (pid {e['pid']}, running)")
    if not done and not running:
        typer.echo("nothing to restore")
