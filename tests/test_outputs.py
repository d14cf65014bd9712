"""Outputs appear whole or not at all, with the permissions an ordinary write would give."""

from __future__ import annotations

import ast
import os
import stat

import pytest

from conftest import ROOT
from qoslab.errors import InputError
from qoslab.outputs import earlier_output, staged_dir, write_file, write_files

SEED_002 = ROOT / "configs" / "nvmelite" / "seeds" / "seed_002.json"


def mode(path) -> int:
    return stat.S_IMODE(os.stat(path).st_mode)


def never(_):
    return False


def test_files_get_the_umask_permissions_not_tempfiles_0600(tmp_path):
    target = write_file(tmp_path / "a.txt", "hello")
    assert target.read_text() == "hello"
    assert mode(target) == 0o666 & ~current_umask()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.txt"]


def test_a_failing_set_of_files_leaves_nothing_and_keeps_the_old_file(tmp_path):
    (tmp_path / "log").write_text("old")
    with pytest.raises(InputError, match=r"missing/x\.sched: cannot write here"):
        write_files({tmp_path / "log": b"new", tmp_path / "missing" / "x.sched": b"s"})
    assert (tmp_path / "log").read_text() == "old"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["log"]


def test_staged_dir_publishes_only_on_success(tmp_path):
    out = tmp_path / "deep" / "out"
    with (
        pytest.raises(RuntimeError),
        staged_dir(out, is_earlier_output=never, refusal="no") as tmp,
    ):
        (tmp / "half.csv").write_text("1")
        raise RuntimeError("interrupted")
    # Neither the output nor the parents created for it remain.
    assert list(tmp_path.iterdir()) == []

    with staged_dir(out, is_earlier_output=never, refusal="no") as tmp:
        (tmp / "runs.csv").write_text("1")
    assert (out / "runs.csv").read_text() == "1"
    assert mode(out) == 0o777 & ~current_umask()
    assert sorted(p.name for p in out.parent.iterdir()) == ["out"]


def test_staged_dir_replaces_only_an_earlier_output(tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    (out / "precious").write_text("keep")
    with (
        pytest.raises(InputError, match="--out: not ours"),
        staged_dir(out, is_earlier_output=lambda d: (d / "runs.csv").exists(), refusal="not ours"),
    ):
        raise AssertionError("the body must not run")
    assert (out / "precious").read_text() == "keep"

    (out / "runs.csv").write_text("old")
    with staged_dir(out, is_earlier_output=lambda d: (d / "runs.csv").exists(), refusal="x") as t:
        (t / "runs.csv").write_text("new")
    assert sorted(p.name for p in out.iterdir()) == ["runs.csv"]
    assert (out / "runs.csv").read_text() == "new"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out"]


def test_an_earlier_output_holds_every_file_its_command_always_writes(tmp_path):
    rule = earlier_output("runs.parquet", "meta.json")
    (tmp_path / "runs.parquet").write_text("x")
    assert not rule(tmp_path)  # one of the two: a user's folder, not ours
    (tmp_path / "meta.json").mkdir()
    assert not rule(tmp_path)  # a folder of that name is not the file the command writes
    (tmp_path / "meta.json").rmdir()
    (tmp_path / "meta.json").write_text("{}")
    assert rule(tmp_path)
    with pytest.raises(ValueError):
        earlier_output()


def test_every_command_uses_the_one_earlier_output_rule():
    """Each `staged_dir(...)` in the package names its command's files through
    `earlier_output(...)`: no command decides by a rule of its own what it may replace."""
    package = ROOT / "python" / "qoslab"
    calls, own = 0, []
    for path in sorted(package.rglob("*.py")):
        rel = path.relative_to(package).as_posix()
        for node in ast.walk(ast.parse(path.read_text())):
            if not (isinstance(node, ast.Call) and getattr(node.func, "id", "") == "staged_dir"):
                continue
            calls += 1
            rule = next(k.value for k in node.keywords if k.arg == "is_earlier_output")
            uses = isinstance(rule, ast.Call) and getattr(rule.func, "id", "") == "earlier_output"
            if not uses:
                own.append(f"{rel}:{node.lineno}")
    assert calls >= 10 and own == []


def test_matrix_report_is_world_readable_under_umask_022(qoslab, tmp_path):
    (tmp_path / "seeds").mkdir()
    (tmp_path / "seeds" / "seed_002.json").write_bytes(SEED_002.read_bytes())
    config = tmp_path / "c.yaml"
    config.write_text(
        'seeds: ["seeds/seed_002.json"]\npolicies: [FIFO]\nbounds: ["0"]\nfaults: [NONE]\n'
        'schedule_seeds: "0-1"\nscheduler_version: "v1.0"\n'
    )
    done = qoslab(
        "nvmelite", "matrix", config, "--out", tmp_path / "out", preexec_fn=lambda: os.umask(0o022)
    )
    assert done.returncode == 0, done.stderr
    assert mode(tmp_path / "out") == 0o755
    assert mode(tmp_path / "out" / "report.html") == 0o644
    assert mode(tmp_path / "out" / "runs.csv") == 0o644


def current_umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def test_a_device_node_is_written_in_place_never_replaced(tmp_path):
    # Renaming a temporary file over /dev/null would turn it into a plain file for everyone.
    before = os.stat("/dev/null")
    write_file("/dev/null", "discarded")
    after = os.stat("/dev/null")
    assert stat.S_ISCHR(after.st_mode) and after.st_rdev == before.st_rdev
    assert after.st_ino == before.st_ino
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    reader = os.open(fifo, os.O_RDONLY | os.O_NONBLOCK)
    write_file(fifo, "through the pipe")
    assert os.read(reader, 100) == b"through the pipe"
    os.close(reader)
    assert stat.S_ISFIFO(os.stat(fifo).st_mode)


def test_sim_outputs_to_dev_null_leave_the_device_node(qoslab, tmp_path):
    before = os.stat("/dev/null")
    job = tmp_path / "job.fio"
    job.write_text("[r]\ndirect=1\nrw=randread\nbs=4k\nsize=1m\nnumber_ios=1000\n")
    done = qoslab(
        "sim", job, "--output-format", "json", "--output", "/dev/null", "--timeseries", "/dev/null"
    )
    assert done.returncode == 0, done.stderr
    after = os.stat("/dev/null")
    assert stat.S_ISCHR(after.st_mode) and after.st_ino == before.st_ino


def test_a_symbolic_link_is_followed_and_stays_a_link(tmp_path):
    (tmp_path / "real.log").write_text("old")
    (tmp_path / "link.log").symlink_to("real.log")
    write_file(tmp_path / "link.log", "new")
    assert (tmp_path / "link.log").is_symlink()
    assert (tmp_path / "real.log").read_text() == "new"
