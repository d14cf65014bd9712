"""A job means what it means in fio: the same file-backed job run by fio 3.33 and by
`qoslab sim` gives the same I/O depth, submission and completion-batch distributions, bytes
and I/O counts, for every engine class and queue option whose outcome does not depend on the
device's timing (docs/workload.md, "Engines and fio's loop").

fio runs each job on a 16 MiB file in a scratch folder with direct I/O; qoslab runs the same
text (its `filename` is a region of the simulated device). Where fio's outcome depends on how
fast the device completes (`iodepth_batch_complete_max` above the minimum: how many
completions wait when fio looks), the case is not here; crates/sim/tests/path/fio_loop.rs
checks those rules on a device of fixed service times. posixaio's getevents takes every
completion it finds, so its cases set `iodepth_batch_complete_min` to the depth: without it
fio itself differs from run to run (five runs of the first case without it: depth 4 from
0.4 % to 3.2 %). fio prints its percentages with six decimals (`%f`), so both sides are
compared at that precision.
"""

from __future__ import annotations

import json
import shutil
import subprocess

import pytest

pytestmark = pytest.mark.skipif(shutil.which("fio") is None, reason="fio is not installed")

BASE = "[global]\nfilename={data}\nsize=16m\nbs=4k\ndirect=1\n"

CASES = {
    # fio's default engine: one I/O at a time whatever iodepth says, no submission latency.
    "psync-at-32": "[p]\nioengine=psync\niodepth=32\nrw=randread\nnumber_ios=2000\n",
    "libaio-at-32": "[a]\nioengine=libaio\niodepth=32\nrw=randread\nnumber_ios=2000\n",
    # A batch goes out whole only while the queue fills ...
    "batch-8": (
        "[a]\nioengine=libaio\niodepth=16\niodepth_batch_submit=8\nrw=randread\nnumber_ios=4000\n"
    ),
    # ... unless iodepth_low lets the queue drain.
    "batch-8-low-8": (
        "[a]\nioengine=libaio\niodepth=16\niodepth_batch_submit=8\niodepth_low=8\n"
        "rw=randread\nnumber_ios=4000\n"
    ),
    "batch-4-low-4": (
        "[a]\nioengine=libaio\niodepth=16\niodepth_batch_submit=4\niodepth_low=4\n"
        "rw=randread\nnumber_ios=4000\n"
    ),
    "complete-min-4": (
        "[a]\nioengine=libaio\niodepth=16\niodepth_batch_submit=8\n"
        "iodepth_batch_complete_min=4\nrw=randread\nnumber_ios=4000\n"
    ),
    # null: one batch in flight.
    "null-at-32": "[n]\nioengine=null\niodepth=32\nrw=randread\nnumber_ios=2000\n",
    "io_uring-at-8": "[u]\nioengine=io_uring\niodepth=8\nrw=randwrite\nnumber_ios=1000\n",
    # posixaio has no commit: each I/O leaves as it is queued, its depth counted in fio's
    # batches; its getevents takes all it finds (here all 8, as the minimum asks).
    "posixaio-batch-4": (
        "[u]\nioengine=posixaio\niodepth=8\niodepth_batch_submit=4\n"
        "iodepth_batch_complete_min=8\nrw=read\nnumber_ios=1000\n"
    ),
    # fio's count of queued I/Os runs across a reap: some are counted at depth 2.
    "posixaio-count-across-reaps": (
        "[u]\nioengine=posixaio\niodepth=6\niodepth_batch_submit=4\n"
        "iodepth_batch_complete_min=6\nrw=randread\nnumber_ios=1000\n"
    ),
    # vsync: adjacent I/Os in one writev ...
    "vsync-vector-of-4": (
        "[v]\nioengine=vsync\niodepth=4\niodepth_batch_submit=4\nrw=write\nnumber_ios=500\n"
    ),
    # ... random ones one call each (the next I/O makes the engine busy) ...
    "vsync-random": (
        "[v]\nioengine=vsync\niodepth=8\niodepth_batch_submit=4\nrw=randwrite\nnumber_ios=500\n"
    ),
    # ... and a call's I/Os that are not reaped before the next call never are: 497 of 500
    # complete, 3 I/Os are never counted at a depth (fio's shares add up to 99.6 %), and
    # total_ios counts all 500, as fio counts an I/O when it queues it.
    "vsync-unreaped-calls": (
        "[v]\nioengine=vsync\niodepth=4\niodepth_batch_submit=3\nrw=read\nnumber_ios=500\n"
    ),
    "loops": "[l]\nioengine=psync\nrw=read\nsize=1m\nloops=3\n",
    # number_ios counts in each loop (30 I/Os here, the offsets running on).
    "loops-number-ios": "[l]\nioengine=psync\nrw=read\nsize=1m\nloops=3\nnumber_ios=10\n",
    # A name in [global] names no job: the section's name is reported.
    "global-name": "[global]\nname=g\n[sec]\nioengine=psync\nrw=read\nnumber_ios=10\n",
    "numjobs": (
        "[c]\nioengine=libaio\niodepth=2\nnumjobs=3\nrw=randread\nnumber_ios=300\ngroup_reporting\n"
    ),
    "stonewalled-sync-engines": (
        "[v]\nioengine=vsync\niodepth=4\nrw=write\nnumber_ios=500\n"
        "[w]\nstonewall\nioengine=pvsync2\nrw=read\nnumber_ios=300\n"
    ),
}


def _r6(d: dict) -> dict:
    return {k: round(v, 6) for k, v in d.items()}


def _summary(text: str) -> list[dict]:
    report = json.loads(text[text.index("{") :])
    out = []
    for job in report["jobs"]:
        row = {
            "job": job["jobname"],
            "iodepth_level": _r6(job["iodepth_level"]),
            "iodepth_submit": _r6(job["iodepth_submit"]),
            "iodepth_complete": _r6(job["iodepth_complete"]),
        }
        for op in ("read", "write"):
            d = job[op]
            row[op] = {
                "io_bytes": d["io_bytes"],
                "total_ios": d["total_ios"],
                "slat_N": d["slat_ns"]["N"],
                "clat_N": d["clat_ns"]["N"],
            }
        out.append(row)
    return out


@pytest.fixture(scope="module")
def data_file(tmp_path_factory):
    folder = tmp_path_factory.mktemp("fio-semantics")
    data = folder / "data"
    data.write_bytes(b"\0" * (16 << 20))
    return data


def _both(qoslab, folder, data, name: str, text: str) -> tuple[str, str]:
    """fio's JSON and qoslab's for the same job text."""
    job = folder / f"{name}.fio"
    job.write_text(BASE.format(data=data) + text)
    real = subprocess.run(
        ["fio", "--output-format=json", str(job)], capture_output=True, text=True, check=True
    )
    simulated = qoslab("sim", job, "--output-format=json")
    assert simulated.returncode == 0, simulated.stderr
    return real.stdout, simulated.stdout


@pytest.mark.parametrize("name", sorted(CASES))
def test_a_file_backed_job_runs_as_fio_runs_it(qoslab, data_file, name):
    real, simulated = _both(qoslab, data_file.parent, data_file, name, CASES[name])
    assert _summary(simulated) == _summary(real)


def test_a_mixed_job_moves_the_same_bytes_with_the_mix_asked(qoslab, data_file):
    # Which I/O is a read is drawn at random, by fio's generator or by qoslab's: the totals
    # agree exactly, the shares of reads within 2 points of each other and of rwmixread.
    text = "[m]\nioengine=libaio\niodepth=4\nrw=randrw\nrwmixread=70\nio_size=8m\n"
    real, simulated = _both(qoslab, data_file.parent, data_file, "mixed-io_size", text)
    shares = []
    for out in (real, simulated):
        (job,) = json.loads(out[out.index("{") :])["jobs"]
        r, w = job["read"], job["write"]
        assert r["io_bytes"] + w["io_bytes"] == 8 << 20
        assert r["total_ios"] + w["total_ios"] == 2048
        shares.append(100 * r["total_ios"] / 2048)
    assert abs(shares[0] - shares[1]) < 2 and abs(shares[1] - 70) < 2, shares
