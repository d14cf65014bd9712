"""What each study runs: one fio job, and one fio run, per data point.

| study     | points                                                                   |
|-----------|--------------------------------------------------------------------------|
| baseline  | QD 1: 4K random read and write, 128K sequential read and write           |
| bs-sweep  | 4K..256K, random and sequential read, at the sweep depth                 |
| mix-sweep | 4K random, 100/70/50/0 % reads, at the sweep depth                       |
| qd-sweep  | 4K random read at QD 1, 2, 4, ..., 128                                   |
| tails     | 4K random read at mid depth and at the knee (found by a qd-sweep first)  |

Every run shares one `[global]` section: direct I/O (no page cache), time-based with a
warm-up (`ramp_time`) excluded from the statistics, total-latency percentiles
(`lat_percentiles=1`), and never `group_reporting`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from qoslab.lab.analysis import KneeRule
from qoslab.lab.runner import FioJob
from qoslab.units import fio_ms

STUDIES = ("baseline", "bs-sweep", "mix-sweep", "qd-sweep", "tails")
KiB = 1024


@dataclass(frozen=True)
class StudyOptions:
    runtime_s: float = 30.0
    ramp_s: float = 5.0
    ioengine: str = "libaio"
    sweep_iodepth: int = 16  # bs-sweep and mix-sweep
    depths: tuple[int, ...] = (1, 2, 4, 8, 16, 32, 64, 128)
    block_sizes: tuple[int, ...] = tuple(k * KiB for k in (4, 8, 16, 32, 64, 128, 256))
    read_mixes: tuple[int, ...] = (100, 70, 50, 0)
    knee: KneeRule = field(default_factory=KneeRule)
    mid_depth: int | None = None  # tails: default from the knee
    knee_depth: int | None = None  # tails: default the knee of the qd-sweep


@dataclass(frozen=True)
class Point:
    study: str
    name: str
    job: FioJob

    @property
    def run_id(self) -> str:
        return f"{self.study}/{self.name}"


def bs_label(size: int) -> str:
    return f"{size // KiB}k" if size % KiB == 0 else f"{size}b"


def global_options(target_path: str, size_bytes: int, opts) -> dict[str, object]:
    """The `[global]` section of every lab run (`opts` has runtime_s, ramp_s, ioengine)."""
    return {
        "filename": target_path,
        "size": size_bytes,
        "ioengine": opts.ioengine,
        "direct": 1,
        "time_based": None,
        "runtime": fio_ms(opts.runtime_s),
        "ramp_time": fio_ms(opts.ramp_s),
        "lat_percentiles": 1,
    }


def _point(study: str, name: str, rw: str, bs: int, iodepth: int, **extra) -> Point:
    options: dict[str, object] = {"rw": rw, "bs": bs, "iodepth": iodepth, **extra}
    return Point(study, name, FioJob(name, options))


def plan(study: str, opts: StudyOptions) -> list[Point]:
    """The points of one study (tails needs the knee first: see `tails_plan`)."""
    if study == "baseline":
        return [
            _point(study, f"{rw}-{bs_label(bs)}-qd1", rw, bs, 1)
            for rw, bs in (
                ("randread", 4 * KiB),
                ("randwrite", 4 * KiB),
                ("read", 128 * KiB),
                ("write", 128 * KiB),
            )
        ]
    if study == "bs-sweep":
        d = opts.sweep_iodepth
        return [
            _point(study, f"{rw}-{bs_label(bs)}-qd{d}", rw, bs, d)
            for rw in ("randread", "read")
            for bs in opts.block_sizes
        ]
    if study == "mix-sweep":
        d = opts.sweep_iodepth
        return [
            _point(study, f"randrw{mix}-4k-qd{d}", "randrw", 4 * KiB, d, rwmixread=mix)
            for mix in opts.read_mixes
        ]
    if study == "qd-sweep":
        return [_point(study, f"randread-4k-qd{d}", "randread", 4 * KiB, d) for d in opts.depths]
    raise ValueError(study)


def tails_depths(opts: StudyOptions, knee_depth: int | None) -> tuple[int, int]:
    """(mid depth, knee depth) for the tails study.

    The knee defaults to the qd-sweep's knee, or its deepest point when the sweep never
    reached one; mid depth defaults to the power of two nearest the geometric middle of
    1 and the knee (QD 4 for a knee at 16).
    """
    knee = opts.knee_depth or knee_depth or max(opts.depths)
    mid = opts.mid_depth or max(1, 2 ** round(math.log2(knee) / 2))
    return mid, knee


def tails_plan(mid: int, knee: int) -> list[Point]:
    return [
        _point("tails", f"mid-randread-4k-qd{mid}", "randread", 4 * KiB, mid),
        _point("tails", f"knee-randread-4k-qd{knee}", "randread", 4 * KiB, knee),
    ]
