"""`sched`: one run of the scheduler study (`qoslab sched study`): the lab's two jobs
(`database_sim` beside `backup_sim`) on one device through one block-layer scheduler.

The summary row holds the block layer's counters of the run (docs/block.md, "The counters");
the `jobs` table holds each job's fio statistics (IOPS, MB/s, mean and p50/p99/p99.9 of the
total latency) and the `series` table each job's IOPS and latency per interval. Device tunables
are `set.SECTION.KEY` parameters, as in the `sim` study; `label`, `tunable` and `value` only
name the point in the study's tables.
"""

from __future__ import annotations

import json
import re
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING, Any

from qoslab.lab.sched_jobs import SchedOptions, prio_options
from qoslab.sweep.kinds import choice, file, integer, real, text
from qoslab.sweep.studies import sim
from qoslab.sweep.study import Detail, Metric, Param, PointResult, Study

if TYPE_CHECKING:
    import pandas as pd

# The lab's jobs as `qoslab lab sched` runs them by default.
LAB = SchedOptions()

# Block-layer counters kept per run (docs/block.md, "The counters").
BLOCK_COUNTERS = (
    ("read_sched_wait_mean_ns", "ns", "mean time a read waited in the scheduler"),
    ("read_sched_wait_p99_ns", "ns", "p99 of a read's wait in the scheduler"),
    ("read_sched_wait_max_ns", "ns", "longest wait of a read in the scheduler"),
    ("read_device_mean_ns", "ns", "mean time a read spent at the device"),
    ("read_device_p99_ns", "ns", "p99 of a read's time at the device"),
    ("read_merges", "requests", "reads merged into another request"),
    ("read_ios", "requests", "reads the block layer completed"),
    ("queued_max", "requests", "most requests held by the scheduler at once"),
    ("in_flight_max", "requests", "most requests at the device at once"),
    ("sched_cpu_ns_per_request", "ns", "the scheduler's CPU cost per request (cost model)"),
)


def registered_schedulers() -> list[str]:
    """The block layer's schedulers, from its registry as the tunables table shows it: the
    default of `block.scheduler`, then each scheduler's `[block.NAME]` section, in registry
    order. (A scheduler without tunables other than the default has no section.)"""
    from qoslab import _core

    names: list[str] = []
    for section, key, _unit, default, _help in _core.sim_tunables():
        if section == "block" and key == "scheduler":
            names.insert(0, default)
        m = re.fullmatch(r'block\.[^ ]+ \(scheduler = "([^"]+)"\)', section)
        if m and m.group(1) not in names:
            names.append(m.group(1))
    return names


def job_text(runtime_s: float, lab: SchedOptions, size: str = "10g") -> str:
    """The lab's two jobs (`qoslab.labstudy.sched`) as a job file for the simulator."""
    jobs = {
        "database_sim": {
            "rw": "randread",
            "bs": "4k",
            "iodepth": lab.db_iodepth,
            **prio_options(lab.db_prio, "--db-prio"),
        },
        "backup_sim": {
            "rw": "read",
            "bs": "128k",
            "iodepth": lab.backup_iodepth,
            **prio_options(lab.backup_prio, "--backup-prio"),
        },
    }
    lines = [
        "[global]",
        f"ioengine={lab.ioengine}",
        "direct=1",
        # As the lab's runs: percentiles of the total latency, which includes the time a
        # request waits in the scheduler (the simulator's clat starts when the driver has it).
        "lat_percentiles=1",
        f"size={size}",
        "time_based=1",
        f"runtime={round(runtime_s * 1000)}ms",
    ]
    for name, opts in jobs.items():
        lines += ["", f"[{name}]", *(f"{k}={v}" for k, v in opts.items())]
    return "\n".join(lines) + "\n"


def measure(
    params: dict[str, Any], seed: int
) -> tuple[dict[str, float], pd.DataFrame, pd.DataFrame]:
    """One simulation of a `sched` point: the block counters, a row per job (fio's
    statistics) and the series of each job."""
    import pandas as pd

    from qoslab.fio import jobs_table, parse_fio_json
    from qoslab.sim import api

    lab = SchedOptions(
        ioengine=params["ioengine"],
        db_prio=params["db_prio"],
        backup_prio=params["backup_prio"],
        db_iodepth=params["db_iodepth"],
        backup_iodepth=params["backup_iodepth"],
    )
    text = job_text(params["runtime_s"], lab, params["size"])
    device_text, _ = api.device_file(params["device"])
    sets = [f"block.scheduler={params['scheduler']}"]
    sets += [f"{n[4:]}={v}" for n, v in params.items() if n.startswith("set.") and v is not None]
    with tempfile.TemporaryDirectory(prefix="qoslab-sched-") as tmp:
        series_path = Path(tmp) / "series.csv"
        result = api.run(
            jobtext=text,
            jobname="sched-study.fio",
            device=params["device"],
            device_text=device_text,
            sets=sets,
            seed=seed,
            timeseries=series_path,
            log_avg_msec=params["log_msec"],
        )
        series = api.read_series(series_path)
    report = json.loads(result["text"])
    table = jobs_table([parse_fio_json(result["text"], path="sched-study.json")])
    table = table[table.op == "read"]
    block = api.stage_counters(report, "block")
    jobs = pd.DataFrame(
        {
            "job": table.job.to_numpy(),
            "iops": table.iops.to_numpy(),
            "mb_s": table.mb_s.to_numpy(),
            "lat_mean_us": table.lat_mean_us.to_numpy(),
            "p50_us": table.p50_us.to_numpy(),
            "p99_us": table.p99_us.to_numpy(),
            "p99_9_us": table.p99_9_us.to_numpy(),
        }
    )
    s = series[series.op == "read"]
    ts = pd.DataFrame(
        {
            "job": s.job.to_numpy(),
            "time_ms": s.time_ms.to_numpy(),
            "iops": s.iops.to_numpy(),
            "lat_mean_us": s.lat_mean_ns.to_numpy() / 1000.0,
            "lat_p99_us": s.lat_p99_ns.to_numpy() / 1000.0,
        }
    )
    return {name: float(block[name]) for name, _, _ in BLOCK_COUNTERS}, jobs, ts


def run_point(params, seed, details) -> PointResult:
    counters, jobs, series = measure(params, seed)
    tables = {"jobs": jobs}
    if "series" in details:
        tables["series"] = series
    return PointResult(counters, tables)


STUDY = Study(
    name="sched",
    help="One run of the scheduler study: the lab's two jobs through one scheduler "
    "(`qoslab sched study`).",
    params=(
        Param("device", file(sim._presets()), "", "hdd-7200", "device preset or device TOML"),
        Param("scheduler", choice(registered_schedulers()), "", "none", "block.scheduler"),
        Param("size", text(), "", "10g", "the region both jobs address (fio's size)"),
        Param("runtime_s", real(positive=True), "s", 3.0, "simulated time of the run"),
        Param("log_msec", integer(1), "ms", 100, "interval of the series"),
        Param("ioengine", text(), "", LAB.ioengine, "the jobs' ioengine"),
        Param("db_prio", text(), "", LAB.db_prio, "database_sim's priority (rt0..7, be0..7, idle)"),
        Param("backup_prio", text(), "", LAB.backup_prio, "backup_sim's priority"),
        Param("db_iodepth", integer(1), "I/Os", LAB.db_iodepth, "database_sim's iodepth"),
        Param("backup_iodepth", integer(1), "I/Os", LAB.backup_iodepth, "backup_sim's iodepth"),
        Param("label", text(), "", None, "the device's name in the study's tables"),
        Param("tunable", text(), "", None, "the scheduler tunable this point varies"),
        Param("value", real(), "", None, "its value"),
    ),
    metrics=tuple(Metric(n, "float64", u, h) for n, u, h in BLOCK_COUNTERS),
    headline=("read_sched_wait_p99_ns", "sched_cpu_ns_per_request"),
    run_point=run_point,
    **sim.ONE_RUN,
    details=(
        Detail("jobs", "a row per job: IOPS, MB/s, mean, p50, p99 and p99.9 latency", True),
        Detail("series", "a row per job and interval: IOPS, mean and p99 latency"),
    ),
)
