"""`pip install .` builds a wheel (maturin) that works outside the checkout: in a fresh virtual
environment, from another folder, `qoslab.sim(...)` returns its DataFrame and the `qoslab`
command runs. Slow (a minute or two: the wheel is built and every dependency installed)."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

import qoslab
from conftest import ROOT

pytestmark = pytest.mark.slow

CHECK = """
import pathlib, sys
import qoslab
assert pathlib.Path(sys.argv[1]) in pathlib.Path(qoslab.__file__).parents, qoslab.__file__
df = qoslab.sim(text=sys.argv[2], device="mqsim-default")
print(len(df), df.op[0], df.total_ios[0], repr(df.iops[0]))
"""
JOB = "[r]\nioengine=libaio\ndirect=1\nrw=randread\niodepth=32\nnumber_ios=20000\n"


def test_pip_install_makes_a_working_qoslab_in_a_fresh_venv(tmp_path):
    venv = tmp_path / "fresh"
    env = {k: v for k, v in os.environ.items() if k not in ("VIRTUAL_ENV", "PYTHONPATH")}
    # The wheel is built in the profile the checkout's extension was built in (the Makefile's
    # CORE_PROFILE: release by default, as pip builds it; `make test` builds the nolto profile,
    # the release profile less LTO), so its build reuses the checkout's compiled crates instead
    # of compiling them all again; what this test checks (the wheel's files, dependencies and
    # command, and the same results as the checkout) is the same in either profile.
    env["MATURIN_PEP517_ARGS"] = f"--profile {os.environ.get('CORE_PROFILE', 'release')}"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    # --no-compile: pip installs the same files but does not byte-compile every dependency
    # (pandas, scipy, dask, ...: about half of this install's CPU, 57 -> 30 s measured); what
    # runs below compiles what it imports, as any first import does.
    pip = subprocess.run(
        [
            venv / "bin" / "pip",
            "install",
            "--quiet",
            "--no-compile",
            "-c",
            ROOT / "requirements.txt",
            ROOT,
        ],
        capture_output=True,
        text=True,
        env=env,
        cwd=tmp_path,
    )
    assert pip.returncode == 0, pip.stderr[-3000:]
    done = subprocess.run(
        [venv / "bin" / "python", "-c", CHECK, str(venv), JOB],
        capture_output=True,
        text=True,
        env=env,
        cwd=tmp_path,
    )
    assert done.returncode == 0, done.stderr
    # The installed wheel simulates what the checkout does, to the last bit.
    here = qoslab.sim(text=JOB, device="mqsim-default")
    assert done.stdout.split() == ["1", "read", "20000", repr(here.iops[0])]
    command = subprocess.run(
        [
            venv / "bin" / "qoslab",
            "sim",
            "--name=x",
            "--direct=1",
            "--number_ios=100",
            "--output-format=terse",
        ],
        capture_output=True,
        text=True,
        env=env,
        cwd=tmp_path,
    )
    assert command.returncode == 0, command.stderr
    assert command.stdout.startswith("3;fio-3.33 (qoslab-sim ")
