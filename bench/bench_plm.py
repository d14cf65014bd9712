"""The PLM coordinator study's speed: the full `qoslab plm study` (datasets DS1-DS4 x configs
1-4 x HoD and CoD x sp and fr, with the shared and isolated baselines: 80 simulations of 30 s
of simulated time each) as a user runs it.

Target (2-core machine): the whole study in under 10 minutes of wall-clock time.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pandas as pd

QOSLAB = Path(sys.executable).parent / "qoslab"
TARGET_S = 600.0


def run() -> list[str]:
    with tempfile.TemporaryDirectory(prefix="qoslab-bench-plm-") as d:
        out = Path(d) / "study"
        cmd = [str(QOSLAB), "plm", "study", "--out", str(out)]
        start = time.perf_counter()
        proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        _, status, rusage = os.wait4(proc.pid, 0)
        wall = time.perf_counter() - start
        if os.waitstatus_to_exitcode(status) != 0:
            raise RuntimeError(f"qoslab plm study failed: {proc.stderr.read().decode()}")
        results = pd.read_parquet(out / "results.parquet")
    cpu = rusage.ru_utime + rusage.ru_stime
    runs = results["run"].nunique()
    reads = int(results["reads"].sum())
    verdict = "met" if wall < TARGET_S else "NOT met"
    return [
        "## PLM coordinator study (study 2)\n\n"
        "Command: `qoslab plm study --out study` (all datasets, configs, predictors and "
        f"policies, 30 s simulated per run). Target: under {TARGET_S / 60:.0f} minutes of "
        f"wall-clock time ({verdict}).\n\n"
        "| simulations | reads simulated | wall s | CPU s (all workers) |\n"
        "|---|---|---|---|\n"
        f"| {runs} | {reads:,} | {wall:.1f} | {cpu:.1f} |\n"
    ]


if __name__ == "__main__":
    print(run()[0])
