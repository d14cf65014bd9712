"""The lab's figures, one function per figure, each drawn from the tidy tables alone.

Each returns a report `Figure` (inline SVG, with the PNG and SVG files beside the report in
`figures/`); the caller adds the caption. The house style comes from `qoslab.report`.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from qoslab.report import Figure
from qoslab.report.figures import pyplot, save_figure
from qoslab.report.stats import MIN_REPS

plt = pyplot()

PCT_COLUMNS = [("p50_us", "p50"), ("p95_us", "p95"), ("p99_us", "p99"), ("p99_9_us", "p99.9")]


def _save(fig, path: Path) -> Figure:
    """Writes `path` (.png) and its .svg twin; links are relative to the report."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.tight_layout()
    return save_figure(fig, path.parent, path.stem, link_prefix=f"{path.parent.name}/")


def _bs_label(size: float) -> str:
    return f"{int(size) // 1024}k"


def baseline(table: pd.DataFrame, path: Path) -> Figure:
    t = table.sort_values(["rw", "bs_bytes"]).reset_index(drop=True)
    labels = [f"{r.rw}\n{_bs_label(r.bs_bytes)}" for r in t.itertuples()]
    x = np.arange(len(t))
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(11, 4))
    ax1.bar(x - 0.2, t.iops, 0.4, label="IOPS", color="tab:blue")
    ax1.set_ylabel("IOPS")
    ax1b = ax1.twinx()
    ax1b.bar(x + 0.2, t.mb_s, 0.4, label="MB/s", color="tab:orange")
    ax1b.set_ylabel("MB/s")
    ax1.set_xticks(x, labels)
    ax1.set_title("QD 1 throughput")
    ax1.legend(
        handles=ax1.patches[:1] + ax1b.patches[:1], labels=["IOPS", "MB/s"], loc="upper center"
    )
    width = 0.16
    for i, (col, name) in enumerate([("lat_mean_us", "mean"), *PCT_COLUMNS]):
        ax2.bar(x + (i - 2) * width, t[col], width, label=name)
    ax2.set_yscale("log")
    ax2.set_xticks(x, labels)
    ax2.set_ylabel("latency (µs)")
    ax2.set_title("QD 1 latency")
    ax2.legend(fontsize=8)
    return _save(fig, path)


def bs_sweep(table: pd.DataFrame, path: Path) -> Figure:
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(11, 4))
    for rw, group in table.groupby("rw"):
        g = group.sort_values("bs_bytes")
        ax1.plot(g.bs_bytes, g.iops, marker="o", label=rw)
        ax2.plot(g.bs_bytes, g.mb_s, marker="o", label=rw)
    for ax, ylabel in ((ax1, "IOPS"), (ax2, "MB/s")):
        ax.set_xscale("log", base=2)
        ticks = sorted(table.bs_bytes.unique())
        ax.set_xticks(ticks, [_bs_label(b) for b in ticks])
        ax.set_xlabel("block size")
        ax.set_ylabel(ylabel)
        ax.grid(alpha=0.3)
        ax.legend()
    qd = int(table.qd.iloc[0])
    ax1.set_title(f"IOPS vs block size (QD {qd})")
    ax2.set_title(f"MB/s vs block size (QD {qd})")
    return _save(fig, path)


def mix_sweep(table: pd.DataFrame, path: Path) -> Figure:
    mixes = sorted(table.rwmixread.dropna().unique(), reverse=True)
    x = np.arange(len(mixes))
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(11, 4))
    bottom = np.zeros(len(mixes))
    for op, color in (("read", "tab:blue"), ("write", "tab:red")):
        vals = np.array(
            [table[(table.rwmixread == m) & (table.op == op)].iops.sum() for m in mixes]
        )
        ax1.bar(x, vals, bottom=bottom, color=color, label=op)
        bottom += vals
        p99 = [table[(table.rwmixread == m) & (table.op == op)].p99_us for m in mixes]
        p99 = np.array([v.iloc[0] if len(v) else np.nan for v in p99])
        offset = -0.2 if op == "read" else 0.2
        ax2.bar(x + offset, p99, 0.4, color=color, label=f"{op} p99")
    labels = [f"{int(m)}% read" for m in mixes]
    ax1.set_xticks(x, labels)
    ax1.set_ylabel("IOPS")
    ax1.set_title("4K random mix: IOPS by direction")
    ax1.legend()
    ax2.set_xticks(x, labels)
    ax2.set_ylabel("p99 latency (µs)")
    ax2.set_title("4K random mix: p99 by direction")
    ax2.legend()
    return _save(fig, path)


def qd_tradeoff(table: pd.DataFrame, knee_depth: int | None, path: Path) -> Figure:
    t = table.sort_values("qd")
    fig, ax = plt.subplots(figsize=(7, 4.5))
    ax.plot(t.iops, t.lat_mean_us, marker="o", label="mean")
    ax.plot(t.iops, t.p99_us, marker="s", label="p99")
    for r in t.itertuples():
        ax.annotate(
            f"QD{int(r.qd)}",
            (r.iops, r.p99_us),
            textcoords="offset points",
            xytext=(4, 4),
            fontsize=8,
        )
    if knee_depth is not None:
        k = t[t.qd == knee_depth].iloc[0]
        ax.axvline(k.iops, color="grey", ls="--", lw=1)
        ax.plot(
            [k.iops],
            [k.p99_us],
            marker="*",
            ms=16,
            color="red",
            ls="none",
            label=f"knee (QD {knee_depth})",
        )
    ax.set_yscale("log")
    ax.set_xlabel("IOPS")
    ax.set_ylabel("latency (µs)")
    ax.set_title("4K random read: throughput vs latency")
    ax.grid(alpha=0.3)
    ax.legend()
    return _save(fig, path)


def littles_law(table: pd.DataFrame, path: Path) -> Figure:
    t = table.sort_values("qd")
    fig, ax = plt.subplots(figsize=(6, 4.5))
    lim = [0.8, float(t.qd.max()) * 1.3]
    ax.plot(lim, lim, color="grey", lw=1, label="L = QD")
    ax.fill_between(
        lim, [v * 0.9 for v in lim], [v * 1.1 for v in lim], color="grey", alpha=0.15, label="±10 %"
    )
    ax.plot(t.qd, t.littles_l, marker="o", ls="none", label="L = IOPS x mean latency")
    ax.set_xscale("log", base=2)
    ax.set_yscale("log", base=2)
    ax.set_xlim(lim)
    ax.set_ylim(lim)
    ax.set_xlabel("queue depth")
    ax.set_ylabel("I/Os in flight (Little's law)")
    ax.set_title("Little's law check")
    ax.grid(alpha=0.3)
    ax.legend()
    return _save(fig, path)


def latency_cdfs(bins: pd.DataFrame, labels: dict[str, str], title: str, path: Path) -> Figure:
    """CDF and tail (1 - CDF) of each run's total latency from json+ bins."""
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(11, 4))
    for run, label in labels.items():
        b = bins[bins.run == run]
        if b.empty:
            continue
        kind = "lat" if (b.kind == "lat").any() else "clat"
        b = b[b.kind == kind].groupby("value_ns")["count"].sum().sort_index()
        us = b.index.to_numpy() / 1000.0
        cdf = np.cumsum(b.to_numpy()) / b.sum()
        ax1.plot(us, cdf, label=label)
        slower = 1.0 - cdf  # fraction of I/Os slower than this bucket
        keep = slower > 0
        ax2.step(us[keep], slower[keep], where="post", label=label)
    for ax in (ax1, ax2):
        ax.set_xscale("log")
        ax.set_xlabel("latency (µs)")
        ax.grid(alpha=0.3, which="both")
    ax1.set_ylabel("fraction of I/Os")
    ax1.set_title(f"{title}: CDF")
    ax2.set_yscale("log")
    for p in (0.5, 0.05, 0.01, 0.001):
        ax2.axhline(p, color="grey", lw=0.6, ls=":")
    ax2.set_ylabel("fraction slower (1 - CDF)")
    ax2.set_title(f"{title}: tail (p50, p95, p99, p99.9 dotted)")
    ax1.legend(fontsize=8)
    return _save(fig, path)


def tails_bars(table: pd.DataFrame, path: Path) -> Figure:
    t = table.sort_values("qd")
    x = np.arange(len(PCT_COLUMNS))
    fig, ax = plt.subplots(figsize=(7, 4))
    width = 0.8 / max(len(t), 1)
    for i, r in enumerate(t.itertuples()):
        vals = [getattr(r, col) for col, _ in PCT_COLUMNS]
        ax.bar(x + (i - (len(t) - 1) / 2) * width, vals, width, label=f"QD {int(r.qd)}")
    ax.set_xticks(x, [name for _, name in PCT_COLUMNS])
    ax.set_yscale("log")
    ax.set_ylabel("latency (µs)")
    ax.set_title("4K random read tail percentiles")
    ax.legend()
    return _save(fig, path)


# ---- kernel schedulers and priorities ----------------------------------------------------------

JOB_COLORS = {"database_sim": "tab:blue", "backup_sim": "tab:orange"}


def _sched_bars(summary, mean, sd, ylabel, title, path, log=False) -> Figure:
    scheds = list(dict.fromkeys(summary.scheduler))
    jobs = list(dict.fromkeys(summary.job))
    fig, axes = plt.subplots(1, len(jobs), figsize=(5 * len(jobs), 4))
    for ax, job in zip(np.atleast_1d(axes), jobs, strict=True):
        s = summary[summary.job == job].set_index("scheduler").reindex(scheds)
        # No error bar from fewer than MIN_REPS repetitions (one run has no spread to show).
        err = s[sd].where(s["reps"] >= MIN_REPS) if sd else None
        ax.bar(scheds, s[mean], yerr=err, capsize=4, color=JOB_COLORS.get(job, "grey"))
        ax.set_title(f"{job}: {title}")
        ax.set_ylabel(ylabel)
        if log:
            ax.set_yscale("log")
        ax.grid(alpha=0.3, axis="y")
    return _save(fig, path)


def iops_bars(summary: pd.DataFrame, path: Path) -> Figure:
    return _sched_bars(summary, "iops_mean", "iops_sd", "IOPS", "IOPS", path)


def p99_bars(summary: pd.DataFrame, path: Path) -> Figure:
    return _sched_bars(
        summary, "p99_us_mean", "p99_us_sd", "p99 latency (µs)", "p99", path, log=True
    )


def cpu_bars(summary: pd.DataFrame, path: Path) -> Figure:
    return _sched_bars(
        summary, "cpu_pct_mean", "cpu_pct_sd", "CPU (% of one core)", "fio CPU (usr+sys)", path
    )


def latency_series(ts: pd.DataFrame, scheds: list[str], path: Path) -> Figure:
    fig, axes = plt.subplots(
        1, len(scheds), figsize=(4 * len(scheds), 3.6), sharey=True, squeeze=False
    )
    first = ts[ts.rep == ts.rep.min()]
    for ax, sched in zip(axes[0], scheds, strict=True):
        for job, g in first[first.scheduler == sched].groupby("job"):
            ax.plot(
                g.time_ms / 1000.0, g.latency_us, lw=1, label=job, color=JOB_COLORS.get(job, "grey")
            )
        ax.set_yscale("log")
        ax.set_title(sched)
        ax.set_xlabel("time (s)")
        ax.grid(alpha=0.3, which="both")
    axes[0][0].set_ylabel("mean latency per window (µs)")
    axes[0][0].legend(fontsize=8)
    return _save(fig, path)


# ---- calibration ---------------------------------------------------------------------------


def calibration(comparison: pd.DataFrame, path: Path) -> Figure:
    c = comparison.sort_values("iodepth")
    fig, ax = plt.subplots(figsize=(7.5, 4.5))
    held = c.role == "held out"
    for name, color in (("p50", "#0072B2"), ("p99", "#D55E00")):
        ax.plot(
            c.iodepth,
            c[f"measured_{name}_us"],
            color=color,
            lw=1,
            marker="o",
            ms=0,
            label=f"measured {name}",
        )
        ax.plot(
            c.iodepth,
            c[f"predicted_{name}_us"],
            color=color,
            lw=1,
            ls="--",
            label=f"predicted {name}",
        )
        ax.scatter(c.iodepth[~held], c[f"measured_{name}_us"][~held], color=color, zorder=3)
        ax.scatter(
            c.iodepth[held],
            c[f"measured_{name}_us"][held],
            facecolors="white",
            edgecolors=color,
            zorder=3,
            s=60,
        )
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xticks(list(c.iodepth), [str(d) for d in c.iodepth])
    ax.set_xlabel("queue depth (hollow: held out of the fit)")
    ax.set_ylabel("total latency (µs)")
    ax.set_title("Empirical device: measured vs simulated")
    ax.legend(fontsize=8)
    return _save(fig, path)
