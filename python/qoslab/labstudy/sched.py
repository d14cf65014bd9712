"""`qoslab lab sched`: do the kernel's I/O schedulers honour I/O priorities?

Two jobs share one device in one fio run: `database_sim` (4K random reads, high priority) and
`backup_sim` (128K sequential reads, low priority). The run is repeated on each scheduler,
`reps` times, interleaved (rep 1 on every scheduler, then rep 2, ...) so that slow drift of
the machine spreads over all schedulers instead of biasing one. Reported per scheduler and
job: IOPS and p99 (mean ± one standard deviation over the repetitions), fio's CPU usage, and
the latency time series of both jobs (fio's `log_avg_msec` logs). The scheduler active before,
and its tunables, are restored afterwards, also after an error or Ctrl-C. Each run is a point of
the sweep engine's `lab run` study (`qoslab.labstudy.runs`), its scheduler selected first: a
command killed midway and started again measures only the runs its store lacks.
"""

from __future__ import annotations

import json
import sys
import time
from dataclasses import asdict
from pathlib import Path

import pandas as pd

from qoslab._core import __version__
from qoslab.errors import InputError
from qoslab.fio import jobs_table
from qoslab.fio.logs import read_fio_log
from qoslab.lab.journal import scheduler_restored
from qoslab.lab.plans import global_options
from qoslab.lab.queue import device_metadata, schedulers
from qoslab.lab.report import environment_section, frame_table
from qoslab.lab.runner import FioJob, render_job_file
from qoslab.lab.sched_jobs import JOBS, SchedOptions, prio_options
from qoslab.labstudy.runs import FioRun, LabRuns, on_target
from qoslab.report import Section, Text, write_report
from qoslab.report.stats import MIN_REPS


def _jobs(opts: SchedOptions) -> list[FioJob]:
    common = {"log_avg_msec": opts.log_msec}
    return [
        FioJob(
            "database_sim",
            {
                "rw": "randread",
                "bs": 4096,
                "iodepth": opts.db_iodepth,
                **prio_options(opts.db_prio, "--db-prio"),
                "write_lat_log": "database_sim",
                **common,
            },
        ),
        FioJob(
            "backup_sim",
            {
                "rw": "read",
                "bs": 131072,
                "iodepth": opts.backup_iodepth,
                **prio_options(opts.backup_prio, "--backup-prio"),
                "write_lat_log": "backup_sim",
                **common,
            },
        ),
    ]


def run_sched(
    target_arg: str,
    *,
    out: Path,
    opts: SchedOptions,
    size: int = 10 << 30,
    destructive_ok: str | None = None,
    precondition: bool = True,
    quiet: bool = False,
    store: Path | None = None,
) -> Path:
    jobs = _jobs(opts)  # validates the priorities before anything is touched
    per_run_s = opts.runtime_s + opts.ramp_s + 0.5
    total_s = per_run_s * opts.reps * len(opts.schedulers)
    started = time.strftime("%Y-%m-%dT%H:%M:%S%z")
    frame = on_target(target_arg, size, out, quiet, destructive_ok, precondition, block=True)
    with frame as (progress, tmp, target):
        available, _active = schedulers(target.disk)
        missing = [s for s in opts.schedulers if s not in available]
        if missing:
            raise InputError(
                f"scheduler(s) {', '.join(missing)} not available on {target.disk} "
                f"(available: {', '.join(available)}; `modprobe` the missing ones)"
            )
        env_before = device_metadata(target.disk)
        g = global_options(target.path, target.size_bytes, opts)
        fio = LabRuns(tmp, target, Path(out), store, progress, total_s, quiet)
        # Interleaved: repetition 1 on every scheduler, then repetition 2, ...
        order = [(rep, sched) for rep in range(1, opts.reps + 1) for sched in opts.schedulers]
        runs = []
        for rep, sched in order:
            header = (
                f"qoslab lab sched: {sched}, repetition {rep}\n"
                "Two concurrent jobs with different I/O priorities; per-job statistics."
            )
            job_file = render_job_file(g, jobs, header)
            runs.append(FioRun(f"{sched}/rep{rep}", job_file, per_run_s, scheduler=sched))
        with scheduler_restored(target.disk):
            done = fio.run("lab-sched", runs)
        frames, series = [], []
        for (rep, sched), run, (output, meta) in zip(order, runs, done, strict=True):
            t = jobs_table([output])
            t.insert(0, "rep", rep)
            t.insert(0, "scheduler", sched)
            t["kernel"] = meta["kernel"]
            frames.append(t)
            series.append(_series(tmp / "logs" / run.run_id, sched, rep))
        env_after = device_metadata(target.disk)
        table = pd.concat(frames, ignore_index=True)
        table["cpu_pct"] = table.usr_cpu + table.sys_cpu
        ts = pd.concat(series, ignore_index=True)
        summary = summarise(table, opts.schedulers)
        table.to_parquet(tmp / "results.parquet", index=False)
        table.to_csv(tmp / "results.csv", index=False, float_format="%.6g")
        summary.to_csv(tmp / "summary.csv", index=False, float_format="%.6g")
        ts.to_parquet(tmp / "latency-series.parquet", index=False)
        meta = {
            "command": sys.argv,
            "qoslab_version": __version__,
            "fio_version": fio.fio_version,
            "options": asdict(opts),
            "target": target.describe(),
            "environment_before": env_before,
            "scheduler_restored": env_after.get("scheduler"),
            "started_at": started,
            "finished_at": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
            **fio.provenance(),
        }
        (tmp / "meta.json").write_text(json.dumps(meta, indent=1, default=str) + "\n")
        _report(tmp, table, summary, ts, opts, meta)
    fio.finish()
    return Path(out)


def _series(log_dir: Path, sched: str, rep: int) -> pd.DataFrame:
    frames = []
    for job in JOBS:
        logs = sorted(log_dir.glob(f"{job}_lat.*.log"))
        if not logs:
            raise InputError(f"fio wrote no latency log for {job}", path=log_dir)
        f = read_fio_log(logs[0])
        f["latency_us"] = f.pop("value") / 1000.0
        f.insert(0, "job", job)
        f.insert(0, "rep", rep)
        f.insert(0, "scheduler", sched)
        frames.append(f)
    return pd.concat(frames, ignore_index=True)


def summarise(table: pd.DataFrame, order: tuple[str, ...]) -> pd.DataFrame:
    """Mean and standard deviation over repetitions, per scheduler and job."""
    g = table.groupby(["scheduler", "job"], sort=False)
    summary = g.agg(
        reps=("rep", "nunique"),
        iops_mean=("iops", "mean"),
        iops_sd=("iops", "std"),
        mb_s_mean=("mb_s", "mean"),
        lat_mean_us=("lat_mean_us", "mean"),
        p99_us_mean=("p99_us", "mean"),
        p99_us_sd=("p99_us", "std"),
        cpu_pct_mean=("cpu_pct", "mean"),
        cpu_pct_sd=("cpu_pct", "std"),
    ).reset_index()
    summary["scheduler"] = pd.Categorical(summary.scheduler, categories=list(order), ordered=True)
    summary["job"] = pd.Categorical(summary.job, categories=list(JOBS), ordered=True)
    summary = summary.sort_values(["scheduler", "job"]).reset_index(drop=True)
    summary["scheduler"] = summary.scheduler.astype(str)
    summary["job"] = summary.job.astype(str)
    return summary


def _report(out, table, summary, ts, opts, meta) -> None:
    from qoslab.lab import figures as figs

    fig_dir = out / "figures"
    env = meta["environment_before"]
    facts = [
        ("target", meta["target"]["path"]),
        ("kernel", env["kernel"]),
        ("fio", meta["fio_version"]),
        ("database_sim", f"4K random read, iodepth {opts.db_iodepth}, priority {opts.db_prio}"),
        (
            "backup_sim",
            f"128K sequential read, iodepth {opts.backup_iodepth}, priority {opts.backup_prio}",
        ),
        (
            "runs",
            f"{opts.runtime_s:g} s after {opts.ramp_s:g} s warm-up, {opts.reps} "
            "repetitions per scheduler, interleaved",
        ),
        ("scheduler before / after", f"{env.get('scheduler')} / {meta['scheduler_restored']}"),
    ]
    shown = summary[
        [
            "scheduler",
            "job",
            "reps",
            "iops_mean",
            "iops_sd",
            "mb_s_mean",
            "lat_mean_us",
            "p99_us_mean",
            "p99_us_sd",
            "cpu_pct_mean",
        ]
    ]
    runs = table[
        [
            "scheduler",
            "rep",
            "job",
            "iops",
            "mb_s",
            "lat_mean_us",
            "p50_us",
            "p99_us",
            "p99_9_us",
            "usr_cpu",
            "sys_cpu",
        ]
    ]

    def fig(figure, caption):
        figure.caption = caption
        return figure

    sections = [
        Section(
            "Throughput and tail latency per scheduler",
            [
                Text(
                    "Both jobs run together in one fio run. A scheduler that honours I/O "
                    "priorities raises database_sim's IOPS and lowers its p99 at backup_sim's "
                    "expense; one that ignores them lets the large sequential reads queue in "
                    "front of the small random ones. Error bars: ±1 standard deviation over "
                    f"the repetitions, drawn from {MIN_REPS} repetitions or more."
                ),
                fig(figs.iops_bars(summary, fig_dir / "sched-iops.png"), "IOPS per job"),
                fig(figs.p99_bars(summary, fig_dir / "sched-p99.png"), "p99 latency per job"),
                fig(
                    figs.cpu_bars(summary, fig_dir / "sched-cpu.png"),
                    "fio CPU usage (usr + sys) per job",
                ),
                frame_table(shown, "Per scheduler and job, over repetitions"),
            ],
        ),
        Section(
            "Latency over time",
            [
                Text(f"Mean latency per {opts.log_msec} ms window, repetition 1, both jobs."),
                fig(
                    figs.latency_series(ts, list(opts.schedulers), fig_dir / "sched-series.png"),
                    "Latency time series per scheduler",
                ),
            ],
        ),
        Section("Every run", [frame_table(runs, "Runs")]),
        environment_section(meta, env),
    ]
    write_report(out / "report.html", "qoslab lab sched", sections, facts=facts)
