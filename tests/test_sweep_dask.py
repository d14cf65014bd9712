"""`qoslab sweep --scheduler ADDRESS` on a Dask cluster (here dask.distributed's LocalCluster of
two worker processes, tests/dask_cluster.py) stores exactly the bytes a single local process
stores."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from conftest import run_qoslab
from sweep_helpers import WORKLOAD, part_files, rows, sweep, write_spec

SPEC = f"""
study: nvmelite run
parameters:
  workload: {WORKLOAD}
  policy: [FIFO, RANDOM, ADVERSARIAL, BATCHED]
  bound: [0, 2, inf]
  fault: [NONE, RESET]
seeds: {{range: [0, 50]}}
"""


def test_a_two_worker_dask_cluster_stores_what_jobs_1_stores(tmp_path):
    spec = write_spec(tmp_path, SPEC)
    sweep(spec, tmp_path / "local", "--jobs", "1", "--batch", "50")
    cluster = subprocess.Popen(
        [sys.executable, Path(__file__).parent / "dask_cluster.py"],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        address = cluster.stdout.readline().strip()
        assert address.startswith("tcp://"), address
        # The installed command, in a process of its own (as a user runs it).
        done = run_qoslab("sweep", spec, "--store", tmp_path / "dask", "--scheduler", address,
                          "--batch", "50")  # fmt: skip
    finally:
        out, _ = cluster.communicate("", timeout=60)
    assert "1,200 points: 1,200 run, 0 failed" in done.stderr
    ran = [(key, worker) for key, worker in json.loads(out) if key.startswith("run_task")]
    assert len(ran) == 24
    assert len({worker for _, worker in ran}) == 2  # both workers took batches
    assert part_files(tmp_path / "dask") == part_files(tmp_path / "local")
    assert len(rows(tmp_path / "dask", "nvmelite_run")) == 1200


def test_an_unreachable_scheduler_is_one_line(tmp_path):
    spec = write_spec(tmp_path, SPEC)
    done = run_qoslab("sweep", spec, "--store", tmp_path / "store", "--scheduler",
                      "tcp://127.0.0.1:9")  # fmt: skip
    assert done.returncode == 2
    assert done.stderr.startswith("qoslab: error: --scheduler: cannot reach the Dask scheduler")
    assert done.stderr.count("\n") == 1
