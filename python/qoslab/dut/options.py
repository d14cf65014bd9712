"""The options of `qoslab nvmelite diff`."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

# Failures whose reproducer is searched for; a timeout or an output flood would make every
# probe of the minimiser as slow as the failure itself.
MINIMIZED_STATUSES = ("diverged", "crash", "exit", "error", "garbage")


@dataclass
class DiffOptions:
    dut: str
    out: Path
    batch: bool = False
    jobs: int = 1
    timeout_s: float = 10.0
    only: str = "all"
    top_k: int = 10
    submit_window: str = "inf"
    minimize: int = 10
    schedules: list[Path] = field(default_factory=list)
