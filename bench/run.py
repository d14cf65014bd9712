"""`make bench`: run every benchmark in bench/ and write docs/benchmarks.md.

Each `bench/bench_*.py` module exposes `run() -> list[Section]`; a section is a title, the
command it timed and a Markdown table of measured figures.

    python bench/run.py                     # every module (make bench)
    python bench/run.py --only nvmelite     # these modules; the others' sections are kept
                                            # (make bench ONLY=nvmelite)

In docs/benchmarks.md each module's sections follow a line that names the commit and the time
they were measured at, so a partial run leaves no figure without its date.
"""

from __future__ import annotations

import argparse
import datetime as dt
import importlib.util
import json
import os
import platform
import re
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


MARK = re.compile(r"^<!-- bench module: (?P<name>\S+) -->$", re.MULTILINE)
DOC = ROOT / "docs" / "benchmarks.md"


def _blocks(text: str) -> dict[str, str]:
    """The module blocks of a docs/benchmarks.md, by module name, in file order."""
    marks = list(MARK.finditer(text))
    return {
        m["name"]: text[m.start() : marks[i + 1].start() if i + 1 < len(marks) else len(text)]
        for i, m in enumerate(marks)
    }


def main() -> None:
    if len(sys.argv) == 4 and sys.argv[1] == "--one":
        _run_one(Path(sys.argv[2]), Path(sys.argv[3]))
        return
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument(
        "--only", nargs="+", metavar="NAME", help="modules to run (bench_NAME.py); default all"
    )
    args = ap.parse_args()
    paths = sorted((ROOT / "bench").glob("bench_*.py"))
    known = [p.stem.removeprefix("bench_") for p in paths]
    if args.only:
        unknown = sorted(set(args.only) - set(known))
        if unknown:
            sys.exit(f"bench: no module {', '.join(unknown)} (known: {', '.join(known)})")
        paths = [p for p in paths if p.stem.removeprefix("bench_") in args.only]
    now = dt.datetime.now(dt.UTC).strftime("%Y-%m-%d %H:%M UTC")
    blocks = _blocks(DOC.read_text()) if args.only and DOC.exists() else {}
    for path in paths:
        sections = []
        name = path.stem.removeprefix("bench_")
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
        blocks[name] = "\n".join(
            [
                f"<!-- bench module: {name} -->",
                f"*`bench/{path.name}`, measured on {now} at commit `{_commit()}`.*",
                "",
                *sections,
            ]
        )
    if not blocks:
        sys.exit("bench: no benchmarks found in bench/")
    order = {n: i for i, n in enumerate(known)}
    text = [
        "# Benchmarks",
        "",
        "Written by `make bench` (`make bench ONLY=module` re-runs some modules and keeps the",
        "others' sections); each module's sections say when and at which commit they were",
        "measured.",
        "",
        f"Machine: {_machine()}.",
        "",
        *(blocks[n].rstrip("\n") + "\n" for n in sorted(blocks, key=lambda n: order.get(n, 99))),
    ]
    out = write_file(DOC, "\n".join(text))
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
