"""A plain file is a target without root: the study runs as an unprivileged user.

Run as root, the test drops to `nobody` in a forked child (the Python installation may sit
under a directory `nobody` cannot read, so every module is imported before the switch).
"""

from __future__ import annotations

import contextlib
import importlib
import io
import os
import pkgutil
import shutil
import sys
import tempfile
import traceback
import warnings
from pathlib import Path

import pandas as pd

NOBODY = 65534
_NOT_IMPORTABLE = {
    "antigravity",
    "this",
    "idlelib",
    "tkinter",
    "turtle",
    "turtledemo",
    "__main__",
    "pydoc_data",
    "lib2to3",
    "ensurepip",
    "venv",
}


def _preload_everything() -> None:
    with (
        contextlib.redirect_stdout(io.StringIO()),
        contextlib.redirect_stderr(io.StringIO()),
        warnings.catch_warnings(),
    ):
        warnings.simplefilter("ignore")
        for name in sorted(sys.stdlib_module_names - _NOT_IMPORTABLE):
            with contextlib.suppress(Exception):
                importlib.import_module(name)
        import encodings  # codecs are looked up lazily, by name

        for codec in pkgutil.iter_modules(encodings.__path__):
            with contextlib.suppress(Exception):
                importlib.import_module(f"encodings.{codec.name}")
    for name in (
        "qoslab.cli",
        "qoslab.lab.cli",
        "qoslab.lab.study",
        "qoslab.lab.figures",
        "qoslab.lab.report",
        "pyarrow.parquet",
        "matplotlib.pyplot",
    ):
        importlib.import_module(name)


def run_study_as_nobody(args: list[str], home: str) -> int:
    from qoslab.cli import main

    _preload_everything()
    pid = os.fork()
    if pid == 0:  # child: never returns into pytest
        code = 1
        try:
            os.setgroups([])
            os.setresgid(NOBODY, NOBODY, NOBODY)
            os.setresuid(NOBODY, NOBODY, NOBODY)
            os.environ.pop("QOSLAB_STATE_DIR", None)
            os.environ.update(HOME=home, XDG_RUNTIME_DIR=home)
            main(args)
            code = 0
        except SystemExit as exit_:
            code = exit_.code if isinstance(exit_.code, int) else 1
        except BaseException:
            traceback.print_exc()
        finally:
            os._exit(code)
    _, status = os.waitpid(pid, 0)
    return os.waitstatus_to_exitcode(status)


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
            "--quiet",
            "--out",
            str(out),
        ]
        if os.geteuid() == 0:
            os.chown(work, NOBODY, NOBODY)
            assert run_study_as_nobody(args, str(work)) == 0
            assert out.stat().st_uid == NOBODY
        else:
            done = qoslab(*args, env={**os.environ, "XDG_RUNTIME_DIR": str(work)})
            assert done.returncode == 0, done.stderr
        table = pd.read_parquet(out / "results.parquet")
        assert table.qd.tolist() == [1, 4]
        assert (table.iops > 0).all()
        assert not target.exists()  # the scratch file is gone
        assert (work / "qoslab" / "created.json").read_text().strip() == "[]"
    finally:
        shutil.rmtree(work)


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
