"""`lab run`: one fio run of a lab command (`qoslab lab study`, `qoslab lab sched`) on the target
the command prepared (docs/lab.md).

A point is one fio run of a job file, exactly as the command wrote it (its `[global]` section
names the target), on the target as the command recorded it, after selecting an I/O scheduler
if the command asks for one (`lab sched`). It is a measurement, not a simulation: it takes no
seed, and the same point run twice gives other numbers, so its key holds what was asked (the
job file, the target, the run's name), and what it keeps is every file the run wrote, byte for
byte: the `files` detail table (`jobs/<run>.fio`, fio's json+ output `raw/<run>.json`, the
environment at the run's start `raw/<run>.meta.json`, fio's stderr if it wrote any, its latency
logs `logs/<run>/*.log`). The command writes those files into its output and reads its tables
from them; the summary row has the run's throughput and worst p99 per direction.

The runs are the command's, on one device: it runs them one at a time in its own process
(`jobs=1`), where Ctrl-C still reaches the runner that stops fio, and the first run that fails
stops the study (`stop_on_failure`: a device that fails one run would fail the next, each after
its timeout). What the command lends its points (its bar, its partial folder) is `COMMAND`.
"""

from __future__ import annotations

import contextvars
import math
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from qoslab.sweep.kinds import choice, flag, integer, real, text
from qoslab.sweep.study import CONTRACT_VERSION, Detail, Metric, Param, PointResult, Study


@dataclass(frozen=True)
class InCommand:
    """What the command running the points in its own process lends them: its bar, whose
    `task` counts fio's seconds, and its partial output folder, where each run writes before
    its files go to the store (the lab's journal removes that folder after a `kill -9`, and
    `lab restore` finds a fio left running by its job file there)."""

    progress: Any
    task: Any
    scratch: Path


# Unset when a spec runs the points (`qoslab sweep`): no bar, the system's temporary folder.
COMMAND: contextvars.ContextVar[InCommand | None] = contextvars.ContextVar(
    "qoslab_lab_command", default=None
)

DIRECTIONS = ("read", "write")  # the lab's jobs trim nothing
METRICS = tuple(
    m
    for op in DIRECTIONS
    for m in (
        Metric(f"{op}_iops", "float64", "IOPS", f"{op} IOPS, summed over the run's jobs"),
        Metric(f"{op}_mb_s", "float64", "MB/s", f"{op} MB/s, summed over the run's jobs"),
        Metric(f"{op}_p99_us", "float64", "us", f"the largest {op} p99 of the run's jobs"),
    )
)


# Each target parameter and its key in the target's description (`Target.describe()`, which
# the runner writes into every run's metadata).
TARGET_KEYS = {
    "target": "path",
    "target_kind": "kind",
    "target_size": "size_bytes",
    "target_disk": "disk",
    "target_created": "created_by_qoslab",
    "target_preconditioned": "preconditioned_by_this_run",
}


def target_params(description: dict) -> dict[str, Any]:
    """A target's description (`Target.describe()`) as this study's parameters."""
    return {param: description[key] for param, key in TARGET_KEYS.items()}


@dataclass(frozen=True)
class RecordedTarget:
    """The target as the command recorded it: what the runner asks of a target."""

    description: dict

    @property
    def disk(self) -> str | None:
        return self.description["disk"]

    def describe(self) -> dict:
        return dict(self.description)


def run_point(params: dict[str, Any], seed: int | None, details: frozenset[str]) -> PointResult:
    from qoslab.fio import jobs_table
    from qoslab.lab.queue import select_scheduler
    from qoslab.lab.runner import Runner

    target = RecordedTarget({key: params[param] for param, key in TARGET_KEYS.items()})
    if params["scheduler"] is not None:
        select_scheduler(target.disk, params["scheduler"])
    command = COMMAND.get()
    within = None if command is None else command.scratch
    with tempfile.TemporaryDirectory(prefix=".fio-run-", dir=within) as scratch:
        folder = Path(scratch)
        if command is None:
            runner = Runner(folder, target)
        else:
            runner = Runner(folder, target, command.progress, task=command.task)
        output, _meta = runner.run_job_file(params["run"], params["job_file"], params["expected_s"])
        files = [
            {"file": p.relative_to(folder).as_posix(), "data": p.read_bytes()}
            for p in sorted(folder.rglob("*"))
            if p.is_file()
        ]
    table = jobs_table([output])
    metrics: dict[str, Any] = {}
    for op in DIRECTIONS:
        mine = table[table.op == op]
        metrics[f"{op}_iops"] = float(mine.iops.sum()) if len(mine) else math.nan
        metrics[f"{op}_mb_s"] = float(mine.mb_s.sum()) if len(mine) else math.nan
        metrics[f"{op}_p99_us"] = float(mine.p99_us.max()) if len(mine) else math.nan
    return PointResult(metrics, {"files": files} if "files" in details else {})


STUDY = Study(
    name="lab run",
    help="One fio run of a lab command (`qoslab lab study`, `qoslab lab sched`) on the target "
    "it prepared: every file the run wrote, byte for byte.",
    params=(
        Param("run", text(), "", help="the run's name: its files are jobs/RUN.fio, raw/RUN.json"),
        Param("job_file", text(), "", help="the job file fio runs, as the command wrote it"),
        Param(
            "expected_s",
            real(positive=True),
            "s",
            help="how long the run takes (its ramp, "
            "runtime and fio's start-up): the progress bar's share, and 3x + 60 s its timeout",
        ),
        Param("target", text(), "", help="the device or file the job file names (filename=)"),
        Param("target_kind", choice(("block", "file")), "", help="a block device or a file"),
        Param("target_size", integer(1), "bytes", help="the region the runs address"),
        Param("target_disk", text(), "", None, "the disk whose request queue serves the I/O"),
        Param("target_created", flag(), "", False, "the target is one qoslab created"),
        Param("target_preconditioned", flag(), "", False, "the command wrote the region first"),
        Param("scheduler", text(), "", None, "the I/O scheduler selected before the run"),
    ),
    metrics=METRICS,
    headline=("read_iops", "read_p99_us"),
    run_point=run_point,
    version=CONTRACT_VERSION,
    details=(Detail("files", "every file the run wrote: its path in the output, its bytes", True),),
    seeded=False,
    seed_help="none: a point is a measurement of the device",
    stop_on_failure=True,
)
