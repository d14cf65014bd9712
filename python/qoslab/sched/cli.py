"""`qoslab sched`: the I/O scheduler study in the simulator (study 5's simulated half)."""

from __future__ import annotations

from pathlib import Path

import typer

from qoslab.errors import InputError
from qoslab.options import store_option

app = typer.Typer(
    name="sched",
    help="The block layer's I/O schedulers in the simulator (study 5, simulated half), beside "
    "the real kernel's (`qoslab lab sched`).",
    no_args_is_help=True,
)


@app.command("study")
def study(
    out: Path = typer.Option(Path("out/sched/study"), "--out", help="Output directory."),
    schedulers: str | None = typer.Option(
        None,
        "--schedulers",
        help="Comma-separated schedulers.",
        show_default="every registered one",
    ),
    seeds: int = typer.Option(5, "--seeds", min=2, help="Seeds per device and scheduler."),
    runtime: str = typer.Option("3s", "--runtime", help="Simulated time per run."),
    hdd_queue_depths: str = typer.Option(
        "1,2,32",
        "--hdd-queue-depths",
        help="The HDD's device/queue_depth values, 1 to 32 (32: NCQ's default).",
    ),
    empirical: Path | None = typer.Option(
        None,
        "--empirical",
        help="Device file from `qoslab lab calibrate` of the lab's loop device.",
        show_default="configs/sched/loop-empirical.toml if present",
    ),
    devices: str = typer.Option(
        "hdd-7200,enterprise-tlc-plp,empirical",
        "--devices",
        help="Comma-separated presets or device files; hdd-7200 runs at each "
        "--hdd-queue-depths, `empirical` is the --empirical file.",
    ),
    real: Path | None = typer.Option(
        None,
        "--real",
        help="A `qoslab lab sched` output to show beside the simulation.",
        show_default="none: simulation only",
    ),
    constants: bool = typer.Option(
        True, "--constants/--no-constants", help="Vary prio's and prio-advanced's constants."
    ),
    sets: list[str] = typer.Option(
        [], "--set", help="Device tunable for every run (k=v).", show_default="the presets' values"
    ),
    jobs: int = typer.Option(2, "--jobs", min=1, help="Simulations run at once."),
    store: Path | None = store_option(),
    quiet: bool = typer.Option(False, "--quiet", help="No progress."),
) -> None:
    """database_sim against backup_sim on each device and scheduler: throughput, tails, CPU."""
    from qoslab.options import duration_option, int_list_option
    from qoslab.sched.study import (
        StudyOptions,
        devices_named,
        registered_schedulers,
        run_study,
    )

    names = (
        tuple(registered_schedulers())
        if schedulers is None
        else tuple(s.strip() for s in schedulers.split(",") if s.strip())
    )
    if not names or len(set(names)) != len(names):
        raise InputError(f"--schedulers: expected distinct names, got {schedulers!r}")
    if empirical is None:
        shipped = Path("configs/sched/loop-empirical.toml")
        empirical = shipped if shipped.is_file() else None
    elif not empirical.is_file():
        raise InputError("--empirical: no such device file", path=empirical)
    depths = int_list_option(hdd_queue_depths, "--hdd-queue-depths")
    if any(d > 32 for d in depths):
        raise InputError(f"--hdd-queue-depths: expected depths 1 to 32, got {hdd_queue_depths}")
    chosen = []
    for name in (d.strip() for d in devices.split(",") if d.strip()):
        if name == "empirical" and empirical is None:
            raise InputError(
                "--devices: 'empirical' needs --empirical FILE (a `qoslab lab calibrate` output)"
            )
        chosen += devices_named(name, empirical, depths)
    if not chosen:
        raise InputError(f"--devices: expected device names, got {devices!r}")
    opts = StudyOptions(
        devices=tuple(chosen),
        schedulers=names,
        seeds=seeds,
        runtime_s=duration_option(runtime, "--runtime"),
        jobs=jobs,
        constants=constants,
        sets=tuple(sets),
    )
    path = run_study(opts, out, real=real, quiet=quiet, store=store)
    typer.echo(f"wrote {path}")
