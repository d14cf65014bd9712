"""`qoslab fs study`: the Rio document's file-system experiments (Liao et al., EuroSys'23) in
the simulator, on ext4, HORAEFS and RioFS over Rio's target presets:

- `fsync-append` (Figure 13): threads appending 4 KiB to a file of their own and calling fsync
  after each write (a fio job, `fsync=1`);
- `varmail` and `fillsync` (Figure 15): Filebench's Varmail and RocksDB's db_bench fillsync,
  each thread a job clone running the application (`app=`, crates/workload/src/apps).

Every point is one `qoslab sim` run on the device's file system mounted (`--set
fs.mount=true`), the file system chosen with `--set fs.type=NAME`; each point runs with several
seeds and the summary gives their mean and spread.

The study states its points (`configs`: configurations of the `fs` sweep study,
`qoslab.sweep.studies.fs`, each with every seed) and runs them through the sweep engine
(`qoslab.sweep.planned`): its store, beside the output (`<out>.store` unless `--store`), keeps
every run, so a rerun, or the run after an interrupted one, runs only the points it lacks; the
tables are made from the store's rows in plan order, so they do not depend on the workers or on
what the store held."""

from __future__ import annotations

import json
import sys
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import pandas as pd

from qoslab.errors import InputError
from qoslab.outputs import earlier_output, staged_dir
from qoslab.sim import api
from qoslab.sweep.planned import Rows, default_store, provenance, run_planned, set_param
from qoslab.sweep.spec import planned_spec
from qoslab.sweep.studies import fs as adapter
from qoslab.sweep.studies.fs import BREAKDOWN, FILE_SYSTEMS, WORKLOADS, job_text

DEVICES = ("rio-flash", "rio-optane")
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


def configs(plan: Plan) -> list[dict[str, Any]]:
    """The study's points as configurations of the `fs` sweep study (each runs with every
    seed): per device, file system and thread count, with the plan's `--set`s (a later one of a
    key wins, as on the command line)."""
    sets: dict[str, Any] = {}
    for text in plan.sets:
        name, value = set_param(adapter.STUDY, text)
        sets.pop(name, None)
        sets[name] = value
    return [
        {"device": d, "fs": fs, "workload": plan.workload, "threads": t, "writes": plan.writes}
        | sets
        for d in plan.devices
        for fs in plan.file_systems
        for t in plan.threads
    ]


def check_plan(plan: Plan) -> list[dict[str, Any]]:
    """The plan's configurations; an InputError for a device, workload, file system or `--set`
    the study does not have, before anything runs."""
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
    return configs(plan)


def runs_table(rows: Rows) -> pd.DataFrame:
    """The study's runs.csv: a row per point and seed, in plan order."""
    points = rows.points
    head = {
        "device": points.device,
        "fs": points.fs,
        "threads": points.threads.astype("int64"),
        "seed": points.seed.astype("int64"),
    }
    return pd.DataFrame(head | {m.name: points[m.name] for m in adapter.METRICS})


def run_study(
    plan: Plan,
    out: Path,
    *,
    jobs: int = 2,
    quiet: bool = False,
    store: Path | None = None,
) -> pd.DataFrame:
    """Runs the plan's points through the sweep engine (into `store`, `<out>.store` unless
    given: a rerun runs only the points it lacks) and writes the study into `out`; returns
    the ratios table."""
    points = check_plan(plan)
    seeds = list(range(1, plan.seeds + 1))
    store = default_store(out) if store is None else Path(store)
    with staged_dir(
        out,
        is_earlier_output=earlier_output("summary.csv", "meta.json"),
        refusal="exists, is not empty and is not an earlier fs study; choose another directory",
    ) as tmp:
        spec = planned_spec("fs", "fs-study", points, seeds)
        rows = run_planned(spec, store, jobs=jobs, quiet=quiet)
        return write_study(plan, runs_table(rows), tmp, provenance(spec, store, rows))


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


def write_study(plan: Plan, runs: pd.DataFrame, out: Path, sweep: dict) -> pd.DataFrame:
    """runs.csv, summary.csv, ratios.csv, breakdown.csv (fsync-append), the job file,
    throughput.png and meta.json (with `sweep`: the store and sweep that ran the points) into
    the folder `out`."""
    summary = summarise(runs)
    table = ratios(summary, plan.workload)
    runs.to_csv(out / "runs.csv", index=False, float_format="%.6g")
    summary.to_csv(out / "summary.csv", index=False, float_format="%.6g")
    table.to_csv(out / "ratios.csv", index=False, float_format="%.4g")
    if plan.workload == "fsync-append":
        breakdown(runs).to_csv(out / "breakdown.csv", index=False, float_format="%.6g")
    (out / f"{plan.workload}.fio").write_text(
        job_text(max(plan.threads), plan.writes, plan.workload)
    )
    plot(summary, out / "throughput.png", plan.workload)
    meta = {"command": sys.argv, "plan": asdict(plan), **sweep}
    (out / "meta.json").write_text(json.dumps(meta, indent=1) + "\n")
    return table
