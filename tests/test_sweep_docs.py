"""docs/sweep.md says what the code does: its worked example runs as written and prints what
the page shows, and its studies reference is the adapters' tables."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

from conftest import ROOT

DOC = ROOT / "docs" / "sweep.md"
# Wall times and rates differ from run to run; everything else must be as the page shows.
TIMING = re.compile(r"\d+\.\d s(, [\d,]+ points/s)?")


def _example() -> list[tuple[str, str | None]]:
    """(command, shown output or None) of each step of the worked example."""
    text = DOC.read_text().split("## A worked example", 1)[1].split("\n## ", 1)[0]
    blocks = re.findall(r"```(\w*)\n(.*?)```", text, re.S)
    steps = []
    for i, (lang, body) in enumerate(blocks):
        if lang == "" and body.startswith("qoslab "):
            shown = blocks[i + 1][1] if i + 1 < len(blocks) and blocks[i + 1][0] == "text" else None
            if shown is not None and shown.startswith("qoslab "):
                shown = None
            steps.append((body.strip(), shown))
    return steps


def test_the_worked_example_runs_as_written_and_prints_what_the_page_shows(tmp_path):
    steps = _example()
    assert len(steps) == 7
    (tmp_path / "configs").symlink_to(ROOT / "configs")
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}:{os.environ['PATH']}"}
    for command, shown in steps:
        done = subprocess.run(
            ["bash", "-c", command], cwd=tmp_path, env=env, capture_output=True, text=True
        )
        assert done.returncode == 0, f"{command}\n{done.stderr}"
        if shown is not None:
            got = (done.stdout + done.stderr).strip()
            assert TIMING.sub("T", got) == TIMING.sub("T", shown.strip()), command
    assert (tmp_path / "out" / "report" / "report.html").is_file()


def test_the_studies_reference_is_generated_from_the_adapters():
    from qoslab.sweep.docs import studies_markdown

    assert studies_markdown() in DOC.read_text(), "run `python -m qoslab.sweep.docs docs/sweep.md`"
