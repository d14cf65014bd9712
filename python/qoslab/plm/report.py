"""The PLM study's tables, the document's claims beside the measured values, and the HTML
report."""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from qoslab.plm.fit import DOC_FIG6
from qoslab.plm.study import CLASSES
from qoslab.report.figures import pyplot, save_figure
from qoslab.report.html import Section, Table, Text, write_report

# Config 2, strict priority: improvement of p99.99 over the bare shared SSD, HoD and CoD.
DOC_IMPROVEMENT = {"high": (87.2, 81.7), "medium": (56.9, 42.9), "low": (42.5, 16.2)}
# The tail metric each claim is read in: the document's (per DTWin) and the whole run's.
METRICS = {"per DTWin": "p9999_per_dtwin_us", "whole run": "p9999_us"}

# Why a row is outside its band: each names the one setting that, changed alone, moves it (and
# the command that shows it), or says it is unexplained. Keyed by Target.key.
WHY: dict[str, str] = {}


@dataclass
class Target:
    """One of the document's claims: what it says, what qoslab measured, and whether the
    measured value is inside the band the comparison allows."""

    key: str
    name: str
    document: str
    measured: float
    shown: str
    inside: bool
    why: str = ""


def _p(results: pd.DataFrame, **eq) -> pd.DataFrame:
    sel = results
    for k, v in eq.items():
        sel = sel[sel[k] == v]
    return sel


def _main(results: pd.DataFrame) -> pd.DataFrame:
    """The study's own runs (not the write-fraction sensitivity's)."""
    return results[results["write_fraction"].isna()]


def _tail(results: pd.DataFrame, cls: str, metric: str = "p9999_per_dtwin_us", **eq) -> float:
    sel = _p(results, cls=cls, **eq)
    return float(sel[metric].iloc[0]) if len(sel) else math.nan


def improvement(
    results: pd.DataFrame,
    dataset: str,
    variant: str,
    config: int,
    policy: str,
    metric: str = "p9999_per_dtwin_us",
) -> dict[str, float]:
    """Per class: 100 x (1 - PLM tail / the shared bare SSD's tail)."""
    out = {}
    for cls in CLASSES:
        bare = _tail(results, cls, metric, dataset=dataset, variant="shared")
        plm = _tail(
            results, cls, metric, dataset=dataset, variant=variant, config=config, policy=policy
        )
        out[cls] = 100.0 * (1.0 - plm / bare) if bare > 0 else math.nan
    return out


def fig6_table(results: pd.DataFrame, dataset: str = "DS1") -> pd.DataFrame:
    """Every row of Fig. 6 the run has (CoD on `dataset`, Configs 2 and 4, sp and fr)."""
    rows = []
    main = _main(results)
    for (config, policy), doc in DOC_FIG6.items():
        sel = _p(main, dataset=dataset, variant="CoD", config=config, policy=policy)
        if sel.empty:
            continue
        for i, cls in enumerate(CLASSES):
            r = sel[sel["cls"] == cls].iloc[0]
            rows.append(
                dict(
                    config=config,
                    policy=policy,
                    cls=cls,
                    utilization_p10=r["utilization_p10"],
                    doc_utilization_p10=doc[0][i],
                    deficiency_p50=r["deficiency_p50"],
                    doc_deficiency_p50=doc[1][i],
                    deficiency_p90=r["deficiency_p90"],
                    doc_deficiency_p90=doc[2][i],
                )
            )
    return pd.DataFrame(rows)


def _pct(x: float) -> str:
    return f"{x:.1f} %" if math.isfinite(x) else "n/a"


def targets(results: pd.DataFrame) -> list[Target]:
    """The document's claims that the run's datasets and configs allow, measured."""
    out: list[Target] = []
    main = _main(results)
    if main.empty:
        return out
    ds = "DS1" if (main["dataset"] == "DS1").any() else main["dataset"].iloc[0]
    m = METRICS["per DTWin"]

    def add(key, name, document, measured, shown, inside):
        out.append(Target(key, name, document, measured, shown, inside))

    shared = _tail(main, "high", m, dataset=ds, variant="shared")
    alone = _tail(main, "high", m, dataset=ds, variant="isolated")
    ratio = shared / alone if alone > 0 else math.nan
    add(
        "fig4",
        "High's p99.99 per DTWin, shared / isolated (bare SSD)",
        "about 6x (Fig. 4)",
        ratio,
        f"{ratio:.2f}x ({shared:,.0f} / {alone:,.0f} us)",
        3.0 <= ratio <= 12.0,
    )
    has_c2 = not _p(main, dataset=ds, variant="CoD", config=2, policy="sp").empty
    if has_c2:
        for label, metric in METRICS.items():
            cod = improvement(main, ds, "CoD", 2, "sp", metric)
            add(
                f"abstract-{metric}",
                f"PLMC (CoD, sp, Config 2) vs bare shared SSD, High p99.99 ({label})",
                "82 % better (abstract)",
                cod["high"],
                _pct(cod["high"]),
                cod["high"] >= 67.0,
            )
        cod99 = improvement(main, ds, "CoD", 2, "sp", "p99_us")
        add(
            "abstract-p99",
            "CoD (sp, Config 2) vs bare shared SSD, High p99",
            "93.2 % better (abstract, IV-C)",
            cod99["high"],
            _pct(cod99["high"]),
            cod99["high"] >= 78.0,
        )
        hod = improvement(main, ds, "HoD", 2, "sp")
        cod = improvement(main, ds, "CoD", 2, "sp")
        for cls in CLASSES:
            dh, dc = DOC_IMPROVEMENT[cls]
            inside = abs(hod[cls] - dh) <= 15 and abs(cod[cls] - dc) <= 15
            add(
                f"improvement-{cls}",
                f"Config 2 sp improvement per DTWin, {cls} (HoD / CoD)",
                f"{dh} / {dc} % (each within 15 points)",
                hod[cls],
                f"{_pct(hod[cls])} / {_pct(cod[cls])}",
                inside,
            )
        order = all(
            x["high"] > x["medium"] > x["low"]
            for x in (hod, cod)
            if all(map(math.isfinite, x.values()))
        )
        add(
            "order",
            "Config 2 sp improvement ordered High > Medium > Low (HoD and CoD)",
            "yes",
            float(order),
            "yes" if order else "no",
            order,
        )
        for policy, doc in (("sp", 30.0), ("fr", 25.0)):
            h = _tail(main, "high", m, dataset=ds, variant="HoD", config=2, policy=policy)
            c = _tail(main, "high", m, dataset=ds, variant="CoD", config=2, policy=policy)
            if not (h > 0 and c > 0):
                continue
            above = 100.0 * (c / h - 1.0)
            add(
                f"cod-above-hod-{policy}",
                f"Config 2 {policy}: CoD High p99.99 above HoD's",
                f"+{doc:.0f} % (IV-C; read as +10 to +50 %)",
                above,
                f"{above:+.1f} %",
                10.0 <= above <= 50.0,
            )
        unc = _p(main, dataset=ds, variant="uncoordinated", config=2)
        if not unc.empty:
            base = _tail(main, "high", "p99_us", dataset=ds, variant="uncoordinated", config=2)
            c = _tail(main, "high", "p99_us", dataset=ds, variant="CoD", config=2, policy="sp")
            gain = 100.0 * (1.0 - c / base) if base > 0 else math.nan
            add(
                "coordinator",
                "CoD (sp, Config 2) vs PLM without the coordinator, High p99",
                "up to 31 % better (I)",
                gain,
                _pct(gain),
                16.0 <= gain <= 46.0,
            )
    for config, doc in ((2, 0.55), (4, 0.87)):
        sel = _p(main, dataset=ds, variant="CoD", config=config)
        if sel.empty:
            continue
        u = float(sel["utilization_p10"].mean())
        add(
            f"u10-{config}",
            f"CoD 10th-percentile utilization, Config {config}",
            f"{doc} (Fig. 6; within 0.1)",
            u,
            f"{u:.2f}",
            abs(u - doc) <= 0.1,
        )
        for q, band in (
            ("deficiency_p50", (0.0, 0.11 if config == 2 else 0.28)),
            ("deficiency_p90", (0.15, 0.36 if config == 2 else 0.54)),
        ):
            d = float(sel[q].mean())
            inside = band[0] - 0.05 <= d <= band[1] + 0.05
            add(
                f"{q}-{config}",
                f"CoD {q.replace('_p', ' p')}, Config {config}",
                f"{band[0]:g} to {band[1]:g} (Fig. 6; within 0.05)",
                d,
                f"{d:.2f}",
                inside,
            )
    hod_rows = _p(main, dataset=ds, variant="HoD")
    if not hod_rows.empty:
        ones = bool((hod_rows["utilization_min"] == 1.0).all())
        add(
            "hod-utilization",
            "HoD utilization",
            "1 in every window (IV-C)",
            float(ones),
            "1 in every window" if ones else "below 1 in some window",
            ones,
        )
        d = float(hod_rows["deficiency_p90"].max())
        add(
            "hod-deficiency",
            "HoD 90th-percentile deficiency",
            "close to 0 (IV-C; read as at most 0.05)",
            d,
            f"{d:.2f}",
            d <= 0.05,
        )
    if {"DS1", "DS4"} <= set(main["dataset"]) and has_c2:
        a = _tail(main, "high", m, dataset="DS1", variant="CoD", config=2, policy="sp")
        b = _tail(main, "high", m, dataset="DS4", variant="CoD", config=2, policy="sp")
        ratio = a / b if b > 0 else math.nan
        add(
            "ds4",
            "DS1 / DS4 p99.99 per DTWin (CoD, sp, Config 2, High)",
            "about 30x (Fig. 9 vs 10; read as at least 10x)",
            ratio,
            f"{ratio:.2f}x",
            ratio >= 10.0,
        )
        h = _tail(main, "high", m, dataset="DS4", variant="HoD", config=2, policy="sp")
        err = 100.0 * abs(b / h - 1.0) if h > 0 else math.nan
        add(
            "ds4-hod-cod",
            "DS4: CoD vs HoD, High p99.99 per DTWin (sp, Config 2)",
            "16 % apart (Fig. 10; read as 6 to 26 %)",
            err,
            _pct(err),
            6.0 <= err <= 26.0,
        )
    for t in out:
        t.why = "" if t.inside else WHY.get(t.key, "unexplained")
    return out


def target_rows(results: pd.DataFrame) -> pd.DataFrame:
    return pd.DataFrame(
        [
            dict(
                shape=t.name,
                document=t.document,
                measured=t.measured,
                qoslab=t.shown,
                inside=t.inside,
                why=t.why,
            )
            for t in targets(results)
        ]
    )


def _series(path: Path, runs: list[str]) -> pd.DataFrame:
    """The per-window rows of `runs` from series.parquet (read for those runs only)."""
    import pyarrow.parquet as pq

    return pq.read_table(path, filters=[("run", "in", runs)]).to_pandas()


DIAGNOSTIC_COLUMNS = [
    "dataset",
    "variant",
    "config",
    "policy",
    "cls",
    "reads",
    "writes",
    "p99_us",
    "p9999_us",
    "p9999_per_dtwin_us",
    "window_p99_median_us",
    "reads_outside_dtwin",
    "no_dtwin_time_frac",
    "entry_wait_p50_ms",
    "entry_wait_max_ms",
    "ndwin_min_advertised_ms",
    "gc_victims",
    "write_amplification",
]


def _formats(frame: pd.DataFrame) -> dict:
    out = {}
    for c in frame.columns:
        if c.endswith("_us"):
            out[c] = "{:,.1f}"
        elif c in ("reads_outside_dtwin", "no_dtwin_time_frac"):
            out[c] = "{:.5f}"
        elif c.endswith("_ms") or c in ("write_amplification",) or "tion_p" in c:
            out[c] = "{:.2f}"
    return out


def write(out: Path, results: pd.DataFrame, series_path: Path, facts: dict, workload) -> None:
    """Writes report.html and its figures into `out`."""
    from qoslab.plm import fit

    plt = pyplot()
    sections: list[Section] = []
    tgs = targets(results)
    sections.append(
        Section(
            "Document vs qoslab",
            [
                Text(
                    "Each claim of the document, beside what this run measured. The tail is "
                    "read in the document's metric (per DTWin: each window's p99.99, then the "
                    "99.99th percentile over the windows) unless the row says otherwise. Where "
                    "the measured value is outside the band, the last column says why."
                ),
                Table(
                    ["claim", "document", "qoslab", "inside", "why not"],
                    [
                        [t.name, t.document, t.shown, "yes" if t.inside else "no", t.why]
                        for t in tgs
                    ],
                ),
            ],
        )
    )
    best, scores = fit.read(_fit_record()) if _fit_record().is_file() else (math.nan, [])
    fitted = fit.table(workload.burst_sigma)
    sections.append(
        Section(
            "Burstiness: fitted to Fig. 6",
            [
                Text(
                    "The document gives each host's mean reads per window (Table I) but not how "
                    "they vary from one window to the next; its Fig. 6 is what that variation "
                    "does to the coordinator. The generator's shared factor (lognormal, mean 1, "
                    "per 100 ms) has the sigma that brings the coordinator's utilization and "
                    "deficiency closest to all 36 numbers of Fig. 6 (least squares; the "
                    "coordinator alone over 15 minutes of DS1 demand, seeds 1 to 3; "
                    "`qoslab plm fit`). "
                    f"This run draws with sigma {workload.burst_sigma:g}"
                    + (f" (the fit's: {best:g})." if math.isfinite(best) else ".")
                ),
                Table(
                    ["sigma", "squared error over Fig. 6"],
                    [[s, e] for s, e in scores],
                    formats={"sigma": "{:.2f}", "squared error over Fig. 6": "{:.4f}"},
                    caption="The fit's objective over its grid.",
                ),
                Table.from_dataframe(
                    fitted,
                    formats={
                        c: "{:.2f}" for c in fitted.columns if c not in ("config", "policy", "cls")
                    },
                    caption="Fig. 6 at the drawn sigma (coordinator alone, mean of seeds 1-3) "
                    "beside the document's.",
                ),
            ],
        )
    )
    f6 = fig6_table(results)
    if not f6.empty:
        sections.append(
            Section(
                "Fig. 6: utilization and deficiency (CoD, DS1, in the simulation)",
                [
                    Table.from_dataframe(
                        f6,
                        formats={
                            c: "{:.2f}" for c in f6.columns if c not in ("config", "policy", "cls")
                        },
                    )
                ],
            )
        )
    main = _main(results)
    diag = main[DIAGNOSTIC_COLUMNS]
    sections.append(
        Section(
            "Tails and what decides them",
            [
                Text(
                    "Per run and class: the whole run's p99 and p99.99, the document's p99.99 "
                    "per DTWin, the median window's p99; the share of reads a host sent to a "
                    "copy not in DTWin (uncovered by the coordinator, or no copy was in), the "
                    "share of the time no copy was in DTWin, how long a set asked into DTWin "
                    "took to enter it (median and longest) against the NDWIN Time Minimum Low "
                    "the drive advertises, and the drive's GC victims and write amplification."
                ),
                Table.from_dataframe(diag, formats=_formats(diag)),
            ],
        )
    )
    sens = results[results["write_fraction"].notna()]
    if not sens.empty:
        cols = ["write_fraction", *DIAGNOSTIC_COLUMNS]
        sections.append(
            Section(
                "Write-fraction sensitivity",
                [
                    Text(
                        "The document's scope is reads; its traces are read-intensive. The same "
                        "runs with a share of writes on top of Table I's reads (each write goes "
                        "to both copies under PLM, into the drive's write cache, destaged "
                        "outside DTWin)."
                    ),
                    Table.from_dataframe(sens[cols], formats=_formats(sens[cols])),
                ],
            )
        )
    fig, ax = plt.subplots(figsize=(8, 3.5))
    ds = "DS1" if (main["dataset"] == "DS1").any() else main["dataset"].iloc[0]
    sel = main[main["dataset"] == ds]
    labels = list(dict.fromkeys(sel["run"].str.replace(f"{ds}-", "", regex=False)))
    for i, cls in enumerate(CLASSES):
        vals = []
        for lab in labels:
            r = sel[(sel["run"] == f"{ds}-{lab}") & (sel["cls"] == cls)]
            vals.append(float(r["p9999_per_dtwin_us"].iloc[0]) if len(r) else math.nan)
        ax.bar([j + 0.27 * (i - 1) for j in range(len(labels))], vals, width=0.27, label=cls)
    ax.set_xticks(range(len(labels)), labels, rotation=60, ha="right", fontsize=7)
    ax.set_ylabel("p99.99 per DTWin (us)")
    ax.set_yscale("log")
    ax.legend()
    sections.append(
        Section(
            "p99.99 per DTWin, per class",
            [save_figure(fig, out, "p9999", f"{ds}: the document's tail metric per run and class")],
        )
    )
    fig, ax = plt.subplots(figsize=(8, 3.5))
    runs = [f"{ds}-shared", f"{ds}-CoD-config2-sp"]
    series = _series(series_path, runs)
    for run in runs:
        s = series[(series["run"] == run) & (series["cls"] == "high")]
        if len(s):
            ax.plot(s["time_ms"] / 1e3, s["lat_p9999_ns"] / 1e3, lw=0.8, label=run)
    ax.set_xlabel("time (s)")
    ax.set_ylabel("high class p99.99 per window (us)")
    ax.set_yscale("log")
    ax.legend()
    sections.append(
        Section(
            "Latency over time",
            [
                save_figure(fig, out, "series", "High's p99.99 read latency per window"),
                Text(
                    "Every run's series is in `series.parquet` (run, cls, time_ms, ios, "
                    "lat_p99_ns, lat_p9999_ns, lat_max_ns)."
                ),
            ],
        )
    )
    split = main[
        [
            "dataset",
            "variant",
            "config",
            "policy",
            "cls",
            "host_us",
            "transport_us",
            "queueing_us",
            "device_us",
        ]
    ]
    sections.append(
        Section(
            "End-to-end latency split (mean read, us)",
            [
                Text(
                    "The part the document left out: each class's mean read latency split into "
                    "host (submission and completion), transport (the link), queueing (in the "
                    "controller) and device time."
                ),
                Table.from_dataframe(
                    split, formats={c: "{:.2f}" for c in split.columns if c.endswith("_us")}
                ),
            ],
        )
    )
    write_report(out / "report.html", "PLM coordinator study", sections, facts=facts)


def _fit_record() -> Path:
    """configs/plm/burst-fit.csv of this checkout (written by `qoslab plm fit`)."""
    return Path(__file__).resolve().parents[3] / "configs" / "plm" / "burst-fit.csv"
