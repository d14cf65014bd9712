"""qoslab writes only to what it created, or to the one device `--destructive-ok` names.

Each rule is tried on a real loop device: mounted, holding a file system or a partition table,
made outside qoslab. Every device and file a test makes is removed in a `finally`.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from lab_helpers import (
    foreign_loop,
    interrupt_lab,
    lab_env,
    mounted,
    needs_root,
    qoslab_device,
    registry_entries,
)

pytestmark = [pytest.mark.root, needs_root]

# The rules are about what a study writes to, not its report: the tables alone (--no-report), as
# the figures took most of each study's CPU (test_lab_study.py and docs/lab.md draw them).
QUICK = ["--depths", "1", "--runtime", "1s", "--ramp", "0s", "--quiet", "--no-report"]


def study(qoslab, state, target, out, *extra):
    return qoslab(
        "lab",
        "study",
        "qd-sweep",
        "--target",
        target,
        "--out",
        out,
        *QUICK,
        *extra,
        env=lab_env(state),
    )


def test_a_mounted_device_is_refused_even_with_destructive_ok(qoslab, tmp_path):
    state = tmp_path / "state"
    with (
        foreign_loop(tmp_path, "fs.img", size_mb=32) as device,
        mounted(device, tmp_path / "mnt") as mnt,
    ):
        (mnt / "keep.txt").write_text("precious")
        for extra in ([], ["--destructive-ok", device]):
            done = study(qoslab, state, device, tmp_path / "out", *extra)
            assert done.returncode == 2
            assert f"{device}: refusing a device in use: mounted on {mnt}" in done.stderr
        assert (mnt / "keep.txt").read_text() == "precious"
    assert not (tmp_path / "out").exists()


def test_a_device_qoslab_did_not_create_needs_destructive_ok_naming_it(qoslab, tmp_path):
    state = tmp_path / "state"
    with (
        foreign_loop(tmp_path, "a.img") as device,
        foreign_loop(tmp_path, "b.img") as other,
    ):
        done = study(qoslab, state, device, tmp_path / "out")
        assert done.returncode == 2
        assert "refusing a block device qoslab did not create" in done.stderr
        done = study(qoslab, state, device, tmp_path / "out", "--destructive-ok", other)
        assert done.returncode == 2
        assert "did not create" in done.stderr
        done = study(qoslab, state, device, tmp_path / "out", "--destructive-ok", device)
        assert done.returncode == 0, done.stderr
    meta = json.loads((tmp_path / "out" / "meta.json").read_text())
    assert meta["target"]["created_by_qoslab"] is False
    assert meta["target"]["preconditioned_by_this_run"] is True


def write_mbr(device: str) -> None:
    """A DOS partition table with one Linux partition from sector 2048 (as fdisk writes it)."""
    sector = bytearray(512)
    entry = bytes([0x00, 0, 0, 0, 0x83, 0, 0, 0]) + (2048).to_bytes(4, "little")
    sector[446 : 446 + 16] = entry + (8192).to_bytes(4, "little")
    sector[510:512] = b"\x55\xaa"
    fd = os.open(device, os.O_WRONLY)
    try:
        os.pwrite(fd, bytes(sector), 0)
        os.fsync(fd)
    finally:
        os.close(fd)


def test_signatures_are_refused_on_qoslabs_own_device(qoslab, tmp_path):
    state = tmp_path / "state"
    with qoslab_device(qoslab, state, tmp_path / "backing.img", size="32M") as device:
        write_mbr(device)
        done = study(qoslab, state, device, tmp_path / "out")
        assert done.returncode == 2
        assert "refusing a device that holds data (dos at offset 0x1fe" in done.stderr
        subprocess.run(["mkfs.ext4", "-q", "-F", device], check=True, capture_output=True)
        done = study(qoslab, state, device, tmp_path / "out")
        assert done.returncode == 2
        assert "ext4 at offset 0x438" in done.stderr
        assert f"pass --destructive-ok {device}" in done.stderr
        # The file system is still there: nothing was written.
        probe = subprocess.run(
            ["blkid", "-p", "-o", "value", "-s", "TYPE", device], capture_output=True, text=True
        )
        assert probe.stdout.strip() == "ext4"
    assert registry_entries(state) == []


def test_a_new_file_target_is_written_in_full_and_removed_afterwards(qoslab, tmp_path):
    state, target = tmp_path / "state", tmp_path / "scratch.img"
    done = study(qoslab, state, target, tmp_path / "out", "--size", "32M")
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == f"wrote {tmp_path / 'out'}/results.csv"
    assert (tmp_path / "out" / "summary.json").exists()
    assert not (tmp_path / "out" / "report.html").exists()
    assert not (tmp_path / "out" / "figures").exists()
    assert not target.exists()
    assert registry_entries(state) == []
    done = study(qoslab, state, target, tmp_path / "out", "--size", "32M", "--keep-target")
    assert done.returncode == 0, done.stderr
    assert target.stat().st_size == 32 << 20
    assert [e["file"] for e in registry_entries(state)] == [str(target)]
    # qoslab's own file is reused without --destructive-ok, then removed on request.
    done = study(qoslab, state, target, tmp_path / "out2", "--size", "32M", "--keep-target")
    assert done.returncode == 0, done.stderr
    done = qoslab("lab", "device", "remove", target, env=lab_env(state))
    assert f"removed {target}" in done.stdout
    assert not target.exists()


def test_an_existing_file_needs_destructive_ok_and_is_filled_when_sparse(qoslab, tmp_path):
    state, target = tmp_path / "state", tmp_path / "user.img"
    with open(target, "wb") as f:
        f.truncate(16 << 20)  # sparse: reads of it would never reach a device
    done = study(qoslab, state, target, tmp_path / "out", "--size", "16M")
    assert done.returncode == 2
    assert "refusing to write into a file qoslab did not create" in done.stderr
    done = study(
        qoslab, state, target, tmp_path / "out", "--size", "16M", "--destructive-ok", target
    )
    assert done.returncode == 0, done.stderr
    st = target.stat()
    assert st.st_blocks * 512 >= st.st_size == 16 << 20
    assert target.exists()  # the user's file stays; qoslab did not create it


def test_sched_needs_a_block_device(qoslab, tmp_path):
    done = qoslab(
        "lab",
        "sched",
        "--target",
        tmp_path / "f.img",
        "--out",
        tmp_path / "o",
        env=lab_env(tmp_path / "state"),
    )
    assert done.returncode == 2
    assert "needs a block device" in done.stderr
    assert not Path(tmp_path / "f.img").exists()


def test_ctrl_c_during_a_study_stops_fio_and_removes_the_scratch_file(tmp_path):
    state, target, out = tmp_path / "state", tmp_path / "scratch.img", tmp_path / "out"
    done = interrupt_lab(
        [
            "lab",
            "study",
            "qd-sweep",
            "--target",
            target,
            "--size",
            "32M",
            "--depths",
            "1,2,4",
            "--runtime",
            "5s",
            "--ramp",
            "0s",
            "--out",
            out,
            "--quiet",
        ],
        state,
        lambda: bool(list(tmp_path.glob(".out.partial-*/jobs/qd-sweep/*.fio"))),
        settle_s=1.0,
    )
    assert done.returncode == 130, done.stderr
    assert not target.exists()
    assert not out.exists() and not list(tmp_path.glob(".out.*"))
    assert registry_entries(state) == []
    assert subprocess.run(["pgrep", "-f", str(target)], capture_output=True).stdout == b""
