"""A plain file is a target without root: the study runs as an unprivileged user.

Run as root, the test starts the `qoslab` command as `nobody` in a process of its own. The
checkout or the Python installation may sit under a directory `nobody` cannot enter (a clone
under /root or `mktemp -d`, Python under /root/.pyenv); for that process only, each such
directory is replaced, in a private mount namespace, by an empty one that anybody may enter,
holding the entries on the way at their usual paths. Nothing changes for other processes.
"""

from __future__ import annotations

import json
import os
import shlex
import shutil
import stat
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from conftest import QOSLAB, ROOT
from qoslab import lab

NOBODY = 65534


def _closed_ancestors(paths: list[Path]) -> dict[Path, set[str]]:
    """Directories on the way to `paths` that others may not enter, with the entries needed."""
    closed: dict[Path, set[str]] = {}
    for path in paths:
        for parent in reversed(path.parents):
            child = path.relative_to(parent).parts[0]
            if not os.stat(parent).st_mode & stat.S_IXOTH:
                closed.setdefault(parent, set()).add(child)
    return closed


def _as_nobody(command: list[str], env: dict[str, str]) -> subprocess.CompletedProcess:
    """Runs `command` as nobody, with the checkout and the interpreter reachable."""
    needed = [ROOT, Path(os.path.realpath(sys.base_prefix)), Path(sys.prefix).resolve()]
    closed = _closed_ancestors(needed)
    lines = ["set -eu"]
    if closed:
        if shutil.which("unshare") is None:
            pytest.skip(f"{', '.join(map(str, closed))} closed to others and no unshare(1)")
        stage = tempfile.mkdtemp(prefix="qoslab-stage-")
        lines.append("mount --make-rprivate /")
        # Outermost first: a deeper closed directory is reached through the mounts above it.
        for i, (folder, children) in enumerate(
            sorted(closed.items(), key=lambda c: len(c[0].parts))
        ):
            d, s = shlex.quote(str(folder)), shlex.quote(f"{stage}/{i}")
            lines += [
                f"mkdir {s}",
                f"mount --bind {d} {s}",
                f"mount -t tmpfs -o mode=0755 qoslab {d}",
            ]
            for child in sorted(children):
                c = shlex.quote(child)
                lines += [f"mkdir {d}/{c}", f"mount --bind {s}/{c} {d}/{c}"]
    drop = "setpriv --reuid=65534 --regid=65534 --clear-groups"
    lines.append(f"exec {drop} {shlex.join(command)}")
    wrapper = (
        ["unshare", "--mount", "sh", "-c", "\n".join(lines)]
        if closed
        else ["sh", "-c", "\n".join(lines)]
    )
    try:
        return subprocess.run(wrapper, env=env, capture_output=True, text=True, timeout=300)
    finally:
        if closed:
            shutil.rmtree(stage, ignore_errors=True)


def test_study_on_a_file_without_root(qoslab):
    # Not pytest's tmp_path: its parents are private to root.
    work = Path(tempfile.mkdtemp(prefix="qoslab-nonroot-"))
    try:
        work.chmod(0o755)
        target, out = work / "data.img", work / "out"
        args = [
            "lab",
            "study",
            "qd-sweep",
            "--target",
            str(target),
            "--size",
            "16M",
            "--depths",
            "1,4",
            "--runtime",
            "1s",
            "--ramp",
            "0s",
            "--out",
            str(out),
        ]
        if os.geteuid() == 0:
            os.chown(work, NOBODY, NOBODY)
            env = {k: v for k, v in os.environ.items() if k != "QOSLAB_STATE_DIR"}
            env.update(HOME=str(work), XDG_RUNTIME_DIR=str(work))
            done = _as_nobody([str(QOSLAB), *args], env)
            assert done.returncode == 0, done.stderr
            assert out.stat().st_uid == NOBODY
        else:
            done = qoslab(*args, env={**os.environ, "XDG_RUNTIME_DIR": str(work)})
            assert done.returncode == 0, done.stderr
        # stderr is a pipe here, not a terminal: no progress bars in it.
        assert "remaining" not in done.stderr and "━" not in done.stderr
        table = lab.results(out)
        assert table.qd.tolist() == [1, 4]
        assert (table.iops > 0).all()
        # Every completion of a run is in its json+ histogram.
        bins = lab.bins(out)
        for row in table.itertuples():
            mine = bins[(bins.source == row.source) & (bins.op == row.op)]
            assert mine[mine.kind == "clat"]["count"].sum() == row.total_ios
        assert not target.exists()  # the scratch file is gone
        assert not (work / "out.store").exists()  # and the default store of its runs
        assert (work / "qoslab" / "created.json").read_text().strip() == "[]"
    finally:
        shutil.rmtree(work)


def test_a_study_started_again_measures_only_the_runs_its_store_lacks(qoslab, tmp_path):
    # A kept store (--store) holds every run's files as they were measured: the same study on
    # the same target with one depth more measures that depth alone, and takes the others'
    # files from the store byte for byte (as a study killed midway and started again does).
    store = tmp_path / "runs.store"
    env = {**os.environ, "QOSLAB_STATE_DIR": str(tmp_path / "state")}
    common = ["lab", "study", "qd-sweep", "--target", tmp_path / "data.img", "--size", "16M"]
    common += ["--runtime", "200ms", "--ramp", "0s", "--store", store, "--no-report"]
    first = qoslab(*common, "--depths", "1", "--out", tmp_path / "a", "--quiet", env=env)
    assert first.returncode == 0, first.stderr
    again = qoslab(*common, "--depths", "1,4", "--out", tmp_path / "b", env=env)
    assert again.returncode == 0, again.stderr
    assert f"1 of 2 runs taken from {store}" in again.stderr
    for name in ("jobs/qd-sweep/randread-4k-qd1.fio", "raw/qd-sweep/randread-4k-qd1.json"):
        assert (tmp_path / "b" / name).read_bytes() == (tmp_path / "a" / name).read_bytes()
    assert lab.results(tmp_path / "b").qd.tolist() == [1, 4]
    meta = json.loads((tmp_path / "b" / "meta.json").read_text())
    assert meta["points"] == {"run": 1, "already_stored": 1}
    assert meta["store"] == str(store) and store.is_dir()


def test_without_fio_the_study_stops_before_writing_anything(qoslab, tmp_path):
    target = tmp_path / "data.img"
    done = qoslab(
        "lab",
        "study",
        "qd-sweep",
        "--target",
        target,
        "--size",
        "16M",
        "--out",
        tmp_path / "out",
        env={**os.environ, "PATH": str(tmp_path), "QOSLAB_STATE_DIR": str(tmp_path)},
    )
    assert done.returncode == 2
    assert "qoslab: error: fio is not installed" in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1
    assert not target.exists() and not (tmp_path / "out").exists()


def test_an_output_directory_that_is_not_qoslabs_is_never_replaced(qoslab, tmp_path):
    precious = tmp_path / "home"
    precious.mkdir()
    (precious / "thesis.tex").write_text("years of work")
    done = qoslab(
        "lab",
        "study",
        "qd-sweep",
        "--target",
        tmp_path / "data.img",
        "--size",
        "16M",
        "--out",
        precious,
        env={**os.environ, "QOSLAB_STATE_DIR": str(tmp_path)},
    )
    assert done.returncode == 2
    assert "is not an earlier qoslab lab output" in done.stderr
    assert (precious / "thesis.tex").read_text() == "years of work"
    assert not (tmp_path / "data.img").exists()


def test_a_missing_name_under_dev_is_no_such_block_device(qoslab, tmp_path):
    done = qoslab(
        "lab",
        "study",
        "qd-sweep",
        "--target",
        "/dev/nvme9n9",
        env={**os.environ, "QOSLAB_STATE_DIR": str(tmp_path)},
    )
    assert done.returncode == 2
    assert done.stderr == "qoslab: error: /dev/nvme9n9: no such block device\n"
    assert not Path("/dev/nvme9n9").exists()
