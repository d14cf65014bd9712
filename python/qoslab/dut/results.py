"""What `qoslab nvmelite diff` found per run, and the CSV text of its result files."""

from __future__ import annotations

import csv
import io
from dataclasses import dataclass

from qoslab.dut.runner import Outcome, Task


@dataclass
class RunReport:
    order: int
    run_id: str
    poison: bool
    outcome: Outcome
    task: Task | None = None  # kept for failed runs: the minimiser starts from it
    workload_path: str = ""


def csv_text(header: list[str], rows) -> str:
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(header)
    w.writerows(rows)
    return buf.getvalue()
