"""The block layer's cost to the simulator: the scheduler study's two jobs on `nvme-analytic`
through `mq-deadline`, against the same jobs with `none`, as a user runs them (`qoslab sim`).

Every simulated path has the block stage; with `none` it hands each request straight to the
driver (no scheduler, no tags, no merge lookups), which is the nearest the simulator has to
"without the block layer". Figure: simulated I/Os per CPU second (the process's own user +
system time), the best of ROUNDS runs of each, alternated, since the machine's speed drifts
from run to run. Target: mq-deadline at no less than half the I/Os per CPU second of none.
"""

from __future__ import annotations

import json
import sys
import tempfile
from pathlib import Path

from measured import measure

ROOT = Path(__file__).resolve().parent.parent
QOSLAB = Path(sys.executable).parent / "qoslab"
RUNTIME = "30s"  # simulated; about a million I/Os on nvme-analytic
TARGET = 0.5
ROUNDS = 3


def _job_file(d: Path) -> Path:
    from qoslab.lab.sched_jobs import SchedOptions
    from qoslab.sched.study import job_text

    path = d / "sched-study.fio"
    path.write_text(job_text(float(RUNTIME[:-1]), SchedOptions()))
    return path


def _run(job: Path, scheduler: str, out: Path) -> dict:
    cmd = [str(QOSLAB), "sim", str(job), "--device", "nvme-analytic",
           "--set", f"block.scheduler={scheduler}", "--output-format", "json",
           "--output", str(out)]  # fmt: skip
    cpu = measure(cmd).cpu
    report = json.loads(out.read_text())
    ios = sum(j["read"]["total_ios"] for j in report["jobs"])
    shown = ["qoslab", "sim", "jobs.fio", *cmd[3:-2]]
    return {"cmd": " ".join(shown), "ios": ios, "cpu": cpu}


def run() -> list[str]:
    with tempfile.TemporaryDirectory(prefix="qoslab-bench-block-") as d:
        job = _job_file(Path(d))
        runs: dict[str, list[dict]] = {"none": [], "mq-deadline": []}
        for _ in range(ROUNDS):
            for sched, found in runs.items():
                found.append(_run(job, sched, Path(d) / f"{sched}.json"))
        none, deadline = (min(runs[k], key=lambda r: r["cpu"]) for k in ("none", "mq-deadline"))
    rate = {k: r["ios"] / r["cpu"] for k, r in (("none", none), ("mq-deadline", deadline))}
    ratio = rate["mq-deadline"] / rate["none"]
    verdict = "met" if ratio >= TARGET else "NOT met"
    rows = [
        "| scheduler | simulated I/Os | CPU s | simulated I/Os per CPU second |",
        "|---|---|---|---|",
        *(
            f"| {k} | {r['ios']:,} | {r['cpu']:.2f} | {rate[k]:,.0f} |"
            for k, r in (("none", none), ("mq-deadline", deadline))
        ),
    ]
    return [
        "## Block layer: the scheduler study's jobs through mq-deadline\n\n"
        f"Command: `{deadline['cmd']}` on the study's job file (`qoslab sched study`'s "
        f"jobs.fio, runtime {RUNTIME}), and the same with `none`; best of {ROUNDS}, "
        "alternated\n\n"
        f"mq-deadline runs at {ratio:.0%} of none's simulated I/Os per CPU second; target: at "
        f"least {TARGET:.0%} ({verdict}).\n\n" + "\n".join(rows) + "\n"
    ]


if __name__ == "__main__":
    print(run()[0])
