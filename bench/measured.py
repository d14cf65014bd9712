"""One measured run of a command, for the bench modules: its wall time, and the process's own
CPU time (user + system) and peak RSS from `os.wait4`, which other processes on a shared
machine do not inflate."""

from __future__ import annotations

import json
import os
import subprocess
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path


@dataclass
class Measured:
    wall: float  # seconds
    cpu: float  # seconds, user + system
    rss_mb: float  # peak resident set, MiB


def measure(cmd: list, *, env: dict | None = None, stdout=subprocess.DEVNULL, ok=(0,)) -> Measured:
    """Runs `cmd` to its end; an exit status outside `ok` raises with the command's stderr."""
    # stderr goes to a file, not a pipe: a pipe read only after the wait would stall a command
    # that writes more than the pipe holds.
    with tempfile.TemporaryFile() as err:
        start = time.perf_counter()
        proc = subprocess.Popen(cmd, env=env, stdout=stdout, stderr=err)
        _, status, rusage = os.wait4(proc.pid, 0)
        wall = time.perf_counter() - start
        if os.waitstatus_to_exitcode(status) not in ok:
            err.seek(0)
            name = f"{os.path.basename(cmd[0])} {cmd[1]}"
            raise RuntimeError(f"{name} failed: {err.read().decode()}")
    return Measured(wall, rusage.ru_utime + rusage.ru_stime, rusage.ru_maxrss / 1024)


def measure_json(cmd: list, out_path: Path, *, env: dict | None = None) -> tuple[Measured, dict]:
    """`measure` of a command that prints JSON: kept in `out_path`, and returned parsed."""
    out_path.parent.mkdir(exist_ok=True)
    with open(out_path, "wb") as out:
        run = measure(cmd, env=env, stdout=out)
    return run, json.loads(out_path.read_text())
