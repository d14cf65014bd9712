"""`qoslab lab device create|remove`: loop devices over fully written files, cleaned up exactly."""

from __future__ import annotations

import os
import signal
import subprocess
from pathlib import Path

import pytest

from lab_helpers import (
    foreign_loop,
    interrupt_lab,
    lab_env,
    loops_backed_by,
    needs_root,
    qoslab_device,
    registry_entries,
)

pytestmark = [pytest.mark.root, needs_root]


def test_create_writes_the_backing_file_in_full_and_turns_direct_io_on(qoslab, tmp_path):
    state, backing = tmp_path / "state", tmp_path / "backing.img"
    with qoslab_device(qoslab, state, backing, size="64M") as device:
        st = os.stat(backing)
        assert st.st_size == 64 << 20
        assert st.st_blocks * 512 >= st.st_size  # no holes: every block allocated
        fd = os.open(backing, os.O_RDONLY)
        try:
            assert os.lseek(fd, 0, os.SEEK_HOLE) == st.st_size
            assert os.pread(fd, 4096, 32 << 20) != bytes(4096)  # data, not zeros
        finally:
            os.close(fd)
        name = Path(device).name
        assert Path(f"/sys/block/{name}/loop/dio").read_text().strip() == "1"
        assert loops_backed_by(backing) == [device]
        (entry,) = registry_entries(state)
        assert (entry["loop"], entry["file"], entry["inode"]) == (device, str(backing), st.st_ino)
        listed = qoslab("lab", "device", "list", env=lab_env(state))
        assert device in listed.stdout
        done = qoslab("lab", "device", "remove", device, env=lab_env(state))
        assert done.returncode == 0, done.stderr
        assert f"detached {device}" in done.stdout
    assert loops_backed_by(backing) == []
    assert not backing.exists()
    assert registry_entries(state) == []


def test_remove_refuses_what_qoslab_did_not_create(qoslab, tmp_path):
    state = tmp_path / "state"
    with foreign_loop(tmp_path, "foreign.img") as device:
        done = qoslab("lab", "device", "remove", device, env=lab_env(state))
        assert done.returncode == 2
        assert "qoslab did not create this" in done.stderr
        assert loops_backed_by(tmp_path / "foreign.img") == [device]  # still attached


def test_create_refuses_an_existing_backing_file_and_tmpfs(qoslab, tmp_path):
    state = tmp_path / "state"
    existing = tmp_path / "precious.img"
    existing.write_bytes(b"data")
    done = qoslab(
        "lab", "device", "create", "--size", "16M", "--backing", existing, env=lab_env(state)
    )
    assert done.returncode == 2
    assert "already exists" in done.stderr
    assert existing.read_bytes() == b"data"
    done = qoslab(
        "lab",
        "device",
        "create",
        "--size",
        "16M",
        "--backing",
        "/dev/shm/qoslab-test.img",
        env=lab_env(state),
    )
    assert done.returncode == 2
    assert "tmpfs" in done.stderr
    assert not Path("/dev/shm/qoslab-test.img").exists()
    assert registry_entries(state) == []


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM], ids=["ctrl-c", "sigterm"])
def test_ctrl_c_or_sigterm_while_writing_the_backing_file_leaves_nothing(tmp_path, sig):
    state, backing = tmp_path / "state", tmp_path / "big.img"
    try:
        done = interrupt_lab(
            ["lab", "device", "create", "--size", "3G", "--backing", backing, "--quiet"],
            state,
            lambda: backing.exists() and backing.stat().st_size >= (64 << 20),
            sig=sig,
        )
    finally:
        for dev in loops_backed_by(backing):
            subprocess.run(["losetup", "--detach", dev], check=False)
    assert done.returncode == 130, done.stderr
    assert not backing.exists()
    assert registry_entries(state) == []
