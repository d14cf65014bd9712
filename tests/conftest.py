"""Shared fixtures: run the installed `qoslab` command as a user would."""

from __future__ import annotations

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
