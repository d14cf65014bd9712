"""`qoslab vm fio`: a fio job file in the guest on one device under one scheduler, N times.

Every repetition's fio JSON comes back as `rep-N.json`; beside it the scheduler's sysfs
counters after it (`rep-N.iosched`), the device's `/proc/diskstats` line before and after
(`rep-N.diskstats-before|after`), `/sys/block/DEV/stat` (`rep-N.stat`), the queue's settings
(`queue.txt`), the console, `dmesg.txt` and `meta.json` (kernel, accelerator, device, scheduler,
tunables, timings). With `--trace`, the block layer's tracepoints of each repetition as
`rep-N.trace` (`qoslab vm trace` sums them up).
"""

from __future__ import annotations

import json
import re
import shutil
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from qoslab.errors import InputError
from qoslab.guest_devices import DeviceSpec
from qoslab.vm import guest
from qoslab.vm.image import check_mke2fs
from qoslab.vm.packages import Kernel

SCHEDULER_NAME = re.compile(r"^[a-z0-9][a-z0-9_-]{0,15}$")
SETTING = re.compile(r"^(iosched|queue)\.([a-z0-9_]+)=([A-Za-z0-9_.:-]+)$")
BOOT_BUDGET_S = 90.0


@dataclass(frozen=True)
class Setting:
    """A sysfs write on the guest's device: queue/NAME or queue/iosched/NAME."""

    where: str
    name: str
    value: str

    @property
    def path(self) -> str:
        return f"queue/iosched/{self.name}" if self.where == "iosched" else f"queue/{self.name}"


def parse_settings(items: list[str]) -> list[Setting]:
    out = []
    for item in items:
        m = SETTING.match(item.strip())
        if m is None:
            raise InputError(
                f"--set: expected iosched.NAME=VALUE or queue.NAME=VALUE "
                f"(e.g. iosched.aging_expire=100), got {item!r}"
            )
        out.append(Setting(*m.groups()))
    return out


def check_scheduler(name: str) -> str:
    if not SCHEDULER_NAME.match(name):
        raise InputError(f"--scheduler: not a scheduler name: {name!r}")
    return name


def check_job(job: Path) -> str:
    """The job file's text; a job that names its own file is refused (the guest gives it)."""
    try:
        text = job.read_text()
    except OSError as err:
        raise InputError(f"cannot read the job file: {err.strerror}", path=job) from None
    for number, line in enumerate(text.splitlines(), 1):
        key = line.split("=", 1)[0].strip().lower()
        if key in ("filename", "directory", "filename_format"):
            raise InputError(
                f"{key}= names a file; qoslab vm runs the job on the guest's device (leave it out)",
                path=job,
                line=number,
            )
    _refuse_misread_values(job)
    return text


def _refuse_misread_values(job: Path) -> None:
    """A value fio 3.33 silently reads as something else (a fractional time or size:
    `ramp_time=0.5s` is no ramp at all, `runtime=2.5s` is 2 s; `5sec` is 5 us) is refused as
    the simulator refuses it: the guest's fio would run another job than the one written,
    and the simulator would not run it at all. Every other check is left to the guest's fio."""
    from qoslab import _core

    try:
        _core.fio_parse(jobfile=str(job))
    except _core.SimInputError as err:
        message, path, line = err.args
        if "fio 3.33" in message:
            raise InputError(message, path=path, line=line) from None


_DURATION = re.compile(r"^\s*(runtime|ramp_time)\s*=\s*([0-9.]+)\s*(ms|s|m|h)?\s*$", re.I)


def job_seconds(text: str) -> float:
    """How long one repetition may take: the longest runtime plus ramp in the file, or 5
    minutes when it does not say (a size-based job)."""
    longest = {"runtime": 0.0, "ramp_time": 0.0}
    for line in text.splitlines():
        m = _DURATION.match(line)
        if m:
            unit = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0}[(m.group(3) or "s").lower()]
            longest[m.group(1).lower()] = max(longest[m.group(1).lower()], float(m.group(2)) * unit)
    if longest["runtime"] == 0:
        return 300.0
    return longest["runtime"] + longest["ramp_time"]


# The block layer's tracepoints `--trace` records: a bio arriving, merging into a queued
# request, a request inserted into the scheduler, issued to the driver, completed.
TRACE_EVENTS = ("block_bio_queue", "block_bio_backmerge", "block_rq_insert", "block_rq_issue",
                "block_rq_complete")  # fmt: skip
TRACEFS = "/sys/kernel/tracing"
TRACE_BUFFER_KB = 131072  # a 5 s run of the study's jobs on scsi_debug writes about 25 MB


_TRACE_EVENT = re.compile(r"^[a-z0-9_]+/[a-z0-9_]+$")


def parse_trace_events(names: list[str]) -> list[str]:
    """`--trace-event GROUP/NAME`: more of the guest's tracepoints, as tracefs names them
    (`syscalls/sys_enter_io_submit`, `block/block_getrq`, `sched/sched_switch`)."""
    for name in names:
        if not _TRACE_EVENT.match(name):
            raise InputError(
                f"--trace-event: expected GROUP/NAME as in tracefs's events/, got {name!r}"
            )
    return list(dict.fromkeys(names))


def trace_steps(extra: list[str] = ()) -> list[str]:
    """Mount tracefs and enable the block tracepoints and `extra` (recording starts per
    repetition); an extra event the guest kernel does not have stops the run."""
    return [
        f"mount -t tracefs nodev {TRACEFS} 2>/dev/null; [ -d {TRACEFS}/events/block ] "
        "|| fail 'the guest kernel has no block tracepoints in tracefs'",
        *[
            f"[ -d {TRACEFS}/events/{e} ] || fail '--trace-event {e}: the guest kernel has no "
            "such tracepoint'"
            for e in extra
        ],
        f"echo {TRACE_BUFFER_KB} > {TRACEFS}/buffer_size_kb",
        *[f"echo 1 > {TRACEFS}/events/block/{e}/enable" for e in TRACE_EVENTS],
        *[f"echo 1 > {TRACEFS}/events/{e}/enable" for e in extra],
    ]


# File systems `--fs` makes on the guest's device (the simulator's twin: `[fs] type`).
FILE_SYSTEMS = ("ext4",)


def check_fs(fs: str | None, spec: DeviceSpec) -> str | None:
    """`--fs`: a file system the guest can make, on a device that keeps what is written."""
    if fs is None:
        return None
    if fs not in FILE_SYSTEMS:
        raise InputError(f"--fs: expected one of {', '.join(FILE_SYSTEMS)}, got {fs!r}")
    check_mke2fs()
    if spec.module == "null_blk" and not spec.value("memory_backed"):
        raise InputError(
            f"--fs {fs}: the device keeps no data (null_blk without memory_backed=1), so no file "
            "system can be made on it: add memory_backed=1 to --device"
        )
    return fs


def fio_steps(
    scheduler: str,
    settings: list[Setting],
    reps: int,
    job_name: str,
    prefix: str = "",
    trace: bool = False,
    fs: str | None = None,
    trace_events: list[str] = (),
) -> list[str]:
    steps = [f"say 'scheduler {scheduler}'", f"scheduler {scheduler}"]
    for s in settings:
        steps.append(f"setting {s.path} {s.value}")
    steps.append(f"snapshot /sys/block/$DEV/queue $OUT/{prefix}queue.txt")
    if trace:
        steps += trace_steps(list(trace_events))
    for rep in range(1, reps + 1):
        base = f"$OUT/{prefix}rep-{rep}"
        steps.append(f"say 'fio repetition {rep} of {reps} ({scheduler})'")
        if fs is not None:
            # A new file system for each repetition: fio's files start empty every time.
            steps.append(f"make_fs {fs}")
        if trace:
            steps += [f"echo > {TRACEFS}/trace", f"echo 1 > {TRACEFS}/tracing_on"]
        steps.append(f"fio_rep {base} $IN/{job_name} {rep}")
        if trace:
            # The events in order, and the buffer's statistics (overrun: events lost).
            steps += [
                f"echo 0 > {TRACEFS}/tracing_on",
                f"cat {TRACEFS}/trace > {base}.trace",
                f"cat {TRACEFS}/per_cpu/cpu0/stats > {base}.trace-stats",
            ]
    return steps


def run_fio(
    kernel: Kernel,
    job: Path,
    spec: DeviceSpec,
    scheduler: str,
    reps: int,
    out: Path,
    *,
    settings: list[Setting],
    modules: list[Path],
    accel: str,
    timeout_s: float | None,
    say: Callable[[str], None],
    trace: bool = False,
    fs: str | None = None,
    trace_events: list[str] = (),
) -> dict:
    """Runs it and fills `out` (an empty staged directory); returns the meta record."""
    text = check_job(job)
    check_fs(fs, spec)
    if reps < 1:
        raise InputError(f"--reps: expected at least 1, got {reps}")
    if timeout_s is None:
        timeout_s = BOOT_BUDGET_S + reps * (job_seconds(text) * 1.5 + 20)
    session = guest.Session(
        kernel,
        spec,
        steps=fio_steps(
            scheduler,
            settings,
            reps,
            "job.fio",
            trace=trace or bool(trace_events),
            fs=fs,
            trace_events=trace_events,
        ),
        inputs={"job.fio": job},
        modules=modules,
    )

    def on_line(line: str) -> None:
        if line.startswith("qoslab-step: "):
            say(line.removeprefix("qoslab-step: "))

    started = time.time()
    result = guest.run_session(session, accel=accel, timeout_s=timeout_s, say=say, on_line=on_line)
    try:
        for f in sorted(result.out.iterdir()):
            if f.name in ("plan.status", "modprobe.err", "insmod.err"):
                continue
            shutil.move(str(f), out / f.name)
        missing = [r for r in range(1, reps + 1) if not (out / f"rep-{r}.json").exists()]
        if missing:
            raise InputError(f"the guest wrote no fio output for repetition {missing[0]}")
    finally:
        shutil.rmtree(result.out, ignore_errors=True)
    meta = {
        "command": "qoslab vm fio",
        "kernel": {"release": kernel.release, "debian_version": kernel.version},
        "accel": result.boot.accel,
        "accel_why": result.accel_why,
        "device": spec.text,
        "scheduler": scheduler,
        "settings": [f"{s.where}.{s.name}={s.value}" for s in settings],
        "modules": [m.name for m in modules],
        "reps": reps,
        "trace": trace or bool(trace_events),
        "trace_events": list(trace_events),
        "fs": fs,
        "job": job.name,
        "started_unix": round(started, 3),
        "wall_seconds": round(result.boot.seconds, 3),
    }
    (out / "meta.json").write_text(json.dumps(meta, indent=1) + "\n")
    return meta
