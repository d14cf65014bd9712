"""Every NVMe-lite spec section that the code cites exists in docs/nvme-lite-spec.md.

The code cites the spec as `spec §5.4`, `§§3-10` or `spec section 11`; a reader follows such a
reference to docs/nvme-lite-spec.md, so each cited number must be a heading there.
"""

from __future__ import annotations

import re
from pathlib import Path

from conftest import ROOT

SPEC = ROOT / "docs" / "nvme-lite-spec.md"
CITING = ("crates", "python", "dut", "tests")
SUFFIXES = {".rs", ".py", ".c", ".h", ".sh"}
SECTION = r"\d+(?:\.\d+)*"
# "§5.4", "§§3–10" (both ends cited); "spec section 11", "spec (section 2".
SIGN_REF = re.compile(rf"\u00a7\u00a7?\s*({SECTION})(?:\s*[\u2013-]\s*({SECTION}))?")
WORD_REF = re.compile(rf"spec\W{{0,3}}sections?\s+({SECTION})")
SELF = Path(__file__).resolve()
HEADING = re.compile(rf"^#{{2,4}} ({SECTION})\.? ", re.M)


def spec_sections() -> set[str]:
    return set(HEADING.findall(SPEC.read_text(encoding="utf-8")))


def cited_sections() -> dict[str, list[str]]:
    """Cited section number -> the places citing it."""
    cited: dict[str, list[str]] = {}
    for top in CITING:
        for path in sorted((ROOT / top).rglob("*")):
            if path.suffix not in SUFFIXES or path == SELF or not path.is_file():
                continue
            text = path.read_text(encoding="utf-8", errors="replace")
            for lineno, line in enumerate(text.splitlines(), 1):
                numbers = [n for m in SIGN_REF.finditer(line) for n in m.groups() if n]
                numbers += WORD_REF.findall(line)
                for number in numbers:
                    where = f"{path.relative_to(ROOT)}:{lineno}"
                    cited.setdefault(number.rstrip("."), []).append(where)
    return cited


def test_the_spec_has_its_fourteen_sections_and_their_subsections():
    sections = spec_sections()
    assert {str(n) for n in range(1, 15)} <= sections
    assert {"1.2", "5.4", "5.7", "9.2", "10.1", "10.5", "13.3"} <= sections
    assert "15" not in sections


def test_every_cited_section_exists_in_the_spec():
    cited = cited_sections()
    # The code cites the spec throughout; an empty scan would mean the pattern broke.
    assert {"1.2", "3", "5.4", "8", "10.1", "11"} <= cited.keys()
    missing = {n: places for n, places in cited.items() if n not in spec_sections()}
    assert missing == {}


def test_a_citation_of_a_missing_section_is_reported():
    line = "see spec §5.9 and §§3\u201316, spec section 11"
    numbers = [n for m in SIGN_REF.finditer(line) for n in m.groups() if n]
    numbers += WORD_REF.findall(line)
    assert numbers == ["5.9", "3", "16", "11"]
    assert {"5.9", "16"} == {n for n in numbers if n not in spec_sections()}
