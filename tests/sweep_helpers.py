"""Running `qoslab sweep` on a spec written by a test, and reading what the store holds."""

from __future__ import annotations

import contextlib
import hashlib
import io
import subprocess
import textwrap
from pathlib import Path

from conftest import ROOT
from qoslab.cli import main

WORKLOAD = ROOT / "configs" / "nvmelite" / "seeds" / "seed_001_long32.json"
C_NVMELITE = ROOT / "build" / "dut" / "nvmelite-c"


def write_spec(directory: Path, text: str, name: str = "spec.yaml") -> Path:
    path = Path(directory) / name
    path.write_text(textwrap.dedent(text).lstrip())
    return path


def sweep(spec: Path, store: Path, *args: str, check: bool = True):
    """`qoslab sweep SPEC --store STORE --quiet ARGS`, run by the command's entry point in this
    process (the same code as the installed command, less a second of start-up per call)."""
    argv = ["sweep", str(spec), "--store", str(store), "--quiet", *map(str, args)]
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            main(argv)
            code = 0
        except SystemExit as exit_:
            code = exit_.code if isinstance(exit_.code, int) else 1
    done = subprocess.CompletedProcess(["qoslab", *argv], code, out.getvalue(), err.getvalue())
    if check and done.returncode != 0:
        raise AssertionError(f"qoslab sweep failed ({done.returncode}):\n{done.stderr}")
    return done


def rows(store: Path, view: str):
    """A view's rows as a DataFrame in key order."""
    import qoslab.store

    with qoslab.store.open(store) as s:
        return s.df(view)


def part_files(store: Path) -> dict[str, str]:
    """Every file of the store's parts/: relative path -> SHA-256 of its bytes."""
    parts = Path(store) / "parts"
    return {
        str(p.relative_to(parts)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(parts.rglob("*"))
        if p.is_file()
    }
