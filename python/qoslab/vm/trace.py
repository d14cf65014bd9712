"""What `qoslab vm fio --trace` recorded: per request size, how long requests waited between
their insertion into the scheduler and their issue to the driver and how long the driver took;
per process, the time between one bio and its next (the guest's CPU time per I/O while the job
keeps submitting).

The input is ftrace's text of the block tracepoints (`rep-N.trace`), one event a line:
`fio-269 [000] ..... 906.253629: block_rq_insert: 8,0 R 4096 () 984 + 8 [fio]`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

import numpy as np

EVENT = re.compile(
    r"^\s*(?P<comm>.+?)-(?P<pid>\d+)\s+\[\d+\]\s+\S+\s+(?P<ts>\d+\.\d+): (?P<name>block_\w+): "
    r"\d+,\d+ (?P<rwbs>\S+) (?:\d+ )?(?:\(\S*\) )?(?P<sector>\d+) \+ (?P<sectors>\d+)"
)
# A job's bios closer than this follow each other in one submission burst; a longer gap is
# the job waiting for completions, not CPU time.
BURST_GAP_S = 200e-6


@dataclass(frozen=True)
class Event:
    ts: float
    comm: str
    pid: int
    name: str
    sector: int
    sectors: int


def read_events(path: Path) -> list[Event]:
    events = []
    for line in path.read_text(errors="replace").splitlines():
        m = EVENT.match(line)
        if m:
            events.append(
                Event(float(m["ts"]), m["comm"], int(m["pid"]), m["name"].removeprefix("block_"),
                      int(m["sector"]), int(m["sectors"]))
            )  # fmt: skip
    return events


def _stats(values: list[float]) -> dict[str, float]:
    a = np.asarray(values) * 1e3  # ms
    if a.size == 0:
        return {"n": 0, "mean_ms": float("nan"), "p99_ms": float("nan"), "max_ms": float("nan")}
    return {"n": int(a.size), "mean_ms": float(a.mean()),
            "p99_ms": float(np.percentile(a, 99)), "max_ms": float(a.max())}  # fmt: skip


def summary(events: list[Event], skip_s: float = 0.0) -> dict:
    """Waits and device times per request size (KiB at insertion), bio gaps per process;
    events in the first `skip_s` seconds (a ramp) are left out."""
    start = events[0].ts + skip_s if events else 0.0
    inserted: dict[int, tuple[float, int]] = {}
    issued: dict[int, tuple[float, int]] = {}
    waits: dict[int, list[float]] = {}
    device: dict[int, list[float]] = {}
    last_bio: dict[int, float] = {}
    gaps: dict[str, list[float]] = {}
    for e in events:
        if e.name == "rq_insert":
            inserted[e.sector] = (e.ts, e.sectors)
        elif e.name == "rq_issue":
            t, sectors = inserted.pop(e.sector, (e.ts, e.sectors))
            issued[e.sector] = (e.ts, e.sectors)
            if e.ts >= start:
                waits.setdefault(sectors // 2, []).append(e.ts - t)
        elif e.name == "rq_complete" and e.sector in issued:
            t, _ = issued.pop(e.sector)
            if e.ts >= start:
                device.setdefault(e.sectors // 2, []).append(e.ts - t)
        elif e.name == "bio_queue":
            before = last_bio.get(e.pid)
            last_bio[e.pid] = e.ts
            if before is not None and e.ts >= start and e.ts - before < BURST_GAP_S:
                gaps.setdefault(f"{e.comm}-{e.pid}", []).append(e.ts - before)
    return {
        "wait": {kib: _stats(v) for kib, v in sorted(waits.items())},
        "device": {kib: _stats(v) for kib, v in sorted(device.items())},
        "bio_gap_us": {p: float(np.median(v)) * 1e6 for p, v in sorted(gaps.items())},
    }
