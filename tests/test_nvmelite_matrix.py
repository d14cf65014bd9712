"""`qoslab nvmelite matrix`: the published expected outputs, the paper's numbers, determinism
across --jobs, atomic output and the report."""

from __future__ import annotations

import csv
import gzip
import hashlib
import os
import signal
import subprocess
import time
from xml.etree import ElementTree

import pytest
from PIL import Image

from conftest import QOSLAB, ROOT, default_sigint

DATA = ROOT / "tests" / "data" / "nvmelite"
EXPECTED = DATA / "expected"
SEEDS = ROOT / "configs" / "nvmelite" / "seeds"

# Published in the paper (Table 2, Table 3, Figure 1, Table 1) for schedule seeds 0-99,
# submit window inf. Mean p95 at fault NONE for k = 0, 1, 2, 3, 5, 10, inf.
PAPER_TABLE_2 = {
    "seed_001_long32": {
        "FIFO": [13.70] * 7,
        "RANDOM": [12.89, 13.48, 14.62, 15.85, 16.69, 18.28, 18.25],
        "BATCHED": [5.87, 6.09, 6.21, 6.41, 6.53, 6.52, 6.52],
        "ADVERSARIAL": [13.70, 13.11, 14.46, 20.95, 28.46, 28.46, 28.46],
    },
    "seed_002": {
        "FIFO": [4.84] * 7,
        "RANDOM": [4.94, 5.04, 5.38, 5.47, 5.69, 5.68, 5.68],
        "BATCHED": [3.66, 3.72, 3.97, 4.00, 4.00, 4.00, 4.00],
        "ADVERSARIAL": [4.84, 4.19, 6.41, 6.48, 6.48, 6.48, 6.48],
    },
}
# Table 3: mean p95 at k = inf for seed1, policies FIFO, RANDOM, BATCHED, ADVERSARIAL.
PAPER_TABLE_3 = {
    "TIMEOUT": {"FIFO": 12.08, "RANDOM": 16.22, "BATCHED": 6.36, "ADVERSARIAL": 24.71},
    "RESET": {"FIFO": 11.28, "RANDOM": 12.05, "BATCHED": 5.82, "ADVERSARIAL": 9.52},
}
# Figure 1: mean RD at fault NONE.
PAPER_RD = {
    "inf": {"ADVERSARIAL": 0.218, "RANDOM": 0.098, "BATCHED": 0.029, "FIFO": 0.0},
    "3": {"ADVERSARIAL": 0.125, "RANDOM": 0.061, "BATCHED": 0.027, "FIFO": 0.0},
}
K_COLUMNS = ["k=0", "k=1", "k=2", "k=3", "k=5", "k=10", "k=inf"]


def read_csv(path):
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


def matrix(qoslab, config, out, *args, check=True, **kw):
    return qoslab("nvmelite", "matrix", config, "--out", out, *args, check=check, **kw)


def write_config(path, seeds, schedule_seeds="0-99", extra=""):
    listed = "\n".join(f'  - "{s}"' for s in seeds)
    path.write_text(
        f"seeds:\n{listed}\n"
        "policies: [FIFO, RANDOM, ADVERSARIAL, BATCHED]\n"
        'bounds: ["0", "1", "2", "3", "5", "10", "inf"]\n'
        "faults: [NONE, TIMEOUT, RESET]\n"
        f'schedule_seeds: "{schedule_seeds}"\n'
        'scheduler_version: "v1.0"\n' + extra
    )
    return path


def test_published_expected_outputs_are_reproduced_byte_for_byte(qoslab, tmp_path):
    out = tmp_path / "out"
    done = matrix(qoslab, EXPECTED / "config.yaml", out)
    assert done.stdout.strip() == str(out / "report.html")
    expected = gzip.decompress((EXPECTED / "runs.csv.gz").read_bytes())
    got = (out / "runs.csv").read_bytes()
    assert got.count(b"\r\n") == 2521
    assert got == expected
    rows = read_csv(out / "runs.csv")
    logs = {p.stem: p for p in (out / "logs").iterdir()}
    assert len(rows) == len(logs) == 2520
    for row in rows:
        data = logs[row["run_id"]].read_bytes()
        assert hashlib.sha256(data).hexdigest() == row["log_sha256"]
    for log in (EXPECTED / "logs").glob("*.log"):
        assert logs[log.stem].read_bytes() == log.read_bytes()


def test_metrics_only_write_is_runs_csv_without_the_hashes(tmp_path):
    from qoslab.nvmelite import load_matrix

    load_matrix(EXPECTED / "config.yaml").write(
        str(tmp_path), logs=False, log_sha256=False, exact_nodes=0
    )
    expected = gzip.decompress((EXPECTED / "runs.csv.gz").read_bytes()).decode()
    header, *rows = expected.removesuffix("\r\n").split("\r\n")
    want = [header] + [row.rsplit(",", 1)[0] + "," for row in rows]
    assert (tmp_path / "runs.csv").read_bytes().decode() == "\r\n".join(want) + "\r\n"
    assert len(rows) == 2520 and not (tmp_path / "logs").exists()


@pytest.fixture(scope="module")
def paper(tmp_path_factory):
    """The paper's matrices for both workloads, 16,800 runs, without logs."""
    d = tmp_path_factory.mktemp("paper")
    config = write_config(
        d / "paper.yaml", [SEEDS / "seed_001_long32.json", SEEDS / "seed_002.json"]
    )
    subprocess.run(
        [QOSLAB, "nvmelite", "matrix", config, "--out", d / "out", "--no-logs"],
        check=True,
        capture_output=True,
    )
    return d / "out"


def test_paper_table_2_mean_p95_by_policy_and_k(paper):
    rows = read_csv(paper / "table2_mean_p95.csv")
    seen = 0
    for row in rows:
        if row["fault_mode"] != "NONE":
            continue
        published = PAPER_TABLE_2[row["seed_id"]][row["policy"]]
        assert [round(float(row[k]), 2) for k in K_COLUMNS] == published, row
        seen += 1
    assert seen == 8


def test_paper_table_3_faults_at_k_inf(paper):
    rows = {
        r["fault_mode"]: r
        for r in read_csv(paper / "table3_mean_p95_kinf.csv")
        if r["seed_id"] == "seed_001_long32"
    }
    for fault, published in PAPER_TABLE_3.items():
        assert {p: round(float(rows[fault][p]), 2) for p in published} == published
    assert round(float(rows["NONE"]["ADVERSARIAL"]), 2) == 28.46


def test_paper_figure_1_mean_rd(paper):
    rows = read_csv(paper / "figure1_mean_rd.csv")
    for row in rows:
        if row["seed_id"] != "seed_001_long32" or row["fault_mode"] != "NONE":
            continue
        assert float(row["k=0"]) == 0.0
        for k, published in PAPER_RD.items():
            assert round(float(row[f"k={k}"]), 3) == published[row["policy"]], (k, row)


def test_paper_table_1_top_poison_schedules(paper):
    rows = read_csv(paper / "poison_top.csv")
    assert len(rows) == 10
    top = [(r["policy"], r["schedule_seed"], float(r["p95_latency_step"])) for r in rows[:3]]
    assert top == [("ADVERSARIAL", seed, 64.0) for seed in ("10", "18", "53")]
    assert all(r["seed_id"] == "seed_001_long32" for r in rows)
    # Each poison schedule replays to the run's log, whose hash runs.csv recorded.
    runs = {r["run_id"]: r for r in read_csv(paper / "runs.csv")}
    first = rows[0]
    done = subprocess.run(
        [
            QOSLAB,
            "nvmelite",
            "replay",
            SEEDS / "seed_001_long32.json",
            paper / first["schedule_file"],
        ],
        check=True,
        capture_output=True,
    )
    assert hashlib.sha256(done.stdout).hexdigest() == runs[first["run_id"]]["log_sha256"]


def test_risk_cliffs_of_the_spec_example(paper):
    cliffs = {
        (r["policy"], r["fault_mode"], r["k_from"], r["k_to"])
        for r in read_csv(paper / "risk_cliffs.csv")
        if r["seed_id"] == "seed_001_long32"
    }
    assert ("ADVERSARIAL", "NONE", "2", "3") in cliffs
    assert ("ADVERSARIAL", "NONE", "3", "5") in cliffs
    assert ("ADVERSARIAL", "TIMEOUT", "1", "2") in cliffs
    assert ("ADVERSARIAL", "TIMEOUT", "2", "3") in cliffs
    none = {c for c in cliffs if c[1] == "NONE"}
    assert none == {("ADVERSARIAL", "NONE", "2", "3"), ("ADVERSARIAL", "NONE", "3", "5")}


def test_report_is_self_contained(paper):
    html = (paper / "report.html").read_text()
    # RD vs k, p95 by policy, and a risk-cliff heatmap per fault mode.
    assert html.count("<svg") == 5
    assert "28.46" in html and "Risk cliffs" in html
    # Nothing is loaded from elsewhere: figures are inline, links only point beside the file.
    assert "src=" not in html and "<link" not in html and "<script" not in html
    assert 'href="http' not in html
    heatmaps = ("risk_cliff_heatmap", "risk_cliff_heatmap_timeout", "risk_cliff_heatmap_reset")
    for stem in ("rd_vs_k", "p95_by_policy", *heatmaps):
        svg = (paper / "figures" / f"{stem}.svg").read_text()
        assert svg in html  # the report shows the very file
        with Image.open(paper / "figures" / f"{stem}.png") as png:
            root = ElementTree.fromstring(svg)
            assert png.format == "PNG"
            assert png.size == (round(float(root.get("width"))), round(float(root.get("height"))))


SVG = "{http://www.w3.org/2000/svg}"


def shapes(path, tag, cls):
    """(element, tooltip) of every `tag` of class `cls` in an SVG file."""
    root = ElementTree.parse(path).getroot()
    return [
        (e, e.findtext(f"{SVG}title")) for e in root.iter(f"{SVG}{tag}") if e.get("class") == cls
    ]


def test_heatmap_shows_the_papers_table_2_and_outlines_its_cliffs(paper):
    cells = shapes(paper / "figures" / "risk_cliff_heatmap.svg", "rect", "cell")
    shown = {}
    for rect, tip in cells:
        where, value = tip.rsplit(": ", 1)
        seed_id, policy, k = where.replace("reordering bound k ", "").split(", ")
        shown[seed_id, policy, k] = (float(value), rect)
    assert len(shown) == 2 * 4 * 7
    for seed_id, policies in PAPER_TABLE_2.items():
        for policy, published in policies.items():
            assert [shown[seed_id, policy, k[2:]][0] for k in K_COLUMNS] == published
    # Colours follow the values: within a workload, more p95 is never darker (viridis).
    for seed_id in PAPER_TABLE_2:
        ranked = sorted((v, r.get("fill")) for (s, _, _), (v, r) in shown.items() if s == seed_id)
        assert ranked[0][1] == "#440154" and ranked[-1][1] == "#FDE725"
        luma = [
            sum(c * w for c, w in zip(rgb(f), (0.3, 0.59, 0.11), strict=True)) for _, f in ranked
        ]
        assert luma == sorted(luma)
    outlined = {
        tip.replace("reordering bound k ", "")
        for _, tip in shapes(paper / "figures" / "risk_cliff_heatmap.svg", "rect", "outlined")
    }
    # Risk cliffs at fault NONE: mean p95 up by more than 20 % from the previous bound.
    assert outlined == {
        "seed_001_long32, ADVERSARIAL, 3",  # 14.46 -> 20.95
        "seed_001_long32, ADVERSARIAL, 5",  # 20.95 -> 28.46
        "seed_002, ADVERSARIAL, 2",  # 4.19 -> 6.41
    }
    # The PNG is the same picture: each cell's colour away from its text, a red outline.
    with Image.open(paper / "figures" / "risk_cliff_heatmap.png") as png:
        png = png.convert("RGB")
        for _, rect in shown.values():
            x, y = float(rect.get("x")), float(rect.get("y"))
            assert png.getpixel((round(x) + 8, round(y) + 8)) == rgb(rect.get("fill"))
        x, y = (float(shown["seed_001_long32", "ADVERSARIAL", "5"][1].get(a)) for a in "xy")
        assert png.getpixel((round(x) + 3, round(y) + 15)) == rgb("#E41A1C")


def rgb(colour):
    return tuple(int(colour[i : i + 2], 16) for i in (1, 3, 5))


def test_rd_chart_plots_the_papers_figure_1(paper):
    dots = shapes(paper / "figures" / "rd_vs_k.svg", "circle", "point")
    points = {}
    for dot, tip in dots:
        where, value = tip.rsplit(": ", 1)
        series, k = where.split(", ")
        points[series, k] = (float(value), float(dot.get("cx")), float(dot.get("cy")))
    assert len(points) == 2 * 4 * 7
    for k, published in PAPER_RD.items():
        for policy, rd in published.items():
            assert points[f"seed_001_long32 {policy}", k][0] == rd
    # One linear y scale for every dot, larger RD higher up; k left to right.
    (v0, _, y0), (v1, _, y1) = min(points.values()), max(points.values())
    slope = (y1 - y0) / (v1 - v0)
    assert slope < 0
    for value, _, y in points.values():
        assert abs(y - (y0 + slope * (value - v0))) < 0.6  # values and pixels both rounded
    xs = [points["seed_002 RANDOM", k[2:]][1] for k in K_COLUMNS]
    assert xs == sorted(xs) and len(set(xs)) == 7
    series = {tip for _, tip in shapes(paper / "figures" / "rd_vs_k.svg", "polyline", "series")}
    assert series == {f"{s} {p}" for s in PAPER_TABLE_2 for p in PAPER_TABLE_2[s]}


def test_p95_chart_bars_are_the_papers_means_at_k_inf(paper):
    bars = shapes(paper / "figures" / "p95_by_policy.svg", "rect", "bar")
    assert len(bars) == 2 * 4
    heights = {}
    for rect, tip in bars:
        where, value = tip.split(": ")
        heights[where] = (float(value.split(" +- ")[0]), float(rect.get("height")))
    for policy, published in PAPER_TABLE_2["seed_001_long32"].items():
        assert heights[f"{policy} (seed_001_long32)"][0] == published[-1]
    scale = {round(h / v, 1) for v, h in heights.values()}
    assert len(scale) == 1  # bar heights proportional to the means


def _tree(d):
    skip = {"report.html"}
    return {
        str(p.relative_to(d)): p.read_bytes()
        for p in sorted(d.rglob("*"))
        if p.is_file() and p.name not in skip and p.suffix not in (".png", ".svg")
    }


def test_output_is_identical_for_any_jobs(qoslab, tmp_path):
    config = write_config(tmp_path / "c.yaml", [SEEDS / "seed_002.json"], "0-40")
    trees = []
    for jobs in ("1", "2", "5"):
        out = tmp_path / f"out{jobs}"
        matrix(qoslab, config, out, "--jobs", jobs, "--submit-window", "3")
        trees.append(_tree(out))
    assert trees[0] == trees[1] == trees[2]
    assert len(trees[0]) > 3444


def test_git_commit_auto_is_the_project_commit(qoslab, tmp_path):
    config = write_config(
        tmp_path / "c.yaml", [SEEDS / "seed_002.json"], "0", 'git_commit: "auto"\n'
    )
    head = subprocess.run(
        ["git", "-C", ROOT, "rev-parse", "HEAD"], capture_output=True, text=True
    ).stdout.strip()
    # Run from a directory that is not a git checkout: the commit is the project's own.
    matrix(qoslab, config, tmp_path / "out", cwd="/")
    header = next((tmp_path / "out" / "logs").iterdir()).read_text().splitlines()[0]
    assert header.endswith(f", git_commit={head})")
    assert len(head) == 40


def test_existing_output_is_replaced_whole(qoslab, tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    (out / "stale.txt").write_text("old")
    config = write_config(tmp_path / "c.yaml", [SEEDS / "seed_002.json"], "0-1")
    # A directory that is not an earlier output is never replaced.
    done = matrix(qoslab, config, out, check=False)
    assert done.returncode == 2 and "holds no runs.csv" in done.stderr
    assert (out / "stale.txt").read_text() == "old"
    (out / "runs.csv").write_text("")
    matrix(qoslab, config, out, "--no-logs")
    assert not (out / "stale.txt").exists()
    assert not (out / "logs").exists()
    assert len(read_csv(out / "runs.csv")) == 2 * 4 * 7 * 3
    assert sorted(p.name for p in tmp_path.iterdir()) == ["c.yaml", "out"]


def test_ctrl_c_leaves_no_output(tmp_path):
    config = write_config(tmp_path / "c.yaml", [SEEDS / "seed_001_long32.json"], "0-2000000")
    proc = subprocess.Popen(
        [QOSLAB, "nvmelite", "matrix", config, "--out", tmp_path / "out", "--no-logs"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        preexec_fn=default_sigint,
    )
    # Wait until the temporary directory exists (the run is under way), then interrupt.
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline and not any(
        p.name.startswith(".out.partial-") for p in tmp_path.iterdir()
    ):
        time.sleep(0.05)
    time.sleep(0.3)
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode != 0
    assert sorted(p.name for p in tmp_path.iterdir()) == ["c.yaml"], err
    assert os.path.exists(config)


def test_progress_bar_only_on_a_terminal(qoslab, tmp_path):
    import pty

    config = write_config(tmp_path / "c.yaml", [SEEDS / "seed_001_long32.json"], "0-999")
    quiet = matrix(qoslab, config, tmp_path / "quiet", "--no-logs")
    assert quiet.stderr == ""
    leader, follower = pty.openpty()
    done = subprocess.run(
        [QOSLAB, "nvmelite", "matrix", config, "--out", tmp_path / "tty", "--no-logs"],
        stdout=subprocess.PIPE,
        stderr=follower,
        check=True,
    )
    os.close(follower)
    shown = b""
    while True:
        try:
            chunk = os.read(leader, 65536)
        except OSError:
            break
        if not chunk:
            break
        shown += chunk
    os.close(leader)
    assert done.stdout.decode().strip() == str(tmp_path / "tty" / "report.html")
    assert b"nvmelite matrix" in shown and b"84000" in shown


def test_sampled_worst_beside_the_exact_worst_case(paper):
    rows = read_csv(paper / "exact_worst.csv")
    # 2 workloads x 3 faults x 4 policies x 7 bounds.
    assert len(rows) == 168
    for r in rows:
        # No sampled run beats the exact worst case or its upper bound.
        assert int(r["sampled_max_p95"]) <= float(r["upper_bound"]), r
        assert float(r["exact_p95"]) <= float(r["upper_bound"]), r
        if r["certificate"] == "optimal":
            assert r["exact_p95"] == r["upper_bound"], r
            assert int(r["sampled_max_p95"]) <= int(r["exact_p95"]), r
    long32 = {
        (r["policy"], r["bound_k"]): r
        for r in rows
        if r["seed_id"] == "seed_001_long32" and r["fault_mode"] == "NONE"
    }
    # The paper's top poison schedule (ADVERSARIAL, k = inf, p95 64) against the optimum 67.
    adv = long32[("ADVERSARIAL", "inf")]
    assert (adv["sampled_max_p95"], adv["exact_p95"], adv["certificate"]) == ("64", "67", "optimal")
    for k, p95 in {"0": "39", "1": "47", "3": "67"}.items():
        assert (long32[("FIFO", k)]["exact_p95"], long32[("FIFO", k)]["certificate"]) == (
            p95,
            "optimal",
        )
    html = (paper / "report.html").read_text()
    assert "Sampled against exact worst case" in html
