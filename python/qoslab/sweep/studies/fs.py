"""`fs`: one run of the file-system study (`qoslab fs study`): fsync-append, Varmail or
fillsync on one file system, mounted on one device, at one thread count (docs/fs.md).

A point is one `qoslab sim` run with the device's file system mounted (`fs.mount=true`) and
chosen (`fs.type`); `set.SECTION.KEY` parameters add settings of `qoslab sim` after those, as
the study's `--set` does. The summary row holds the threads' throughput, their fsync latency
(fio's mean and 99th percentile), the file system's counters and Figure 14's latency
breakdown of an fsync (the fs stage's `breakdown_*` counters, means over the fsyncs that
waited for all three kinds of block).
"""

from __future__ import annotations

import json
import math
from typing import Any

from qoslab.sweep.kinds import choice, file, integer
from qoslab.sweep.studies import sim
from qoslab.sweep.study import Metric, Param, PointResult, Study

FILE_SYSTEMS = ("ext4", "horaefs", "riofs")
WORKLOADS = ("fsync-append", "varmail", "fillsync")
# Figure 14's latency breakdown of an append's fsync: the blocks of each kind, the file's data
# (D), the journal's descriptor and metadata (JM), the commit record and its FLUSH (JC), and
# when they left the file system (sent), the host driver (dispatched) and completed (done),
# each in microseconds after the fsync started.
PARTS = ("d", "jm", "jc")
MOMENTS = ("sent", "dispatched", "done")
BREAKDOWN = (*(f"{p}_{m}_us" for p in PARTS for m in MOMENTS), "end_us")
_PART = {"d": "the data (D)", "jm": "the journal's JM", "jc": "the commit record (JC)"}
_MOMENT = {"sent": "left the fs", "dispatched": "left the host", "done": "completed"}

# The summary row, in the order of the study's runs.csv columns after device, fs, threads, seed.
METRICS = (
    Metric("kops", "float64", "K ops/s", "the threads' operations per second, in thousands"),
    Metric("fsync_lat_mean_us", "float64", "us", "mean fsync latency over every thread"),
    Metric("fsync_lat_p99_us", "float64", "us", "fio's p99 of the fsync latency (one job)"),
    Metric("fsyncs", "int64", "calls", "fsyncs (and fdatasyncs) the file system served"),
    Metric("commits", "int64", "commits", "journal commits"),
    Metric("file_commits", "int64", "commits", "file-level commits (iJournaling's)"),
    Metric("flushes", "int64", "requests", "FLUSH requests the file system sent"),
    Metric("breakdown_fsyncs", "int64", "calls", "fsyncs that waited for D, JM and JC"),
    *(
        Metric(f"{p}_{m}_us", "float64", "us", f"when {_PART[p]} {_MOMENT[m]}, after the fsync")
        for p in PARTS
        for m in MOMENTS
    ),
    Metric("end_us", "float64", "us", "when the fsync returned (means over breakdown_fsyncs)"),
)


def job_text(threads: int, writes: int, workload: str = "fsync-append") -> str:
    """fio's fsync-append: `threads` clones, each appending `writes` 4 KiB blocks to its own new
    file with an fsync after each; or `threads` threads of an application, `writes` operations
    each."""
    if workload != "fsync-append":
        return (
            f"[{workload}]\napp={workload}\nnumjobs={threads}\nnumber_ios={writes}\n"
            "group_reporting=1\n"
        )
    # One report for all threads (group_reporting): its fsync latency percentiles are those of
    # every thread's fsyncs together, as fio merges them.
    return (
        "[global]\nrw=write\nbs=4k\nsize=1g\nfsync=1\ngroup_reporting=1\n"
        f"number_ios={writes}\n\n[fsync-append]\nnumjobs={threads}\n"
    )


def measure(params: dict[str, Any], seed: int) -> dict[str, Any]:
    """One simulation of an `fs` point: the threads' total throughput, their fsync latency,
    the file system's counters and the latency breakdown."""
    from qoslab.sim import api

    workload = params["workload"]
    sets = ["fs.mount=true", f"fs.type={params['fs']}"]
    sets += [f"{n[4:]}={v}" for n, v in params.items() if n.startswith("set.") and v is not None]
    result = api.run(
        jobtext=job_text(params["threads"], params["writes"], workload),
        jobname="fs-study.fio",
        device=params["device"],
        sets=sets,
        seed=seed,
    )
    report = json.loads(result["text"])
    jobs = report["jobs"]
    counters = api.stage_counters(report, "fs")
    syncs = [j["sync"] for j in jobs]
    n = sum(s["total_ios"] for s in syncs)
    if workload == "fsync-append":
        # An operation is one append and its fsync: the appends per second of every thread.
        kops = sum(j["write"]["iops"] for j in jobs) / 1000.0
    else:
        # The application's operations per second (Filebench's and db_bench's own measure).
        kops = sum(j["qoslab_app"]["ops_per_s"] for j in jobs) / 1000.0
    # fio's 99th percentile of the fsync latency (fsync-append reports its threads as one job;
    # an application's threads are one job already).
    p99 = [float(s["lat_ns"].get("percentile", {}).get("99.000000", "nan")) for s in syncs]
    counted = counters["breakdown_fsyncs"]
    breakdown = {
        f"{p}_{m}_us": counters[f"breakdown_{p}_{m}_ns"] / counted / 1000.0 if counted else math.nan
        for p in PARTS
        for m in MOMENTS
    }
    breakdown["end_us"] = counters["breakdown_end_ns"] / counted / 1000.0 if counted else math.nan
    return {
        "kops": kops,
        "fsync_lat_mean_us": sum(s["lat_ns"]["mean"] * s["total_ios"] for s in syncs)
        / max(n, 1)
        / 1000.0,
        "fsync_lat_p99_us": (p99[0] if len(p99) == 1 else float("nan")) / 1000.0,
        "fsyncs": counters["fsyncs"],
        "commits": counters["commits"],
        "file_commits": counters["file_commits"],
        "flushes": counters["flushes"],
        "breakdown_fsyncs": counted,
        **breakdown,
    }


def run_point(params, seed, details) -> PointResult:
    return PointResult(measure(params, seed))


STUDY = Study(
    name="fs",
    help="One run of the file-system study: fsync-append, Varmail or fillsync on one file "
    "system at one thread count (`qoslab fs study`).",
    params=(
        Param("device", file(sim._presets()), "", "rio-optane", "device preset or device TOML"),
        Param("fs", choice(FILE_SYSTEMS), "", "riofs", "the file system mounted (fs.type)"),
        Param("workload", choice(WORKLOADS), "", "fsync-append", "what each thread runs"),
        Param("threads", integer(1), "threads", 1, "threads (job clones) running it"),
        Param("writes", integer(1), "ops", 200, "operations per thread: appends, flowops, puts"),
    ),
    metrics=METRICS,
    headline=("kops", "fsync_lat_p99_us"),
    run_point=run_point,
    **sim.ONE_RUN,
    # A point costs 10 to 50 ms: one stored part per point (its Parquet files and fsyncs) made
    # the quick study 43 % slower than its thread-pool loop; eight per batch, 9 %.
    batch_points=8,
)
