"""The PLM report's presentation: each shared finding and experiment written once under the
"Document vs qoslab" table (the rows cite them), and the tail bars on an axis that starts at 0."""

from __future__ import annotations

import pandas as pd

from qoslab.plm import report


def test_each_shared_finding_and_experiment_is_written_once_and_cited_by_the_rows():
    whys = list(report.WHY.values())
    cells, notes = report.cited(whys)
    shown = "\n".join([*cells, *(text for _, text in notes)])
    labels = [label for label, _ in notes]
    assert len(labels) == len(set(labels))
    for key, finding in report.FINDINGS.items():
        rows = [w for w in whys if finding in w]
        assert len(rows) >= 2, key  # shared by several rows
        assert shown.count(finding.strip()[:120]) == 1, key
    for experiment in report.EXPERIMENTS:
        command = experiment.split(", ", 1)[1][:60]
        assert shown.count(command) == 1, experiment[:20]
    # The row that gave every finding of the reads-only slowdown in full now cites them.
    p99 = cells[list(report.WHY).index("abstract-p99")]
    assert p99.endswith("See findings W, S and P below.")
    assert "(E1)" in p99 and "`qoslab plm study" not in p99

    # Nothing is lost: every number of a row's whole text is in its cell or in the list.
    def numbers(text: str) -> set[str]:
        return {w.strip(".,;:()[]") for w in text.split() if w.strip("([-+")[:1].isdigit()}

    for why, cell in zip(whys, cells, strict=True):
        assert numbers(why) <= numbers(cell) | numbers(" ".join(t for _, t in notes))


def test_the_tail_bars_start_at_zero_on_a_linear_axis():
    main = pd.DataFrame(
        {
            "dataset": "DS1",
            "run": ["DS1-shared"] * 3 + ["DS1-isolated-high"] * 3,
            "cls": ["high", "medium", "low"] * 2,
            "p9999_per_dtwin_us": [1920.0, 1860.0, 1760.0, 347.0, 300.0, 280.0],
        }
    )
    fig = report.tail_bars(main, "DS1")
    ax = fig.axes[0]
    assert ax.get_yscale() == "linear"
    assert ax.get_ylim()[0] == 0
    heights = sorted(round(p.get_height(), 6) for p in ax.patches)
    assert heights == sorted(main["p9999_per_dtwin_us"])
    assert all(p.get_y() == 0 for p in ax.patches)
