"""Builds another revision of qoslab beside this checkout, so that two builds can be run side by
side on one machine in one session (bench/golden.py, bench/side_by_side.py).

A revision is checked out into a detached git worktree under `out/revs/REV`, its Rust extension
is built there with cargo (its own target directory, so two revisions never rebuild each other)
and copied next to its Python sources. Running `python -m qoslab` with `PYTHONPATH` set to
that worktree's `python/` folder then runs that revision with this checkout's virtualenv (the
dependencies are the same).
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
from pathlib import Path

from qoslab.outputs import write_file

ROOT = Path(__file__).resolve().parent.parent
REVS = ROOT / "out" / "revs"


def _git(*args: str, cwd: Path = ROOT) -> str:
    out = subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True, text=True)
    return out.stdout.strip()


def resolve(rev: str) -> str:
    """The full commit id of `rev` (a branch, tag, `HEAD~1`, ...)."""
    return _git("rev-parse", "--verify", f"{rev}^{{commit}}")


def build(rev: str) -> Path:
    """Checks out and builds `rev`; returns its `python/` folder (for PYTHONPATH)."""
    commit = resolve(rev)
    wt = REVS / commit[:12]
    if not (wt / ".git").exists():
        REVS.mkdir(parents=True, exist_ok=True)
        subprocess.run(["git", "worktree", "prune"], cwd=ROOT, check=True)
        _git("worktree", "add", "--detach", "--force", str(wt), commit)
    env = {**os.environ, "CARGO_TARGET_DIR": str(wt / "target")}
    subprocess.run(
        [
            "cargo",
            "build",
            "--quiet",
            "--release",
            "-p",
            "qoslab-py",
            "--features",
            "extension-module",
        ],
        cwd=wt,
        env=env,
        check=True,
    )
    lib = wt / "target" / "release" / "lib_core.so"
    shutil.copy2(lib, wt / "python" / "qoslab" / "_core.abi3.so")
    dut = wt / "dut" / "nvmelite-c"
    if dut.is_dir():
        # The NVMe-lite C implementation, for the benchmarks that run it.
        subprocess.run(["make", "--quiet", "dut-build"], cwd=wt, check=True, capture_output=True)
    return wt / "python"


def env_for(python_dir: Path | None) -> dict[str, str]:
    """The environment that makes `python -m qoslab` (and the `qoslab` script) run the build
    whose sources are in `python_dir` (this checkout for None)."""
    env = dict(os.environ)
    if python_dir is not None:
        env["PYTHONPATH"] = str(python_dir)
    return env


def comparison_args(ap: argparse.ArgumentParser) -> None:
    """The arguments every two-build comparison takes: BASE [HEAD] and --out FILE."""
    ap.add_argument("base", help="the revision to compare against (e.g. a commit id)")
    ap.add_argument("head", nargs="?", default="HEAD", help="the revision measured (HEAD)")
    ap.add_argument("--out", type=Path, help="also write the table to this Markdown file")


def report(lines: list[str], out: Path | None) -> None:
    """Prints a comparison's Markdown lines, and writes them to `out` when given."""
    table = "\n".join(lines) + "\n"
    print(table)
    if out:
        write_file(out, table)
