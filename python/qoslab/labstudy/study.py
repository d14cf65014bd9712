"""`qoslab lab study NAME`: run a characterisation study and write its tables, figures, report.

Output directory:

    meta.json           the command, its options, fio version, kernel, target and its queue
    jobs/<study>/*.fio  the job file of every run, exactly as fio ran it
    raw/<study>/*.json  fio's json+ output per run (+ .meta.json: environment at run start)
    (each run a point of the sweep engine's `lab run` study, `qoslab.labstudy.runs`: a study
    killed midway and started again measures only the runs its store lacks)
    results.parquet     tidy table, one row per run, job and direction (also results.csv)
    bins.parquet        json+ latency histograms per run (for CDFs and calibration)
    summary.json        the knee and the Little's-law check
    figures/*.png       the figures of the report
    report.html         everything above on one page
"""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path

import pandas as pd

from qoslab._core import __version__
from qoslab.fio import FioOutput, bins_table, jobs_table
from qoslab.lab import figures
from qoslab.lab.analysis import Knee, add_littles_law, find_knee, knee_steps
from qoslab.lab.plans import (
    STUDIES,
    Point,
    StudyOptions,
    global_options,
    plan,
    tails_depths,
    tails_plan,
)
from qoslab.lab.queue import device_metadata
from qoslab.lab.report import environment_section, frame_table
from qoslab.lab.runner import render_job_file
from qoslab.labstudy.runs import FioRun, LabRuns, on_target
from qoslab.report import Figure, Section, Text, write_report
from qoslab.units import human_bytes

FIO_START_S = 0.5  # fio's own start-up and teardown per run, for the time estimate

SHOWN_COLUMNS = [
    "point",
    "op",
    "qd",
    "iops",
    "mb_s",
    "lat_mean_us",
    "p50_us",
    "p95_us",
    "p99_us",
    "p99_9_us",
]


def run_study(
    name: str,
    target_arg: str,
    *,
    size: int,
    out: Path,
    opts: StudyOptions,
    destructive_ok: str | None = None,
    precondition: bool = True,
    keep_target: bool = False,
    quiet: bool = False,
    report: bool = True,
    store: Path | None = None,
) -> Path:
    studies = list(STUDIES) if name == "all" else [name]
    planned = [s for s in studies if s != "tails"]
    if "tails" in studies and "qd-sweep" not in planned:
        planned.append("qd-sweep")  # the tails are taken at depths the sweep finds
    points = [p for s in planned for p in plan(s, opts)]
    per_run_s = opts.runtime_s + opts.ramp_s + FIO_START_S
    total_s = per_run_s * (len(points) + (2 if "tails" in studies else 0))
    started = time.strftime("%Y-%m-%dT%H:%M:%S%z")
    frame = on_target(target_arg, size, out, quiet, destructive_ok, precondition, keep=keep_target)
    with frame as (progress, tmp, target):
        fio = LabRuns(tmp, target, Path(out), store, progress, total_s, quiet)
        env = device_metadata(target.disk)
        g = global_options(target.path, target.size_bytes, opts)

        def measure(sweep: str, chosen: list[Point]) -> list[tuple[Point, FioOutput, dict]]:
            runs = [FioRun(p.run_id, _job_file(p, g, name), per_run_s) for p in chosen]
            done = fio.run(sweep, runs)
            return [(p, output, meta) for p, (output, meta) in zip(chosen, done, strict=True)]

        runs = measure(f"lab-{name}", points)
        table = _table(runs)
        knee = None
        if "qd-sweep" in planned:
            knee = find_knee(_sweep(table, "qd-sweep"), opts.knee)
        if "tails" in studies:
            mid, knee_qd = tails_depths(opts, knee.depth if knee else None)
            runs += measure(f"lab-{name}-tails", tails_plan(mid, knee_qd))
            table = _table(runs)
        bins = _bins(runs)
        _write_tables(tmp, table, bins)
        summary = _summary(table, knee, opts)
        (tmp / "summary.json").write_text(json.dumps(summary, indent=1, default=str) + "\n")
        meta = {
            "command": sys.argv,
            "study": name,
            "qoslab_version": __version__,
            "fio_version": fio.fio_version,
            "options": asdict(opts),
            "target": target.describe(),
            "environment": env,
            "started_at": started,
            "finished_at": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
            **fio.provenance(),
        }
        (tmp / "meta.json").write_text(json.dumps(meta, indent=1, default=str) + "\n")
        if report:  # the figures are most of a short study's CPU (matplotlib's layout)
            shown = planned + (["tails"] if "tails" in studies else [])
            _report(tmp, name, table, bins, knee, summary, meta, shown)
    fio.finish()
    return Path(out)


def _job_file(p: Point, g: dict, study: str) -> str:
    header = (
        f"qoslab lab study {study}: {p.run_id}\n"
        "One fio run per data point; no group_reporting, so every job reports its own numbers."
    )
    return render_job_file(g, [p.job], header)


def _table(runs: list[tuple[Point, FioOutput, dict]]) -> pd.DataFrame:
    frames = []
    for p, output, meta in runs:
        t = jobs_table([output])
        t.insert(0, "run", p.run_id)
        t.insert(0, "point", p.name)
        t.insert(0, "study", p.study)
        t["kernel"] = meta.get("kernel", "")
        t["scheduler"] = meta.get("scheduler", "")
        t["target"] = meta["target"]["path"]
        frames.append(t)
    return add_littles_law(pd.concat(frames, ignore_index=True))


def _bins(runs: list[tuple[Point, FioOutput, dict]]) -> pd.DataFrame:
    frames = []
    for p, output, _meta in runs:
        b = bins_table([output])
        b.insert(0, "run", p.run_id)
        b.insert(0, "study", p.study)
        frames.append(b)
    return pd.concat(frames, ignore_index=True)


def _sweep(table: pd.DataFrame, study: str) -> pd.DataFrame:
    t = table[(table.study == study) & (table.op == "read")]
    return t[["qd", "iops", "p99_us", "lat_mean_us", "littles_l", "littles_ratio", "run"]]


def _write_tables(out: Path, table: pd.DataFrame, bins: pd.DataFrame) -> None:
    table.to_parquet(out / "results.parquet", index=False)
    table.to_csv(out / "results.csv", index=False, float_format="%.6g")
    bins.to_parquet(out / "bins.parquet", index=False)


def _summary(table: pd.DataFrame, knee: Knee | None, opts: StudyOptions) -> dict:
    summary: dict = {"runs": int(table.run.nunique())}
    if knee is not None:
        summary["knee"] = knee.as_dict()
        sweep = _sweep(table, "qd-sweep").sort_values("qd")
        summary["littles_law"] = [
            {"qd": int(r.qd), "L": float(r.littles_l), "L_over_qd": float(r.littles_ratio)}
            for r in sweep.itertuples()
        ]
    return summary


def _shown(table: pd.DataFrame) -> pd.DataFrame:
    return table[SHOWN_COLUMNS].reset_index(drop=True)


def _figure(figure: Figure, caption: str) -> Figure:
    figure.caption = caption
    return figure


def _report(out, name, table, bins, knee, summary, meta, studies) -> None:
    target, env, o = meta["target"], meta["environment"], meta["options"]
    intro = Text(
        f"Each data point is its own fio run of {o['runtime_s']:g} s after {o['ramp_s']:g} s "
        "of warm-up (excluded from the statistics), with direct I/O and no group_reporting. "
        "Latencies are fio's total latency (submission + completion) in µs."
    )
    facts = [
        (
            "target",
            f"{target['path']} ({target['kind']}, {human_bytes(target['size_bytes'])} addressed)",
        ),
        ("scheduler", env.get("scheduler", "n/a")),
        ("kernel", env["kernel"]),
        ("fio", meta["fio_version"]),
    ]
    fig_dir = out / "figures"
    sections = [
        _SECTIONS[study](table[table.study == study], bins, knee, fig_dir) for study in studies
    ]
    sections[0].items.insert(0, intro)
    sections.append(environment_section(meta, env))
    write_report(out / "report.html", f"qoslab lab study {name}", sections, facts=facts)


@dataclass(frozen=True)
class _Plain:
    """A section that is an explanation, one figure and the table of its runs."""

    title: str
    text: str
    draw: Callable[[pd.DataFrame, Path], Figure]
    image: str
    caption: str
    rows: Callable[[pd.DataFrame], pd.DataFrame]
    table_caption: str

    def __call__(self, t, bins, knee, fig_dir) -> Section:
        figure = _figure(self.draw(t, fig_dir / self.image), self.caption)
        return Section(
            self.title, [Text(self.text), figure, frame_table(self.rows(t), self.table_caption)]
        )


MIX_COLUMNS = ["point", "op", "rwmixread", "iops", "mb_s", "lat_mean_us", "p99_us", "p99_9_us"]

_baseline_section = _Plain(
    "Baseline (QD 1)",
    "One I/O at a time: the device's unloaded service time per access pattern. "
    "Left: IOPS and MB/s; right: mean and percentile latency (log scale).",
    figures.baseline,
    "baseline.png",
    "QD 1 baselines",
    _shown,
    "Baseline runs",
)

_bs_sweep_section = _Plain(
    "Block-size sweep",
    "Small blocks are bounded by the cost per command (IOPS), large ones by "
    "bandwidth (MB/s). Where MB/s flattens, the transfer path is saturated.",
    figures.bs_sweep,
    "bs-sweep.png",
    "IOPS and MB/s vs block size",
    _shown,
    "Block-size sweep",
)

_mix_sweep_section = _Plain(
    "Read/write mix",
    "4K random I/O from all reads to all writes. Left: IOPS per direction, "
    "stacked; right: p99 per direction.",
    figures.mix_sweep,
    "mix-sweep.png",
    "IOPS and p99 by mix",
    lambda t: t[MIX_COLUMNS],
    "Mix sweep",
)


def _qd_sweep_section(t, bins, knee, fig_dir) -> Section:
    sweep = t.sort_values("qd")
    if knee.depth is not None:
        found = f"Knee at QD {knee.depth} ({knee.iops:,.0f} IOPS, p99 {knee.p99_us:,.0f} µs)"
    else:
        found = "No knee within the measured depths"
    labels = {r.run: f"QD {int(r.qd)}" for r in sweep.itertuples()}
    steps = knee_steps(_sweep(t, "qd-sweep"), knee.rule)
    return Section(
        "Queue-depth sweep",
        [
            Text(f"{found}; the rule: {knee.rule.describe()}."),
            Text(
                "Throughput vs latency: one point per depth; the curve turns upward once extra "
                "depth only adds queueing. Little's law: L = IOPS x mean latency equals the "
                "queue depth when fio keeps the queue full (the grey band is ±10 %)."
            ),
            _figure(
                figures.qd_tradeoff(sweep, knee.depth, fig_dir / "qd-tradeoff.png"),
                "Throughput vs latency, knee marked",
            ),
            _figure(
                figures.littles_law(sweep, fig_dir / "littles-law.png"),
                "Little's law: I/Os in flight vs queue depth",
            ),
            _figure(
                figures.latency_cdfs(bins, labels, "4K random read", fig_dir / "qd-cdf.png"),
                "Latency distribution per queue depth",
            ),
            frame_table(sweep[[*SHOWN_COLUMNS, "littles_l", "littles_ratio"]], "Queue-depth sweep"),
            frame_table(steps, "Knee rule, step by step"),
        ],
    )


def _tails_section(t, bins, knee, fig_dir) -> Section:
    labels = {r.run: f"{r.point.split('-')[0]} QD {int(r.qd)}" for r in t.itertuples()}
    return Section(
        "Tail latency",
        [
            Text(
                "p50/p95/p99/p99.9 at mid queue depth and at the knee: how far the tail "
                "stretches beyond the median as the device approaches saturation."
            ),
            _figure(figures.tails_bars(t, fig_dir / "tails.png"), "Tail percentiles"),
            _figure(
                figures.latency_cdfs(bins, labels, "tails", fig_dir / "tails-cdf.png"),
                "Latency CDFs at mid depth and at the knee",
            ),
            frame_table(_shown(t), "Tails"),
        ],
    )


_SECTIONS = {
    "baseline": _baseline_section,
    "bs-sweep": _bs_sweep_section,
    "mix-sweep": _mix_sweep_section,
    "qd-sweep": _qd_sweep_section,
    "tails": _tails_section,
}
