"""`qoslab sim`: the timed simulator, fio job in, fio report out.

Jobs come from a fio job file, from stdin (`-`), or from fio's own command-line syntax
(`--name=x --rw=randread ...`, see `qoslab.sim.fio_cli`); a trace replays instead with
`--trace`. The report is in fio's formats (normal, terse, json, json+, or a comma list).
"""

from __future__ import annotations

import json
import sys
import tempfile
from contextlib import ExitStack
from pathlib import Path

import typer
from typer.core import TyperCommand

from qoslab import progress
from qoslab.errors import InputError
from qoslab.outputs import write_file
from qoslab.sim import api
from qoslab.sim.fio_cli import CommandLineJobs, cmdhelp, job_text, showcmd, split_arguments
from qoslab.units import parse_duration

FORMATS = ("normal", "terse", "json", "json+")
# fio's other names of its terse output in --output-format.
TERSE_NAMES = ("minimal", "csv")
FIO_ARGS = "qoslab.sim.fio_args"
FORMAT_ARGS = "qoslab.sim.format_args"
# The options that set the output formats, which fio applies in their order (init.c): --minimal
# makes the output terse alone, --output-format replaces the formats, --append-terse adds terse.
FORMAT_OPTIONS = ("--minimal", "--output-format", "--append-terse")


class FioCommandLine(TyperCommand):
    """Takes fio's job options out of the arguments before typer reads qoslab's own, and notes
    the order of the format options, which typer does not keep."""

    def parse_args(self, ctx: typer.Context, args: list[str]) -> list[str]:
        if "--help" in args:
            return super().parse_args(ctx, args)
        own, fio = split_arguments(args, self.params)
        ctx.meta[FIO_ARGS] = fio
        ctx.meta[FORMAT_ARGS] = _format_arguments(own)
        return super().parse_args(ctx, own)


def _format_arguments(own: list[str]) -> list[tuple[str, str | None]]:
    """The format options in the order given: (option, its value or None)."""
    found = []
    args = iter(own)
    for arg in args:
        if arg == "--":
            break
        name, eq, value = arg.partition("=")
        if name not in FORMAT_OPTIONS:
            continue
        if name == "--output-format" and not eq:
            value = next(args, "")
        found.append((name, value if name == "--output-format" else None))
    return found


def _fio_output_format(given: list[tuple[str, str | None]]) -> str:
    """The formats the options ask for, applied in their order as fio applies them: the later
    of --minimal and --output-format wins, --append-terse adds terse to what stands before it."""
    formats = ["normal"]
    for option, value in given:
        if option == "--minimal":
            formats = ["terse"]
        elif option == "--output-format":
            formats = _output_formats(value or "").split(",")
        elif "terse" not in formats:
            formats.append("terse")
    return ",".join(formats)


# fio's shortest --eta-interval (a shorter one is an error in fio 3.33).
MIN_ETA_INTERVAL_S = 0.25
# The terse versions fio 3.33 writes (3 by default).
TERSE_VERSIONS = ("2", "3", "4", "5")
# fio's read-only directions (`td_write`/`td_trim` false).
READ_ONLY = ("read", "randread")


def _refuse_writers(parsed: dict) -> None:
    """fio's --readonly: a job that writes or trims is refused, naming its line."""
    for job in parsed["jobs"]:
        if job["rw"] not in READ_ONLY:
            raise InputError(
                f"{job['location']}: job '{job['name']}': rw={job['rw']} writes or trims, and "
                "--readonly allows reads only (as fio's read-only mode)"
            )


def _eta_time(text: str | None, option: str, least_s: float = 0.0) -> float | None:
    """A time of fio's --eta-newline/--eta-interval: seconds when it has no unit."""
    if text is None:
        return None
    try:
        seconds = parse_duration(text, option)
    except ValueError as err:
        raise InputError(str(err)) from None
    if seconds <= 0 or seconds < least_s:
        least = f"at least {least_s * 1000:g}ms (fio's shortest)" if least_s else "above 0"
        raise InputError(f"{option}: expected a time {least}, got '{text}'")
    return seconds


def _output_formats(text: str) -> str:
    words = [w.strip() for w in text.split(",")]
    words = ["terse" if w in TERSE_NAMES else w for w in words]
    bad = [w for w in words if w not in FORMATS]
    if bad:
        raise InputError(
            f"--output-format: expected {', '.join(FORMATS)} (or fio's {' or '.join(TERSE_NAMES)}"
            f" for terse) or a comma list of them, got '{bad[0]}'"
        )
    return ",".join(dict.fromkeys(words))


def sim(
    ctx: typer.Context,
    jobfile: Path | None = typer.Argument(
        None,
        help="fio job file to run, or - for stdin; or give the job as fio's options "
        "(--name=x --rw=randread ...), or --trace.",
        show_default=False,
    ),
    section: list[str] = typer.Option(
        [], "--section", help="Run only this job section (repeatable).", show_default="all"
    ),
    parse_only: bool = typer.Option(
        False,
        "--parse-only",
        help="Read the jobs and stop (with --output-format json: print how they were read).",
    ),
    show_cmd: bool = typer.Option(
        False, "--showcmd", help="Print the job file as fio's command line and stop."
    ),
    mqsim_workload: Path | None = typer.Option(
        None,
        "--mqsim-workload",
        help="Run MQSim's workload.xml: a job per synthetic flow, a stonewall per scenario.",
        show_default="none",
    ),
    trace: list[Path] | None = typer.Option(
        None,
        "--trace",
        help="Replay a block trace (MSR, SYSTOR'17, blkparse, fio iolog v2/v3); repeat it for "
        "several hosts: the i-th trace runs on host i.",
        show_default="none",
    ),
    trace_format: str = typer.Option(
        "auto", "--trace-format", help="auto, msr, systor17, blkparse, iolog2 or iolog3."
    ),
    speed: float = typer.Option(1.0, "--speed", help="Trace replay speed (2 = twice as fast)."),
    qd_cap: int = typer.Option(
        0, "--qd-cap", help="Most trace I/Os outstanding at once (0 = no cap)."
    ),
    device: str = typer.Option(
        api.DEFAULT_DEVICE,
        "--device",
        help="Device preset name, device TOML file, MQSim's ssdconfig.xml, or a guest device "
        "SPEC (null_blk:k=v,..., scsi_debug:k=v,...) whose simulator twin runs.",
    ),
    sets: list[str] = typer.Option(
        [],
        "--set",
        help="Override a device tunable: section.key=value (repeatable).",
        show_default="none",
    ),
    seed: int = typer.Option(1, "--seed", help="Run seed (every random stream derives from it)."),
    repeat: int = typer.Option(
        1, "--repeat", help="Run N seeds (seed, seed+1, ...) on all cores; report mean and 95% CI."
    ),
    output_format: str = typer.Option(
        "normal",
        "--output-format",
        help="normal, terse, json or json+ (fio's formats), or a comma list of them.",
    ),
    output: Path | None = typer.Option(
        None, "--output", help="Write the report to this file.", show_default="stdout"
    ),
    minimal: bool = typer.Option(
        False,
        "--minimal",
        help="fio's terse output: the same as --output-format terse (the later of the two "
        "wins, as in fio).",
    ),
    append_terse: bool = typer.Option(
        False,
        "--append-terse",
        help="Also print the terse output (fio's older form of --output-format X,terse; a "
        "later --output-format replaces it, as in fio).",
    ),
    terse_version: str = typer.Option(
        "3", "--terse-version", help="fio's terse version of the terse lines: 2, 3, 4 or 5."
    ),
    eta: str = typer.Option(
        "auto",
        "--eta",
        help="When to show the progress bar on stderr, as fio's --eta: always (also into a "
        "file or pipe), never, or auto (when stderr is a terminal).",
    ),
    eta_newline: str | None = typer.Option(
        None,
        "--eta-newline",
        help="Also print the progress bar as a line that stays every this long (fio's): 5s, "
        "500ms, or a number of seconds.",
        show_default="never",
    ),
    eta_interval: str | None = typer.Option(
        None,
        "--eta-interval",
        help="Redraw the progress bar every this long (fio's; at least 250ms).",
        show_default="0.1s",
    ),
    quiet: bool = typer.Option(
        False, "--quiet", "-q", help="No progress bar (the same as --eta never)."
    ),
    warnings_fatal: bool = typer.Option(
        False,
        "--warnings-fatal",
        help="Stop, as fio's --warnings-fatal, where a warning would be printed (options "
        "the simulator ignores, a synchronous engine's capped iodepth).",
    ),
    version: bool = typer.Option(
        False, "--version", help="Print qoslab's version and stop (as fio's --version)."
    ),
    cmd_help: str | None = typer.Option(
        None,
        "--cmdhelp",
        help="Print the help of a job option (or all), as fio's --cmdhelp, and stop.",
        show_default="none",
    ),
    status_interval: str | None = typer.Option(
        None,
        "--status-interval",
        help="Print the report so far every this much simulated time (fio's, which counts "
        "wall-clock time), then the final one: 10ms, 1s, or a number of seconds.",
        show_default="never",
    ),
    readonly: bool = typer.Option(
        False,
        "--readonly",
        help="Refuse a job that writes or trims, as fio's --readonly (its safety check).",
    ),
    timeseries: Path | None = typer.Option(
        None,
        "--timeseries",
        help="Write per-interval IOPS, MB/s, mean and p99 (.csv or .parquet).",
        show_default="not written",
    ),
    log_avg_msec: float = typer.Option(
        100.0, "--log-avg-msec", help="Interval of --timeseries in ms (a job's log_avg_msec wins)."
    ),
    plot: Path | None = typer.Option(
        None,
        "--plot",
        help="Plot IOPS and p99 latency over time (PNG, SVG or PDF).",
        show_default="not drawn",
    ),
    power_fail_at: str | None = typer.Option(
        None,
        "--power-fail-at",
        help="Cut the power at this simulated time (e.g. 20ms) and report per job what it "
        "took (qoslab.durability in the JSON) and, for ordered jobs, what recovery kept "
        "(qoslab.recovery).",
        show_default="never",
    ),
    crash_target: int | None = typer.Option(
        None,
        "--crash-target",
        help="With --power-fail-at: only this target server (0 to the device's "
        "fabric.targets - 1) crashes and restarts; qoslab.recovery.target_crash says what it "
        "lost.",
        show_default="none",
    ),
    list_devices: bool = typer.Option(False, "--list-devices", help="List device presets."),
    list_tunables: bool = typer.Option(
        False, "--list-tunables", help="List every device-file tunable (unit, default, help)."
    ),
    show_device: str | None = typer.Option(
        None, "--show-device", help="Print a preset's TOML and exit.", show_default="none"
    ),
) -> None:
    """The timed simulator: fio job in, fio report out (or a trace replayed)."""
    if version:
        from qoslab._core import __version__

        typer.echo(f"qoslab {__version__}")
        return
    if cmd_help is not None:
        sys.stdout.write(cmdhelp(cmd_help))
        return
    if list_devices:
        for name, description in api.presets():
            typer.echo(f"{name}\n    {' '.join(description.split())}")
        return
    if list_tunables:
        current = None
        for sec, key, unit, default, help_text in api.tunables():
            if sec != current:
                typer.echo(f"[{sec}]")
                current = sec
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
    given = ctx.meta.get(FORMAT_ARGS)
    if given is None:
        # Called without fio's command line (typer's own): the options' order is unknown.
        given = [("--output-format", output_format)]
        given += [("--minimal", None)] * minimal + [("--append-terse", None)] * append_terse
    output_format = _fio_output_format(given)
    if terse_version not in TERSE_VERSIONS:
        raise InputError(f"--terse-version: expected 2, 3, 4 or 5 (fio's), got '{terse_version}'")
    if eta not in progress.ETA:
        raise InputError(f"--eta: expected {', '.join(progress.ETA)}, got '{eta}'")
    if quiet and eta == "always":
        raise InputError("--quiet is --eta never: give one of them, not --eta always")
    eta_newline_s = _eta_time(eta_newline, "--eta-newline")
    eta_interval_s = _eta_time(eta_interval, "--eta-interval", MIN_ETA_INTERVAL_S)
    if readonly and trace is not None:
        raise InputError("--readonly: checks jobs; a replayed trace is not checked")
    fio_args = ctx.meta.get(FIO_ARGS, [])
    jobs = dict(sections=section)
    flows = None
    if mqsim_workload is not None:
        from qoslab.sim.mqsim import jobs_from_workload

        if fio_args or jobfile is not None:
            raise InputError("give the jobs either as --mqsim-workload or as fio jobs, not both")
        converted, flows = jobs_from_workload(mqsim_workload)
        _warn(converted.warning(mqsim_workload))
        jobs.update(jobtext=converted.text, jobname=str(mqsim_workload))
    elif fio_args:
        if jobfile is not None and str(jobfile) == "-":
            raise InputError(
                "fio options beside a job file on stdin: give the job file's path (or put the "
                "options in its [global] section)"
            )
        # Beside a job file, fio's options come first: global ones the file overrides, and
        # jobs of their own (--name=...) before the file's.
        jobs["jobtext"] = job_text(fio_args)
        if jobfile is not None:
            jobs["jobfile"] = jobfile
    elif jobfile is not None and str(jobfile) == "-":
        jobs.update(jobtext=sys.stdin.read(), jobname="<stdin>")
    elif jobfile is not None:
        jobs["jobfile"] = jobfile
    if len(jobs) == 1 and trace is None:
        raise InputError("give a job file (or - for stdin), fio job options, or --trace FILE")
    if len(jobs) > 1 and trace is not None:
        raise InputError("give either jobs or --trace FILE, not both")
    device_text, warning = api.device_file(device, flows)
    _warn(warning)
    if trace is None:
        parsed = api.parse_jobs(**jobs)
        if show_cmd:
            sys.stdout.write(showcmd(parsed))
            return
        if parse_only:
            if "json" in output_format:
                sys.stdout.write(json.dumps(parsed, indent=2) + "\n")
            return
        if readonly:
            _refuse_writers(parsed)
        cmdline = jobs.get("jobtext")
        for line in api.job_notes(
            parsed, cmdline if isinstance(cmdline, CommandLineJobs) else None
        ):
            if warnings_fatal:
                raise InputError(f"--warnings-fatal: {line}")
            _warn(line)
    if plot is not None and plot.suffix not in (".png", ".svg", ".pdf"):
        raise InputError(f"--plot: expected a .png, .svg or .pdf file, got '{plot}'")
    if plot is not None and repeat > 1:
        raise InputError("--plot: draws one run; leave out --repeat")
    for path, option in ((output, "--output"), (plot, "--plot")):
        if path is not None:
            api.check_writable(path, option)
    with ExitStack() as scratch:
        series = timeseries
        if plot is not None and series is None:
            # The plot reads the series from a file, as the simulator streams it.
            folder = Path(scratch.enter_context(tempfile.TemporaryDirectory(prefix="qoslab-sim-")))
            series = folder / "series.csv"
        result = api.run(
            **jobs,
            trace=trace,
            trace_format=trace_format,
            speed=speed,
            qd_cap=qd_cap,
            device=device,
            device_text=device_text,
            sets=sets,
            seed=seed,
            repeat=repeat,
            output_format=output_format,
            timeseries=series,
            log_avg_msec=log_avg_msec,
            eta="never" if quiet else eta,
            eta_newline_s=eta_newline_s,
            eta_interval_s=eta_interval_s,
            terse_version=int(terse_version),
            fio_logs=True,
            power_fail_at=power_fail_at,
            crash_target=crash_target,
            status_interval=status_interval,
        )
        if plot is not None:
            from qoslab.sim.plot import timeseries_figure

            title = str(trace[0] if trace else jobfile or "command line")
            timeseries_figure(series, plot, title=title)
    text = "".join(result["status"]) + result["text"]
    if output is None:
        sys.stdout.write(text)
    else:
        write_file(output, text)


def _warn(warning: str | None) -> None:
    if warning:
        print(f"qoslab: warning: {warning}", file=sys.stderr)


mqsim_app = typer.Typer(
    name="mqsim",
    help="MQSim's input files as qoslab's: a device file and a fio job file.",
    no_args_is_help=True,
)


@mqsim_app.command("convert")
def mqsim_convert(
    ssdconfig: Path = typer.Argument(..., help="MQSim's device file (ssdconfig.xml)."),
    workload: Path | None = typer.Argument(
        None, help="MQSim's workload file (workload.xml).", show_default="none"
    ),
    out: Path = typer.Option(Path("."), "--out", help="Folder for device.toml and workload.fio."),
) -> None:
    """Write the SSD model's device file (and a fio job file) equivalent to MQSim's XML."""
    from qoslab.outputs import write_files
    from qoslab.sim.mqsim import device_from_ssdconfig, jobs_from_workload

    if not out.is_dir():
        raise InputError("--out: expected an existing folder", path=out)
    files = {}
    flows = None
    if workload is not None:
        jobs, flows = jobs_from_workload(workload)
        _warn(jobs.warning(workload))
        files[out / "workload.fio"] = jobs.text
    device = device_from_ssdconfig(ssdconfig, flows)
    _warn(device.warning(ssdconfig))
    files[out / "device.toml"] = device.text
    write_files(files)
    for path in sorted(files):
        typer.echo(f"wrote {path}")


def register(app: typer.Typer) -> None:
    app.command("sim", cls=FioCommandLine)(sim)
    app.add_typer(mqsim_app)
