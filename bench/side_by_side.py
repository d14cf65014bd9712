"""Are two builds as fast as each other? Builds both revisions (bench/revs.py), runs the
benchmark modules of `make bench` alternately on each, and prints every figure side by side.

    python bench/side_by_side.py BASE [HEAD] [--module sim --module media] [--rounds 3]
                                 [--out FILE]

Each round runs every chosen module once on BASE, then once on HEAD, so that the load of a
shared machine falls on both alike; a figure is the median over the rounds, and the ratio is
the median of each round's HEAD / BASE (the two runs of a round follow each other, so a
machine whose speed drifts over minutes moves both), with the range of those ratios beside
it. A module runs as `make bench` runs it (bench/run.py --one), from the revision's own
worktree, so each revision is timed by its own benchmark code on its own build. Only modules
both revisions have are compared, and only the figures both report. A figure is a cell of a
section's Markdown table whose text starts with a number, in any column but the first: the first
column names the row (`| figure | value |` tables: the row's name; tables of several measured
columns, such as `| stack | crash points | wall s |`: "row: column"). A row name that repeats in
a table is told apart by the row's other cells that are not numbers (`| 1,000,000 | no | 2.6 s |`).
"""

from __future__ import annotations

import argparse
import json
import re
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import revs

NUMBER = re.compile(r"^(?P<num>-?[0-9][0-9,]*(?:\.[0-9]+)?)\s*(?P<unit>.*)$")
SEPARATOR = re.compile(r"^\|(\s*:?-+:?\s*\|)+$")


def _cells(line: str) -> list[str] | None:
    """The cells of a Markdown table row, or None if `line` is not one."""
    line = line.strip()
    if len(line) < 2 or not (line.startswith("|") and line.endswith("|")):
        return None
    return [c.strip() for c in line[1:-1].split("|")]


def _tables(lines: list[str]) -> list[tuple[list[str], list[list[str]]]]:
    """Each table of `lines` as (header cells, body rows): a header row, a separator row
    (`|---|---|`), then rows up to the first line that is not a row."""
    out = []
    i = 0
    while i + 1 < len(lines):
        header = _cells(lines[i])
        if header is None or not SEPARATOR.match(lines[i + 1].strip()):
            i += 1
            continue
        body = []
        i += 2
        while i < len(lines) and (row := _cells(lines[i])) is not None:
            body.append(row)
            i += 1
        out.append((header, body))
    return out


def _row_names(body: list[list[str]]) -> list[str]:
    """Each row's name: its first cell; where that repeats, with the row's cells that are not
    numbers; where that still repeats, with the row's place in the table."""
    first = [row[0] for row in body]
    names = [
        ", ".join([row[0], *(c for c in row[1:] if c and not NUMBER.match(c))])
        if first.count(row[0]) > 1
        else row[0]
        for row in body
    ]
    return [f"{n} (row {r + 1})" if names.count(n) > 1 else n for r, n in enumerate(names)]


def figures(sections: list[str]) -> dict[tuple[str, str], tuple[float, str]]:
    """`(section title, figure) -> (number, unit)` for every numeric cell of every table of
    every section (the module docstring says how a figure is named)."""
    out: dict[tuple[str, str], tuple[float, str]] = {}
    for section in sections:
        lines = section.splitlines()
        title = next((ln[3:].strip() for ln in lines if ln.startswith("## ")), "?")
        for t, (header, body) in enumerate(_tables(lines)):
            for r, name in enumerate(_row_names(body)):
                for c, cell in enumerate(body[r][1:], start=1):
                    num = NUMBER.match(cell)
                    if not num:
                        continue
                    column = header[c] if c < len(header) else f"column {c + 1}"
                    figure = name if len(header) == 2 else f"{name}: {column}"
                    if (title, figure) in out:  # the same row and column in an earlier table
                        figure = f"{figure} (table {t + 1})"
                    out[(title, figure)] = (float(num["num"].replace(",", "")), num["unit"])
    return out


def run_module(worktree: Path, module: str) -> list[str]:
    """The sections of `bench/bench_MODULE.py` run from `worktree` on that worktree's build."""
    env = revs.env_for(worktree / "python")
    with tempfile.TemporaryDirectory(prefix="qoslab-sbs-") as scratch:
        out = Path(scratch) / "sections.json"
        subprocess.run(
            [
                sys.executable,
                str(worktree / "bench" / "run.py"),
                "--one",
                str(worktree / "bench" / f"bench_{module}.py"),
                str(out),
            ],
            cwd=worktree,
            env=env,
            check=True,
        )
        return json.loads(out.read_text())


def modules_of(worktree: Path) -> set[str]:
    return {p.stem.removeprefix("bench_") for p in (worktree / "bench").glob("bench_*.py")}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    revs.comparison_args(ap)
    ap.add_argument(
        "--module",
        action="append",
        help="a bench module by its name without bench_ (repeatable; default: all both have)",
    )
    ap.add_argument("--rounds", type=int, default=1, help="alternating rounds (default 1)")
    args = ap.parse_args()
    if args.rounds < 1:
        sys.exit("side_by_side: --rounds: expected a whole number of at least 1")

    names = {"base": revs.resolve(args.base), "head": revs.resolve(args.head)}
    trees = {k: revs.build(c).parent for k, c in names.items()}
    common = modules_of(trees["base"]) & modules_of(trees["head"])
    chosen = sorted(common if not args.module else set(args.module))
    missing = [m for m in chosen if m not in common]
    if missing:
        sys.exit(f"side_by_side: --module {missing[0]}: not a bench module of both revisions")

    runs: dict[str, list[dict]] = {"base": [], "head": []}
    for r in range(args.rounds):
        for module in chosen:
            for side in ("base", "head"):
                print(f"round {r + 1}/{args.rounds}: {module} on {side}", flush=True)
                runs[side].append(
                    {"module": module, "figures": figures(run_module(trees[side], module))}
                )

    def median(side: str, module: str, key: tuple[str, str]) -> float | None:
        vals = [
            run["figures"][key][0]
            for run in runs[side]
            if run["module"] == module and key in run["figures"]
        ]
        return statistics.median(vals) if vals else None

    def round_ratios(module: str, key: tuple[str, str]) -> list[float]:
        # runs["base"][i] and runs["head"][i] are the same module in the same round.
        return [
            h["figures"][key][0] / b["figures"][key][0]
            for b, h in zip(runs["base"], runs["head"], strict=True)
            if b["module"] == module
            and key in b["figures"]
            and key in h["figures"]
            and b["figures"][key][0]
        ]

    lines = [
        f"Side by side: base `{names['base'][:12]}`, head `{names['head'][:12]}`, "
        f"{args.rounds} alternating round(s), medians; head / base is the median of the "
        "rounds' ratios, with their range.",
        "",
        "| module | section | figure | base | head | head / base | range |",
        "|---|---|---|---|---|---|---|",
    ]
    for module in chosen:
        units = {
            k: unit
            for run in runs["head"]
            if run["module"] == module
            for k, (_, unit) in run["figures"].items()
        }
        for key, unit in units.items():
            b, h = median("base", module, key), median("head", module, key)
            if b is None or h is None:
                continue
            ratios = round_ratios(module, key)
            ratio = f"{statistics.median(ratios):.3f}" if ratios else "-"
            spread = f"{min(ratios):.3f} to {max(ratios):.3f}" if ratios else "-"
            lines.append(
                f"| {module} | {key[0]} | {key[1]} | {b:,.6g} | {h:,.6g} {unit} | {ratio} "
                f"| {spread} |"
            )
    revs.report(lines, args.out)


if __name__ == "__main__":
    main()
