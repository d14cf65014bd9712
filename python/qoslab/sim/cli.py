"""`qoslab sim`: a fio job file (or a trace) on a simulated NVMe path and device."""

from __future__ import annotations

import sys
import tempfile
from contextlib import ExitStack
from pathlib import Path

import typer

from qoslab.errors import InputError
from qoslab.outputs import write_file
from qoslab.sim import api

FORMATS = ("normal", "json", "json+")


def sim(
    jobfile: Path | None = typer.Argument(
        None, help="fio job file to run (or give --trace).", show_default=False
    ),
    trace: list[Path] | None = typer.Option(
        None,
        "--trace",
        help="Replay a block trace (MSR, SYSTOR'17, blkparse, fio iolog v2/v3); repeat it for "
        "several hosts: the i-th trace runs on host i.",
    ),
    trace_format: str = typer.Option(
        "auto", "--trace-format", help="auto, msr, systor17, blkparse, iolog2 or iolog3."
    ),
    speed: float = typer.Option(1.0, "--speed", help="Trace replay speed (2 = twice as fast)."),
    qd_cap: int = typer.Option(
        0, "--qd-cap", help="Most trace I/Os outstanding at once (0 = no cap)."
    ),
    device: str = typer.Option(
        api.DEFAULT_DEVICE, "--device", help="Device preset name or device TOML file."
    ),
    sets: list[str] = typer.Option(
        [], "--set", help="Override a device tunable: section.key=value (repeatable)."
    ),
    seed: int = typer.Option(1, "--seed", help="Run seed (every random stream derives from it)."),
    repeat: int = typer.Option(
        1, "--repeat", help="Run N seeds (seed, seed+1, ...) on all cores; report mean and 95% CI."
    ),
    output_format: str = typer.Option(
        "normal", "--output-format", help="normal, json or json+ (fio's formats)."
    ),
    output: Path | None = typer.Option(
        None, "--output", help="Write the report here instead of stdout."
    ),
    timeseries: Path | None = typer.Option(
        None, "--timeseries", help="Write per-interval IOPS, MB/s, mean and p99 (CSV or .parquet)."
    ),
    log_avg_msec: float = typer.Option(
        100.0, "--log-avg-msec", help="Interval of --timeseries in ms (a job's log_avg_msec wins)."
    ),
    plot: Path | None = typer.Option(
        None, "--plot", help="Plot IOPS and p99 latency over time (PNG, SVG or PDF)."
    ),
    list_devices: bool = typer.Option(False, "--list-devices", help="List device presets."),
    list_tunables: bool = typer.Option(
        False, "--list-tunables", help="List every device-file tunable (unit, default, help)."
    ),
    show_device: str | None = typer.Option(
        None, "--show-device", help="Print a preset's TOML and exit."
    ),
) -> None:
    """Simulate a fio job file (or replay a trace) and report like fio."""
    if list_devices:
        for name, description in api.presets():
            typer.echo(f"{name}\n    {' '.join(description.split())}")
        return
    if list_tunables:
        section = None
        for sec, key, unit, default, help_text in api.tunables():
            if sec != section:
                typer.echo(f"[{sec}]")
                section = sec
            typer.echo(f"  {key:<22} {unit:<8} default {default:<12} {help_text}")
        return
    if show_device is not None:
        text = api.preset_text(show_device)
        if text is None:
            names = ", ".join(n for n, _ in api.presets())
            raise InputError(f"--show-device: no preset '{show_device}' (presets: {names})")
        typer.echo(text, nl=False)
        return
    trace = trace or None
    if (jobfile is None) == (trace is None):
        raise InputError("give either a job file or --trace FILE")
    if output_format not in FORMATS:
        raise InputError(f"--output-format: expected normal, json or json+, got '{output_format}'")
    if plot is not None and plot.suffix not in (".png", ".svg", ".pdf"):
        raise InputError(f"--plot: expected a .png, .svg or .pdf file, got '{plot}'")
    if plot is not None and repeat > 1:
        raise InputError("--plot: draws one run; leave out --repeat")
    for path in (output, plot):
        if path is not None:
            api.check_writable(path)
    with ExitStack() as scratch:
        series = timeseries
        if plot is not None and series is None:
            # The plot reads the series from a file, as the simulator streams it.
            folder = Path(scratch.enter_context(tempfile.TemporaryDirectory(prefix="qoslab-sim-")))
            series = folder / "series.csv"
        result = api.run(
            jobfile,
            trace=trace,
            trace_format=trace_format,
            speed=speed,
            qd_cap=qd_cap,
            device=device,
            sets=sets,
            seed=seed,
            repeat=repeat,
            output_format=output_format,
            timeseries=series,
            log_avg_msec=log_avg_msec,
            progress=sys.stderr.isatty(),
        )
        if plot is not None:
            from qoslab.sim.plot import timeseries_figure

            timeseries_figure(series, plot, title=str(jobfile or trace[0]))
    if output is None:
        sys.stdout.write(result["text"])
    else:
        write_file(output, result["text"])


def register(app: typer.Typer) -> None:
    app.command("sim")(sim)
