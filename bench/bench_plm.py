"""The PLM study's simulation path and memory, run as the study runs them.

- The SSD path in the study's setting: DS1's three hosts (Table I's reads, 4 KiB at random in
  the first GiB) replayed from SYSTOR '17 files on MQSim's default drive, 75 % written, bare
  and under PLM (CoD, sp, Config 2): simulated I/Os per CPU second, net of the drive's build and
  preconditioning (a run of 60 s less a run of 1 s).
- `qoslab plm study`'s peak memory at 60 s and at 900 s of simulated time per run (one worker,
  so that the peak is one process's): the requests stream to files, so the two stay within
  20 % of each other.

The full study's time is bench_plm_study.py's.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

QOSLAB = Path(sys.executable).parent / "qoslab"
RSS_BAND = 0.20


def _path_run(variant: str, duration_ms: int) -> tuple[float, int]:
    """(CPU seconds, I/Os) of one study run of `duration_ms`, in a child process."""
    code = f"""
import json, resource, sys, tempfile
from pathlib import Path
from qoslab.plm import study as S
from qoslab.sim import api  # imported before the clock starts
d = Path(tempfile.mkdtemp(prefix="qoslab-bench-plm-"))
t = S.generate("DS1", {duration_ms}, 1, S.Workload(), d)
variant = {variant!r}
run = S.Run("DS1", "shared") if variant == "shared" else S.Run("DS1", variant, 2, "sp")
cap = 0 if variant == "shared" else t.capacity(2)
before = resource.getrusage(resource.RUSAGE_SELF)
out = S._simulate(S.Job(run, tuple(t.paths), 100, cap, None, 1, (), t.span_ns + 1))
after = resource.getrusage(resource.RUSAGE_SELF)
cpu = after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime
ios = sum(r["reads"] + r["writes"] for r in out["rows"])
print(json.dumps([cpu, ios]))
"""
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    cpu, ios = json.loads(done.stdout.strip().splitlines()[-1])
    return float(cpu), int(ios)


def _study_rss(duration: str) -> tuple[float, float]:
    """(peak RSS in MB, wall s) of a one-worker study of DS1, Config 2, sp at `duration`."""
    with tempfile.TemporaryDirectory(prefix="qoslab-bench-plm-") as d:
        cmd = [str(QOSLAB), "plm", "study", "--out", str(Path(d) / "s"), "--datasets", "DS1",
               "--configs", "2", "--policies", "sp", "--write-sensitivity", "", "--seeds", "1",
               "--workers", "1", "--duration", duration]  # fmt: skip
        start = time.perf_counter()
        proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        _, status, rusage = os.wait4(proc.pid, 0)
        wall = time.perf_counter() - start
        if os.waitstatus_to_exitcode(status) != 0:
            raise RuntimeError(f"qoslab plm study failed: {proc.stderr.read().decode()}")
    return rusage.ru_maxrss / 1024, wall


def run() -> list[str]:
    rows = []
    for variant, label in (("shared", "bare drive, 3 hosts"), ("CoD", "PLM, CoD sp Config 2")):
        cpu_long, ios_long = _path_run(variant, 60_000)
        cpu_short, ios_short = _path_run(variant, 1_000)
        rate = (ios_long - ios_short) / (cpu_long - cpu_short)
        rows.append(f"| SSD path, {label} | {rate:,.0f} simulated I/Os per CPU second |")
    rss60, wall60 = _study_rss("60s")
    rss900, wall900 = _study_rss("900s")
    spread = abs(rss900 / rss60 - 1)
    verdict = "met" if spread <= RSS_BAND else "NOT met"
    load = os.getloadavg()[0]
    sections = [
        "## PLM study: the simulation path\n\n"
        "DS1 (Table I's reads) replayed on `mqsim-default`, 75 % written, through the full NVMe "
        "path; simulated I/Os per CPU second, a 60 s run less a 1 s run (the drive's build and "
        "preconditioning left out).\n\n"
        "| figure | value |\n|---|---|\n" + "\n".join(rows) + "\n",
        "## PLM study: memory against simulated time\n\n"
        "Command: `qoslab plm study --datasets DS1 --configs 2 --policies sp "
        "--write-sensitivity '' --seeds 1 --workers 1 --duration D` (7 runs). Peak RSS at "
        "900 s within "
        f"{RSS_BAND:.0%} of the peak at 60 s: {verdict} ({spread:.1%}; load average "
        f"{load:.1f} when measured).\n\n"
        "| figure | value |\n|---|---|\n"
        f"| peak RSS, 60 s per run | {rss60:,.0f} MB |\n"
        f"| peak RSS, 900 s per run | {rss900:,.0f} MB |\n"
        f"| wall, 60 s per run | {wall60:.1f} s |\n"
        f"| wall, 900 s per run | {wall900:.1f} s |\n",
    ]
    return sections


if __name__ == "__main__":
    print("\n".join(run()))
