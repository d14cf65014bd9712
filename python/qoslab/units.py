"""Sizes and durations as every command line takes them. A neutral module: the shared options,
the lab and the studies read values through it, and it imports nothing of theirs.

Sizes are read by the simulator's one parser, as fio reads them with its default kb_base=1024:
`4k` = `4K` = `4KB` = 4096 bytes, `10G` = 10 GiB, a bare number is bytes, and (fio's inversion
for old scripts) `4KiB` = 4000 bytes. Durations take `us`, `ms`, `s`, `m`, `h`; a bare number
is seconds.
"""

from __future__ import annotations

import re

from qoslab._core import parse_size as fio_size
from qoslab.limits import MAX_INT, MAX_TIME_S, TIME_LIMIT_TEXT

_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(us|ms|s|m|h)?\s*$", re.IGNORECASE)
_DURATION_S = {"us": 1e-6, "ms": 1e-3, "s": 1.0, "m": 60.0, "h": 3600.0, None: 1.0}


def parse_size(text: str, what: str = "size") -> int:
    """Bytes from `4k`, `256M`, `10G` or `4096`; ValueError names `what` otherwise."""
    try:
        value = fio_size(str(text))
    except ValueError as e:
        raise ValueError(
            f"{what}: expected a size like 4k, 256M or 10G, got {text!r} ({e})"
        ) from None
    if value <= 0:
        raise ValueError(f"{what}: expected a positive number of bytes, got {text!r}")
    if value > MAX_INT:
        raise ValueError(f"{what}: at most {MAX_INT} bytes (2^63 - 1), got {text!r}")
    return value


def parse_duration(text: str, what: str = "duration") -> float:
    """Seconds from `30s`, `500ms`, `2m` or `1.5`; ValueError names `what` otherwise."""
    m = _DURATION.match(str(text))
    if not m:
        raise ValueError(f"{what}: expected a duration like 30s, 500ms or 2m, got {text!r}")
    unit = m.group(2).lower() if m.group(2) else None
    seconds = float(m.group(1)) * _DURATION_S[unit]
    if seconds > MAX_TIME_S:
        raise ValueError(f"{what}: at most {TIME_LIMIT_TEXT}, got {text!r}")
    return seconds


def fio_ms(seconds: float) -> str:
    """A duration as a fio time value in whole milliseconds (`1500ms`)."""
    return f"{round(seconds * 1000)}ms"


def human_bytes(n: float) -> str:
    """`268435456` -> `256 MiB` (for messages and reports)."""
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(n) < 1024 or unit == "TiB":
            return f"{n:.0f} {unit}" if unit == "B" or n == int(n) else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n} B"
