"""The full PLM coordinator study as a user runs it: `qoslab plm study` with its defaults (the
four datasets, the four configs, HoD and CoD, sp and fr, the baselines, PLM without the
coordinator and the write-fraction sensitivity: 87 simulations of 15 minutes of simulated time
each, on up to 2 workers), on one seed (`--seeds 1`): the default repeats every run on 3 seeds,
which takes 3 times as long.

Target: under 20 minutes of wall-clock time on a 2-core machine of our own. The machine's load
average is given with the figures: on a machine shared with other work the wall time grows
with it, the CPU time does not.
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
TARGET_S = 20 * 60.0


def run() -> list[str]:
    with tempfile.TemporaryDirectory(prefix="qoslab-bench-plm-") as d:
        out = Path(d) / "study"
        cmd = [str(QOSLAB), "plm", "study", "--out", str(out), "--seeds", "1"]
        load_before = os.getloadavg()[0]
        start = time.perf_counter()
        proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        _, status, rusage = os.wait4(proc.pid, 0)
        wall = time.perf_counter() - start
        load_after = os.getloadavg()[0]
        if os.waitstatus_to_exitcode(status) != 0:
            raise RuntimeError(f"qoslab plm study failed: {proc.stderr.read().decode()}")
        results = pd.read_parquet(out / "results.parquet")
    cpu = rusage.ru_utime + rusage.ru_stime
    runs = results["run"].nunique()
    ios = int(results["reads"].sum() + results["writes"].sum())
    verdict = "met" if wall < TARGET_S else "NOT met"
    return [
        "## PLM coordinator study (study 2)\n\n"
        "Command: `qoslab plm study --out study --seeds 1` (all datasets, configs, predictors "
        "and policies, the baselines and the write-fraction sensitivity, 15 minutes simulated "
        "per run, one seed: the default's 3 seeds take 3 times as long). "
        f"Target: under {TARGET_S / 60:.0f} minutes of wall-clock time ({verdict}; load "
        f"average {load_before:.1f} before and {load_after:.1f} after).\n\n"
        "| figure | value |\n|---|---|\n"
        f"| simulations | {runs} |\n"
        f"| I/Os simulated | {ios:,} |\n"
        f"| wall | {wall:.0f} s |\n"
        f"| CPU (all workers) | {cpu:.0f} s |\n"
        f"| simulated I/Os per CPU second | {ios / cpu:,.0f} |\n"
    ]


if __name__ == "__main__":
    print(run()[0])
