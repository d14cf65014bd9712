"""The PLM study's tables, the document's shape targets beside the measured values, and the
HTML report."""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from qoslab.plm.study import CLASSES
from qoslab.report.figures import pyplot, save_figure
from qoslab.report.html import Section, Table, Text, write_report

# Fig. 6 of the document: CoD, DS1: 10th-percentile utilization and 50th / 90th-percentile
# deficiency, (config, policy) -> high, medium, low.
DOC_FIG6 = {
    (2, "sp"): ((0.56, 0.56, 0.56), (0, 0.03, 0.05), (0.28, 0.35, 0.33)),
    (2, "fr"): ((0.54, 0.56, 0.56), (0, 0.11, 0.11), (0.15, 0.35, 0.36)),
    (4, "sp"): ((0.87, 0.88, 0.89), (0, 0.02, 0.04), (0.28, 0.49, 0.49)),
    (4, "fr"): ((0.84, 0.88, 0.89), (0, 0.27, 0.28), (0.15, 0.54, 0.54)),
}
# Config 2, strict priority: improvement of p99.99 over the bare shared SSD, HoD and CoD.
DOC_IMPROVEMENT = {"high": (87.2, 81.7), "medium": (56.9, 42.9), "low": (42.5, 16.2)}


@dataclass
class Target:
    """One of the document's shapes: what it says, what qoslab measured, and whether the
    measured value is inside the band the comparison allows."""

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


def _p9999(results: pd.DataFrame, cls: str, **eq) -> float:
    sel = _p(results, cls=cls, **eq)
    return float(sel["p9999_us"].iloc[0]) if len(sel) else math.nan


def improvement(results: pd.DataFrame, dataset: str, variant: str, config: int, policy: str):
    """Per class: 100 x (1 - PLM p99.99 / shared bare-SSD p99.99)."""
    out = {}
    for cls in CLASSES:
        bare = _p9999(results, cls, dataset=dataset, variant="shared")
        plm = _p9999(results, cls, dataset=dataset, variant=variant, config=config, policy=policy)
        out[cls] = 100.0 * (1.0 - plm / bare) if bare > 0 else math.nan
    return out


def fig6_table(results: pd.DataFrame, dataset: str = "DS1") -> pd.DataFrame:
    rows = []
    for (config, policy), doc in DOC_FIG6.items():
        sel = _p(results, dataset=dataset, variant="CoD", config=config, policy=policy)
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


def targets(results: pd.DataFrame) -> list[Target]:
    """The document's shapes that the run's datasets and configs allow, measured."""
    out: list[Target] = []
    ds = "DS1" if (results["dataset"] == "DS1").any() else results["dataset"].iloc[0]
    shared = _p9999(results, "high", dataset=ds, variant="shared")
    alone = _p9999(results, "high", dataset=ds, variant="isolated")
    ratio = shared / alone if alone > 0 else math.nan
    out.append(
        Target(
            "High's p99.99, shared / isolated (bare SSD)",
            "about 6x (Fig. 4)",
            ratio,
            f"{ratio:.2f}x",
            3.0 <= ratio <= 12.0,
            "the three hosts' 10,000 reads/s on average use a small part of the 64 dies of "
            "MQSim's default SSD: sharing adds little queueing. The bare drive's tail is its GC "
            "(preconditioned, every plane collects throughout the run: reads wait behind "
            "750 us GC programs), and one host alone pays it as much as three together",
        )
    )
    has_c2 = not _p(results, dataset=ds, variant="CoD", config=2, policy="sp").empty
    if has_c2:
        cod = improvement(results, ds, "CoD", 2, "sp")
        hod = improvement(results, ds, "HoD", 2, "sp")
        why_worse = (
            "PLM's p99.99 is the drive's DRAM: in the run's largest burst (17x the mean in "
            "100 ms) the copies write every write twice through the one write-cache DRAM "
            "(20.5 us per 4 KiB at MQSim's timing), which is then asked for rho = 1.09 of its "
            "time, and reads that hit the cache wait (rho - 1) x 100 ms (docs/plm.md gives the "
            "closed form). Split read by read (qoslab plm study --slow-reads), the slowest 0.1 % "
            "of DS1, Config 2 are all such cache hits, 3.7 ms of DRAM wait on average. With a "
            "faster DRAM PLM's p99.99 is the bare drive's, 1.8 to 2.0 ms: reads served while "
            "no copy is in DTWin (or not covered by the coordinator) wait for GC programs like "
            "the bare drive's, and with 100 ms windows 3 in 4 reads are, with 400 ms windows "
            "still 7 %, far more than the 0.01 % a p99.99 allows. The typical window does "
            "improve: the median window p99 is about 85 % lower than the bare drive's with "
            "400 ms windows (Configs 3, 4) and about 3 % lower with 100 ms windows, where a "
            "copy is often still finishing its GC moves when its window begins"
        )
        out.append(
            Target(
                "PLMC (CoD, sp, Config 2) vs bare shared SSD, High p99.99",
                "82 % better (abstract)",
                cod["high"],
                f"{cod['high']:.1f} %",
                cod["high"] >= 67.0,
                why_worse,
            )
        )
        for cls in CLASSES:
            dh, dc = DOC_IMPROVEMENT[cls]
            inside = abs(hod[cls] - dh) <= 15 and abs(cod[cls] - dc) <= 15
            out.append(
                Target(
                    f"Config 2 sp improvement, {cls} (HoD / CoD)",
                    f"{dh} / {dc} % (each within 15 points)",
                    hod[cls],
                    f"{hod[cls]:.1f} / {cod[cls]:.1f} %",
                    inside,
                    why_worse,
                )
            )
        order = (
            hod["high"] > hod["medium"] > hod["low"] and cod["high"] > cod["medium"] > cod["low"]
        )
        out.append(
            Target(
                "Config 2 sp improvement ordered High > Medium > Low",
                "yes",
                float(order),
                "yes" if order else "no",
                order,
                "the tail of every class comes from the same few slow reads, whatever share of "
                "the counts the class holds",
            )
        )
        ge = all(hod[c] >= cod[c] for c in CLASSES)
        out.append(
            Target(
                "Config 2 sp: HoD >= CoD for every class",
                "yes",
                float(ge),
                "yes" if ge else "no",
                ge,
                "HoD and CoD differ only in which reads are covered; the tail is set by the "
                "slow reads both see",
            )
        )
    for config, doc in ((2, 0.55), (4, 0.87)):
        sel = _p(results, dataset=ds, variant="CoD", config=config)
        if sel.empty:
            continue
        u = float(sel["utilization_p10"].mean())
        out.append(
            Target(
                f"CoD 10th-percentile utilization, Config {config}",
                f"near {doc} (Fig. 6)",
                u,
                f"{u:.2f}",
                abs(u - doc) <= 0.1,
                "the generator's bursts (a shared lognormal factor of sigma 1 per 100 ms) make "
                "quiet windows after busy ones, where the moving average (zeta 0.5) asks for "
                "far more than is used; the document's trace portions were less variable "
                "from one window to the next",
            )
        )
    if {"DS1", "DS4"} <= set(results["dataset"]) and has_c2:
        a = _p9999(results, "high", dataset="DS1", variant="CoD", config=2, policy="sp")
        b = _p9999(results, "high", dataset="DS4", variant="CoD", config=2, policy="sp")
        ratio = a / b if b > 0 else math.nan
        out.append(
            Target(
                "DS1 / DS4 p99.99 (CoD, sp, Config 2, High)",
                "about 30x (Fig. 9 vs 10)",
                ratio,
                f"{ratio:.1f}x",
                ratio >= 10.0,
                "desynchronising the hosts removes the bursts that back up the DRAM (see "
                "above), but not the GC tail of the reads served outside a DTWin, which the "
                "bare drive has too (1.8 ms)",
            )
        )
    for t in out:
        if t.inside:
            t.why = ""
    return out


def write(out: Path, results: pd.DataFrame, series: pd.DataFrame, facts: dict) -> None:
    """Writes report.html and its figures into `out`."""
    plt = pyplot()
    sections: list[Section] = []
    tgs = targets(results)
    sections.append(
        Section(
            "Document vs qoslab",
            [
                Text(
                    "Each shape the document reports, beside what this run measured. "
                    "Where the measured value is outside the band, the last column says why."
                ),
                Table(
                    ["shape", "document", "qoslab", "inside", "why not"],
                    [
                        [t.name, t.document, t.shown, "yes" if t.inside else "no", t.why]
                        for t in tgs
                    ],
                ),
            ],
        )
    )
    f6 = fig6_table(results)
    if not f6.empty:
        sections.append(
            Section(
                "Fig. 6: utilization and deficiency (CoD, DS1)",
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
    tail = results[
        [
            *("dataset", "variant", "config", "policy", "cls", "reads"),
            *("p99_us", "p9999_us", "window_p99_median_us"),
        ]
    ]
    fig, ax = plt.subplots(figsize=(8, 3.5))
    ds = "DS1" if (results["dataset"] == "DS1").any() else results["dataset"].iloc[0]
    sel = results[results["dataset"] == ds]
    labels = list(dict.fromkeys(sel["run"].str.replace(f"{ds}-", "", regex=False)))
    for i, cls in enumerate(CLASSES):
        vals = []
        for lab in labels:
            r = sel[(sel["run"] == f"{ds}-{lab}") & (sel["cls"] == cls)]
            vals.append(float(r["p9999_us"].iloc[0]) if len(r) else math.nan)
        ax.bar([j + 0.27 * (i - 1) for j in range(len(labels))], vals, width=0.27, label=cls)
    ax.set_xticks(range(len(labels)), labels, rotation=60, ha="right", fontsize=7)
    ax.set_ylabel("p99.99 read latency (us)")
    ax.set_yscale("log")
    ax.legend()
    sections.append(
        Section(
            "p99.99 per class",
            [
                save_figure(fig, out, "p9999", f"{ds}: p99.99 read latency per run and class"),
                Text(
                    "p99.99 is over all of a run's reads of a class; window_p99_median_us is the "
                    "median over the windows of each window's p99 (the typical window's tail)."
                ),
                Table.from_dataframe(
                    tail,
                    formats={c: "{:.1f}" for c in ("p99_us", "p9999_us", "window_p99_median_us")},
                ),
            ],
        )
    )
    fig, ax = plt.subplots(figsize=(8, 3.5))
    for run in (f"{ds}-shared", f"{ds}-CoD-config2-sp"):
        s = series[(series["run"] == run) & (series["cls"] == "high")]
        if len(s):
            ax.plot(s["time_ms"] / 1e3, s["lat_p99_ns"] / 1e3, lw=0.8, label=run)
    ax.set_xlabel("time (s)")
    ax.set_ylabel("high class p99 per window (us)")
    ax.set_yscale("log")
    ax.legend()
    sections.append(
        Section(
            "Latency over time",
            [
                save_figure(fig, out, "series", "High's p99 read latency per window"),
                Text("Every run's series is in `series.parquet` (time_ms, cls, lat_p99_ns, ios)."),
            ],
        )
    )
    split = results[
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
