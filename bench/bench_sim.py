"""Simulator throughput and memory: 4 KiB random reads at queue depth 32 on the analytic
`nvme-analytic` device through the full NVMe path (host costs, doorbells, fetch, PCIe link,
interrupts), run as a user runs it: the `qoslab sim` command.

Figures: simulated I/Os per wall-clock second and per CPU second (the process's own user +
system time, which a busy machine does not inflate), events per I/O, and peak RSS of a run of
100,000,000 I/Os (memory must follow the outstanding I/Os, not the run length).
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

from measured import measure_json

ROOT = Path(__file__).resolve().parent.parent
QOSLAB = Path(sys.executable).parent / "qoslab"
JOB = ROOT / "bench" / "jobs" / "randread-qd32.fio"
TARGET_IOPS = 2_000_000
TARGET_RSS_MB = 100


def _run_measured(number_ios: int) -> dict:
    cmd = [str(QOSLAB), "sim", str(JOB), "--device", "nvme-analytic", "--output-format", "json"]
    env = {**os.environ, "NUMBER_IOS": str(number_ios)}
    run, report = measure_json(cmd, ROOT / "out" / "bench-sim.json", env=env)
    return {
        "cmd": cmd,
        "wall": run.wall,
        "cpu": run.cpu,
        "rss_mb": run.rss_mb,
        "ios": report["jobs"][0]["read"]["total_ios"],
        "events": report["qoslab"]["events"],
        "iops_sim": report["jobs"][0]["read"]["iops"],
    }


def _section(title: str, r: dict, note: str) -> str:
    args = [str(Path(a).relative_to(ROOT)) if a.startswith(str(ROOT)) else a for a in r["cmd"][1:]]
    cmd = " ".join(["NUMBER_IOS=" + str(r["ios"]), "qoslab", *args])
    rows = [
        ("simulated I/Os", f"{r['ios']:,}"),
        ("wall time", f"{r['wall']:.2f} s"),
        ("CPU time (user + system)", f"{r['cpu']:.2f} s"),
        ("simulated I/Os per wall-clock second", f"{r['ios'] / r['wall']:,.0f}"),
        ("simulated I/Os per CPU second", f"{r['ios'] / r['cpu']:,.0f}"),
        ("heap events per I/O", f"{r['events'] / r['ios']:.2f}"),
        ("peak RSS", f"{r['rss_mb']:.1f} MB"),
        ("simulated device IOPS (for reference)", f"{r['iops_sim']:,.0f}"),
    ]
    table = "\n".join(f"| {k} | {v} |" for k, v in rows)
    return (
        f"## {title}\n\nCommand (from the repository root): `{cmd}`\n\n"
        f"| figure | value |\n|---|---|\n{table}\n\n{note}\n"
    )


def run() -> list[str]:
    speed = _run_measured(10_000_000)
    big = _run_measured(100_000_000)
    load = os.getloadavg()[0]
    verdict_speed = (
        f"Target: at least {TARGET_IOPS:,} simulated I/Os per wall-clock second on one core "
        f"(the simulator is single-threaded). Load average when measured: {load:.1f} on "
        f"{os.cpu_count()} cores; on a shared machine the CPU-second figure is the one that "
        "does not depend on other processes."
    )
    verdict_rss = (
        f"Target: RSS under {TARGET_RSS_MB} MB for 100,000,000 I/Os; the same process for "
        f"10,000,000 I/Os peaked at {speed['rss_mb']:.1f} MB, so memory does not grow with "
        "the run length."
    )
    return [
        _section(
            "Simulator: 4 KiB random read, QD 32, analytic device, full NVMe path",
            speed,
            verdict_speed,
        ),
        _section("Simulator: 100,000,000 I/Os, memory", big, verdict_rss),
    ]


if __name__ == "__main__":
    print("\n".join(run()))
