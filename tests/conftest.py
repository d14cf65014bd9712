"""Shared fixtures: run the installed `qoslab` command as a user would."""

from __future__ import annotations

import functools
import signal
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
QOSLAB = Path(sys.executable).parent / "qoslab"


def default_sigint() -> None:
    """`preexec_fn` of a command a test interrupts with Ctrl-C: SIGINT at its default, as a
    shell gives it. An ignored SIGINT survives exec (a background job of a non-interactive
    shell has it ignored, and so does everything `make test` starts from one), and a Python
    started so never raises KeyboardInterrupt."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def run_qoslab(*args: str, cwd: Path | None = None, check: bool = False, **kw):
    """Runs `qoslab ARGS...` in a subprocess and returns the CompletedProcess."""
    return subprocess.run(
        [str(QOSLAB), *map(str, args)],
        cwd=cwd,
        capture_output=True,
        text=True,
        check=check,
        **kw,
    )


@pytest.fixture
def qoslab():
    return run_qoslab


# ---- how `make test` spreads the suite over its two workers (-n 2 --dist loadfile) ----------
# xdist's loadfile keeps a test file on one worker (its module fixtures are made once) and hands
# the files out largest test count first. Two things made that slow: the documents of
# test_docs_commands.py (one file, 400 s of a 730 s run in s8) all landed on one worker, and a
# unit of a minute or more handed out late kept one worker busy while the other idled. So each
# document is a unit of its own (those that write into the checkout or set up loop devices
# share one, run one after another as before), and the units measured to be long go first
# (longest first: the short ones fill in at the end). A unit not in LONGEST_FIRST keeps xdist's
# place; tests/test_suite_schedule.py checks that each name there still names a unit.
DOCS_TEST = "tests/test_docs_commands.py"
SHARED_DOCS = f"{DOCS_TEST}::documents sharing the checkout or loop devices"
LONGEST_FIRST = (
    SHARED_DOCS,
    "tests/test_plm_study.py",
    f"{DOCS_TEST}::test_every_command_block_runs[fs.md]",
    "tests/test_wheel.py",
    f"{DOCS_TEST}::test_every_command_block_runs[vm.md]",
    "tests/test_sweep_docs.py",
)


@functools.cache
def unit_of(nodeid: str) -> str:
    """The unit of work a test is scheduled in: its file, or for a document its own."""
    path, _, test = nodeid.partition("::")
    if path != DOCS_TEST:
        return path
    import test_docs_commands as docs  # here, not above: it imports this module

    name = test.partition("[")[2].removesuffix("]")
    doc = next((d for d in docs.DOCUMENTS if d.name == name), None)
    return SHARED_DOCS if doc is not None and docs.shares_the_machine(doc) else nodeid


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config, log):
    if config.getvalue("dist") != "loadfile":
        return None
    from xdist.scheduler import LoadFileScheduling

    class LongestFirst(LoadFileScheduling):
        def _split_scope(self, nodeid: str) -> str:
            return unit_of(nodeid)

        def _assign_work_unit(self, node) -> None:
            known = next((u for u in LONGEST_FIRST if u in self.workqueue), None)
            if known is not None:
                self.workqueue.move_to_end(known, last=False)
            super()._assign_work_unit(node)

    return LongestFirst(config, log)
