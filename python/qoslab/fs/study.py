"""`qoslab fs study`: the Rio document's file-system experiments (Liao et al., EuroSys'23) in
the simulator, on ext4, HORAEFS and RioFS over Rio's target presets:

- `fsync-append` (Figure 13): threads appending 4 KiB to a file of their own and calling fsync
  after each write (a fio job, `fsync=1`);
- `varmail` and `fillsync` (Figure 15): Filebench's Varmail and RocksDB's db_bench fillsync,
  each thread a job clone running the application (`app=`, crates/workload/src/apps).

Every point is one `qoslab sim` run on the device's file system mounted (`--set
fs.mount=true`), the file system chosen with `--set fs.type=NAME`; each point runs with several
seeds and the summary gives their mean and spread."""

from __future__ import annotations

import json
import math
import sys
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass
from pathlib import Path

import pandas as pd

from qoslab.errors import InputError
from qoslab.outputs import earlier_output, staged_dir
from qoslab.progress import Count, progress_bar
from qoslab.sim import api

FILE_SYSTEMS = ("ext4", "horaefs", "riofs")
DEVICES = ("rio-flash", "rio-optane")
WORKLOADS = ("fsync-append", "varmail", "fillsync")
# The document's results: RioFS's throughput against Ext4's and HORAEFS's, for fsync-append at
# 16 threads (6.3, Figure 13), for Varmail and fillsync on average over its thread counts (6.4,
# Figure 15). All on the Optane target.
DOCUMENT_RATIOS = {
    "fsync-append": {"ext4": 3.0, "horaefs": 1.2},
    "varmail": {"ext4": 2.3, "horaefs": 1.3},
    "fillsync": {"ext4": 1.9, "horaefs": 1.5},
}
DOCUMENT_AT = {"fsync-append": "16 threads", "varmail": "mean", "fillsync": "mean"}
# Figure 13's fsync latency at 16 threads as RioFS's against the others' (6.3: "The average
# latency decreases by 67% and 18% in RioFS against Ext4 and HORAEFS ... the 99th percentile
# latency decreases by 50% and 20%").
DOCUMENT_LATENCY_RATIOS = {
    "fsync_lat_mean_us": {"ext4": 0.33, "horaefs": 0.82},
    "fsync_lat_p99_us": {"ext4": 0.50, "horaefs": 0.80},
}
# Figure 14's latency breakdown of an append's fsync: the blocks of each kind, the file's data
# (D), the journal's descriptor and metadata (JM), the commit record and its FLUSH (JC), and
# when they left the file system (sent), the host driver (dispatched) and completed (done),
# each in microseconds after the fsync started (the fs stage's `breakdown_*` counters, means
# over the fsyncs that waited for all three).
PARTS = ("d", "jm", "jc")
MOMENTS = ("sent", "dispatched", "done")
BREAKDOWN = (*(f"{p}_{m}_us" for p in PARTS for m in MOMENTS), "end_us")


@dataclass(frozen=True)
class Plan:
    """What the study runs; `quick` is for tests and the docs."""

    threads: tuple[int, ...] = (1, 4, 16, 24)
    # Operations per thread: appends (each with its fsync), Varmail's flowops, fillsync's puts.
    writes: int = 200
    seeds: int = 3
    file_systems: tuple[str, ...] = FILE_SYSTEMS
    devices: tuple[str, ...] = DEVICES
    workload: str = "fsync-append"
    # KEY=VALUE settings of qoslab sim added to every run (the why table's experiments).
    sets: tuple[str, ...] = ()

    @classmethod
    def quick(cls, workload: str = "fsync-append") -> Plan:
        # Varmail: two rounds of its thirteen flowops per thread.
        ops = 26 if workload == "varmail" else 20
        return cls(threads=(1, 4), writes=ops, seeds=3, workload=workload)


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


def run_point(
    device: str,
    fs: str,
    threads: int,
    writes: int,
    seed: int,
    workload: str = "fsync-append",
    sets: tuple[str, ...] = (),
) -> dict:
    """One simulation: the threads' total throughput and their fsync latency."""
    result = api.run(
        jobtext=job_text(threads, writes, workload),
        jobname="fs-study.fio",
        device=device,
        sets=["fs.mount=true", f"fs.type={fs}", *sets],
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
        "device": device,
        "fs": fs,
        "threads": threads,
        "seed": seed,
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


def run_study(plan: Plan, jobs: int = 2, quiet: bool = False) -> pd.DataFrame:
    for d in plan.devices:
        if d not in dict(api.presets()):
            raise InputError(f"--devices: no preset '{d}'")
    if plan.workload not in WORKLOADS:
        raise InputError(
            f"--workload: expected one of {', '.join(WORKLOADS)}, got '{plan.workload}'"
        )
    for fs in plan.file_systems:
        if fs not in FILE_SYSTEMS:
            raise InputError(f"--fs: expected some of {', '.join(FILE_SYSTEMS)}, got '{fs}'")
    points = [
        (d, fs, t, plan.writes, seed, plan.workload, plan.sets)
        for d in plan.devices
        for fs in plan.file_systems
        for t in plan.threads
        for seed in range(1, plan.seeds + 1)
    ]
    rows = []
    with progress_bar(quiet) as bar, ThreadPoolExecutor(max_workers=max(1, jobs)) as pool:
        done = Count(bar, "fs study", total=len(points))
        futures = [pool.submit(run_point, *p) for p in points]
        for f in futures:  # in point order, whatever the worker count
            rows.append(f.result())
            done.advance()
    return pd.DataFrame(rows)


def summarise(runs: pd.DataFrame) -> pd.DataFrame:
    """Mean, smallest and largest over the seeds of each (device, fs, threads)."""
    g = runs.groupby(["device", "fs", "threads"], sort=False)
    out = g.agg(
        seeds=("seed", "count"),
        kops_mean=("kops", "mean"),
        kops_min=("kops", "min"),
        kops_max=("kops", "max"),
        fsync_lat_mean_us=("fsync_lat_mean_us", "mean"),
        fsync_lat_p99_us=("fsync_lat_p99_us", "mean"),
    ).reset_index()
    return out


def breakdown(runs: pd.DataFrame) -> pd.DataFrame:
    """Figure 14: per (device, fs, threads), the seeds' mean of each kind of block's moments
    after the fsync started (sent by the file system, dispatched by the host driver, done),
    and the fsync's end."""
    g = runs.groupby(["device", "fs", "threads"], sort=False)
    return g[["breakdown_fsyncs", *BREAKDOWN]].mean().reset_index()


def ratios(summary: pd.DataFrame, workload: str = "fsync-append") -> pd.DataFrame:
    """RioFS's throughput against each other file system's, per device and thread count, beside
    the document's (fsync-append: at 16 threads; Varmail and fillsync: its mean over threads);
    for fsync-append also RioFS's fsync latency against theirs, mean and 99th percentile
    (Figure 13)."""
    figures = {"kops_mean": DOCUMENT_RATIOS[workload]}
    if workload == "fsync-append":
        figures |= DOCUMENT_LATENCY_RATIOS
    rows = []
    for (device, threads), g in summary.groupby(["device", "threads"], sort=False):
        for figure, document in figures.items():
            by = dict(zip(g.fs, g[figure], strict=True))
            if "riofs" not in by:
                continue
            for other, doc in document.items():
                if other in by and by[other] > 0:
                    rows.append(
                        {
                            "device": device,
                            "threads": threads,
                            "figure": "throughput" if figure == "kops_mean" else figure,
                            "vs": other,
                            "qoslab": by["riofs"] / by[other],
                            "document": doc,
                            "document_at": DOCUMENT_AT[workload],
                        }
                    )
    return pd.DataFrame(rows)


def plot(summary: pd.DataFrame, path: Path, workload: str = "fsync-append") -> None:
    """Throughput against threads, one panel per device, one line per file system, the seeds'
    range as error bars."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    devices = list(dict.fromkeys(summary.device))
    fig, axes = plt.subplots(1, len(devices), figsize=(5 * len(devices), 3.6), squeeze=False)
    for ax, device in zip(axes[0], devices, strict=True):
        d = summary[summary.device == device]
        for fs, g in d.groupby("fs", sort=False):
            err = [
                (g.kops_mean - g.kops_min).clip(lower=0),
                (g.kops_max - g.kops_mean).clip(lower=0),
            ]
            ax.errorbar(g.threads, g.kops_mean, yerr=err, marker="o", capsize=3, label=fs)
        ax.set_title(f"{workload}, {device}")
        ax.set_xlabel("threads")
        unit = "appends+fsync" if workload == "fsync-append" else "ops"
        ax.set_ylabel(f"throughput (K {unit}/s)")
        ax.set_ylim(bottom=0)
        ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


def write_study(plan: Plan, runs: pd.DataFrame, out: Path) -> pd.DataFrame:
    """runs.csv, summary.csv, ratios.csv, breakdown.csv (fsync-append), throughput.png and
    meta.json into `out`."""
    summary = summarise(runs)
    table = ratios(summary, plan.workload)
    with staged_dir(
        out,
        is_earlier_output=earlier_output("summary.csv", "meta.json"),
        refusal="exists, is not empty and is not an earlier fs study; choose another directory",
    ) as tmp:
        runs.to_csv(tmp / "runs.csv", index=False, float_format="%.6g")
        summary.to_csv(tmp / "summary.csv", index=False, float_format="%.6g")
        table.to_csv(tmp / "ratios.csv", index=False, float_format="%.4g")
        if plan.workload == "fsync-append":
            breakdown(runs).to_csv(tmp / "breakdown.csv", index=False, float_format="%.6g")
        (tmp / f"{plan.workload}.fio").write_text(
            job_text(max(plan.threads), plan.writes, plan.workload)
        )
        plot(summary, tmp / "throughput.png", plan.workload)
        meta = {"command": sys.argv, "plan": asdict(plan)}
        (tmp / "meta.json").write_text(json.dumps(meta, indent=1) + "\n")
    return table
