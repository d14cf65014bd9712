"""Every command README.md and docs/*.md show runs as written.

A fenced block without a language (or marked sh/bash) is commands; every other block says what
it is (`text` for outputs, synopses and file contents; `ini`, `toml`, `json`, `python`, ...),
except a file that begins with its format's own header line (a schedule file), which is that
file.
Each document's command blocks run in order, as one reader would type them, in a folder of
their own that holds the checkout's files (so `configs/...` resolves and `out/...` is written
there), with the `qoslab` command on PATH and what a reader brings of their own: a job file, a
block trace, a firmware model to test. `make` commands run in the checkout itself; `make test`
is the suite this test belongs to, so it is only resolved (`make -n test`). The lab's blocks
need root and loop devices; without them they are skipped, as `make lab-demo` skips.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import ROOT
from qoslab.vm.packages import cache_root

DOCUMENTS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
COMMAND_LANGUAGES = ("", "sh", "bash", "shell")
# The first lines of files the documents show as they are (docs/nvmelite-schedule.md).
FILE_HEADERS = ("qoslab-nvmelite-schedule v1",)
FENCE = re.compile(r"^```([\w+-]*)\n(.*?)^```", re.S | re.M)

# What a reader brings of their own, by the name the documents give it.
READER_FILES = {
    "job.fio": "[job]\nioengine=libaio\ndirect=1\nrw=randread\niodepth=4\nnumber_ios=2000\n",
    "my-firmware-model": f'#!/bin/sh\nexec "{ROOT}/build/dut/nvmelite-c" "$@"\n',
}


def blkparse_trace(ios: int = 2000) -> str:
    """A block trace as blkparse(1) prints it: a queue (Q) and a dispatch (D) line per I/O,
    one every 50 us, alternating reads and writes of 8 sectors."""
    lines = []
    for i in range(ios):
        t = i * 50_000
        rwbs, sector = ("R" if i % 2 else "W"), (i * 7919 % 1_000_000) * 8
        for seq, action in ((2 * i + 1, "Q"), (2 * i + 2, "D")):
            lines.append(
                f"  8,0    1 {seq:8} {t // 10**9:5}.{t % 10**9:09}  4242  {action}  {rwbs} "
                f"{sector} + 8 [fio]"
            )
    return "\n".join(lines) + "\n"


def command_blocks(doc: Path) -> list[tuple[int, str]]:
    text = doc.read_text()
    return [
        (text[: m.start()].count("\n") + 1, m.group(2))
        for m in FENCE.finditer(text)
        if m.group(1) in COMMAND_LANGUAGES and not m.group(2).startswith(FILE_HEADERS)
    ]


# Documents whose command blocks all run, as this test runs them, in another test that then
# checks what they wrote: docs/plm.md's reduced study is the study tests/test_plm_study.py's
# `repeated` fixture checks (run_blocks on the whole document, in a reader's folder; running it
# here too ran the same 27 simulations twice).
RUN_BY_THEIR_TEST = {"plm.md": "tests/test_plm_study.py"}


def run_elsewhere(doc: Path) -> bool:
    """Whether every command block of the document runs in another test, in order and checked
    more closely: docs/sweep.md's blocks are its worked example, which tests/test_sweep_docs.py
    runs and compares with the outputs the page shows (running them here too ran the same
    sweeps twice); a block that test does not run brings the whole document back here. The
    documents of RUN_BY_THEIR_TEST are run whole by run_blocks in their test."""
    if doc.name in RUN_BY_THEIR_TEST:
        return True
    if doc.name != "sweep.md":
        return False
    import test_sweep_docs

    example = {command for command, _ in test_sweep_docs._example()}
    return all(block.strip() in example for _, block in command_blocks(doc))


def runs_here(doc: Path) -> bool:
    return bool(command_blocks(doc)) and not run_elsewhere(doc)


def commands(block: str) -> list[str]:
    """A block's commands as the shell reads them: continued lines joined, blank lines and
    comment lines left out."""
    joined = re.sub(r"\s*\\\n\s*", " ", block)
    return [c for c in (line.strip() for line in joined.splitlines()) if c and c[0] != "#"]


def repeated_in_the_docs(doc: Path, block: str) -> bool:
    """Whether every command of a README.md block is, as written, a command of a block of the
    documents under docs/, each of which runs (here, or in the test RUN_BY_THEIR_TEST or
    run_elsewhere names): the README's tour shows the studies' first commands, and running
    them twice ran the same sweeps and studies twice (sweeps 19, rio 11 CPU s)."""
    if doc.name != "README.md":
        return False
    others = [d for d in DOCUMENTS if d.parent.name == "docs"]
    shown = {c for d in others for _, b in command_blocks(d) for c in commands(b)}
    return bool(commands(block)) and all(c in shown for c in commands(block))


def blocks_run_here(doc: Path) -> list[tuple[int, str]]:
    return [(line, b) for line, b in command_blocks(doc) if not repeated_in_the_docs(doc, b)]


def needs_root(block: str) -> bool:
    return "qoslab lab device create" in block or "qoslab lab sched" in block


def uses_make(block: str) -> bool:
    return re.search(r"^make ", block, re.M) is not None


def shares_the_machine(doc: Path) -> bool:
    """Whether the document's commands write into the checkout itself (`make`) or set up loop
    devices: two such documents at once would write into each other's out/ or race for a free
    loop device, so they run one after another (tests/conftest.py)."""
    return any(uses_make(block) or needs_root(block) for _, block in command_blocks(doc))


def lab_available() -> bool:
    return os.geteuid() == 0 and shutil.which("losetup") is not None


def reader_folder(tmp_path: Path) -> Path:
    """A folder holding the checkout's files (not its outputs) and the reader's own."""
    work = tmp_path / "work"
    work.mkdir()
    for entry in ROOT.iterdir():
        if entry.name not in ("out", "target", ".git"):
            (work / entry.name).symlink_to(entry)
    for name, content in READER_FILES.items():
        (work / name).write_text(content)
        (work / name).chmod(0o755)
    (work / "my.blkparse.txt").write_text(blkparse_trace())
    return work


# `make test` is this suite: it is resolved, not run again.
MAKE = (
    'make() { if [ "$*" = test ]; then command make -n test >/dev/null; '
    'else command make "$@"; fi; }'
)


@pytest.fixture(scope="module")
def guest_cache() -> Path:
    """The guest kernel's download cache (docs/vm.md, docs/fs.md): the one the reader has, which
    `make lint` (the kernel modules' build) and `make test-vm` use too, so that the suite fetches
    and unpacks the packages once and later boots reuse the KVM probe's verdict kept there (a new
    HOME must not fetch them again for every document). Fetches into it at the same moment (a
    document on each test worker beside the lint lane's) take turns: the first downloads and
    unpacks, the others wait on the cache's lock and find it complete (python/qoslab/vm/
    packages.py; two at once into a half-made cache: tests/test_vm_cache.py)."""
    return cache_root().parent


def reader_env(tmp_path: Path, guest_cache: Path) -> dict:
    """The reader's environment: the `qoslab` command on PATH, a home and a state folder of
    their own, the guest kernel's cache."""
    return {
        **os.environ,
        "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}",
        "QOSLAB_STATE_DIR": str(tmp_path / "state"),
        "HOME": str(tmp_path),
        "QOSLAB_CACHE_DIR": str(guest_cache),
    }


@pytest.mark.parametrize("doc", [d for d in DOCUMENTS if runs_here(d)], ids=lambda d: d.name)
def test_every_command_block_runs(doc, tmp_path, guest_cache):
    blocks = blocks_run_here(doc)
    work = reader_folder(tmp_path)
    env = reader_env(tmp_path, guest_cache)
    try:
        ran = run_blocks(doc, blocks, work, env)
    finally:
        # Whatever a failed block left behind: qoslab's own loop devices and files only.
        subprocess.run(
            [Path(sys.executable).parent / "qoslab", "lab", "device", "remove"],
            env=env,
            capture_output=True,
        )
    assert ran > 0 or not lab_available()


def run_blocks(doc: Path, blocks: list[tuple[int, str]], work: Path, env: dict) -> int:
    ran = 0
    for line, block in blocks:
        if needs_root(block) and not lab_available():
            continue
        script = f"set -euo pipefail\n{MAKE}\n{block}"
        done = subprocess.run(
            ["bash", "-c", script],
            cwd=ROOT if uses_make(block) else work,
            env=env,
            capture_output=True,
            text=True,
            timeout=900,
        )
        assert done.returncode == 0, f"{doc.name}:{line}:\n{block}\n{done.stderr[-3000:]}"
        ran += 1
    return ran
