"""The SSD model's speed and memory on MQSim's default drive (`mqsim-default`, 512 GiB raw,
62.4 M logical pages), run as a user runs it: `qoslab sim` through the full NVMe path.

- 4 KiB random reads at QD 32 with MQSim's 2 MiB mapping cache (two flash reads per I/O).
- 4 KiB random writes at QD 32 in steady state: the drive preconditioned to every page written
  by uniform random writes (garbage collection runs from the first write), and at MQSim's
  workload occupancy of 75 %.
- Preconditioning the whole drive: the steady-state map computed directly.
- Peak RSS against 100 MB plus the mapping table (forward and reverse maps, 4 bytes a page).

Figures are simulated I/Os per wall-clock second and per CPU second (the process's own user +
system time, which other processes on a shared machine do not inflate).
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

from measured import measure_json
from qoslab.sim.api import stage_counters

ROOT = Path(__file__).resolve().parent.parent
QOSLAB = Path(sys.executable).parent / "qoslab"
JOBS = ROOT / "configs" / "jobs"

READ_TARGET = 1_000_000
WRITE_TARGET = 300_000
PRECONDITION_TARGET_S = 10.0
RSS_TARGET_MB = 100
LOGICAL_PAGES = 62_411_243
PHYSICAL_PAGES = 1 << 26
MAP_MB = (LOGICAL_PAGES + PHYSICAL_PAGES) * 4 / 1e6


def _run(job: str, number_ios: int, sets: list[str]) -> dict:
    cmd = [str(QOSLAB), "sim", str(JOBS / job), "--device", "mqsim-default"]
    for s in sets:
        cmd += ["--set", s]
    cmd += ["--output-format", "json"]
    env = {**os.environ, "NUMBER_IOS": str(number_ios)}
    run, report = measure_json(cmd, ROOT / "out" / "bench-media.json", env=env)
    job_report = report["jobs"][0]
    ios = sum(job_report[op]["total_ios"] for op in ("read", "write"))
    return {
        "cmd": "NUMBER_IOS="
        + str(number_ios)
        + " qoslab "
        + " ".join(cmd[1:]).replace(str(ROOT) + "/", ""),
        "wall": run.wall,
        "cpu": run.cpu,
        "rss_mb": run.rss_mb,
        "ios": ios,
        "media": stage_counters(report, "media"),
        "iops_sim": sum(job_report[op]["iops"] for op in ("read", "write")),
    }


def _table(rows: list[tuple[str, str]]) -> str:
    return "| figure | value |\n|---|---|\n" + "\n".join(f"| {k} | {v} |" for k, v in rows)


def _throughput(
    title: str, r: dict, setup: dict, target: int, extra: list[tuple[str, str]], note: str
) -> str:
    """`setup` is a run of one I/O on the same drive: the process start, the device build and
    any preconditioning, which the net figures leave out."""
    net_wall = max(r["wall"] - setup["wall"], 1e-9)
    net_cpu = max(r["cpu"] - setup["cpu"], 1e-9)
    rows = [
        ("simulated I/Os", f"{r['ios']:,}"),
        ("wall time (whole process)", f"{r['wall']:.2f} s"),
        ("CPU time (user + system, whole process)", f"{r['cpu']:.2f} s"),
        ("of which start, device build, preconditioning", f"{setup['wall']:.2f} s wall"),
        ("simulated I/Os per wall-clock second, whole process", f"{r['ios'] / r['wall']:,.0f}"),
        ("simulated I/Os per wall-clock second, simulation only", f"{r['ios'] / net_wall:,.0f}"),
        ("simulated I/Os per CPU second, simulation only", f"{r['ios'] / net_cpu:,.0f}"),
        ("target", f"{target:,} per second"),
        ("peak RSS", f"{r['rss_mb']:.0f} MB"),
        ("simulated drive IOPS", f"{r['iops_sim']:,.0f}"),
        *extra,
    ]
    return f"## {title}\n\nCommand: `{r['cmd']}`\n\n{_table(rows)}\n\n{note}\n"


def run() -> list[str]:
    load = os.getloadavg()[0]
    machine = f"Load average when measured: {load:.1f} on {os.cpu_count()} cores."
    random_fill = ["media.precondition.pattern=random"]
    fresh = _run("mqsim-randread-qd32.fio", 1, [])
    reads = _run("mqsim-randread-qd32.fio", 5_000_000, [])
    sections = [
        _throughput(
            "SSD: 4 KiB random read, QD 32, mqsim-default (2 MiB mapping cache)",
            reads,
            fresh,
            READ_TARGET,
            [
                (
                    "mapping-cache misses (translation reads)",
                    f"{reads['media']['mapping_reads']:,.0f}",
                )
            ],
            "Every read misses the mapping cache (233,016 entries for 62.4 M pages) and reads "
            "its translation page first: two flash reads per I/O. " + machine,
        )
    ]
    setups = {}
    for fill, label in [(1.0, "every page written"), (0.75, "MQSim's 75 % occupancy")]:
        sets = [f"media.precondition.fill={fill}", *random_fill]
        setups[fill] = _run("mqsim-randwrite-qd32.fio", 1, sets)
        writes = _run("mqsim-randwrite-qd32.fio", 1_000_000, sets)
        media = writes["media"]
        sections.append(
            _throughput(
                f"SSD: 4 KiB random write, QD 32, GC steady state, mqsim-default ({label})",
                writes,
                setups[fill],
                WRITE_TARGET,
                [
                    ("write amplification (measured)", f"{media['write_amplification']:.2f}"),
                    (
                        "write amplification of the preconditioned state (mean-field model)",
                        f"{media['precondition_model_write_amplification']:.2f}",
                    ),
                    ("GC victims collected", f"{media['gc_victims']:,.0f}"),
                ],
                "The drive starts in the steady state of uniform random writes over "
                f"{fill:.0%} of its pages (computed, not simulated), so GC runs from the first "
                "write; the writes are uniformly random (`norandommap=1`). Each 4 KiB write of "
                "an 8 KiB page also reads the page's other half (read-modify-write), misses the "
                "mapping cache and evicts a changed entry. " + machine,
            )
        )
    full = setups[1.0]
    precondition_s = full["wall"] - fresh["wall"]
    rows = [
        (
            "run of 1 I/O on the fresh drive",
            f"{fresh['wall']:.2f} s wall, {fresh['cpu']:.2f} s CPU",
        ),
        (
            "run of 1 I/O on the preconditioned drive",
            f"{full['wall']:.2f} s wall, {full['cpu']:.2f} s CPU",
        ),
        (
            "preconditioning (the difference)",
            f"{precondition_s:.2f} s wall, {full['cpu'] - fresh['cpu']:.2f} s CPU",
        ),
        ("target", f"under {PRECONDITION_TARGET_S:.0f} s"),
        ("logical pages mapped", f"{LOGICAL_PAGES:,}"),
        ("mapping table (forward + reverse, 4 B a page)", f"{MAP_MB:.0f} MB"),
        ("peak RSS, fresh drive (maps not yet touched)", f"{fresh['rss_mb']:.0f} MB"),
        ("peak RSS, preconditioned", f"{full['rss_mb']:.0f} MB"),
        (
            "peak RSS beyond the mapping table",
            f"{full['rss_mb'] - MAP_MB:.0f} MB (target under {RSS_TARGET_MB} MB)",
        ),
    ]
    sections.append(
        "## SSD: preconditioning the whole of mqsim-default, and memory\n\n"
        f"Command: `{full['cmd']}` (and the same without the `--set`s)\n\n{_table(rows)}\n\n"
        "Uniform random writes over every page, to GC steady state. MQSim on this machine "
        "spent 670 s and 6.8 GB to precondition the same drive. " + machine + "\n"
    )
    return sections


if __name__ == "__main__":
    print("\n".join(run()))
