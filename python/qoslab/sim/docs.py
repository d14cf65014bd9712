"""Regenerates the generated parts of docs/sim.md: the tour's output excerpt and figure, the
presets table and the tunables reference, from the code and a run of the tour job.

    python -m qoslab.sim.docs docs/sim.md
"""

from __future__ import annotations

import json
import sys
import tempfile
from pathlib import Path

from qoslab.outputs import splice_generated
from qoslab.sim.api import DEFAULT_DEVICE, presets, run, tunables_markdown

ROOT = Path(__file__).resolve().parents[3]
TOUR_JOB = ROOT / "configs" / "jobs" / "tour.fio"
EXCERPT_LINES = 32
# The models documented here; the SSD and HDD models have their own page (docs/media.md).
MODELS = ["analytic", "empirical", "null"]


def presets_table() -> str:
    """Every preset of the registry (configs/devices), with the description its file gives."""
    rows = ["| preset | what |", "|---|---|"]
    for name, description in presets():
        label = f"`{name}`" + (" (default)" if name == DEFAULT_DEVICE else "")
        rows.append(f"| {label} | {' '.join(description.split())} |")
    return "\n".join(rows) + "\n"


def tour_excerpt() -> str:
    """The first lines of the second group's reader, as the JSON report has them."""
    report = json.loads(run(TOUR_JOB, device="nvme-analytic", output_format="json")["text"])
    reader = next(j for j in report["jobs"] if j["jobname"] == "reader")
    lines = json.dumps({"read": reader["read"]}, indent=2).splitlines()[:EXCERPT_LINES]
    return "```json\n" + "\n".join(lines) + "\n  ...\n```\n"


def update(path: Path, figure: bool = True) -> bool:
    """Rewrites the generated parts of `path`; returns whether the text changed."""
    parts = {
        "tunables": tunables_markdown(MODELS),
        "presets": presets_table(),
        "tour": tour_excerpt(),
    }
    if figure:
        from qoslab.sim.plot import timeseries_figure

        with tempfile.TemporaryDirectory(prefix="qoslab-sim-docs-") as scratch:
            # The tour job sets its own interval (log_avg_msec=20).
            series = Path(scratch) / "tour.csv"
            run(TOUR_JOB, device="nvme-analytic", output_format="json", timeseries=series)
            timeseries_figure(
                series, path.parent / "img" / "sim-tour.png", title="configs/jobs/tour.fio"
            )
    return splice_generated(path, parts)


if __name__ == "__main__":
    changed = update(Path(sys.argv[1]))
    print(f"{sys.argv[1]}: {'updated' if changed else 'up to date'}")
