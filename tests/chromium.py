"""A report as headless Chromium loads and draws it, for the report tests: script errors, failed
loads and console errors, whether every image loaded and every inline SVG of a figure has a
drawn size, and the page's text."""

from __future__ import annotations

import html
import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest

CHROMIUM = shutil.which("chromium")
needs_chromium = pytest.mark.skipif(CHROMIUM is None, reason="chromium is installed by make tools")

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


def chromium_probe(page: Path, profile: Path) -> dict:
    """What PROBE found in `page`, loaded by headless Chromium from a copy beside it (so that
    relative links resolve) with its own profile directory `profile`."""
    probe = page.with_name("probe.html")
    probe.write_text(page.read_text().replace("<head>", "<head>" + PROBE, 1))
    try:
        done = subprocess.run(
            [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--virtual-time-budget=5000",
             f"--user-data-dir={profile}", "--dump-dom", probe.as_uri()],
            capture_output=True, text=True, timeout=120,
        )  # fmt: skip
    finally:
        probe.unlink()
    assert done.returncode == 0, done.stderr[-2000:]
    found = re.search(r'<pre id="qoslab-probe">(.*?)</pre>', done.stdout, re.S)
    assert found, done.stdout[-2000:]
    return json.loads(html.unescape(found.group(1)))
