"""Differential testing and the C implementation (docs/dut-protocol.md).

- `qoslab nvmelite diff` of the paper matrix (8,400 runs) against `builtin:c` in batch mode,
  the whole command as a user runs it (target: under 10 s on the 2-core machine);
- the C implementation's own matrix beside the Rust model's, on the same 8,400 runs.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
QOSLAB = Path(sys.executable).parent / "qoslab"
C_BINARY = ROOT / "build" / "dut" / "nvmelite-c"
CONFIG = ROOT / "configs" / "nvmelite" / "main.yaml"
WORKLOAD = ROOT / "configs" / "nvmelite" / "seeds" / "seed_001_long32.json"
REPEAT = 3


def _best(fn) -> float:
    times = []
    for _ in range(REPEAT):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return min(times)


def _diff_section(tmp: Path) -> str:
    rows = []
    for jobs in ("1", "2"):
        out = tmp / f"diff{jobs}"
        cmd = [str(QOSLAB), "nvmelite", "diff", str(CONFIG), "--dut", "builtin:c",
               "--dut-batch", "--jobs", jobs, "--out", str(out)]  # fmt: skip

        def once(cmd=cmd):
            done = subprocess.run(cmd, capture_output=True, text=True)
            if done.returncode != 0:
                raise RuntimeError(done.stdout + done.stderr)

        wall = _best(once)
        summary = json.loads((out / "summary.json").read_text())
        assert summary["statuses"] == {"match": 8400}, summary
        rows.append(f"| {jobs} | {summary['runs']} | {wall:.2f} | {summary['diff_seconds']:.2f} |")
    return "\n".join(
        [
            "## `qoslab nvmelite diff`: paper matrix against builtin:c, batch mode",
            "",
            "```text",
            "qoslab nvmelite diff configs/nvmelite/main.yaml --dut builtin:c --dut-batch "
            "--jobs N --out DIR",
            "```",
            "",
            f"Best of {REPEAT}. Wall time = the whole command (start-up, model matrix, DUT, "
            "comparison, output files); replay = the DUT phase as the command reports it. "
            "Target: under 10 s. Every run matched.",
            "",
            "| jobs | runs | wall time (s) | replay and compare (s) |",
            "|---|---|---|---|",
            *rows,
            "",
        ]
    )


def _matrix_section(tmp: Path) -> str:
    from qoslab import nvmelite

    commit = nvmelite.project_commit()  # main.yaml says git_commit: auto

    def c_matrix(logs: bool):
        out = tmp / "c"
        shutil.rmtree(out, ignore_errors=True)
        args = [
            str(C_BINARY),
            "matrix",
            "--out",
            str(out),
            "--seeds",
            "0-99",
            "--git-commit",
            commit,
        ]
        subprocess.run([*args, *([] if logs else ["--no-logs"]), str(WORKLOAD)], check=True)

    def rust_matrix(logs: bool):
        out = tmp / "rust"
        shutil.rmtree(out, ignore_errors=True)
        out.mkdir()
        nvmelite.load_matrix(CONFIG).write(str(out), logs=logs)

    rows = []
    for logs in (False, True):
        c = _best(lambda logs=logs: c_matrix(logs))
        r = _best(lambda logs=logs: rust_matrix(logs))
        rows.append(f"| {'yes' if logs else 'no'} | {c:.3f} | {r:.3f} |")
    same = (tmp / "c" / "runs.csv").read_bytes() == (tmp / "rust" / "runs.csv").read_bytes()
    return "\n".join(
        [
            "## NVMe-lite matrix: the C implementation beside the Rust model",
            "",
            "```text",
            "build/dut/nvmelite-c matrix --out DIR [--no-logs] seed_001_long32.json   # C",
            "qoslab.nvmelite.load_matrix('configs/nvmelite/main.yaml').write(DIR, logs=)  # Rust",
            "```",
            "",
            f"8,400 runs (4 policies x 7 bounds x 3 faults x seeds 0-99), best of {REPEAT}. "
            "C: one thread, a separate process (start-up included), runs.csv and the logs. "
            "Rust: in-process, all cores, runs.csv, logs and the study tables. "
            f"runs.csv byte-identical: {'yes' if same else 'NO'}.",
            "",
            "| logs | C (s) | Rust (s) |",
            "|---|---|---|",
            *rows,
            "",
        ]
    )


def run() -> list[str]:
    if not C_BINARY.exists():
        subprocess.run(["make", "-s", "-C", str(ROOT), "dut-build"], check=True)
    with tempfile.TemporaryDirectory() as tmp:
        return [_diff_section(Path(tmp)), _matrix_section(Path(tmp))]


if __name__ == "__main__":
    for section in run():
        print(section)
