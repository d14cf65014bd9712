"""After a `kill -9` of a lab command (no clean-up runs), `qoslab lab restore` (or the next lab
command) puts the machine back: the scheduler as it was, no fio left, no partial folder."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from pathlib import Path

import pytest

from conftest import QOSLAB
from lab_helpers import (
    active_scheduler,
    interrupt_lab,
    lab_env,
    needs_root,
    qoslab_device,
    queue,
    registry_entries,
)

pytestmark = [pytest.mark.root, needs_root]


def fio_running(folder: Path) -> list[str]:
    """The fio processes whose command line names a file under `folder`."""
    found = []
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            argv = (proc / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if argv and os.path.basename(argv[0]) == b"fio" and str(folder).encode() in b" ".join(argv):
            found.append(proc.name)
    return found


def _killed_mid_run(device: str, state: Path, out: Path, schedulers: str) -> None:
    """Starts `lab sched` and kills it (-9) while fio runs on the second scheduler."""
    first = schedulers.split(",")[0]
    interrupt_lab(
        ["lab", "sched", "--target", device, "--schedulers", schedulers,
         "--reps", "1", "--runtime", "20s", "--ramp", "0s", "--out", out, "--quiet"],
        state,
        lambda: active_scheduler(device) == first and bool(fio_running(out.parent)),
        settle_s=0.5,
        sig=signal.SIGKILL,
        within_s=60,
    )  # fmt: skip


def test_restore_after_kill_9_of_lab_sched(qoslab, tmp_path):
    state = tmp_path / "state"
    with qoslab_device(qoslab, state, tmp_path / "backing.img", size="128M") as device:
        (queue(device) / "scheduler").write_text("mq-deadline")
        (queue(device) / "iosched" / "read_expire").write_text("200")
        out = tmp_path / "sched"
        _killed_mid_run(device, state, out, "kyber,bfq")
        # What the kill left: a switched scheduler, fio still doing I/O, a partial folder.
        assert active_scheduler(device) == "kyber"
        assert fio_running(tmp_path)
        assert list(tmp_path.glob(".sched.partial-*"))
        journal = json.loads((state / "journal.json").read_text())
        assert {e["kind"] for e in journal} == {"scheduler", "fio", "partial"}

        done = qoslab("lab", "restore", env=lab_env(state))
        assert done.returncode == 0, done.stderr
        assert active_scheduler(device) == "mq-deadline"
        assert (queue(device) / "iosched" / "read_expire").read_text().strip() == "200"
        assert not fio_running(tmp_path)
        assert not list(tmp_path.glob(".sched.partial-*"))
        assert not out.exists()
        assert "kyber -> mq-deadline" in done.stdout
        assert json.loads((state / "journal.json").read_text()) == []
        again = qoslab("lab", "restore", env=lab_env(state), check=True)
        assert again.stdout.strip() == "nothing to restore"
        # qoslab's own device is still there, and still qoslab's.
        assert [e["loop"] for e in registry_entries(state)] == [device]


def test_the_next_lab_command_restores_first_and_keeps_the_true_original(qoslab, tmp_path):
    # The next `lab sched` once saved the switched scheduler as the original and restored that.
    state = tmp_path / "state"
    with qoslab_device(qoslab, state, tmp_path / "backing.img", size="128M") as device:
        (queue(device) / "scheduler").write_text("none")
        _killed_mid_run(device, state, tmp_path / "first", "mq-deadline,kyber")
        assert active_scheduler(device) == "mq-deadline"
        done = qoslab(
            "lab", "sched", "--target", device, "--schedulers", "bfq", "--reps", "1",
            "--runtime", "1s", "--ramp", "0s", "--out", tmp_path / "second", "--quiet",
            env=lab_env(state),
        )  # fmt: skip
        assert done.returncode == 0, done.stderr
        assert "undone after a killed qoslab lab command" in done.stderr
        assert active_scheduler(device) == "none"
        meta = json.loads((tmp_path / "second" / "meta.json").read_text())
        assert meta["environment_before"]["scheduler"] == "none"
        assert not fio_running(tmp_path)
        assert not list(tmp_path.glob(".first.partial-*"))


def test_a_device_create_killed_mid_write_is_removed_by_restore(qoslab, tmp_path):
    state = tmp_path / "state"
    backing = tmp_path / "big.img"
    proc = subprocess.Popen(
        [QOSLAB, "lab", "device", "create", "--size", "2G", "--backing", backing, "--quiet"],
        env=lab_env(state),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 30
        while not (backing.exists() and backing.stat().st_size > 0):
            assert proc.poll() is None
            assert time.monotonic() < deadline
            time.sleep(0.02)
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait()
    assert backing.exists() and registry_entries(state)
    done = qoslab("lab", "restore", env=lab_env(state), check=True)
    assert f"removed {backing}" in done.stdout
    assert not backing.exists()
    assert registry_entries(state) == []


def test_a_running_commands_changes_are_left_alone(qoslab, tmp_path):
    from qoslab.lab.journal import Journal

    state = tmp_path / "state"
    Journal(state).record("partial", path=str(tmp_path / ".x.partial-1-abc"))
    (tmp_path / ".x.partial-1-abc").mkdir()
    done = qoslab("lab", "restore", env=lab_env(state), check=True)
    assert "left alone: a partial change" in done.stdout
    assert (tmp_path / ".x.partial-1-abc").is_dir()
