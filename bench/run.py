"""`make bench`: run every benchmark in bench/ and write docs/benchmarks.md.

Each `bench/bench_*.py` module exposes `run() -> list[Section]`; a section is a title, the
command it timed and a Markdown table of measured figures.
"""

from __future__ import annotations

import datetime as dt
import importlib.util
import json
import os
import platform
import subprocess
import sys
import tempfile
from pathlib import Path

from qoslab.outputs import write_file

ROOT = Path(__file__).resolve().parent.parent


def _machine() -> str:
    cpu = "unknown CPU"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    mem_gib = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30
    return (
        f"{cpu}, {os.cpu_count()} cores, {mem_gib:.0f} GiB RAM, "
        f"{platform.system()} {platform.release()}, Python {platform.python_version()}"
    )


def _commit() -> str:
    try:
        out = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True
        )
        return out.stdout.strip() or "unknown"
    except OSError:
        return "unknown"


def _run_one(path: Path, sections_json: Path) -> None:
    spec = importlib.util.spec_from_file_location(path.stem, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    sections_json.write_text(json.dumps(module.run()))


def main() -> None:
    if len(sys.argv) == 4 and sys.argv[1] == "--one":
        _run_one(Path(sys.argv[2]), Path(sys.argv[3]))
        return
    sections = []
    for path in sorted((ROOT / "bench").glob("bench_*.py")):
        print(f"== {path.name}", flush=True)
        # Each module runs in a process of its own: a child's peak RSS (ru_maxrss) starts at its
        # parent's RSS when forked, so a runner that had loaded pandas for an earlier module
        # would inflate every later memory figure.
        with tempfile.TemporaryDirectory(prefix="qoslab-bench-") as scratch:
            out = Path(scratch) / "sections.json"
            subprocess.run([sys.executable, __file__, "--one", str(path), str(out)], check=True)
            for section in json.loads(out.read_text()):
                print(section, flush=True)
                sections.append(section)
    if not sections:
        sys.exit("bench: no benchmarks found in bench/")
    now = dt.datetime.now(dt.UTC).strftime("%Y-%m-%d %H:%M UTC")
    text = [
        "# Benchmarks",
        "",
        f"Written by `make bench` on {now}, commit `{_commit()}`.",
        "",
        f"Machine: {_machine()}.",
        "",
        *sections,
    ]
    out = write_file(ROOT / "docs" / "benchmarks.md", "\n".join(text) + "\n")
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
