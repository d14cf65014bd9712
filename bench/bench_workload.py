"""Generator and trace-reader throughput of crates/workload (one core)."""

from __future__ import annotations

import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
COMMAND = [
    "cargo",
    "run",
    "--quiet",
    "--release",
    "-p",
    "qoslab-workload",
    "--example",
    "workload_bench",
]


def run() -> list[str]:
    out = subprocess.run(COMMAND, cwd=ROOT, check=True, capture_output=True, text=True).stdout
    rows = [
        "| case | items | seconds | million items per second |",
        "|---|---|---|---|",
    ]
    for line in out.strip().splitlines():
        name, items, secs = line.split("\t")
        rate = int(items) / float(secs) / 1e6
        rows.append(f"| {name} | {int(items):,} | {float(secs):.3f} | {rate:.1f} |")
    return [
        "## Workload generators and trace readers\n\n"
        f"Command: `{' '.join(COMMAND)}`\n\n"
        "`JobGen::next_io` per generated I/O and `TraceReader` per record, one thread.\n\n"
        + "\n".join(rows)
        + "\n"
    ]
