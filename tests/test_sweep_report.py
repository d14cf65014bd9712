"""`qoslab report STORE --out DIR`: one self-contained HTML report of a store holding several
studies, opened in headless Chromium (Debian's `chromium`, installed by `make tools`)."""

from __future__ import annotations

import re
import shutil

import pandas as pd
import pytest

from conftest import run_qoslab
from sweep_helpers import WORKLOAD, sweep, write_spec

CHROMIUM = shutil.which("chromium")

SPECS = {
    "cliff.yaml": f"""
        study: nvmelite run
        parameters:
          workload: {WORKLOAD}
          policy: [FIFO, RANDOM, ADVERSARIAL]
          bound: [0, 1, 3, inf]
        seeds: {{range: [0, 20]}}
        """,
    "qd.yaml": """
        study: sim
        parameters:
          job: qd.fio
          device: ideal
          env.QD: [1, 2, 8]
        seeds: [1, 2]
        """,
    "windows.yaml": """
        study: nvmelite matrix
        parameters:
          config: matrix.yaml
          submit_window: [inf, 2]
        """,
    "lhs.yaml": """
        study: selftest
        sample: {method: lhs, n: 40, seed: 3, parameters: {x: {uniform: [0, 1]}}}
        zip: [{n: [1, 2], fail: [false, true]}]
        seeds: [1, 2, 3]
        """,
}


@pytest.fixture(scope="module")
def report(tmp_path_factory):
    d = tmp_path_factory.mktemp("report")
    (d / "qd.fio").write_text(
        "[r]\nioengine=libaio\ndirect=1\nrw=randread\nbs=4k\nsize=1g\niodepth=${QD}\nnumber_ios=2000\n"
    )
    (d / "matrix.yaml").write_text(
        f'seeds: ["{WORKLOAD}"]\npolicies: [FIFO, RANDOM]\nbounds: ["0", "inf"]\n'
        'faults: [NONE]\nschedule_seeds: "0-9"\nscheduler_version: "v1.0"\n'
    )
    store = d / "store"
    for name, text in SPECS.items():
        sweep(write_spec(d, text, name), store, "--jobs", "1", check=name != "lhs.yaml")
    done = run_qoslab("report", store, "--out", d / "out")
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == str(d / "out" / "report.html")
    return d


def test_the_report_is_one_file_with_its_figures_inline(report):
    html = (report / "out" / "report.html").read_text()
    # Self-contained: no script, no stylesheet, nothing fetched from elsewhere.
    assert "<script" not in html and "<link" not in html
    assert not re.search(r'(src|href)="(https?:|//)|url\((?!#)', html)
    n_svg = len(list((report / "out" / "figures").glob("*.svg")))
    assert html.count("<figure>") == n_svg == len(list((report / "out" / "figures").glob("*.png")))
    assert html.count("<svg") >= n_svg


@pytest.mark.skipif(CHROMIUM is None, reason="Debian's chromium is not installed and could not "
                    "be installed (`make tools` installs it when run as root)")  # fmt: skip
def test_the_report_opens_in_chromium_with_every_figure_drawn_and_no_console_error(report):
    from playwright.sync_api import sync_playwright

    problems = []
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
        page = browser.new_page()
        page.on("console", lambda m: m.type in ("error", "warning") and problems.append(m.text))
        page.on("pageerror", lambda e: problems.append(str(e)))
        page.on("requestfailed", lambda r: problems.append(f"failed to load {r.url}"))
        page.goto((report / "out" / "report.html").as_uri(), wait_until="load")
        figures = page.evaluate(
            """() => [...document.querySelectorAll('figure')].map(f => {
                const svg = f.querySelector('svg'), img = f.querySelector('img');
                const box = svg ? svg.getBoundingClientRect() : null;
                return {
                    title: (f.querySelector('h3') || {}).textContent,
                    drawn: svg ? box.width > 100 && box.height > 100
                                 && svg.querySelectorAll('path').length > 5
                               : img.complete && img.naturalWidth > 0,
                    links: [...f.querySelectorAll('figcaption a')].map(a => a.getAttribute('href')),
                };
            })"""
        )
        tables = page.evaluate(
            """() => [...document.querySelectorAll('h3')]
                .filter(h => h.textContent.startsWith('Configurations'))
                .map(h => { const t = h.nextElementSibling.querySelector('table');
                    return [...t.rows].map(r => [...r.cells].map(c => c.textContent)); })"""
        )
        browser.close()
    assert problems == []
    assert figures and all(f["drawn"] for f in figures), [f["title"] for f in figures]
    for f in figures:
        assert len(f["links"]) == 2
        assert all((report / "out" / href).is_file() for href in f["links"])
    titles = {f["title"] for f in figures}
    for want in (
        "p95_latency_step vs bound",
        "RD vs policy",
        "Risk cliffs: seed_001_long32.json, fault NONE, submit window inf",
        "read_clat_p99_ns vs env.QD",
        "Read IOPS against p99 latency",
        "p95_mean vs submit_window",
        "x_times_n vs x",
    ):
        assert want in titles

    # The configurations table of the NVMe-lite sweep: the mean p95 of each policy and bound
    # over the 20 seeds, as `qoslab nvmelite matrix` computes it for the same runs.
    cliff = next(t for t in tables if t[0][:3] == ["policy", "bound", "seeds"])
    got = pd.DataFrame(cliff[1:], columns=cliff[0])
    (report / "m.yaml").write_text(
        f'seeds: ["{WORKLOAD}"]\npolicies: [FIFO, RANDOM, ADVERSARIAL]\n'
        'bounds: ["0", "1", "3", "inf"]\nfaults: [NONE]\nschedule_seeds: "0-19"\n'
        'scheduler_version: "v1.0"\n'
    )
    done = run_qoslab("nvmelite", "matrix", report / "m.yaml", "--out", report / "m", "--no-logs")
    assert done.returncode == 0, done.stderr
    cells = pd.read_csv(report / "m" / "cells.csv", dtype={"bound_k": str})
    assert len(got) == len(cells) == 12
    for _, c in cells.iterrows():
        row = got[(got["policy"] == c["policy"]) & (got["bound"] == c["bound_k"])]
        assert row["seeds"].item() == "20"
        assert float(row["p95_latency_step mean"].item()) == pytest.approx(c["p95_mean"], abs=1e-6)
        assert float(row["p95_latency_step sd"].item()) == pytest.approx(
            c["p95_std"] * (20 / 19) ** 0.5, rel=1e-5
        )  # the matrix gives the population standard deviation, the report the sample's


def test_failed_points_are_listed_in_the_report(report):
    html = (report / "out" / "report.html").read_text()
    assert "Failed points (first 50)" in html
    assert "RuntimeError: failed on purpose" in html


def test_a_store_of_failed_points_alone_is_reported(tmp_path):
    spec = write_spec(
        tmp_path, "study: selftest\nparameters: {fail: true, x: [1, 2]}\nseeds: [1]\n"
    )
    sweep(spec, tmp_path / "store", "--jobs", "1", check=False)
    done = run_qoslab("report", tmp_path / "store", "--out", tmp_path / "out")
    assert done.returncode == 0, done.stderr
    html = (tmp_path / "out" / "report.html").read_text()
    assert "selftest: failed points" in html
    assert html.count("RuntimeError: failed on purpose") == 2


def test_two_copies_of_a_store_give_the_same_report_whatever_the_directory(tmp_path, monkeypatch):
    # The report names the store as the user gave it (relative) or by its name (absolute),
    # never by where it is: two users' reports of the same store are the same bytes.
    from qoslab.sweep.report import build_report

    spec = write_spec(
        tmp_path, "study: selftest\nparameters: {x: [1, 2], n: [1, 3]}\nseeds: [1, 2]\n"
    )
    sweep(spec, tmp_path / "a" / "results" / "store", "--jobs", "1")
    shutil.copytree(tmp_path / "a" / "results", tmp_path / "b" / "elsewhere" / "results")
    reports = []
    for user in ("a", "b/elsewhere"):
        monkeypatch.chdir(tmp_path / user)
        build_report("results/store", "out")
        reports.append((tmp_path / user / "out" / "report.html").read_bytes())
    assert reports[0] == reports[1]
    assert b"qoslab store query results/store" in reports[0]
    assert str(tmp_path).encode() not in reports[0]
    build_report(tmp_path / "a" / "results" / "store", tmp_path / "c")
    by_name = (tmp_path / "c" / "report.html").read_text()
    assert "qoslab store query store " in by_name and str(tmp_path) not in by_name
