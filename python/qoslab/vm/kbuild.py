"""Out-of-tree modules built against the guest kernel, kernel-style warnings as errors.

The sources (a directory with a `Kbuild` or a `Makefile` naming `obj-m`) are copied into the
build directory, the block layer's private headers (elevator.h, blk-mq-sched.h, ...) beside
them in `private/`, and kbuild runs with `W=1` and `-Werror`. The private headers come from the
pinned kernel's own source package at build time and are never committed.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

from qoslab.errors import InputError
from qoslab.vm.packages import Kernel

SOURCE_SUFFIXES = (".c", ".h")


def build_modules(kernel: Kernel, src: Path, out: Path) -> list[Path]:
    """Builds the modules of `src` into `out`; returns the .ko files."""
    if not src.is_dir():
        raise InputError("not a directory of module sources", path=src)
    if not (src / "Kbuild").exists() and not (src / "Makefile").exists():
        raise InputError("no Kbuild or Makefile naming the modules (obj-m := x.o)", path=src)
    out.mkdir(parents=True, exist_ok=True)
    for f in src.iterdir():
        if f.is_file() and (f.suffix in SOURCE_SUFFIXES or f.name in ("Kbuild", "Makefile")):
            shutil.copy2(f, out / f.name)
    private = out / "private"
    shutil.rmtree(private, ignore_errors=True)
    shutil.copytree(kernel.private_headers, private)
    if shutil.which("make") is None or shutil.which("gcc-12") is None:
        raise InputError(
            "make and gcc-12 are needed to build modules for the guest kernel "
            "(apt-get install make gcc-12)"
        )
    cmd = [
        "make",
        "-C",
        str(kernel.build_dir),
        f"M={out.resolve()}",
        "W=1",
        f"KCFLAGS=-Werror -I{private.resolve()}",
        "modules",
    ]
    done = subprocess.run(cmd, capture_output=True, text=True)
    if done.returncode != 0:
        errors = [
            ln for ln in (done.stderr + done.stdout).splitlines() if "error" in ln.lower()
        ] or (done.stderr.strip().splitlines() or ["failed"])
        raise InputError(f"building the modules of {src} failed: {errors[0].strip()}")
    kos = sorted(out.glob("*.ko"))
    if not kos:
        raise InputError(f"building the modules of {src} made no .ko file", path=src)
    return kos


def checkpatch(kernel: Kernel, files: list[Path]) -> list[str]:
    """checkpatch.pl's errors and warnings on `files` (its default level), one line each."""
    if shutil.which("perl") is None:
        raise InputError("perl not found: checkpatch.pl needs it")
    done = subprocess.run(
        [
            "perl",
            str(kernel.checkpatch),
            "--no-tree",
            "--terse",
            "--show-types",
            "-f",
            *map(str, files),
        ],
        capture_output=True,
        text=True,
    )
    return [ln for ln in done.stdout.splitlines() if ": ERROR:" in ln or ": WARNING:" in ln]
