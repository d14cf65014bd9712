"""The NVMe-lite report in a real browser: headless Chromium (Debian's `chromium`, installed by
`make tools`) loads it with no console error and every figure drawn; the findings at its top
name the risk cliffs that the published runs table implies."""

from __future__ import annotations

import gzip
import io
import itertools
import json
import re
import shutil
import subprocess
from html.parser import HTMLParser

import pandas as pd
import pytest

from conftest import ROOT

CHROMIUM = shutil.which("chromium")
EXPECTED = ROOT / "tests" / "data" / "nvmelite" / "expected"

# Injected at the top of a copy of the report: records script errors, failed loads and
# console errors, and on load writes what it found (every image, every SVG's drawn size)
# into the page for --dump-dom to return.
PROBE = """<script>
window.__errors = [];
window.addEventListener(
  "error", e => window.__errors.push(String(e.message || e.target.src)), true);
const consoleError = console.error;
console.error = (...a) => { window.__errors.push(a.join(" ")); consoleError(...a); };
window.addEventListener("load", () => {
  const found = {
    errors: window.__errors,
    images: [...document.images].map(i => i.complete && i.naturalWidth > 0),
    svgs: [...document.querySelectorAll("figure svg")].map(s => {
      const r = s.getBoundingClientRect(); return r.width > 0 && r.height > 0; }),
    code: [...document.querySelectorAll("code")].length,
    text: document.body.innerText,
  };
  const out = document.createElement("pre");
  out.id = "qoslab-probe";
  out.textContent = JSON.stringify(found);
  document.body.appendChild(out);
});
</script>"""


@pytest.fixture(scope="module")
def report(tmp_path_factory):
    from conftest import run_qoslab

    out = tmp_path_factory.mktemp("nvmelite") / "out"
    done = run_qoslab("nvmelite", "matrix", EXPECTED / "config.yaml", "--out", out)
    assert done.returncode == 0, done.stderr
    return out


def cliffs_from_published_runs() -> list[tuple[str, str, str, str, float, float]]:
    """The risk cliffs of the published runs table, worked out here: a cell's mean p95 over its
    schedule seeds rising by more than 20 % from one bound to the next."""
    runs = pd.read_csv(io.BytesIO(gzip.decompress((EXPECTED / "runs.csv.gz").read_bytes())))
    parts = runs.run_id.str.rsplit("_", n=4, expand=True)
    runs["policy"], runs["k"], runs["fault"] = parts[1], parts[2], parts[4]
    means = runs.groupby(["policy", "fault", "k"]).p95_latency_step.mean()
    order = ["0", "1", "2", "3", "5", "10", "inf"]
    cliffs = []
    for (policy, fault), cell in means.groupby(level=[0, 1]):
        by_k = cell.droplevel([0, 1])
        for a, b in itertools.pairwise(order):
            if by_k[b] > 1.2 * by_k[a]:
                cliffs.append((policy, fault, a, b, by_k[a], by_k[b]))
    return cliffs


def test_the_findings_name_every_risk_cliff_with_its_size(report):
    html = (report / "report.html").read_text()
    findings = html[html.index("Findings</h2>") : html.index("</section>")]
    cliffs = cliffs_from_published_runs()
    assert cliffs, "the published matrix has risk cliffs"
    for policy, fault, a, b, p95_a, p95_b in cliffs:
        said = f"{policy} from k = {a} to {b} (mean p95 {p95_a:.2f} to {p95_b:.2f} steps, "
        sentence = next(s for s in findings.split("<p>") if f"Under fault {fault}," in s)
        assert said in sentence, (said, sentence)
        assert f"+{100 * (p95_b / p95_a - 1):.1f} %" in sentence
    for fault in {"NONE", "TIMEOUT", "RESET"} - {c[1] for c in cliffs}:
        assert f"Under fault {fault}: no risk cliff." in findings
    # The findings come first.
    assert html.index("Findings</h2>") < html.index("<h2>", html.index("<h2>") + 1)


class _Links(HTMLParser):
    def __init__(self):
        super().__init__()
        self.hrefs = []

    def handle_starttag(self, tag, attrs):
        if tag == "a":
            self.hrefs += [v for k, v in attrs if k == "href"]


@pytest.mark.skipif(CHROMIUM is None, reason="chromium is installed by make tools")
def test_chromium_loads_the_report_with_no_error_and_every_figure_drawn(report, tmp_path):
    page = (report / "report.html").read_text()
    probe = report / "probe.html"
    probe.write_text(page.replace("<head>", "<head>" + PROBE, 1))
    try:
        done = subprocess.run(
            [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--virtual-time-budget=5000",
             f"--user-data-dir={tmp_path / 'profile'}", "--dump-dom", probe.as_uri()],
            capture_output=True, text=True, timeout=120,
        )  # fmt: skip
    finally:
        probe.unlink()
    assert done.returncode == 0, done.stderr[-2000:]
    found = json.loads(
        re.search(r'<pre id="qoslab-probe">(.*?)</pre>', done.stdout, re.S).group(1)
        .replace("&lt;", "<").replace("&gt;", ">").replace("&amp;", "&")
    )  # fmt: skip
    assert found["errors"] == []
    assert all(found["images"])
    # RD vs k, p95 by policy, and a heatmap per fault mode, each drawn with a size.
    assert found["svgs"] == [True] * 5
    assert found["code"] > 0 and "`" not in found["text"]
    footer = found["text"][found["text"].rindex("Generated by qoslab") :]
    assert "version 0.1.0" in footer and "command qoslab nvmelite matrix" in footer
    # Every link points at a file beside the report.
    links = _Links()
    links.feed(page)
    local = [h for h in links.hrefs if not h.startswith("#")]
    assert local and all((report / h).exists() for h in local), local
