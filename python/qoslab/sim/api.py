"""Calling the Rust simulator; its outputs are written through `qoslab.outputs`."""

from __future__ import annotations

import json
import math
import tempfile
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from qoslab import _core, limits
from qoslab.errors import InputError
from qoslab.outputs import staged_file, write_files
from qoslab.sim.fio_cli import COMMAND_LINE, CommandLineJobs

DEFAULT_DEVICE = "nvme-analytic"
SERIES_SUFFIXES = (".csv", ".parquet")


def _input_error(err: Exception, jobs: CommandLineJobs | None = None) -> InputError:
    message, path, line = err.args
    if path == COMMAND_LINE and jobs is not None:
        # Job text made from fio options on the command line: name the argument.
        return InputError(f"{jobs.where(line)}: {message}")
    return InputError(message, path=path, line=line)


def _job_source(jobfile, jobtext, jobname, sections, env=None) -> dict[str, Any]:
    return dict(
        jobfile=None if jobfile is None else str(jobfile),
        jobtext=jobtext,
        jobname=jobname,
        sections=list(sections or []),
        env=_env(env),
    )


def _env(env: dict[str, object] | None) -> dict[str, str] | None:
    """The values of `${NAME}` in the jobs, as fio reads its environment: text (`{"QD": 32}`
    is QD=32)."""
    if env is None:
        return None
    if not isinstance(env, dict):
        raise InputError(f"env: expected a dict of NAME: value, got {type(env).__name__}")
    return {str(k): str(v) for k, v in env.items()}


def parse_jobs(
    jobfile: str | Path | None = None,
    *,
    jobtext: str | CommandLineJobs | None = None,
    jobname: str | None = None,
    sections: list[str] | None = None,
    env: dict[str, object] | None = None,
) -> dict[str, Any]:
    """How qoslab reads a job file (or job text), without running it: a dict with `path`,
    `global_options` and `jobs`, each job's settings with their units in their names. `env`
    gives the jobs' `${NAME}`s (before the process environment)."""
    cmdline = jobtext if isinstance(jobtext, CommandLineJobs) else None
    if cmdline is not None:
        jobtext, jobname = cmdline.text, COMMAND_LINE
    try:
        source = _job_source(jobfile, jobtext, jobname, sections, env)
        return json.loads(_core.fio_parse(**source))
    except _core.SimInputError as err:
        raise _input_error(err, cmdline) from None


def job_notes(parsed: dict[str, Any], cmdline: CommandLineJobs | None = None) -> list[str]:
    """The lines a run warns with: one per `${NAME}` that no variable gave, and one per job at
    most for each kind: the options the simulator accepts but does not act on (each where it
    was written: with `cmdline`, an option of fio's command line by its argument), and fio's
    own note for a synchronous engine asked for more than one I/O in flight."""

    def where(location: str) -> str:
        path, _, line = location.rpartition(":")
        if cmdline is not None and path == COMMAND_LINE and line.isdigit():
            return cmdline.where(int(line))
        return location

    # fio reads an unset ${NAME} as nothing, without a word; a run says so.
    lines = [
        f"{where(item['location'])}: environment variable '{item['name']}' is not set: read "
        "as nothing, as fio does"
        for item in parsed.get("unset_env", [])
    ]
    for job in parsed["jobs"]:
        seen: dict[str, str] = {}
        for item in job["ignored"]:
            seen.setdefault(item["option"], f"{item['option']} ({where(item['location'])})")
        if seen:
            lines.append(
                f"job '{job['name']}': options accepted but ignored by the simulator: "
                + ", ".join(seen.values())
            )
        if job["ioengine"] == "vsync" and job["iodepth"] > 1:
            lines.append(
                f"job '{job['name']}': ioengine=vsync at iodepth={job['iodepth']}: adjacent I/Os "
                "go out together in one readv/writev, one call at a time, and fio 3.33 never "
                "reaps the I/Os of a call once it makes the next (see 'Engines' in "
                "docs/workload.md)"
            )
        elif job["engine_class"] == "sync" and job["iodepth"] > 1:
            lines.append(
                f"job '{job['name']}': ioengine={job['ioengine']} is synchronous: iodepth="
                f'{job["iodepth"]} is capped at 1, as fio does (fio: "queue depth will be '
                'capped at 1"); ioengine=libaio or io_uring keeps that many in flight'
            )
    return lines


def run(
    jobfile: str | Path | None = None,
    *,
    jobtext: str | CommandLineJobs | None = None,
    jobname: str | None = None,
    sections: list[str] | None = None,
    trace: str | Path | list[str | Path] | None = None,
    trace_format: str | None = None,
    speed: float = 1.0,
    qd_cap: int = 0,
    device: str = DEFAULT_DEVICE,
    device_text: str | None = None,
    sets: list[str] | None = None,
    seed: int = 1,
    repeat: int = 1,
    output_format: str = "json",
    timeseries: str | Path | None = None,
    log_avg_msec: float = 100.0,
    eta: str = "never",
    eta_newline_s: float | None = None,
    eta_interval_s: float | None = None,
    fio_logs: bool = False,
    power_fail_at: str | None = None,
    crash_target: int | None = None,
    status_interval: str | None = None,
    env: dict[str, object] | None = None,
    terse_version: int = 3,
) -> dict[str, Any]:
    """Runs one simulation; returns {"text", "status", "ios", "events", "max_outstanding",
    "logs"} and, for jobs, "jobs" (how they were read, as `parse_jobs` gives it). "status" has
    the report at every `status_interval` of simulated time (fio's `--status-interval`; a
    number is seconds), before the end.

    `trace` is one block trace or a list of them, trace i replayed on host i. Jobs come from a
    job file, or from `jobtext` (job-file text named `jobname` in messages, or fio's command
    line as `CommandLineJobs`), only the `sections` named if any. The device is a preset name
    or a device file (`device_text`, when given, is that file's text; see `device_file` for
    MQSim's ssdconfig.xml). With `timeseries`, the per-interval series (every `log_avg_msec`,
    unless a job sets its own) is written there as CSV, or as Parquet when the name ends in
    .parquet. With `fio_logs`, the fio logs the jobs ask for (`write_lat_log`, ...) are written
    in the current folder (from the first seed's run) and "logs" lists them. With
    `power_fail_at`, the power fails at that simulated time; with `crash_target` too, only that
    target server crashes (`qoslab.recovery.target_crash`). `env` gives the jobs' `${NAME}`s
    (before the process environment). Terse lines are fio's `terse_version` (2 to 5). The
    progress bar (`qoslab.progress`) follows fio's `--eta` (`eta`: never, auto, always),
    `--eta-newline` and `--eta-interval` (in seconds)."""
    if repeat < 1:
        raise InputError(f"--repeat: expected at least 1, got {repeat}")
    if seed < 0:
        raise InputError(f"--seed: expected a non-negative integer, got {seed}")
    if qd_cap < 0:
        raise InputError(f"--qd-cap: expected a non-negative integer, got {qd_cap}")
    # What the core holds them in (u32, u64); the core says what a run can afford.
    limits.number(repeat, "--repeat", lo=1, hi=limits.MAX_U32, integer=True)
    limits.number(qd_cap, "--qd-cap", hi=limits.MAX_U32, integer=True)
    limits.number(seed, "--seed", hi=limits.MAX_SEED, integer=True)
    if crash_target is not None:
        limits.number(crash_target, "--crash-target", hi=0xFFFF, integer=True)
    if not (speed > 0 and math.isfinite(speed)):
        raise InputError(f"--speed: expected a number above 0, got {speed:g}")
    if timeseries is not None:
        _check_series_name(Path(timeseries))
    cmdline = jobtext if isinstance(jobtext, CommandLineJobs) else None
    if cmdline is not None:
        jobtext, jobname = cmdline.text, COMMAND_LINE
    core_args = dict(
        **_job_source(jobfile, jobtext, jobname, sections, env),
        trace=None if trace is None else [str(t) for t in _as_list(trace)],
        trace_format=trace_format,
        speed=speed,
        qd_cap=qd_cap,
        series_interval_ms=log_avg_msec,
        device_text=device_text,
        power_fail_at=power_fail_at,
        crash_target=crash_target,
        status_interval=status_interval,
        terse_version=terse_version,
    )
    series = None if timeseries is None else Path(timeseries)
    try:
        with _progress(core_args, repeat, eta, eta_newline_s, eta_interval_s):
            result = _run_with_series(device, sets, seed, repeat, output_format, series, core_args)
    except _core.SimInputError as err:
        raise _input_error(err, cmdline) from None
    if "jobs" in result:
        result["jobs"] = json.loads(result["jobs"])
    core_logs = result.pop("fio_logs")
    result["logs"] = []
    if fio_logs and trace is None:
        # The simulator writes every fio log (result["fio_logs"]).
        files = {Path(name): text for name, text in core_logs}
        write_files(files)
        result["logs"] = sorted(files)
    return result


def crash_views(
    jobtext: str,
    at_ns: list[int],
    *,
    jobname: str = "jobs",
    device: str = DEFAULT_DEVICE,
    sets: list[str] | None = None,
    seed: int = 1,
) -> tuple[list[dict[str, Any]], int]:
    """Power cuts at each of `at_ns` (simulated ns, in order) of one run of the job text
    `jobtext` on a device with target servers, all read during that one run: each is
    {"events": events handled before it, "recovery": what `power_fail_at` at that time reports
    as `qoslab.recovery`}, without the destructive cut (the simulator's crash views; a test
    holds them equal). Also the events of the run, which stops at its last view."""
    limits.number(seed, "--seed", hi=limits.MAX_SEED, integer=True)
    try:
        result = _core.sim_run(
            device,
            list(sets or []),
            seed,
            1,
            "json",
            **_job_source(None, jobtext, jobname, None),
            crash_views_at=[int(t) for t in at_ns],
        )
    except _core.SimInputError as err:
        raise _input_error(err) from None
    return json.loads(result["crash_views"]), result["events"]


# A bar appears once a run has taken this long (under fio's --eta=auto), so that a short run
# does not flash one.
SHOW_AFTER_S = 1.0


@contextmanager
def _progress(core_args, runs: int, eta: str, newline_s, interval_s):
    """The run's progress bar (`qoslab.progress`), drawn from what the simulator says of its
    runs (`core_args["progress"]`, read from a thread while they go); with `eta="auto"` only
    once they have taken SHOW_AFTER_S."""
    from qoslab.progress import lines_every, polled, progress_bar

    with progress_bar(eta=eta, refresh_s=interval_s) as bar:
        if bar.disable:
            yield
            return
        state = core_args["progress"] = _core.SimProgress()
        task = bar.add_task("sim", total=None, visible=eta == "always")
        started = time.monotonic()

        def update() -> None:
            seen = state.runs()
            fractions = [r[0] for r in seen]
            known = bool(seen) and None not in fractions
            done = sum(r[3] for r in seen)
            simulated_s = max((r[1] for r in seen), default=0) / 1e9
            what = f"sim: {simulated_s:.3f} s simulated, {sum(r[2] for r in seen):,} I/Os"
            if runs > 1:
                what += f", {done}/{runs} runs"
            bar.update(
                task,
                total=1.0 if known else None,
                completed=sum(fractions) / runs if known else 0,
                description=what,
                visible=bar.tasks[0].visible or time.monotonic() - started >= SHOW_AFTER_S,
            )

        with lines_every(bar, newline_s), polled(update):
            yield


def _check_series_name(path: Path) -> None:
    check_writable(path, "--timeseries")
    # A device or a pipe (/dev/null, /dev/stdout) takes the CSV; a file's name says its format.
    if (not path.exists() or path.is_file()) and path.suffix not in SERIES_SUFFIXES:
        raise InputError(f"--timeseries: expected a .csv or .parquet file name, got '{path}'")


def read_series(path: str | Path):
    """A series file (CSV, or Parquet by its name) as a DataFrame of the series' types."""
    import pandas as pd

    path = Path(path)
    if path.suffix == ".parquet":
        return pd.read_parquet(path)
    return pd.read_csv(path, dtype=SERIES_COLUMN_TYPES)


def _run_with_series(device, sets, seed, repeat, output_format, timeseries, core_args):
    if timeseries is None:
        return _sim_run(device, sets, seed, repeat, output_format, None, core_args)
    series = Path(timeseries)
    check_writable(series, "--timeseries")
    with staged_file(series) as staged:
        if series.suffix != ".parquet":
            return _sim_run(device, sets, seed, repeat, output_format, staged, core_args)
        # Parquet is converted from a CSV the simulator streams beside it, batch by batch.
        with tempfile.NamedTemporaryFile(dir=staged.parent, prefix=staged.name, suffix=".csv") as f:
            scratch = Path(f.name)
            result = _sim_run(device, sets, seed, repeat, output_format, scratch, core_args)
            _csv_to_parquet(scratch, staged)
        return result


def _as_list(x: Any) -> list:
    return list(x) if isinstance(x, (list, tuple)) else [x]


def _sim_run(
    device: str,
    sets: list[str] | None,
    seed: int,
    repeat: int,
    output_format: str,
    series: Path | None,
    core_args: dict[str, Any],
) -> dict[str, Any]:
    return _core.sim_run(
        device,
        list(sets or []),
        seed,
        repeat,
        output_format,
        series_path=None if series is None else str(series),
        **core_args,
    )


# Column types of the series, fixed rather than inferred, so that every file has the same
# schema (a series whose intervals all happen to be whole ms is still float `interval_ms`).
SERIES_COLUMN_TYPES = {
    "seed": "int64",
    "time_ms": "int64",
    "interval_ms": "float64",
    "job": "string",
    "job_index": "int64",
    "op": "string",
    "ios": "int64",
    "bytes": "int64",
    "iops": "float64",
    "bytes_per_s": "float64",
    "lat_mean_ns": "float64",
    "lat_p99_ns": "int64",
    "lat_p9999_ns": "int64",
    "lat_max_ns": "int64",
    "dispatch_lat_p99_ns": "int64",
    "dispatch_lat_p9999_ns": "int64",
    "dispatch_lat_max_ns": "int64",
}
# CSV read per batch when converting to Parquet; each batch becomes one row group (about
# 25,000 rows). Measured on series of 2 to 8 million rows: the conversion's peak RSS stays at
# 166 MB with 1 MiB batches, but grows with the file's length with 4 MiB ones.
PARQUET_BATCH_BYTES = 1 << 20


def _csv_to_parquet(csv_path: Path, out: Path) -> None:
    """Converts the series CSV to Parquet one batch at a time (memory stays at one batch)."""
    import pyarrow as pa
    import pyarrow.csv as pacsv
    import pyarrow.parquet as pq

    types = {name: pa.type_for_alias(t) for name, t in SERIES_COLUMN_TYPES.items()}
    reader = pacsv.open_csv(
        csv_path,
        read_options=pacsv.ReadOptions(block_size=PARQUET_BATCH_BYTES),
        convert_options=pacsv.ConvertOptions(column_types=types),
    )
    with pq.ParquetWriter(out, reader.schema) as writer:
        for batch in reader:
            writer.write_batch(batch)


def device_file(device: str, workload=None) -> tuple[str | None, str | None]:
    """(device file text, warning) for `--device`: for MQSim's ssdconfig.xml (a name ending
    in .xml) the SSD model's device file made from it and the warning naming what it leaves
    out (`workload`: `qoslab.sim.mqsim.Workload` of the flows, for preconditioning); for a
    preset or a TOML file (None, None). A guest device SPEC (`null_blk:...`, `scsi_debug:...`,
    docs/vm.md) gives its simulator twin's device file."""
    from qoslab.guest_devices import is_spec, parse_spec, twin_toml

    if is_spec(device):
        return twin_toml(parse_spec(device)), None
    if not device.endswith(".xml"):
        return None, None
    from qoslab.sim.mqsim import device_from_ssdconfig

    converted = device_from_ssdconfig(device, workload)
    return converted.text, converted.warning(Path(device))


def presets() -> list[tuple[str, str]]:
    """(name, description) of the device presets shipped in configs/devices."""
    return _core.sim_presets()


def preset_text(name: str) -> str | None:
    return _core.sim_preset_text(name)


def tunables() -> list[tuple[str, str, str, str, str]]:
    """(section, key, unit, default, help) of every device-file tunable."""
    return _core.sim_tunables()


def tunables_markdown(models: list[str] | None = None) -> str:
    """The tunables reference as Markdown; media models in `models` only (all when None)."""
    return _core.sim_tunables_markdown(models)


def check_writable(path: Path, option: str) -> None:
    """Fails with an input error naming `option`, before a long run, if `path` could not be
    written."""
    path = Path(path)
    directory = path.parent if str(path.parent) else Path(".")
    if directory.exists() and not directory.is_dir():
        raise InputError(f"{option}: cannot write {path}: {directory} is a file, not a folder")
    if not directory.is_dir():
        raise InputError(f"{option}: cannot write {path}: the folder {directory} does not exist")
    if path.is_dir():
        raise InputError(f"{option}: {path} is a folder; expected the name of a file")


def sim_json(
    job: str | Path | None = None,
    *,
    text: str | None = None,
    device: str = DEFAULT_DEVICE,
    set: dict[str, object] | list[str] | None = None,
    seed: int = 1,
    repeat: int = 1,
    sections: list[str] | None = None,
    mqsim_workload: str | Path | None = None,
    env: dict[str, object] | None = None,
) -> dict[str, Any]:
    """`qoslab sim` from Python: the fio JSON report of a run as a dict.

    The jobs are a job file (`job`), job-file `text`, or MQSim's workload.xml
    (`mqsim_workload`); `device` a preset, a device file or MQSim's ssdconfig.xml; `set`
    overrides device tunables ({"media.servers": 4}, as `--set media.servers=4`); `env` the
    jobs' `${NAME}`s ({"QD": 32} for `iodepth=${QD}`, as `QD=32 qoslab sim job.fio`). What the
    command line warns about (ignored options, MQSim parameters it does not model) comes as
    Python warnings."""
    import warnings

    sets = [f"{k}={v}" for k, v in set.items()] if isinstance(set, dict) else list(set or [])
    jobs: dict[str, Any] = dict(sections=sections)
    flows = None
    if mqsim_workload is not None:
        from qoslab.sim.mqsim import jobs_from_workload

        converted, flows = jobs_from_workload(mqsim_workload)
        jobs.update(jobtext=converted.text, jobname=str(mqsim_workload))
        notes = [converted.warning(Path(mqsim_workload))]
    elif text is not None:
        jobs.update(jobtext=text, jobname="<text>")
        notes = []
    elif job is not None:
        jobs["jobfile"] = job
        notes = []
    else:
        raise InputError("give a job file, job text or an MQSim workload")
    device_text, device_note = device_file(str(device), flows)
    notes += [device_note, *job_notes(parse_jobs(**jobs, env=env))]
    for note in filter(None, notes):
        warnings.warn(note, stacklevel=2)
    result = run(
        **jobs,
        device=str(device),
        device_text=device_text,
        sets=sets,
        seed=seed,
        repeat=repeat,
        output_format="json",
        env=env,
    )
    return json.loads(result["text"])


def sim_frame(*args, **kwargs):
    """`qoslab sim` from Python as a pandas DataFrame: one row per job and direction with
    fio's fields, units in the column names (`iops`, `bw_bytes_s`, `lat_mean_us`, `p99_us`,
    ...; see `qoslab.fio.tables`). Takes what `sim_json` takes."""
    from qoslab.fio import jobs_table, parse_fio_json

    report = sim_json(*args, **kwargs)
    name = kwargs.get("mqsim_workload") or (args[0] if args else kwargs.get("job")) or "<text>"
    return jobs_table([parse_fio_json(json.dumps(report), path=Path(str(name)).name)])


def stage_counters(report: dict[str, Any], stage: str) -> dict[str, Any]:
    """The counters of the path's stage called `stage` in a JSON report (`qoslab.stages`);
    `"media"` names the last stage, whatever the model."""
    stages = report["qoslab"]["stages"]
    if stage == "media":
        return stages[-1]["counters"]
    for s in stages:
        if s["stage"] == stage:
            return s["counters"]
    raise KeyError(f"no stage '{stage}' in the report (stages: {[s['stage'] for s in stages]})")
