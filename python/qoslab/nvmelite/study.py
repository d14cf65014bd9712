"""`qoslab nvmelite matrix`: the risk-cliff study from a config file to report.html.

The Rust core runs the matrix and writes runs.csv, the logs, the poison schedules and the
tables; this module validates the inputs first, shows progress, draws the three figures, writes
the report and publishes the whole directory atomically (temporary directory beside the target,
then rename): an error or Ctrl-C leaves no half-written output.
"""

from __future__ import annotations

import threading
from pathlib import Path

from qoslab.errors import InputError
from qoslab.nvmelite.config import load_matrix
from qoslab.outputs import earlier_output, staged_dir
from qoslab.progress import Count, progress_bar
from qoslab.report import Figure, Link, Section, Table, Text, write_report
from qoslab.report.stats import MIN_REPS

FAULT_ORDER = ("NONE", "TIMEOUT", "RESET")

_REFUSAL = (
    "exists, is not empty and holds no runs.csv (not an earlier output); "
    "remove it or choose another directory"
)


def run_study(
    config: Path,
    out: Path,
    *,
    submit_window: str = "inf",
    logs: bool = True,
    jobs: int | None = None,
    top_k: int = 10,
    report: bool = True,
    exact_nodes: int | None = None,
    command: str = "",
) -> Path:
    """Runs the matrix of `config` into `out` and returns the report's path (or `out`);
    `command` (what ran it) goes into the report's footer."""
    matrix = load_matrix(config, submit_window)
    out = Path(out)
    with staged_dir(out, is_earlier_output=earlier_output("runs.csv"), refusal=_REFUSAL) as tmp:
        if report:
            # The Rust core releases the GIL while it runs the matrix: load the chart code
            # meanwhile, off the command's critical path.
            threading.Thread(target=_load_chart_code, daemon=True).start()
        with progress_bar() as bar:
            progress = Count(bar, "nvmelite matrix", total=len(matrix))
            try:
                extra = {} if exact_nodes is None else {"exact_nodes": exact_nodes}
                summary = matrix.write(
                    str(tmp), logs=logs, top_k=top_k, jobs=jobs, progress=progress, **extra
                )
            except OSError as err:
                raise InputError(f"cannot write the output: {err}", path=out) from None
        if report:
            build_report(
                tmp, config=config, summary=summary, submit_window=submit_window, command=command
            )
    return out / "report.html" if report else out


# ---- figures and report ---------------------------------------------------------------------


def _load_chart_code() -> None:
    try:
        from PIL import Image, ImageDraw, ImageFont, PngImagePlugin  # noqa: F401

        import qoslab.report.charts  # noqa: F401
    except ImportError:
        pass  # _figures imports them again and reports the error


def _k_columns(table: Table) -> list[str]:
    return [c for c in table.columns if c.startswith("k=")]


def _focus_fault(table: Table) -> str:
    faults = set(table.column("fault_mode"))
    return next((f for f in FAULT_ORDER if f in faults), sorted(faults)[0] if faults else "NONE")


def _figures(d: Path, t2: Table, f1: Table, cells: Table, cliffs: Table) -> list[Figure]:
    from qoslab.report.charts import HeatPanel, bar_chart, heatmap, line_chart, save_chart

    figdir = d / "figures"
    figdir.mkdir()
    fault = _focus_fault(t2)
    ks = _k_columns(t2)
    labels = [k[2:] for k in ks]
    seed_ids = list(dict.fromkeys(t2.column("seed_id")))
    many = len(seed_ids) > 1
    figures = []

    # Figure 1: mean RD vs k.
    series = [
        (f"{row[0]} {row[2]}" if many else row[2], [row[f1.columns.index(k)] for k in ks])
        for row in f1.where(fault_mode=fault).rows
    ]
    chart = line_chart(
        labels,
        series,
        title=f"Realized reordering vs k (fault {fault})",
        x_label="reordering bound k",
        y_label="mean RD",
    )
    figures.append(
        save_chart(
            chart,
            figdir,
            "rd_vs_k",
            "Mean RD vs bound k",
            f"Mean reordering degree over the schedule seeds of each cell, fault {fault}.",
            "figures/",
        )
    )

    # Figure 2: p95 by policy at the largest k, with standard deviations.
    top_k = "inf" if "k=inf" in ks else (labels[-1] if labels else "inf")
    sel = [r for r in cells.where(fault_mode=fault).rows if str(r[2]) == top_k]
    idx = {c: i for i, c in enumerate(cells.columns)}
    policies = list(dict.fromkeys(r[idx["policy"]] for r in sel))
    groups = []
    for seed_id in seed_ids:
        rows = {r[idx["policy"]]: r for r in sel if r[idx["seed_id"]] == seed_id}
        means = [rows[p][idx["p95_mean"]] if p in rows else 0 for p in policies]
        # No error bar from fewer than MIN_REPS schedule seeds (report/stats.py).
        stds = [
            rows[p][idx["p95_std"]] if p in rows and rows[p][idx["runs"]] >= MIN_REPS else 0
            for p in policies
        ]
        groups.append((seed_id, means, stds))
    chart = bar_chart(
        policies,
        groups,
        title=f"p95 by policy at k={top_k} (fault {fault})",
        y_label="mean p95 latency (steps)",
        legend=many,
    )
    figures.append(
        save_chart(
            chart,
            figdir,
            "p95_by_policy",
            f"p95 by policy at k = {top_k}",
            "Bars: mean of the per-run p95; error bars: population standard deviation "
            f"over the schedule seeds, drawn from {MIN_REPS} seeds or more.",
            "figures/",
        )
    )

    # Figure 3: a risk-cliff heatmap (mean p95 per policy x k, cliffs outlined) per fault
    # mode; the first fault's keeps the plain name.
    ci = {c: i for i, c in enumerate(cliffs.columns)}
    for f in [f for f in FAULT_ORDER if f in set(t2.column("fault_mode"))]:
        cliff_rows = cliffs.where(fault_mode=f).rows
        panels = []
        for seed_id in seed_ids:
            rows = t2.where(seed_id=seed_id, fault_mode=f).rows
            names = [r[2] for r in rows]
            outlined = {
                (names.index(c[ci["policy"]]), labels.index(str(c[ci["k_to"]])))
                for c in cliff_rows
                if c[ci["seed_id"]] == seed_id and c[ci["policy"]] in names
            }
            panels.append(
                HeatPanel(
                    seed_id,
                    f"{seed_id}: mean p95 (steps), fault {f}; red = risk cliff",
                    names,
                    labels,
                    [[r[t2.columns.index(k)] for k in ks] for r in rows],
                    outlined,
                )
            )
        figures.append(
            save_chart(
                heatmap(panels, x_label="reordering bound k"),
                figdir,
                "risk_cliff_heatmap" if f == fault else f"risk_cliff_heatmap_{f.lower()}",
                f"Risk-cliff heatmap, fault {f}",
                f"Mean p95 per policy and bound under fault {f}; a red outline marks a bound "
                "whose mean p95 is more than 20 % above the previous bound's (a risk cliff).",
                "figures/",
            )
        )
    return figures


def _exact_table(d: Path) -> Table | None:
    """Per workload, fault and k: the exact worst-case p95 beside each policy's sampled worst."""
    path = d / "exact_worst.csv"
    if not path.is_file():
        return None
    t = Table.from_csv(path)
    i = {c: n for n, c in enumerate(t.columns)}
    policies = list(dict.fromkeys(t.column("policy")))
    rows: dict[tuple, list] = {}
    for r in t.rows:
        key = (r[i["seed_id"]], r[i["fault_mode"]], str(r[i["bound_k"]]))
        if key not in rows:
            exact = r[i["exact_p95"]]
            if r[i["certificate"]] != "optimal" and exact != "":
                exact = f"{exact:g} to {r[i['upper_bound']]:g}"
            rows[key] = [*key, exact, *([""] * len(policies))]
        rows[key][4 + policies.index(r[i["policy"]])] = r[i["sampled_max_p95"]]
    return Table(
        ["seed_id", "fault_mode", "k", "exact worst p95", *(f"{p} max" for p in policies)],
        list(rows.values()),
        title="Worst p95 over the schedule seeds, per policy, beside the exact worst case",
        caption="The exact worst case is over every schedule the bound k allows (branch and "
        "bound, docs/nvmelite.md); 'a to b' when the search's state budget (--exact-nodes) ran "
        "out first: the worst found and an upper bound.",
    )


def _findings(cliffs: Table, t2: Table) -> Text:
    """The risk cliffs in words: under each fault mode, which cells jump, from which bound to
    which, and how far; then the largest."""
    idx = {c: i for i, c in enumerate(cliffs.columns)}
    many = len(set(t2.column("seed_id"))) > 1
    faults = [f for f in FAULT_ORDER if f in set(t2.column("fault_mode"))]

    def cell(r) -> str:
        where = f" on `{r[idx['seed_id']]}`" if many else ""
        return (
            f"{r[idx['policy']]}{where} from k = {r[idx['k_from']]} to {r[idx['k_to']]} "
            f"(mean p95 {r[idx['p95_mean_from']]:.2f} to {r[idx['p95_mean_to']]:.2f} steps, "
            f"+{r[idx['rise_pct']]:.1f} %)"
        )

    lines = []
    for fault in faults:
        rows = cliffs.where(fault_mode=fault).rows
        if not rows:
            lines.append(f"Under fault {fault}: no risk cliff.")
            continue
        count = f"{len(rows)} risk cliff{'s' if len(rows) > 1 else ''}"
        lines.append(f"Under fault {fault}, {count}: " + "; ".join(cell(r) for r in rows) + ".")
    if cliffs.rows:
        top = max(cliffs.rows, key=lambda r: r[idx["rise_pct"]])
        lines.append(f"The largest: {cell(top)}, under fault {top[idx['fault_mode']]}.")
    else:
        lines.append("No step of k raises any cell's mean p95 by more than 20 %.")
    return Text("\n\n".join(lines))


def build_report(
    d: Path, *, config: Path, summary: dict, submit_window: str, command: str = ""
) -> Path:
    """Figures and report.html from the tables the matrix wrote into `d`; `command` is what
    ran it, named in the report's footer."""
    two = "{:.2f}"
    three = "{:.3f}"
    t2 = Table.from_csv(d / "table2_mean_p95.csv")
    t3 = Table.from_csv(d / "table3_mean_p95_kinf.csv")
    f1 = Table.from_csv(d / "figure1_mean_rd.csv")
    cells = Table.from_csv(d / "cells.csv")
    cliffs = Table.from_csv(d / "risk_cliffs.csv")
    poison = Table.from_csv(d / "poison_top.csv")
    fig_rd, fig_p95, *heatmaps = _figures(d, t2, f1, cells, cliffs)
    for t, fmt in ((t2, two), (t3, two), (f1, three)):
        t.formats = dict.fromkeys(t.columns[2:], fmt)
    cliffs.formats = {
        "p95_mean_from": two,
        "p95_mean_to": two,
        "rise_pct": "{:.1f}",
    }
    ci = {c: i for i, c in enumerate(poison.columns)}
    for row in poison.rows:
        for col in ("schedule_file", "reference_schedule_file"):
            row[ci[col]] = Link(Path(row[ci[col]]).suffix.lstrip("."), row[ci[col]])
    poison.formats = {"p95_latency_step": "{:.0f}", "RD": three}
    cells.formats = {c: three for c in cells.columns[5:] if c not in ("p95_max",)}
    fault = _focus_fault(t2)

    sections = [
        Section("Findings", [_findings(cliffs, t2)]),
        Section(
            "How to read this report",
            [
                Text(
                    "Each run executes one workload under one completion policy, reordering "
                    "bound k, fault mode and schedule seed; latencies are in scheduler steps "
                    "(log lines between a command's SUBMIT and COMPLETE). A cell is one "
                    "(workload, policy, k, fault) combination; its numbers are means over the "
                    "cell's schedule seeds. RD is the fraction of completion pairs that "
                    "finished out of submission order."
                ),
                Text(
                    "A risk cliff is a step from one bound to the next larger one where the "
                    "cell's mean p95 rises by more than 20 %. Poison schedules are the runs "
                    "with the highest p95 at fault NONE and k = inf; their schedule files "
                    "replay them exactly with `qoslab nvmelite replay WORKLOAD FILE`."
                ),
            ],
        ),
        Section(
            "Realized reordering (RD) vs k",
            [fig_rd, Table(f1.columns, f1.where(fault_mode=fault).rows, formats=f1.formats)],
        ),
        Section("Tail latency by policy", [fig_p95, t3]),
        Section(
            "Risk cliffs",
            [
                *heatmaps,
                Table(
                    cliffs.columns,
                    cliffs.rows,
                    title=f"Risk cliffs (all faults): {len(cliffs.rows)}",
                    formats=cliffs.formats,
                ),
            ],
        ),
        Section("Mean p95 by workload, policy and k", [t2]),
        *(
            [Section("Sampled against exact worst case", [exact])]
            if (exact := _exact_table(d)) is not None
            else []
        ),
        Section(
            "Poison schedules",
            [
                Text(
                    "Top runs by p95 at fault NONE and k = inf (ties in run_id byte order). "
                    "`.sched` is qoslab's replayable schedule file, `.json` the reference's "
                    "schedule record."
                ),
                poison,
            ],
        ),
        Section("All cells", [cells]),
    ]
    files = [Link("runs.csv", "runs.csv")]
    if (d / "logs").is_dir():
        files.append(Link("logs/", "logs/"))
    facts = [
        ("config", str(config)),
        ("runs", summary["runs"]),
        ("submit window", submit_window),
        ("risk cliffs", summary["cliffs"]),
        ("per-run results", files[0]),
    ]
    from qoslab._core import __version__
    from qoslab.nvmelite.config import project_commit

    return write_report(
        d / "report.html",
        "NVMe-lite risk cliffs",
        sections,
        facts=facts,
        generator="qoslab",
        footer={"version": __version__, "commit": project_commit(), "command": command},
    )
