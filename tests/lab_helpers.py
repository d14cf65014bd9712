"""Helpers for the lab's tests on real loop devices: each cleans up after itself, even on failure.

The tests keep qoslab's registry in their own directory (QOSLAB_STATE_DIR), so they never
see or touch what a user's qoslab created.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from conftest import QOSLAB, default_sigint

needs_root = pytest.mark.skipif(os.geteuid() != 0, reason="loop devices and sysfs need root")


def lab_env(state_dir: Path) -> dict[str, str]:
    return {**os.environ, "QOSLAB_STATE_DIR": str(state_dir)}


def queue(device: str) -> Path:
    """The disk's request queue in sysfs."""
    return Path("/sys/block") / Path(device).name / "queue"


def active_scheduler(device: str) -> str:
    text = (queue(device) / "scheduler").read_text()
    return text[text.index("[") + 1 : text.index("]")]


def interrupt_lab(
    args: list,
    state_dir: Path,
    ready: Callable[[], bool],
    *,
    settle_s: float = 0.0,
    sig: int = signal.SIGINT,
    within_s: float = 30.0,
) -> subprocess.CompletedProcess:
    """Runs `qoslab ARGS` with the lab's state in STATE_DIR and sends it `sig` (Ctrl-C's SIGINT,
    or SIGKILL for a `kill -9`) once `ready()` holds (within `within_s`, while the command still
    runs) and `settle_s` more seconds have passed; returns how the command ended. It is killed
    if it does not end."""
    proc = subprocess.Popen(
        [QOSLAB, *args],
        env=lab_env(state_dir),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        preexec_fn=default_sigint,
    )
    try:
        deadline = time.monotonic() + within_s
        while not ready():
            assert proc.poll() is None, proc.communicate()
            assert time.monotonic() < deadline
            time.sleep(0.05)
        time.sleep(settle_s)
        proc.send_signal(sig)
        out, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    return subprocess.CompletedProcess(proc.args, proc.returncode, out, err)


def loops_backed_by(path: Path) -> list[str]:
    """Loop devices the kernel says are attached to `path` (by inode, as losetup reports)."""
    out = subprocess.run(
        ["losetup", "--list", "--json", "--output", "NAME,BACK-FILE,BACK-INO"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    rows = json.loads(out).get("loopdevices", []) if out.strip() else []
    try:
        ino = os.stat(path).st_ino
    except FileNotFoundError:
        ino = None
    return [
        r["name"]
        for r in rows
        if (r.get("back-file") or "").startswith(str(path)) or str(r.get("back-ino")) == str(ino)
    ]


@contextlib.contextmanager
def foreign_loop(tmp_path: Path, name: str, size_mb: int = 16, fill: bool = True):
    """A loop device made by the test itself, outside qoslab (losetup directly)."""
    backing = tmp_path / name
    with open(backing, "wb") as f:
        if fill:
            for _ in range(size_mb):
                f.write(os.urandom(1 << 20))
        else:
            f.truncate(size_mb << 20)
    device = None
    try:
        device = subprocess.run(
            ["losetup", "--find", "--show", str(backing)],
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
        yield device
    finally:
        if device:
            subprocess.run(["losetup", "--detach", device], check=False)
        backing.unlink(missing_ok=True)


@contextlib.contextmanager
def mounted(device: str, mount_point: Path):
    """Puts an ext4 file system on `device` and mounts it for the length of the block."""
    subprocess.run(["mkfs.ext4", "-q", "-F", device], check=True, capture_output=True)
    mount_point.mkdir(exist_ok=True)
    subprocess.run(["mount", device, str(mount_point)], check=True)
    try:
        yield mount_point
    finally:
        subprocess.run(["umount", str(mount_point)], check=False)


@contextlib.contextmanager
def qoslab_device(qoslab, state: Path, backing: Path, size: str = "256M"):
    """`qoslab lab device create`, and `device remove` afterwards whatever happens."""
    done = qoslab(
        "lab",
        "device",
        "create",
        "--size",
        size,
        "--backing",
        backing,
        "--quiet",
        env=lab_env(state),
    )
    assert done.returncode == 0, done.stderr
    device = done.stdout.strip()
    try:
        yield device
    finally:
        qoslab("lab", "device", "remove", env=lab_env(state))
        for dev in loops_backed_by(backing):  # only if qoslab failed to: never leave one behind
            subprocess.run(["losetup", "--detach", dev], check=False)
        backing.unlink(missing_ok=True)


def registry_entries(state: Path) -> list[dict]:
    path = state / "created.json"
    return json.loads(path.read_text()) if path.exists() else []
