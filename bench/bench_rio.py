"""The crash checker's speed: crash points tried per second (each one a recovery and the
prefix and durability checks), for each stack, as a user runs it (`qoslab rio crash-check`).

Target (2-core machine): at least 50,000 crash points per second of wall-clock time for Rio
on the default workloads (2 streams of 6 writes, 2 targets).

The timed study's speed: timed events per second of `qoslab rio study` (every simulator run it
makes: the points of Figures 10-12 at every seed, the recovery runs to the end and the runs
their power cuts are taken in). Target: the whole study in under two minutes.
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
WORKLOADS = 2000
TARGET = 50_000
STUDY_TARGET_S = 120.0


def _run(stack: str) -> dict:
    with tempfile.TemporaryDirectory(prefix="qoslab-bench-rio-") as d:
        out = Path(d) / "out"
        cmd = [str(QOSLAB), "rio", "crash-check", "--stack", stack]
        cmd += ["--workloads", str(WORKLOADS), "--reproducers", "0", "--out", str(out)]
        start = time.perf_counter()
        proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        _, status, rusage = os.wait4(proc.pid, 0)
        wall = time.perf_counter() - start
        if os.waitstatus_to_exitcode(status) not in (0, 1):
            raise RuntimeError(f"qoslab rio crash-check failed: {proc.stderr.read().decode()}")
        summary = json.loads((out / "summary.json").read_text())
    return {
        "cmd": " ".join(["qoslab", *cmd[1:-2]]),
        "wall": wall,
        "cpu": rusage.ru_utime + rusage.ru_stime,
        "points": summary["crash_points"],
        "violations": summary["prefix_violations"] + summary["acked_lost"],
    }


def run() -> list[str]:
    rows = [
        "| stack | crash points | violating points | wall s | per wall s | per CPU s |",
        "|---|---|---|---|---|---|",
    ]
    commands = []
    for stack in ("orderless", "linux", "horae", "rio"):
        r = _run(stack)
        commands.append(r["cmd"])
        rows.append(
            f"| {stack} | {r['points']:,} | {r['violations']:,} | {r['wall']:.2f} | "
            f"{r['points'] / r['wall']:,.0f} | {r['points'] / r['cpu']:,.0f} |"
        )
        if stack == "rio":
            verdict = "met" if r["points"] / r["wall"] >= TARGET else "NOT met"
    return [
        *_study(),
        "## Crash checker (study 4)\n\n"
        f"Command: `{commands[-1]}` (and the same with each `--stack`)\n\n"
        "Every event boundary of each workload is a crash point; the figures include the process "
        f"start. Target: {TARGET:,} crash points per wall-clock second for Rio ({verdict}).\n\n"
        + "\n".join(rows)
        + "\n",
    ]


def _study() -> list[str]:
    with tempfile.TemporaryDirectory(prefix="qoslab-bench-rio-study-") as d:
        out = Path(d) / "out"
        cmd = [str(QOSLAB), "rio", "study", "--out", str(out)]
        start = time.perf_counter()
        proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        _, status, rusage = os.wait4(proc.pid, 0)
        wall = time.perf_counter() - start
        if os.waitstatus_to_exitcode(status) != 0:
            raise RuntimeError(f"qoslab rio study failed: {proc.stderr.read().decode()}")
        study = json.loads((out / "study.json").read_text())
    # Every run's events: the points', the recovery runs' and those of the runs the power cuts
    # are taken in, so that events per second is the rate of all the work timed.
    events = study["events"]
    cpu = rusage.ru_utime + rusage.ru_stime
    verdict = "met" if wall <= STUDY_TARGET_S else "NOT met"
    plan = study["plan"]
    profile = _profile(study)
    return [
        "## Timed ordered-write study (study 4)\n\n"
        "Command: `qoslab rio study --out DIR` (Figures 10-12 and the recovery runs, every "
        f"stack, {plan['seeds']} seeds, 2 simulations at once)\n\n"
        f"Target: the whole study within {STUDY_TARGET_S:.0f} s of wall-clock time ({verdict}).\n\n"
        "| study | simulator runs | timed events | wall s | CPU s | events per wall s "
        "| events per CPU s |\n"
        "|---|---|---|---|---|---|---|\n"
        f"| rio study | {study['runs']:,} | {events:,} | {wall:.2f} | {cpu:.2f} "
        f"| {events / wall:,.0f} | {events / cpu:,.0f} |\n\n"
        "Where the timed events go, by kind of run:\n\n"
        "| runs | simulator runs | timed events | share |\n"
        "|---|---|---|---|\n"
        + "".join(
            f"| {name} | {n:,} | {ev:,} | {100 * ev / events:.1f} % |\n" for name, n, ev in profile
        )
        + "\n"
        + CUTS_IN_RUN
    ]


CUTS_IN_RUN = (
    "Every power cut of a recovery run is taken during one more run of its job, to the last "
    "cut (the moments are drawn over the length of the run to the end, so that run comes "
    "first): at each moment the run reads the crash image a cut there would leave, without "
    "disturbing itself, recovers it and goes on (`qoslab_sim::crash_views`; "
    "`crates/sim/tests/path/crash_views.rs` holds each equal to a real cut of a fresh run). "
    "Before (e145552), each cut ran its job again from time 0: 1,017 runs and 123,488,843 "
    "events, 84.2 % of them the cuts on the document's setup.\n"
)


def _profile(study: dict) -> list[tuple[str, int, int]]:
    """The study's runs by kind: (kind, runs, events)."""
    points = study["points"]
    figures = sorted({(p["figure"], p["ssd"]) for p in points})
    rows = [
        (
            f"Figure {fig} ({ssd}) points",
            sum(1 for p in points if (p["figure"], p["ssd"]) == (fig, ssd)),
            sum(p["events"] for p in points if (p["figure"], p["ssd"]) == (fig, ssd)),
        )
        for fig, ssd in figures
    ]
    taken_in = study["cut_runs"]
    rows += [
        (
            name,
            sum(1 for r in taken_in if r["kind"] == kind),
            sum(r["events"] for r in taken_in if r["kind"] == kind),
        )
        for name, kind in (
            ("runs taking the recovery cuts over the thread counts", "recovery-cuts"),
            ("runs taking the recovery cuts on the document's setup (6.5)", "setup-cuts"),
        )
    ]
    # The runs to the end that the cuts are placed in: what is left of the study's totals.
    counted_runs = sum(n for _, n, _ in rows)
    counted = sum(ev for _, _, ev in rows)
    rows.append(
        (
            "runs to the end the cuts are placed in",
            study["runs"] - counted_runs,
            study["events"] - counted,
        )
    )
    return rows


if __name__ == "__main__":
    print("\n".join(run()))
