"""The fio JSON reader: every lab run and every simulated run goes through it."""

from __future__ import annotations

import shutil
import subprocess
import tempfile
import time
from pathlib import Path


def _best_of(n: int, fn) -> float:
    best = float("inf")
    for _ in range(n):
        t0 = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t0)
    return best


def run() -> list[str]:
    from qoslab.fio import bins_table, jobs_table, read_fio_json

    if shutil.which("fio") is None:
        return ["## fio JSON reader\n\nSkipped: fio is not installed (`make tools`).\n"]
    with tempfile.TemporaryDirectory() as d:
        out = Path(d) / "out.json"
        # A json+ output with a wide latency histogram: 8 jobs, random read/write mix.
        cmd = [
            "fio",
            "--name=bench",
            "--ioengine=null",
            "--size=256M",
            "--rw=randrw",
            "--bs=4k",
            "--iodepth=16",
            "--numjobs=8",
            "--runtime=1",
            "--time_based",
            "--lat_percentiles=1",
            "--output-format=json+",
            f"--output={out}",
        ]
        subprocess.run(cmd, check=True, capture_output=True)
        size_kib = out.stat().st_size / 1024
        parsed = read_fio_json(out)
        n_bins = sum(
            len(lat.bins_ns or {})
            for job in parsed.jobs
            for op in job.ops.values()
            for lat in op.latency.values()
        )
        t_read = _best_of(20, lambda: read_fio_json(out))
        t_jobs = _best_of(20, lambda: jobs_table([parsed]))
        t_bins = _best_of(20, lambda: bins_table([parsed]))
    command = " ".join(cmd[:-1]) + " --output=out.json"
    return [
        "## fio JSON reader (`qoslab.fio`)\n\n"
        f"Input: `{command}` ({size_kib:,.0f} KiB of json+, {len(parsed.jobs)} jobs, "
        f"{n_bins:,} latency bins). Best of 20.\n\n"
        "| step | time |\n|---|---|\n"
        f"| read_fio_json (parse, normalise to ns) | {t_read * 1e3:.1f} ms |\n"
        f"| jobs_table (one row per job and op) | {t_jobs * 1e3:.1f} ms |\n"
        f"| bins_table (one row per latency bin) | {t_bins * 1e3:.1f} ms |\n"
    ]
