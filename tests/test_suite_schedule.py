"""How `make test` spreads the suite over its two workers (tests/conftest.py): a document of
test_docs_commands.py is a unit of its own unless it writes into the checkout or sets up loop
devices (those share one), every other test file is one unit, and the units the schedule starts
first are units the suite has (a renamed file or document would lose its place without a
word)."""

from __future__ import annotations

import test_docs_commands as docs
from conftest import DOCS_TEST, LONGEST_FIRST, ROOT, SHARED_DOCS, unit_of

TEST = f"{DOCS_TEST}::{docs.test_every_command_block_runs.__name__}"


def document_units() -> dict[str, str]:
    return {d.name: unit_of(f"{TEST}[{d.name}]") for d in docs.DOCUMENTS if docs.runs_here(d)}


def test_a_document_is_a_unit_and_any_other_test_its_files():
    units = document_units()
    assert units["fs.md"] == f"{TEST}[fs.md]"
    # README.md runs `make demo` in the checkout and sets up a loop device, as lab.md does.
    assert units["README.md"] == units["lab.md"] == units["nvmelite.md"] == SHARED_DOCS
    assert unit_of("tests/test_vm.py::test_a_spec_is_the_module_and_its_parameters") == (
        "tests/test_vm.py"
    )
    assert unit_of("tests/test_plm.py::test_x[a::b]") == "tests/test_plm.py"


def test_a_document_not_run_here_has_every_block_run_by_another_test():
    import test_plm_study
    import test_sweep_docs

    example = {command for command, _ in test_sweep_docs._example()}
    skipped = [d for d in docs.DOCUMENTS if docs.command_blocks(d) and not docs.runs_here(d)]
    assert [d.name for d in skipped] in (["plm.md"], ["plm.md", "sweep.md"])
    for doc in skipped:
        if doc.name == "sweep.md":
            assert {block.strip() for _, block in docs.command_blocks(doc)} <= example
    # docs/plm.md's blocks run whole in tests/test_plm_study.py's `repeated` (run_blocks).
    assert docs.RUN_BY_THEIR_TEST == {"plm.md": "tests/test_plm_study.py"}
    assert test_plm_study.DOC == ROOT / "docs" / "plm.md"


def test_a_readme_block_not_run_here_is_run_by_the_documents():
    readme = ROOT / "README.md"
    skipped = [b for _, b in docs.command_blocks(readme) if docs.repeated_in_the_docs(readme, b)]
    # The sweeps, the Rio, the PLM coordinator and the scheduler blocks: docs/sweep.md's worked
    # example, docs/rio.md, docs/plm.md and docs/block.md run them.
    assert len(skipped) == 4
    for doc in docs.DOCUMENTS:
        if doc != readme:
            # Every block of the documents runs, here or in their test (above).
            assert docs.blocks_run_here(doc) == docs.command_blocks(doc)
    shown = {
        c
        for d in docs.DOCUMENTS
        if d.parent == ROOT / "docs"
        for _, b in docs.command_blocks(d)
        for c in docs.commands(b)
    }
    for block in skipped:
        assert docs.commands(block) and set(docs.commands(block)) <= shown, block
    assert docs.commands("a \\\n    --b c\n# note\n\nd") == ["a --b c", "d"]


def test_every_unit_started_first_is_one_the_suite_has():
    files = {p.relative_to(ROOT).as_posix() for p in (ROOT / "tests").glob("test_*.py")}
    units = files | set(document_units().values())
    assert len(set(LONGEST_FIRST)) == len(LONGEST_FIRST)
    assert [u for u in LONGEST_FIRST if u not in units] == []
