"""`bench/side_by_side.py` compares every figure `make bench` prints: each numeric cell of each
section's table, whatever the number of columns (the block and rio benches print tables of
several measured columns, one row per scheduler or stack)."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parent.parent / "bench"


@pytest.fixture(scope="module")
def side_by_side():
    sys.path.insert(0, str(BENCH))
    try:
        spec = importlib.util.spec_from_file_location("side_by_side", BENCH / "side_by_side.py")
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        yield module
    finally:
        sys.path.remove(str(BENCH))


# Sections as bench/run.py writes them: a title, a command, text, a Markdown table.
TWO_COLUMNS = """## Simulator: 4 KiB random read

Command: `qoslab sim job.fio`

| figure | value |
|---|---|
| simulated I/Os | 10,000,000 |
| wall time | 4.73 s |
| target | under 10 s |
| peak RSS | 21.1 MB |
"""

STACKS = """## Crash checker (study 4)

Command: `qoslab rio crash-check --stack rio`

| stack | crash points | violating points | wall s | per CPU s |
|---|---|---|---|---|
| orderless | 239,188 | 101,317 | 0.22 | 764,633 |
| rio | 282,749 | 0 | 0.29 | 608,562 |
"""

NUMBERED_ROWS = """## NVMe-lite: 1,000,000 runs, metrics only

| runs | log_sha256 | wall | target |
|---|---|---|---|
| 100,000 | yes | 0.30 s | < 1 s |
| 1,000,000 | yes | 2.58 s | |
| 1,000,000 | no (metrics only) | 1.35 s (target < 2 s) | < 2 s |
"""


def test_a_two_column_table_gives_one_figure_per_numeric_row(side_by_side):
    assert side_by_side.figures([TWO_COLUMNS]) == {
        ("Simulator: 4 KiB random read", "simulated I/Os"): (10_000_000.0, ""),
        ("Simulator: 4 KiB random read", "wall time"): (4.73, "s"),
        ("Simulator: 4 KiB random read", "peak RSS"): (21.1, "MB"),
    }


def test_a_table_of_several_columns_gives_every_numeric_cell_by_row_and_column(side_by_side):
    got = side_by_side.figures([STACKS])
    title = "Crash checker (study 4)"
    assert len(got) == 8
    assert got[(title, "orderless: crash points")] == (239_188.0, "")
    assert got[(title, "orderless: violating points")] == (101_317.0, "")
    assert got[(title, "rio: violating points")] == (0.0, "")
    assert got[(title, "rio: wall s")] == (0.29, "")
    assert got[(title, "rio: per CPU s")] == (608_562.0, "")


def test_rows_named_by_a_number_are_told_apart_by_their_words(side_by_side):
    got = side_by_side.figures([NUMBERED_ROWS])
    title = "NVMe-lite: 1,000,000 runs, metrics only"
    # The first column names the row even when it is a number; "target" holds no number, so
    # it is no figure but, in a repeated row, part of the name.
    assert got == {
        (title, "100,000: wall"): (0.30, "s"),
        (title, "1,000,000, yes: wall"): (2.58, "s"),
        (title, "1,000,000, no (metrics only), < 2 s: wall"): (1.35, "s (target < 2 s)"),
    }


def test_identical_rows_and_a_second_table_keep_every_figure(side_by_side):
    section = """## Two tables

| case | s |
|---|---|
| a | 1 |
| a | 2 |

Text between the tables.

| case | s |
|---|---|
| a | 3 |
| -b | -4.5 ms |
"""
    assert side_by_side.figures([section]) == {
        ("Two tables", "a (row 1)"): (1.0, ""),
        ("Two tables", "a (row 2)"): (2.0, ""),
        ("Two tables", "a"): (3.0, ""),
        ("Two tables", "-b"): (-4.5, "ms"),
    }


def test_rows_that_are_not_in_a_table_are_not_figures(side_by_side):
    # A row without a header and separator above it is prose that happens to hold pipes.
    section = "## Loose\n\n| a | 1 |\n\n| x | y |\n|---|---|\n| n | 7 |\n"
    assert side_by_side.figures([section]) == {("Loose", "n"): (7.0, "")}


def test_every_table_of_the_bench_report_gives_figures(side_by_side):
    """Every section of docs/benchmarks.md (what `make bench` wrote) with a table has figures
    to compare: the multi-column tables of the block and rio benches among them."""
    text = (BENCH.parent / "docs" / "benchmarks.md").read_text()
    sections = ["## " + part for part in text.split("\n## ")[1:]]
    with_tables = {s.splitlines()[0][3:].strip() for s in sections if "\n|---" in s}
    assert len(with_tables) >= 10
    assert with_tables <= {title for title, _ in side_by_side.figures(sections)}
