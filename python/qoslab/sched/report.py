"""The scheduler study's report: figures drawn from the study's tables alone, and the
comparison with `qoslab lab sched` results."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from qoslab.errors import InputError
from qoslab.lab.report import frame_table
from qoslab.report import Figure, Section, Text, write_report
from qoslab.report.figures import PALETTE, pyplot, save_figure
from qoslab.report.stats import INTERVAL_NAME, MIN_REPS, order_of, shown_sd, welch_interval

JOB_COLORS = {"database_sim": PALETTE[0], "backup_sim": PALETTE[1]}
REAL_COLUMNS = ("scheduler", "rep", "job", "iops", "mb_s", "p50_us", "p99_us", "p99_9_us")
# The metrics compared with the real kernel, one chart each.
COMPARED = (("iops", "IOPS"), ("mb_s", "MB/s"), ("p50_us", "p50 (µs)"), ("p99_us", "p99 (µs)"))


def read_real(path: Path) -> pd.DataFrame:
    """The runs of a `qoslab lab sched` output directory."""
    table = Path(path) / "results.parquet"
    if not table.is_file():
        raise InputError(
            "--real: expected a `qoslab lab sched` output (no results.parquet)", path=path
        )
    real = pd.read_parquet(table)
    missing = [c for c in REAL_COLUMNS if c not in real.columns]
    if missing:
        raise InputError(f"--real: results.parquet lacks {', '.join(missing)}", path=table)
    return real[list(REAL_COLUMNS)]


def over(runs: pd.DataFrame, keys: list[str], metric: str) -> pd.DataFrame:
    """Mean, standard deviation and count of `metric` over repetitions, per `keys`; `bar` is
    the standard deviation where there are at least MIN_REPS repetitions, else NaN (the
    figures draw no error bar from fewer)."""
    g = runs.groupby(keys, sort=False)[metric]
    out = pd.DataFrame({"mean": g.mean(), "sd": g.std(ddof=1), "n": g.size()})
    out["bar"] = [shown_sd(sd, n) for sd, n in zip(out.sd, out.n, strict=True)]
    return out


def rank_agreement(
    real: pd.DataFrame, sim: pd.DataFrame, job: str = "database_sim", metric: str = "p99_us"
) -> pd.DataFrame:
    """Per pair of schedulers both sides ran: the real difference a - b of `metric` for `job`
    with its 95 % Welch t interval over the repetitions (none under MIN_REPS on either side),
    what the interval says (`real_order`: a lower, a higher, not resolved, or too few
    repetitions), and how the simulation orders the pair: `same`, `opposite`, or `tie` (equal
    means: nothing the two schedulers do differently reaches the device, so the simulation
    cannot order them)."""
    r = over(real[real.job == job], ["scheduler"], metric)
    s = over(sim[sim.job == job], ["scheduler"], metric)
    common = [x for x in r.index if x in s.index]
    rows = []
    for i, a in enumerate(common):
        for b in common[i + 1 :]:
            diff = r.loc[a, "mean"] - r.loc[b, "mean"]
            ci = welch_interval(
                (r.loc[a, "mean"], r.loc[a, "sd"], r.loc[a, "n"]),
                (r.loc[b, "mean"], r.loc[b, "sd"], r.loc[b, "n"]),
            )
            sim_diff = s.loc[a, "mean"] - s.loc[b, "mean"]
            rows.append(
                {
                    "a": a,
                    "b": b,
                    "real_a": r.loc[a, "mean"],
                    "real_b": r.loc[b, "mean"],
                    "real_reps": int(min(r.loc[a, "n"], r.loc[b, "n"])),
                    "real_diff": diff,
                    "real_ci_low": ci[0] if ci else np.nan,
                    "real_ci_high": ci[1] if ci else np.nan,
                    "real_order": order_of(ci),
                    "sim_a": s.loc[a, "mean"],
                    "sim_b": s.loc[b, "mean"],
                    "sim_order": "tie"
                    if sim_diff == 0
                    else "same"
                    if np.sign(diff) == np.sign(sim_diff)
                    else "opposite",
                }
            )
    return pd.DataFrame(rows)


# ---- figures -------------------------------------------------------------------------------

plt = pyplot()


def _save(fig, out: Path, stem: str, caption: str) -> Figure:
    d = out / "figures"
    d.mkdir(parents=True, exist_ok=True)
    fig.tight_layout()
    f = save_figure(fig, d, stem, link_prefix="figures/")
    f.caption = caption
    return f


def _bars(ax, runs: pd.DataFrame, scheds: list[str], metric: str, log: bool = False) -> None:
    jobs = [j for j in JOB_COLORS if j in set(runs.job)]
    width = 0.8 / max(1, len(jobs))
    x = np.arange(len(scheds))
    for k, job in enumerate(jobs):
        s = over(runs[runs.job == job], ["scheduler"], metric).reindex(scheds)
        ax.bar(
            x + (k - (len(jobs) - 1) / 2) * width,
            s["mean"],
            width,
            yerr=s["bar"],
            capsize=3,
            label=job,
            color=JOB_COLORS[job],
        )
    ax.set_xticks(x, scheds, rotation=20)
    if log:
        ax.set_yscale("log")


def device_figure(runs: pd.DataFrame, device: str, scheds: list[str], out: Path, n: int) -> Figure:
    d = runs[runs.device == device]
    panels = [
        ("iops", "IOPS", False),
        ("mb_s", "MB/s", False),
        ("p50_us", "p50 latency (µs)", True),
        ("p99_us", "p99 latency (µs)", True),
        ("p99_9_us", "p99.9 latency (µs)", True),
        ("sched_cpu_ns_per_request", "scheduler CPU per request (ns)", False),
    ]
    fig, axes = plt.subplots(2, 3, figsize=(13, 7))
    for ax, (metric, label, log) in zip(axes.flat, panels, strict=True):
        if metric == "sched_cpu_ns_per_request":
            _bars(ax, d[d.job == "database_sim"], scheds, metric)
        else:
            _bars(ax, d, scheds, metric, log)
        ax.set_title(label)
    axes.flat[0].legend(fontsize=8)
    return _save(
        fig,
        out,
        f"device-{n}",
        f"{device}: per job and scheduler, mean over seeds, error bars ±1 standard deviation "
        f"(drawn from {MIN_REPS} seeds or more). "
        "Latency is the total latency (submission + completion, fio's lat_percentiles=1). "
        "Scheduler CPU: the cost model's price of the scheduler's work per request completed "
        "(the whole device, not per job).",
    )


def wait_figure(runs: pd.DataFrame, device: str, scheds: list[str], out: Path, n: int) -> Figure:
    d = runs[(runs.job == "database_sim") & (runs.device == device)]
    fig, ax = plt.subplots(figsize=(8, 3.6))
    x = np.arange(len(scheds))
    for k, (metric, label) in enumerate(
        (("read_sched_wait_p99_ns", "in the scheduler"), ("read_device_p99_ns", "at the device"))
    ):
        s = over(d, ["scheduler"], metric).reindex(scheds)
        ax.bar(
            x + (k - 0.5) * 0.4,
            s["mean"] / 1e6,
            0.4,
            yerr=s["bar"] / 1e6,
            capsize=3,
            label=label,
            color=PALETTE[2 + k],
        )
    ax.set_xticks(x, scheds, rotation=20)
    ax.set_ylabel("p99 of every read (ms)")
    ax.legend(fontsize=8)
    return _save(
        fig,
        out,
        f"wait-{n}",
        f"{device}: where reads wait, p99 over all reads of both jobs: in the block layer "
        "(scheduler and dispatch list) and from the driver to completion (the device's own queue).",
    )


def series_figure(
    series: pd.DataFrame, device: str, scheds: list[str], out: Path, n: int
) -> Figure:
    d = series[(series.device == device) & (series.seed == series.seed.min())]
    fig, axes = plt.subplots(
        1, len(scheds), figsize=(3.4 * len(scheds), 3.2), sharey=True, squeeze=False
    )
    for ax, sched in zip(axes[0], scheds, strict=True):
        for job, g in d[d.scheduler == sched].groupby("job", sort=False):
            ax.plot(
                g.time_ms / 1000.0, g.lat_p99_us, lw=1, label=job, color=JOB_COLORS.get(job, "grey")
            )
        ax.set_yscale("log")
        ax.set_title(sched)
        ax.set_xlabel("time (s)")
    axes[0][0].set_ylabel("p99 per window (µs)")
    axes[0][0].legend(fontsize=8)
    return _save(fig, out, f"series-{n}", f"{device}: latency p99 per window over time, seed 1.")


def constants_figure(const: pd.DataFrame, out: Path) -> Figure:
    keys = list(dict.fromkeys(zip(const.scheduler, const.tunable, strict=True)))
    fig, axes = plt.subplots(2, len(keys), figsize=(3.2 * len(keys), 6), squeeze=False)
    for i, (sched, tunable) in enumerate(keys):
        c = const[(const.scheduler == sched) & (const.tunable == tunable)]
        for row, (job, metric, label) in enumerate(
            (
                ("database_sim", "p99_us", "database_sim p99 (ms)"),
                ("backup_sim", "mb_s", "backup_sim MB/s"),
            )
        ):
            s = over(c[c.job == job], ["value"], metric).sort_index()
            scale = 1000.0 if metric == "p99_us" else 1.0
            ax = axes[row][i]
            ax.errorbar(
                s.index,
                s["mean"] / scale,
                yerr=s["bar"] / scale,
                marker="o",
                capsize=3,
                color=JOB_COLORS[job],
            )
            ax.set_xscale("log")
            ax.set_xlabel(tunable)
            if i == 0:
                ax.set_ylabel(label)
            if row == 0:
                ax.set_title(sched, fontsize=9)
    return _save(
        fig,
        out,
        "constants",
        "The study's open constants on the HDD, each changed alone (the others at their "
        "defaults): database_sim's p99 and backup_sim's throughput, mean over seeds, ± 1 sd "
        f"from {MIN_REPS} seeds or more.",
    )


def real_figure(real: pd.DataFrame, sim: pd.DataFrame, out: Path) -> Figure:
    scheds = list(dict.fromkeys([*real.scheduler, *sim.scheduler]))
    fig, axes = plt.subplots(len(COMPARED), 2, figsize=(12, 3.2 * len(COMPARED)), squeeze=False)
    for i, (metric, label) in enumerate(COMPARED):
        for j, job in enumerate(JOB_COLORS):
            ax = axes[i][j]
            x = np.arange(len(scheds))
            for k, (name, runs) in enumerate((("real kernel", real), ("simulated", sim))):
                s = over(runs[runs.job == job], ["scheduler"], metric).reindex(scheds)
                ax.bar(
                    x + (k - 0.5) * 0.4,
                    s["mean"],
                    0.4,
                    yerr=s["bar"],
                    capsize=3,
                    label=name,
                    color=PALETTE[4 + k],
                )
            ax.set_xticks(x, scheds, rotation=20)
            ax.set_title(f"{job}: {label}")
    axes[0][0].legend(fontsize=8)
    return _save(
        fig,
        out,
        "sim-vs-real",
        "The loop device: `qoslab lab sched` on the real kernel beside the simulation on the "
        "device calibrated from it; mean over repetitions (real) and seeds (simulated), ± 1 sd "
        f"where a side has {MIN_REPS} or more. "
        "A scheduler only one side has shows one bar.",
    )


# ---- the report ----------------------------------------------------------------------------

_SUMMARY_COLUMNS = [
    "device",
    "scheduler",
    "job",
    "seeds",
    "iops_mean",
    "iops_sd",
    "mb_s_mean",
    "p50_us_mean",
    "p99_us_mean",
    "p99_us_sd",
    "p99_9_us_mean",
    "read_sched_wait_p99_ns_mean",
    "read_device_p99_ns_mean",
    "read_merges_mean",
    "sched_cpu_ns_per_request_mean",
]


def findings(summary: pd.DataFrame, device: str) -> list[str]:
    """What the table says on `device`, in words computed from it (no finding is forced)."""
    s = summary[summary.device == device].set_index(["scheduler", "job"])
    lines = []

    def get(sched, job, col):
        return s.loc[(sched, job), col] if (sched, job) in s.index else None

    def p99(sched):
        return tuple(get(sched, "database_sim", c) for c in ("p99_us_mean", "p99_us_sd", "seeds"))

    base = get("none", "database_sim", "p99_us_mean")
    if base is None:
        return lines
    for sched in dict.fromkeys(summary.scheduler):
        if sched == "none":
            continue
        mean = get(sched, "database_sim", "p99_us_mean")
        mb = get(sched, "backup_sim", "mb_s_mean")
        if mean is None:
            continue
        rel = (mean - base) / base
        ci = welch_interval(p99(sched), p99("none"))
        if ci is None:
            verdict = f"beside `none`'s (under {MIN_REPS} seeds: no interval, no verdict)"
        else:
            said = {"a lower": "lower than", "a higher": "higher than"}
            verdict = (
                f"{said.get(order_of(ci), 'not told apart from')} `none`'s "
                f"({INTERVAL_NAME} of the difference: {ci[0] / 1000:+.2f} to "
                f"{ci[1] / 1000:+.2f} ms)"
            )
        lines.append(
            f"`{sched}`: database_sim p99 {mean / 1000:.2f} ms ({rel:+.0%}), {verdict}, "
            f"`none` {base / 1000:.2f} ms; backup_sim {mb:.1f} MB/s."
        )
    return lines


def write_study_report(out, opts, runs, summary, series, const, real) -> Path:
    scheds = list(opts.schedulers)
    sections = [
        Section(
            "How to read this report",
            [
                Text(
                    "Each device runs the two jobs of `qoslab lab sched` together, once per "
                    f"scheduler and seed ({opts.seeds} seeds, {opts.runtime_s:g} s simulated "
                    "each). Bars are means over seeds, with ±1 standard deviation from "
                    f"{MIN_REPS} seeds or more (none is drawn from fewer), and a difference is "
                    f"told only by its {INTERVAL_NAME}. A scheduler "
                    "can only order requests that wait in the block layer: where the device "
                    "takes every request at once (its queue deeper than the 20 the jobs keep "
                    "out), all work-conserving schedulers give the same result, and the figure "
                    "'where reads wait' shows it (nothing waits in the scheduler). `bfq` is "
                    "not work-conserving: it serves one queue at a time and idles for it."
                ),
            ],
        )
    ]
    for n, d in enumerate(opts.devices):
        sections.append(
            Section(
                d.label,
                [
                    Text(d.about + (f" (`--set {' '.join(d.sets)}`)" if d.sets else "")),
                    *[Text(line) for line in findings(summary, d.label)],
                    device_figure(runs, d.label, scheds, out, n),
                    wait_figure(runs, d.label, scheds, out, n),
                    series_figure(series, d.label, scheds, out, n),
                ],
            )
        )
    shown = summary[[c for c in _SUMMARY_COLUMNS if c in summary.columns]]
    sections.append(Section("Every device, scheduler and job", [frame_table(shown, "Summary")]))
    if const is not None:
        sections.append(
            Section(
                "The study's open constants",
                [
                    Text(
                        "The source study gives no aging limit, sequential gap, HDD expiry or "
                        "batch size. Here each is changed alone on the HDD; docs/block.md says "
                        "why each default was chosen."
                    ),
                    constants_figure(const, out),
                ],
            )
        )
    if real is not None:
        empirical = [d.label for d in opts.devices if "empirical" in d.label]
        sim = runs[runs.device == (empirical[0] if empirical else opts.devices[-1].label)]
        agree = rank_agreement(real, sim)
        sections.append(
            Section(
                "Simulated beside the real kernel",
                [
                    Text(
                        "A pair of schedulers counts where the "
                        f"{INTERVAL_NAME} of the real difference of database_sim's p99 "
                        f"(from {MIN_REPS} repetitions or more) leaves out zero; "
                        "there the simulation should order the pair the same way. A tie means "
                        "the simulated schedulers did the same: nothing waited in the scheduler "
                        "(the loop device takes 128 requests per hardware queue, the jobs keep "
                        "20 out), and the simulator prices a scheduler's CPU work in its "
                        "counters, not in simulated time, so it cannot tell them apart."
                    ),
                    real_figure(real, sim, out),
                    frame_table(agree, "database_sim p99 (µs): pairs of schedulers"),
                ],
            )
        )
    return write_report(out / "report.html", "qoslab sched study", sections)
