"""Do two builds of the simulator give the same results? Runs every example job on every device
preset and on variants of the NVMe path, and compares the fio JSON `jobs` sections byte for byte.

    python bench/golden.py record OUT_DIR [--rev REV]     # this checkout, or a built revision
    python bench/golden.py compare DIR_A DIR_B            # exit 1 on any difference
    python bench/golden.py check REV                      # record REV and this checkout, compare

The jobs are `configs/jobs/*.fio` (with NUMBER_IOS set) and `tests/data/sim-jobs/*.fio`; the
devices are every preset `qoslab sim --list-devices` names, then `nvme-analytic` with each of
VARIANTS (coalescing, completion orders, WRR, timeouts with aborts and resets, a shallow SQ, a
single core, controller limits, SQ/CQ entries off the link, each service-time distribution, each
block scheduler, split bios, a shallow block queue), and the device files in bench/golden/ (an
empirical device). A run that fails records its error message instead, which must match too.

An older revision is run with the names its tunables had then (OLDER_NAMES), and a case it
cannot run at all, because the section it sets did not exist yet (the block layer before it was
a stage), is recorded as not applicable and left out of the comparison, with a count.
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import revs

ROOT = revs.ROOT
NUMBER_IOS = "5000"

VARIANTS: dict[str, list[str]] = {
    "coalesce": ["controller.coalesce_threshold=8", "controller.coalesce_time_ns=20us"],
    "order-random": ["controller.completion_order=random", "controller.reorder_bound=3"],
    "order-adversarial": ["controller.completion_order=adversarial", "controller.reorder_bound=2"],
    "order-batched": ["controller.completion_order=batched", "controller.reorder_bound=8"],
    "order-fifo": ["controller.completion_order=fifo", "controller.reorder_bound=0"],
    "wrr": [
        "controller.arbitration=wrr",
        "controller.wrr.high_weight=8",
        "controller.wrr.medium_weight=4",
        "controller.arbitration_burst=2",
    ],
    "timeouts": [
        "media.service=exponential",
        "media.service_mean_ns=150us",
        "media.servers=8",
        "host.timeout_ns=400us",
        "host.reset_ns=50us",
    ],
    "shallow-sq": ["host.sq_depth=8", "host.cq_depth=4"],
    "one-core": ["host.cores=1"],
    "limits": ["controller.max_outstanding=12", "controller.fetch_limit_per_sq=3"],
    "entries-off-link": ["link.queue_entries=false", "link.doorbell_ns=0"],
    "service-fixed": ["media.service=fixed", "media.servers=4"],
    "service-lognormal": [
        "media.service=lognormal",
        "media.service_cv=1.5",
        "media.write_mean_ns=40us",
    ],
    "service-empirical": [
        "media.service=empirical",
        "media.service_points_ns=[5000, 8000, 12000, 60000]",
        "media.service_points_pct=[0, 50, 90, 100]",
        "media.write_mean_ns=30us",
        "media.transfer_rate=2",
    ],
    # The block layer: each scheduler, bios split to the queue's limits, a queue that holds
    # requests back with no scheduler.
    "mq-deadline": ["block.scheduler=mq-deadline"],
    "kyber": ["block.scheduler=kyber"],
    "bfq": ["block.scheduler=bfq"],
    "prio": ["block.scheduler=prio"],
    "prio-advanced": ["block.scheduler=prio-advanced"],
    "split": ["block.max_sectors_kb=8"],
    "shallow-queue": ["block.queue_depth=4"],
}

# Tunables renamed since the simulator before the chain of stages (176044f): the name a
# revision refuses, and the name it knew.
OLDER_NAMES = {
    "controller.wrr.high_weight": "controller.wrr_high_weight",
    "controller.wrr.medium_weight": "controller.wrr_medium_weight",
    "controller.wrr.low_weight": "controller.wrr_low_weight",
    "link.doorbell_ns": "host.doorbell_ns",
}
UNKNOWN_KEY = re.compile(r"unknown key '([^']+)'")
UNKNOWN_SECTION = re.compile(r"unknown section '(\w+)'")
NOT_APPLICABLE = "not-applicable"

# Device files beside the presets: models no preset uses.
DEVICE_FILES = sorted((Path(__file__).resolve().parent / "golden").glob("*.toml"))


def _jobs() -> list[Path]:
    return sorted((ROOT / "configs" / "jobs").glob("*.fio")) + sorted(
        (ROOT / "tests" / "data" / "sim-jobs").glob("*.fio")
    )


def _presets(env: dict[str, str]) -> list[str]:
    out = subprocess.run(
        [sys.executable, "-m", "qoslab", "sim", "--list-devices"],
        env=env,
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    return [line.strip() for line in out.splitlines() if line and not line[0].isspace()]


def _cases(env: dict[str, str]) -> list[tuple[str, Path, str, list[str]]]:
    cases = []
    for job in _jobs():
        for device in _presets(env):
            cases.append((f"{job.stem}@{device}", job, device, []))
        for path in DEVICE_FILES:
            cases.append((f"{job.stem}@{path.stem}", job, str(path), []))
        for name, sets in VARIANTS.items():
            cases.append((f"{job.stem}@nvme-analytic+{name}", job, "nvme-analytic", sets))
    return cases


def _older_name(setting: str, error: str) -> str | None:
    """`setting` (`key=value`) under the name the revision knew, if `error` refused its key."""
    key, _, value = setting.partition("=")
    refused = UNKNOWN_KEY.search(error)
    if refused and refused[1] == key and key in OLDER_NAMES:
        return f"{OLDER_NAMES[key]}={value}"
    return None


def _run(env: dict[str, str], job: Path, device: str, sets: list[str]) -> str:
    cmd = [sys.executable, "-m", "qoslab", "sim", str(job), "--device", device]
    cmd += ["--output-format", "json"]
    for s in sets:
        cmd += ["--set", s]
    proc = subprocess.run(
        cmd, env={**env, "NUMBER_IOS": NUMBER_IOS}, capture_output=True, text=True, cwd=ROOT
    )
    if proc.returncode != 0:
        error = proc.stderr.strip()
        renamed = [_older_name(s, error) or s for s in sets]
        if renamed != sets:
            return _run(env, job, device, renamed)
        missing = UNKNOWN_SECTION.search(error)
        if missing and any(s.startswith(f"{missing[1]}.") for s in sets):
            return json.dumps({NOT_APPLICABLE: error}) + "\n"
        return json.dumps({"error": error}) + "\n"
    return json.dumps(json.loads(proc.stdout)["jobs"], indent=1, sort_keys=True) + "\n"


def _applicable(path: Path) -> bool:
    return not path.read_text().startswith(f'{{"{NOT_APPLICABLE}"')


def record(out_dir: Path, rev: str | None) -> None:
    env = revs.env_for(revs.build(rev) if rev else None)
    out_dir.mkdir(parents=True, exist_ok=True)
    cases = _cases(env)

    def one(case: tuple[str, Path, str, list[str]]) -> str:
        name, job, device, sets = case
        (out_dir / f"{name}.json").write_text(_run(env, job, device, sets))
        return name

    with ThreadPoolExecutor(max_workers=2) as pool:
        for i, name in enumerate(pool.map(one, cases), 1):
            print(f"[{i}/{len(cases)}] {name}", flush=True)


def compare(a: Path, b: Path) -> int:
    names_a = {p.name for p in a.glob("*.json")}
    names_b = {p.name for p in b.glob("*.json")}
    both = names_a & names_b
    skipped = {n for n in both if not (_applicable(a / n) and _applicable(b / n))}
    paired = both - skipped
    differ = sorted(n for n in paired if (a / n).read_bytes() != (b / n).read_bytes())
    for n in sorted(names_a ^ names_b):
        print(f"only in {'A' if n in names_a else 'B'}: {n}")
    for n in differ:
        print(f"differs: {n}")
    # A case only B has (a preset B added) has nothing to be compared with; one only A has
    # was lost.
    print(
        f"{len(paired) - len(differ)} identical, {len(differ)} different, "
        f"{len(names_b - names_a)} new in B, {len(names_a - names_b)} missing from B, "
        f"{len(skipped)} not applicable to one revision"
    )
    return 1 if differ or names_a - names_b else 0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    r = sub.add_parser("record")
    r.add_argument("out", type=Path)
    r.add_argument("--rev")
    c = sub.add_parser("compare")
    c.add_argument("a", type=Path)
    c.add_argument("b", type=Path)
    k = sub.add_parser("check")
    k.add_argument("rev")
    args = ap.parse_args()
    if args.cmd == "record":
        record(args.out, args.rev)
        return 0
    if args.cmd == "compare":
        return compare(args.a, args.b)
    base = ROOT / "out" / "golden"
    record(base / revs.resolve(args.rev)[:12], args.rev)
    record(base / "worktree", None)
    return compare(base / revs.resolve(args.rev)[:12], base / "worktree")


if __name__ == "__main__":
    sys.exit(main())
