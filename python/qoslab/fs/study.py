"""`qoslab fs study`: the Rio document's fsync-append experiment (Liao et al., EuroSys'23,
Figure 13) in the simulator: threads appending 4 KiB to a file of their own and calling fsync
after each write, on ext4, HORAEFS and RioFS, on Rio's target presets. Every point is one
`qoslab sim` run of a fio job file (`fsync=1`) on the device's file system mounted
(`--set fs.mount=true`), the file system chosen with `--set fs.type=NAME`; each point runs
with several seeds and the summary gives their mean and spread."""

from __future__ import annotations

import json
import sys
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass
from pathlib import Path

import pandas as pd

from qoslab.errors import InputError
from qoslab.outputs import staged_dir
from qoslab.sim import api

FILE_SYSTEMS = ("ext4", "horaefs", "riofs")
DEVICES = ("rio-flash", "rio-optane")
# The document's fsync-append results at 16 threads (6.3, Figure 13): RioFS's throughput
# against Ext4's and HORAEFS's.
DOCUMENT_RATIOS = {"ext4": 3.0, "horaefs": 1.2}


@dataclass(frozen=True)
class Plan:
    """What the study runs; `quick` is for tests and the docs."""

    threads: tuple[int, ...] = (1, 4, 16, 24)
    writes: int = 200
    seeds: int = 3
    file_systems: tuple[str, ...] = FILE_SYSTEMS
    devices: tuple[str, ...] = DEVICES

    @classmethod
    def quick(cls) -> Plan:
        return cls(threads=(1, 4), writes=20, seeds=3)


def job_text(threads: int, writes: int) -> str:
    """fio's fsync-append: `threads` clones, each appending `writes` 4 KiB blocks to its own new
    file with an fsync after each."""
    return (
        "[global]\nrw=write\nbs=4k\nsize=1g\nfsync=1\n"
        f"number_ios={writes}\n\n[fsync-append]\nnumjobs={threads}\n"
    )


def run_point(device: str, fs: str, threads: int, writes: int, seed: int) -> dict:
    """One simulation: the threads' total throughput and their fsync latency."""
    result = api.run(
        jobtext=job_text(threads, writes),
        jobname="fs-study.fio",
        device=device,
        sets=["fs.mount=true", f"fs.type={fs}"],
        seed=seed,
    )
    report = json.loads(result["text"])
    jobs = report["jobs"]
    counters = api.stage_counters(report, "fs")
    syncs = [j["sync"] for j in jobs]
    n = sum(s["total_ios"] for s in syncs)
    return {
        "device": device,
        "fs": fs,
        "threads": threads,
        "seed": seed,
        # An operation is one append and its fsync: the appends per second of every thread.
        "kops": sum(j["write"]["iops"] for j in jobs) / 1000.0,
        "fsync_lat_mean_us": sum(s["lat_ns"]["mean"] * s["total_ios"] for s in syncs)
        / max(n, 1)
        / 1000.0,
        "commits": counters["commits"],
        "file_commits": counters["file_commits"],
        "flushes": counters["flushes"],
    }


def run_study(plan: Plan, jobs: int = 2, quiet: bool = False) -> pd.DataFrame:
    for d in plan.devices:
        if d not in dict(api.presets()):
            raise InputError(f"--devices: no preset '{d}'")
    for fs in plan.file_systems:
        if fs not in FILE_SYSTEMS:
            raise InputError(f"--fs: expected some of {', '.join(FILE_SYSTEMS)}, got '{fs}'")
    points = [
        (d, fs, t, plan.writes, seed)
        for d in plan.devices
        for fs in plan.file_systems
        for t in plan.threads
        for seed in range(1, plan.seeds + 1)
    ]
    rows = []
    with ThreadPoolExecutor(max_workers=max(1, jobs)) as pool:
        futures = [pool.submit(run_point, *p) for p in points]
        for i, f in enumerate(futures):  # in point order, whatever the worker count
            rows.append(f.result())
            if not quiet and sys.stderr.isatty():
                print(f"\rfs study: {i + 1}/{len(points)} runs", end="", file=sys.stderr)
    if not quiet and sys.stderr.isatty():
        print(file=sys.stderr)
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
    ).reset_index()
    return out


def ratios(summary: pd.DataFrame) -> pd.DataFrame:
    """RioFS's throughput against each other file system's, per device and thread count, beside
    the document's (given at 16 threads)."""
    rows = []
    for (device, threads), g in summary.groupby(["device", "threads"], sort=False):
        by = dict(zip(g.fs, g.kops_mean, strict=True))
        if "riofs" not in by:
            continue
        for other, doc in DOCUMENT_RATIOS.items():
            if other in by and by[other] > 0:
                rows.append(
                    {
                        "device": device,
                        "threads": threads,
                        "vs": other,
                        "qoslab": by["riofs"] / by[other],
                        "document_at_16_threads": doc,
                    }
                )
    return pd.DataFrame(rows)


def plot(summary: pd.DataFrame, path: Path) -> None:
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
        ax.set_title(f"fsync-append, {device}")
        ax.set_xlabel("threads")
        ax.set_ylabel("throughput (K appends+fsync/s)")
        ax.set_ylim(bottom=0)
        ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


def write_study(plan: Plan, runs: pd.DataFrame, out: Path) -> pd.DataFrame:
    """runs.csv, summary.csv, ratios.csv, throughput.png and meta.json into `out`."""
    summary = summarise(runs)
    table = ratios(summary)
    with staged_dir(
        out,
        is_earlier_output=lambda d: (d / "summary.csv").is_file() and (d / "meta.json").is_file(),
        refusal="exists, is not empty and is not an earlier fs study; choose another directory",
    ) as tmp:
        runs.to_csv(tmp / "runs.csv", index=False, float_format="%.6g")
        summary.to_csv(tmp / "summary.csv", index=False, float_format="%.6g")
        table.to_csv(tmp / "ratios.csv", index=False, float_format="%.4g")
        (tmp / "fsync-append.fio").write_text(job_text(max(plan.threads), plan.writes))
        plot(summary, tmp / "throughput.png")
        meta = {"command": sys.argv, "plan": asdict(plan)}
        (tmp / "meta.json").write_text(json.dumps(meta, indent=1) + "\n")
    return table
