"""The sweep report's figure of a metric against one parameter (`qoslab report`): it never
averages the metric over another varying parameter, never joins categorical values with lines,
draws a time kept in ns in a unit that needs no axis offset, and draws no error bar from fewer
than 3 seeds."""

from __future__ import annotations

import re

import pytest

from sweep_helpers import sweep, write_spec


@pytest.fixture
def drawn(tmp_path, monkeypatch):
    """Builds the report of the sweeps given, and returns {figure title: its axes' content}."""
    from qoslab.report import figures
    from qoslab.sweep.report import build_report

    seen = {}
    save = figures.save_figure

    def record(fig, directory, stem, title=None, caption="", link_prefix=""):
        ax = fig.axes[0]
        fig.canvas.draw()
        seen[title] = {
            "marks": [
                (label, list(c.lines[0].get_xdata()), list(c.lines[0].get_ydata()), ls)
                for c in ax.containers
                for label, ls in [(c.get_label(), c.lines[0].get_linestyle())]
            ],
            # The drawn length of every error bar (zero: none drawn).
            "bars": [
                float(abs(seg[1][1] - seg[0][1]))
                for c in ax.containers
                for col in c.lines[2]
                for seg in col.get_segments()
            ],
            "ylabel": ax.get_ylabel(),
            "offset": ax.yaxis.get_major_formatter().get_offset(),
            "caption": caption,
        }
        return save(fig, directory, stem, title, caption, link_prefix)

    monkeypatch.setattr(figures, "save_figure", record)

    def build(*specs: str) -> dict:
        for i, text in enumerate(specs):
            sweep(write_spec(tmp_path, text, f"s{i}.yaml"), tmp_path / "store", "--jobs", "1")
        build_report(tmp_path / "store", tmp_path / "out")
        return seen

    return build


def test_a_metric_is_never_averaged_over_another_varying_parameter(drawn):
    # x_times_n against x, with n taking 9 values: too many for lines, so each configuration
    # is a mark of its own, at its own x * n (an average over n would put 5 x at each x).
    seen = drawn(
        """
        study: selftest
        parameters: {x: [1, 2], n: [1, 2, 3, 4, 5, 6, 7, 8, 9]}
        seeds: [1]
        """
    )
    fig = seen["x_times_n vs x"]
    points = sorted((x, y) for _, xs, ys, _ in fig["marks"] for x, y in zip(xs, ys, strict=True))
    want = sorted((x, float(x * n)) for x in (1, 2) for n in range(1, 10))
    assert points == want
    assert "not averaged" in fig["caption"]


def test_a_categorical_parameter_gets_marks_side_by_side_and_no_joining_line(drawn):
    seen = drawn(
        """
        study: selftest
        parameters: {x: [1, 2], n: 3, label: [c, a, bb]}
        seeds: [1]
        """
    )
    fig = seen["x_times_n vs label"]
    assert [label for label, *_ in fig["marks"]] == ["x = 1.0", "x = 2.0"]
    assert {ls for *_, ls in fig["marks"]} == {"None"}
    # category positions 0, 1, 2 (a, bb, c), the two lines' marks either side of each
    (_, left, ys1, _), (_, right, ys2, _) = fig["marks"]
    assert all(a < round(a) + 0.01 and a > round(a) - 0.5 for a in left)
    assert all(b > round(b) - 0.01 and b < round(b) + 0.5 for b in right)
    assert [round(a) for a in left] == [round(b) for b in right] == [0, 1, 2]
    assert ys1 == [3.0, 3.0, 3.0] and ys2 == [6.0, 6.0, 6.0]
    # a numeric parameter keeps its line
    assert {ls for *_, ls in seen["x_times_n vs x"]["marks"]} == {"-"}


def test_a_time_in_ns_is_drawn_in_a_unit_that_needs_no_offset(drawn, tmp_path):
    (tmp_path / "qd.fio").write_text(
        "[r]\nioengine=libaio\ndirect=1\nrw=randread\nbs=4k\nsize=1g\niodepth=${QD}\n"
        "number_ios=500\n"
    )
    seen = drawn(
        """
        study: sim
        name: qd
        parameters:
          job: qd.fio
          device: nvme-analytic
          env.QD: [1, 4, 16]
          set.media.servers: [64, 16]
        seeds: [1]
        """
    )
    fig = seen["read_clat_p99_ns vs env.QD"]
    ys = [y for _, _, marks, _ in fig["marks"] for y in marks]
    assert fig["ylabel"] == "read_clat_p99_ns (µs)"
    assert fig["offset"] == ""
    assert 1 < max(ys) < 1000
    # The configurations table shows the same metric in the same unit as the figure.
    html = (tmp_path / "out" / "report.html").read_text()
    table = html[html.index("<h3>Configurations") :]
    table = table[: table.index("</table>")]
    header = re.findall(r"<th>(.*?)</th>", table)
    assert "read_clat_p99_ns mean (µs)" in header and "read_clat_p99_ns sd (µs)" in header
    column = header.index("read_clat_p99_ns mean (µs)")
    rows = [re.findall(r"<td[^>]*>(.*?)</td>", r) for r in table.split("<tr>")[2:]]
    means = [float(r[column].replace(",", "")) for r in rows]
    assert len(means) == 6 and max(means) == pytest.approx(max(ys), rel=1e-5)
    # IOPS against p99: one curve per value of the other parameter, joined in QD's order.
    curves = seen["Read IOPS against p99 latency"]["marks"]
    assert [label for label, *_ in curves] == [
        "qd: set.media.servers = 16",
        "qd: set.media.servers = 64",
    ]
    for _, iops, _, style in curves:
        assert len(iops) == 3 and style == "-"
        assert iops == sorted(iops)  # more queue depth, more IOPS


@pytest.mark.parametrize(("seeds", "bars"), [("[1, 2]", False), ("[1, 2, 3]", True)])
def test_no_error_bar_from_fewer_than_three_seeds(drawn, seeds, bars):
    # u is a draw of each seed: two seeds have a spread, but give no interval (report/stats.py).
    fig = drawn(f"study: selftest\nparameters: {{x: [1, 2]}}\nseeds: {seeds}\n")["u vs x"]
    assert any(length > 0 for length in fig["bars"]) is bars, fig["bars"]
    assert "drawn from 3 seeds or more" in fig["caption"]
