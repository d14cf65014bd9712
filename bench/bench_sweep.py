"""Sweeps at scale: 1,000,000 NVMe-lite runs through `qoslab sweep` beside `qoslab nvmelite
matrix` on the same runs, a rerun that finds every point stored, and the report of the store.

Target: the sweep's rate within 2x of the matrix command's own (both whole commands, start-up
included, all cores).
"""

from __future__ import annotations

import os
import shutil
import statistics
import subprocess
import sys
import textwrap
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
WORKLOAD = ROOT / "configs" / "nvmelite" / "seeds" / "seed_001_long32.json"
QOSLAB = Path(sys.executable).parent / "qoslab"
SCRATCH = ROOT / "out" / "bench" / "sweep"
REPEATS = 3
SEEDS = 11905  # 4 policies x 7 bounds x 3 faults x 11,905 seeds = 1,000,020 runs
RUNS = 4 * 7 * 3 * SEEDS

SPEC = f"""\
study: nvmelite run
name: million
parameters:
  workload: {WORKLOAD}
  policy: [FIFO, RANDOM, ADVERSARIAL, BATCHED]
  bound: [0, 1, 2, 3, 5, 10, inf]
  fault: [NONE, TIMEOUT, RESET]
seeds: {{range: [0, {SEEDS}]}}
"""
MATRIX = f"""\
seeds: ["{WORKLOAD}"]
policies: [FIFO, RANDOM, ADVERSARIAL, BATCHED]
bounds: ["0", "1", "2", "3", "5", "10", "inf"]
faults: [NONE, TIMEOUT, RESET]
schedule_seeds: "0-{SEEDS - 1}"
scheduler_version: "v1.0"
"""


def _wall(*args) -> float:
    t0 = time.perf_counter()
    subprocess.run([QOSLAB, *map(str, args)], check=True, capture_output=True)
    return time.perf_counter() - t0


def _size(path: Path) -> int:
    return sum(f.stat().st_size for f in path.rglob("*") if f.is_file())


def run() -> list[str]:
    shutil.rmtree(SCRATCH, ignore_errors=True)
    SCRATCH.mkdir(parents=True)
    spec = SCRATCH / "million.yaml"
    spec.write_text(SPEC)
    config = SCRATCH / "million-matrix.yaml"
    config.write_text(MATRIX)
    store, out = SCRATCH / "store", SCRATCH / "matrix"
    load_before = os.getloadavg()[0]
    sweep_s, matrix_s = [], []
    # Alternated, so that both see the same share of a busy machine.
    for _ in range(REPEATS):
        shutil.rmtree(store, ignore_errors=True)
        sweep_s.append(_wall("sweep", spec, "--store", store, "--quiet"))
        matrix_s.append(_wall("nvmelite", "matrix", config, "--out", out, "--no-logs"))
    rerun_s = _wall("sweep", spec, "--store", store, "--quiet")
    report_s = _wall("report", store, "--out", SCRATCH / "report")
    size = _size(store)
    n_parts = len(list((store / "parts").glob("*/*")))
    load_after = os.getloadavg()[0]
    sweep_best, matrix_best = min(sweep_s), min(matrix_s)
    shutil.rmtree(SCRATCH, ignore_errors=True)
    return [
        textwrap.dedent(
            f"""\
            ## Sweeps: 1,000,000 NVMe-lite runs through `qoslab sweep`

            ```text
            qoslab sweep million.yaml --store STORE      # study nvmelite run, 84 configurations x 11,905 seeds
            qoslab nvmelite matrix million-matrix.yaml --out DIR --no-logs   # the same 1,000,020 runs
            ```

            `seed_001_long32.json` x 4 policies x 7 bounds x 3 faults x schedule seeds
            0-11,904 = {RUNS:,} runs; whole commands (start-up included) on all cores
            (`--jobs` default: 2 worker processes), alternated, best and median of {REPEATS}.
            The sweep keys every run, runs it in batches of 16,384 through the Rust core and
            stores its summary row (parameters, runs.csv metrics, log SHA-256); the matrix
            command writes runs.csv, its tables, figures and report. The machine is shared: its
            1-minute load average was {load_before:.1f} before and {load_after:.1f} after.

            | what | best | median |
            |---|---|---|
            | `qoslab sweep` (empty store) | {sweep_best:.2f} s ({RUNS / sweep_best:,.0f} runs/s) | {statistics.median(sweep_s):.2f} s |
            | `qoslab nvmelite matrix --no-logs` | {matrix_best:.2f} s ({RUNS / matrix_best:,.0f} runs/s) | {statistics.median(matrix_s):.2f} s |
            | sweep time / matrix time (target: at most 2) | {sweep_best / matrix_best:.2f} | {statistics.median(sweep_s) / statistics.median(matrix_s):.2f} |
            | rerun of the finished sweep (every point found stored) | {rerun_s:.2f} s | |
            | `qoslab report` of the store | {report_s:.2f} s | |
            | store size | {size / 2**20:.1f} MiB in {n_parts} parts ({size / RUNS:.0f} bytes a run) | |
            """  # noqa: E501
        )
    ]


if __name__ == "__main__":
    for section in run():
        print(section)
