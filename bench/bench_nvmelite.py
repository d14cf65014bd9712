"""NVMe-lite: the paper matrix in-process and as a command (beside the C implementation's
run-matrix), the run API, 1,000,000 runs, and the worst-case search's states per second.

Targets (2-core machine): 8,400 runs with runs.csv and all tables < 0.05 s without logs and
< 0.3 s with logs (in-process, figures and report excluded); the whole `qoslab nvmelite matrix`
command within 2x of `nvmelite-c matrix` measured side by side; 1,000,000 metrics-only runs
< 2 s with flat memory; the exact worst case of seed_001_long32 at each of the paper's bounds
(fault NONE) < 60 s.
"""

from __future__ import annotations

import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CONFIG = ROOT / "configs" / "nvmelite" / "main.yaml"
LONG32 = ROOT / "configs" / "nvmelite" / "seeds" / "seed_001_long32.json"
C_BINARY = ROOT / "build" / "dut" / "nvmelite-c"
QOSLAB = Path(sys.executable).parent / "qoslab"
SCRATCH = ROOT / "out" / "bench"
REPEATS = 7


def _timed(fn, repeats=REPEATS):
    wall, cpu = [], []
    for _ in range(repeats):
        c0, t0 = time.process_time(), time.perf_counter()
        fn()
        wall.append(time.perf_counter() - t0)
        cpu.append(time.process_time() - c0)
    return wall, cpu


def _fmt(seconds: list[float]) -> str:
    return f"{statistics.median(seconds):.3f} s (min {min(seconds):.3f} s)"


def _matrix_in_process(logs: bool) -> tuple[list[float], list[float]]:
    from qoslab.nvmelite import load_matrix

    matrix = load_matrix(CONFIG)
    dirs = []

    def once():
        d = Path(tempfile.mkdtemp(dir=SCRATCH))
        dirs.append(d)
        matrix.write(str(d), logs=logs)

    try:
        return _timed(once)
    finally:
        for d in dirs:
            shutil.rmtree(d, ignore_errors=True)


def _iter_runs() -> tuple[list[float], list[float]]:
    from qoslab.nvmelite import load_matrix

    matrix = load_matrix(CONFIG)

    def once():
        n = sum(1 for r in matrix.iter_runs(log=True, schedule=True) if r.log)
        assert n == 8400

    return _timed(once, 5)


def _child_cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def _run_timed(argv: list) -> tuple[float, float]:
    """Wall and CPU (user + system, all threads) of one command."""
    c0, t0 = _child_cpu(), time.perf_counter()
    subprocess.run(argv, check=True, capture_output=True)
    return time.perf_counter() - t0, _child_cpu() - c0


def _command() -> dict[str, tuple[list[float], list[float]]]:
    """The whole qoslab command, the C implementation's run-matrix (with logs) and qoslab's
    start-up alone (`qoslab --version`: interpreter, imports, CLI), alternated so that all
    see the same machine load. Each: (wall times, CPU times)."""
    out, c_out = SCRATCH / "command", SCRATCH / "c-matrix"
    runs = {"qoslab": ([], []), "c": ([], []), "start": ([], [])}
    for _ in range(5):
        for name, argv in (
            ("qoslab", [QOSLAB, "nvmelite", "matrix", CONFIG, "--out", out]),
            ("c", [C_BINARY, "matrix", "--out", c_out, LONG32]),
            ("start", [QOSLAB, "--version"]),
        ):
            shutil.rmtree(c_out, ignore_errors=True)
            wall, cpu = _run_timed(argv)
            runs[name][0].append(wall)
            runs[name][1].append(cpu)
    shutil.rmtree(out, ignore_errors=True)
    shutil.rmtree(c_out, ignore_errors=True)
    return runs


def _search() -> list[tuple[str, str, int, float]]:
    from qoslab.nvmelite import load_workload, search

    w = load_workload(LONG32)
    rows = []
    for k in ("0", "1", "2", "3", "5", "10", "inf"):
        r = search.worst(w, bound_k=k, time_limit_s=60.0)
        value = (
            f"{r.value:g}" if r.certificate == "optimal" else f"{r.value:g} to {r.upper_bound:g}"
        )
        rows.append((k, f"{value} ({r.certificate})", r.nodes, r.elapsed_s))
    return rows


_MILLION = textwrap.dedent(
    """
    import resource, sys, tempfile, time, shutil
    from qoslab.nvmelite import load_matrix
    m = load_matrix(sys.argv[1])
    d = tempfile.mkdtemp(dir=sys.argv[2])
    t0 = time.perf_counter(); c0 = time.process_time()
    summary = m.write(d, logs=False, exact_nodes=0, log_sha256=sys.argv[3] == "hash")
    wall = time.perf_counter() - t0; cpu = time.process_time() - c0
    rows = sum(1 for _ in open(d + "/runs.csv", "rb")) - 1
    shutil.rmtree(d)
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    print(summary["runs"], rows, wall, cpu, rss)
    """
)


def _million(seeds: str, log_sha256: bool = True) -> tuple[int, int, float, float, int]:
    config = SCRATCH / f"million-{seeds}.yaml"
    config.write_text(
        f'seeds: ["{ROOT / "configs/nvmelite/seeds/seed_001_long32.json"}"]\n'
        f"policies: [RANDOM]\nbounds: [inf]\nfaults: [NONE]\n"
        f'schedule_seeds: "{seeds}"\nscheduler_version: "v1.0"\n'
    )
    done = subprocess.run(
        [sys.executable, "-c", _MILLION, config, SCRATCH, "hash" if log_sha256 else "none"],
        check=True,
        capture_output=True,
        text=True,
    )
    runs, rows, wall, cpu, rss = done.stdout.split()
    return int(runs), int(rows), float(wall), float(cpu), int(rss)


def run() -> list[str]:
    SCRATCH.mkdir(parents=True, exist_ok=True)
    load_before = os.getloadavg()[0]
    no_logs = _matrix_in_process(False)
    with_logs = _matrix_in_process(True)
    api = _iter_runs()
    timed = _command()
    command, c_matrix, start = timed["qoslab"], timed["c"], timed["start"]
    searched = _search()
    # Joined at the template's indent, so that dedent below sees one margin.
    search_rows = ("\n" + " " * 12).join(
        f"| {k} | {value} | {nodes:,} | {secs:.3f} s | {nodes / max(secs, 1e-9):,.0f} |"
        for k, value, nodes, secs in searched
    )
    small = _million("0-99999")
    big = _million("0-999999")
    metrics_only = _million("0-999999", log_sha256=False)
    load_after = os.getloadavg()[0]
    return [
        textwrap.dedent(
            f"""\
            ## NVMe-lite run matrix

            Paper matrix `configs/nvmelite/main.yaml`: `seed_001_long32.json` x 4 policies x
            7 bounds x 3 faults x schedule seeds 0-99 = 8,400 runs. In-process: the Rust core
            writes runs.csv, the tables and the poison schedules (`Matrix.write`), figures and
            HTML excluded; median of {REPEATS} runs on ext4 (`out/bench/`), wall time and the
            process's CPU time (2 worker threads). The machine is shared: its 1-minute load
            average was {load_before:.1f} before and {load_after:.1f} after these measurements
            (2 cores), so wall times above the CPU time / 2 are time spent waiting for a core.
            The commands' CPU is the child process's user + system time (all its threads).

            | what | target | wall | CPU |
            |---|---|---|---|
            | 8,400 runs, runs.csv + tables, no logs | < 0.05 s | {_fmt(no_logs[0])} | {_fmt(no_logs[1])} |
            | 8,400 runs, runs.csv + tables + 8,400 log files | < 0.3 s | {_fmt(with_logs[0])} | {_fmt(with_logs[1])} |
            | `Matrix.iter_runs(log=True, schedule=True)`: every run's id, log, schedule file, row (Python objects) | (for `nvmelite diff`) | {_fmt(api[0])} | {_fmt(api[1])} |
            | whole command `qoslab nvmelite matrix configs/nvmelite/main.yaml --out out/bench/command` (start-up, 8,400 runs with logs, tables, exact_worst.csv, figures, report.html) | within 2x of the C run-matrix | {_fmt(command[0])} | {_fmt(command[1])} |
            | side by side: `build/dut/nvmelite-c matrix --out DIR seed_001_long32.json` (the C implementation, one thread, runs.csv and 8,400 logs) | | {_fmt(c_matrix[0])} | {_fmt(c_matrix[1])} |
            | ratio of the medians, qoslab / C | < 2 | {statistics.median(command[0]) / statistics.median(c_matrix[0]):.1f} | {statistics.median(command[1]) / statistics.median(c_matrix[1]):.1f} |
            | of which qoslab's start-up, `qoslab --version` (interpreter, imports, the CLI's option parsing) | | {_fmt(start[0])} | {_fmt(start[1])} |

            ## NVMe-lite: the exact worst case of seed_001_long32 (p95, fault NONE)

            `qoslab.nvmelite.search.worst(w, bound_k=k, time_limit_s=60)`: branch and bound over
            every schedule at bound k (one thread). Target: each under 60 s.

            | k | worst p95 | states | time | states/s |
            |---|---|---|---|---|
            {search_rows}

            ## NVMe-lite: 1,000,000 runs, metrics only

            One workload (`seed_001_long32.json`), RANDOM, k = inf, fault NONE, schedule seeds
            0-999,999, `Matrix.write(..., logs=False)` in a fresh process (runs.csv of every run,
            sorted by run_id, streamed in blocks of 4,096 runs). In the first two rows every
            run's log is formatted and hashed for runs.csv's log_sha256 column; the last row
            passes `log_sha256=False`: metrics-only runs, which format and hash no log (the
            column is left empty). Peak RSS is the whole Python process's.

            | runs | log_sha256 | runs.csv rows | wall | CPU | peak RSS |
            |---|---|---|---|---|---|
            | {small[0]:,} | yes | {small[1]:,} | {small[2]:.2f} s | {small[3]:.2f} s | {small[4] / 1024:.0f} MiB |
            | {big[0]:,} | yes | {big[1]:,} | {big[2]:.2f} s | {big[3]:.2f} s | {big[4] / 1024:.0f} MiB |
            | {metrics_only[0]:,} | no (metrics only) | {metrics_only[1]:,} | {metrics_only[2]:.2f} s (target < 2 s) | {metrics_only[3]:.2f} s | {metrics_only[4] / 1024:.0f} MiB |
            """  # noqa: E501
        )
    ]


if __name__ == "__main__":
    for section in run():
        print(section)
