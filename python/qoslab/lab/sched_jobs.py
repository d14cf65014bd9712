"""The two jobs of the scheduler study and their options: `database_sim` (4K random reads,
high priority) beside `backup_sim` (128K sequential reads, low priority).

Apart from `qoslab.labstudy.sched` (the real-device runs, whose imports take seconds) because the
simulated study (`qoslab sched study`) builds the same jobs in each of its worker processes.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from qoslab.errors import InputError

JOBS = ("database_sim", "backup_sim")
_PRIO = re.compile(r"^(rt|be)([0-7])$|^idle$")


@dataclass(frozen=True)
class SchedOptions:
    schedulers: tuple[str, ...] = ("none", "mq-deadline", "kyber", "bfq")
    reps: int = 5
    runtime_s: float = 10.0
    ramp_s: float = 1.0
    ioengine: str = "libaio"
    db_prio: str = "be1"
    backup_prio: str = "be7"
    db_iodepth: int = 4
    backup_iodepth: int = 16
    log_msec: int = 100


def prio_options(text: str, option: str) -> dict[str, int]:
    """fio's prioclass/prio from `rt0`..`rt7`, `be0`..`be7` or `idle` (ioprio_set classes)."""
    m = _PRIO.match(text)
    if not m:
        raise InputError(f"{option}: expected rt0..rt7, be0..be7 or idle, got {text!r}")
    if text == "idle":
        return {"prioclass": 3}
    return {"prioclass": 1 if m.group(1) == "rt" else 2, "prio": int(m.group(2))}
