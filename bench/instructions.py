"""Instructions per simulated I/O of two builds, counted by valgrind. The count does not depend
on the machine's load, so it compares two builds where wall-clock and CPU-second figures
(bench/side_by_side.py) move with whatever else the machine runs.

    python bench/instructions.py BASE [HEAD] [--ios N] [--device PRESET] [--job FILE]
                                 [--out FILE]

Each revision is checked out beside this one (bench/revs.py) and its `simrun` example
(crates/sim/examples/simrun.rs: one run from a job file, no Python) is built there. Both run
the same job file (default: `make bench`'s, bench/jobs/randread-qd32.fio; any job whose
`number_ios` is `${NUMBER_IOS}`) under `valgrind --tool=cachegrind` with N and with 2N I/Os:
the difference of the two counts, over N, is what one I/O costs, start-up, preconditioning and
the report left out.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import revs

JOB = revs.ROOT / "bench" / "jobs" / "randread-qd32.fio"
REFS = re.compile(r"I\s+refs:\s+([0-9,]+)")


def simrun(rev: str) -> Path:
    """The `simrun` example of `rev`, built in its worktree."""
    wt = revs.build(rev).parent
    target = wt / "target"
    subprocess.run(
        ["cargo", "build", "--quiet", "--release", "--example", "simrun", "-p", "qoslab-sim"],
        cwd=wt,
        env={**os.environ, "CARGO_TARGET_DIR": str(target)},
        check=True,
    )
    return target / "release" / "examples" / "simrun"


def instructions(binary: Path, job: Path, ios: int, device: str) -> int:
    """Instructions the whole process of one run of `ios` I/Os executes."""
    with tempfile.TemporaryDirectory(prefix="qoslab-instr-") as scratch:
        done = subprocess.run(
            [
                "valgrind",
                "--tool=cachegrind",
                "--cache-sim=no",
                f"--cachegrind-out-file={Path(scratch) / 'out'}",
                str(binary),
                str(job),
                device,
            ],
            env={**os.environ, "NUMBER_IOS": str(ios)},
            capture_output=True,
            text=True,
            check=True,
        )
    found = REFS.search(done.stderr)
    if not found:
        raise RuntimeError(f"valgrind printed no instruction count:\n{done.stderr[-2000:]}")
    return int(found[1].replace(",", ""))


def shown(path: Path) -> Path:
    """`path` from the repository's root when it lies inside."""
    return path.relative_to(revs.ROOT) if path.is_relative_to(revs.ROOT) else path


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    revs.comparison_args(ap)
    ap.add_argument("--ios", type=int, default=200_000, help="N (default 200,000)")
    ap.add_argument("--device", default="nvme-analytic", help="device preset (nvme-analytic)")
    ap.add_argument(
        "--job", type=Path, default=JOB, help="the job file (bench/jobs/randread-qd32.fio)"
    )
    args = ap.parse_args()
    job = args.job.resolve()
    if not job.is_file():
        print(f"instructions: --job {args.job}: no such file", file=sys.stderr)
        sys.exit(2)
    if args.ios < 1:
        print("instructions: --ios: expected a whole number of at least 1", file=sys.stderr)
        sys.exit(2)
    if shutil.which("valgrind") is None:
        print("instructions: valgrind is not installed (apt-get install valgrind)", file=sys.stderr)
        sys.exit(2)

    names = {"base": revs.resolve(args.base), "head": revs.resolve(args.head)}
    binaries = {side: simrun(commit) for side, commit in names.items()}
    runs = [(side, n) for side in names for n in (args.ios, 2 * args.ios)]
    # The counts are exact whatever runs beside them, so the runs share the cores.
    with ThreadPoolExecutor(max_workers=os.cpu_count() or 1) as pool:
        counts = dict(
            zip(
                runs,
                pool.map(lambda r: instructions(binaries[r[0]], job, r[1], args.device), runs),
                strict=True,
            )
        )
    per_io = {
        side: (counts[(side, 2 * args.ios)] - counts[(side, args.ios)]) / args.ios for side in names
    }
    lines = [
        f"Instructions per simulated I/O: `{shown(job)}` on `{args.device}`, "
        f"(runs of {2 * args.ios:,} I/Os - runs of {args.ios:,}) / {args.ios:,}, "
        "valgrind --tool=cachegrind.",
        "",
        f"| revision | instructions, {args.ios:,} I/Os | instructions, {2 * args.ios:,} I/Os "
        "| per I/O |",
        "|---|---|---|---|",
    ]
    for side, commit in names.items():
        lines.append(
            f"| {side} `{commit[:12]}` | {counts[(side, args.ios)]:,} "
            f"| {counts[(side, 2 * args.ios)]:,} | {per_io[side]:,.0f} |"
        )
    lines += ["", f"head / base: {per_io['head'] / per_io['base']:.3f}"]
    revs.report(lines, args.out)


if __name__ == "__main__":
    main()
