"""`qoslab report STORE --out DIR`: one self-contained HTML report of whatever a store holds.

For each study in the store: the figures the study defines (its adapter's `figures` hook),
then for each sweep of it the parameters that vary, a table of configurations (mean and
spread over seeds), and one figure per varying parameter and headline metric: the metric's
mean over seeds against the parameter, error bars the 95 % confidence interval of the mean
(Student's t), one line per combination of the other varying parameters (or one mark per
configuration when they are too many: a metric is never averaged over another parameter), marks
without joining lines for a categorical parameter, and times in ns drawn and tabled in ns, µs, ms
or s. The store is named as the user gave it (relative) or by its name, never by where it is.
Parameters and metrics are read from the store itself (a row's `params` names
its parameters), so a study this qoslab does not know is still reported, generically.
Everything is aggregated by DuckDB: a report of a million points reads no row into Python.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

from qoslab.outputs import earlier_output, staged_dir
from qoslab.report.html import Figure, Section, Table, Text, write_report
from qoslab.report.stats import MIN_REPS
from qoslab.store import Store
from qoslab.sweep.study import FIXED_COLUMNS

MAX_PARAMS_PLOTTED = 4  # varying parameters drawn per sweep (the first ones of the spec)
MAX_LINES = 8  # a second parameter becomes one line per value if it has at most this many
MAX_CATEGORIES = 24  # more distinct values than this: a numeric parameter is drawn per config
MAX_TABLE_ROWS = 200
CONFIDENCE = 0.95

_REFUSAL = (
    "exists, is not empty and holds no report.html (not an earlier report); "
    "remove it or choose another directory"
)
_NUMERIC = (
    "TINYINT",
    "SMALLINT",
    "INTEGER",
    "BIGINT",
    "HUGEINT",
    "UTINYINT",
    "USMALLINT",
    "UINTEGER",
    "UBIGINT",
    "FLOAT",
    "DOUBLE",
    "DECIMAL",
)


def _ident(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def _is_numeric(dtype: str) -> bool:
    return dtype.split("(")[0] in _NUMERIC


def _order_key(value: Any) -> tuple:
    """Numbers by value (with 'inf' last), then strings alphabetically."""
    if isinstance(value, bool):
        return (1, str(value))
    if isinstance(value, int | float):
        return (0, float(value))
    if value == "inf":
        return (0, math.inf)
    try:
        return (0, float(value))
    except (TypeError, ValueError):
        return (1, str(value))


def _t_quantile(n: int) -> float:
    from scipy.stats import t

    return float(t.ppf(0.5 + CONFIDENCE / 2, n - 1))


def _ci(sd: float | None, n: int) -> float:
    """The half-width of the interval of a mean over `n` seeds; 0 (no error bar) from fewer
    than MIN_REPS seeds (report/stats.py)."""
    if n < MIN_REPS or sd is None or math.isnan(sd):
        return 0.0
    return _t_quantile(n) * sd / math.sqrt(n)


class _StudyView:
    """One study table of the store: its columns, parameters and metrics."""

    def __init__(self, store: Store, table: str):
        from qoslab.sweep.studies import STUDIES

        self.store = store
        self.table = table
        self.study = next((s for s in STUDIES.values() if s.table == table), None)
        cols = store.con.execute(f"DESCRIBE {_ident(table)}").fetchall()
        self.types = {c[0]: c[1] for c in cols}
        self.sweeps = [
            r[0]
            for r in store.con.execute(
                f"SELECT DISTINCT sweep FROM {_ident(table)} ORDER BY sweep"
            ).fetchall()
        ]

    def params_of(self, sweep: str) -> list[str]:
        row = self.store.con.execute(
            f"SELECT params FROM {_ident(self.table)} WHERE sweep = ? LIMIT 1", [sweep]
        ).fetchone()
        names = list(json.loads(row[0])) if row else []
        return [n for n in names if n in self.types]

    def metrics(self, params: list[str]) -> list[str]:
        if self.study is not None:
            return [m.name for m in self.study.metrics if _is_numeric(self.types.get(m.name, ""))]
        return [
            c
            for c, t in self.types.items()
            if c not in FIXED_COLUMNS and c not in params and _is_numeric(t)
        ]

    def headline(self, metrics: list[str]) -> list[str]:
        if self.study is not None:
            return [m for m in self.study.headline if m in metrics]
        return metrics[:2]


def _fmt(value: Any) -> Any:
    if isinstance(value, float):
        return None if math.isnan(value) else float(f"{value:.6g}")
    return value


def _shown(value: Any) -> str:
    if value is None:
        return "(none)"
    return '""' if value == "" else str(value)


def _sweep_section(view: _StudyView, sweep: str, figdir: Path, n_fig: list[int]) -> Section:
    con = view.store.con
    t = _ident(view.table)
    params = view.params_of(sweep)
    metrics = view.metrics(params)
    headline = view.headline(metrics)
    counts = con.execute(
        f"SELECT count(*), count(DISTINCT params), count(DISTINCT seed) FROM {t} WHERE sweep = ?",
        [sweep],
    ).fetchone()
    distinct = _per_param(view, sweep, "count(DISTINCT {})", params)
    varying = [p for p in params if distinct.get(p, 0) > 1]
    fixed = [p for p in params if p not in varying]
    items: list[Text | Table | Figure] = []
    fixed_values = _per_param(view, sweep, "any_value({})", fixed)
    seeded = counts[2] > 0
    shape = (
        f"{counts[1]:,} configurations x up to {counts[2]:,} seeds"
        if seeded
        else (f"{counts[1]:,} configurations, no seeds")
    )
    items.append(
        Text(
            f"{counts[0]:,} points: {shape}. "
            + (f"Varying: {', '.join(varying)}. " if varying else "No parameter varies. ")
            + (
                "Fixed: " + ", ".join(f"{k} = {_shown(v)}" for k, v in fixed_values.items()) + "."
                if fixed_values
                else ""
            )
        )
    )
    plotted = _informative(view, sweep, headline)
    if len(plotted) < len(headline):
        same = [m for m in headline if m not in plotted]
        items.append(Text(f"One value or none in this sweep (not drawn): {', '.join(same)}."))
    for p in varying[:MAX_PARAMS_PLOTTED]:
        others = [q for q in varying if q != p]
        for m in plotted:
            fig = _param_figure(view, sweep, p, others, m, distinct, figdir, n_fig, seeded)
            if fig is not None:
                items.append(fig)
    items.append(_config_table(view, sweep, varying, plotted))
    failed = _failures(view.store, view.table, sweep)
    if failed is not None:
        items.append(failed)
    return Section(f"{view.study.name if view.study else view.table}: sweep {sweep}", items)


def _per_param(view: _StudyView, sweep: str, aggregate: str, params: list[str]) -> dict:
    """`aggregate` (a DuckDB expression of `{}`) of each of `params` over one sweep's rows."""
    if not params:
        return {}
    row = view.store.con.execute(
        "SELECT "
        + ", ".join(aggregate.format(_ident(p)) for p in params)
        + f" FROM {_ident(view.table)} WHERE sweep = ?",
        [sweep],
    ).fetchone()
    return dict(zip(params, row, strict=True))


def _informative(view: _StudyView, sweep: str, metrics: list[str]) -> list[str]:
    """The metrics that take more than one value in the sweep (a constant draws nothing)."""
    if not metrics:
        return []
    row = view.store.con.execute(
        "SELECT "
        + ", ".join(f"count(DISTINCT {_ident(m)})" for m in metrics)
        + f" FROM {_ident(view.table)} WHERE sweep = ?",
        [sweep],
    ).fetchone()
    return [m for m, n in zip(metrics, row, strict=True) if n > 1]


def _param_figure(view, sweep, p, others, metric, distinct, figdir, n_fig, seeded) -> Figure | None:
    """`metric` against the parameter `p`. Nothing is averaged over another varying parameter (a
    p99 averaged over queue depths means nothing): the other parameters' combinations become
    lines when there are at most MAX_LINES of them, otherwise each configuration is one mark.
    A categorical `p` gets marks, never lines joining its categories."""
    from qoslab.report.figures import pyplot, save_figure

    con = view.store.con
    t = _ident(view.table)
    numeric = _is_numeric(view.types[p])
    combinations = math.prod(distinct[q] for q in others)
    per_config = (numeric and distinct[p] > MAX_CATEGORIES) or combinations > MAX_LINES
    lines_by = [] if per_config else others
    keys = ["x", *(f"k{i}" for i in range(len(lines_by)))]
    columns = ", ".join(
        [f"{_ident(p)} AS x", *(f"{_ident(q)} AS k{i}" for i, q in enumerate(lines_by))]
        + (["params AS config"] if per_config else [])
    )
    # The mean of each configuration over its seeds, and the spread over seeds (GROUP BY ALL:
    # by the selected columns, whatever the parameters are called).
    frame = con.execute(
        f"SELECT {columns}, avg({_ident(metric)}) AS mean, stddev_samp({_ident(metric)}) AS sd, "
        f"count(*) AS n FROM {t} WHERE sweep = ? AND {_ident(metric)} IS NOT NULL GROUP BY ALL",
        [sweep],
    ).df()
    if frame.empty:
        return None
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(6.4, 3.9))
    frame["ci"] = [_ci(sd, int(n)) for sd, n in zip(frame["sd"], frame["n"], strict=True)]
    unit, scale = _scaled_unit(view, metric, frame["mean"].abs().max())
    frame["mean"] /= scale
    frame["ci"] /= scale
    categories = sorted(frame["x"].unique(), key=_order_key)
    position = {v: i for i, v in enumerate(categories)}
    if per_config:
        xs = frame["x"] if numeric else frame["x"].map(position)
        ax.errorbar(xs, frame["mean"], yerr=frame["ci"], fmt="o", ms=3, capsize=2, alpha=0.7)
    else:

        def label(row: tuple) -> str:
            return ", ".join(f"{q} = {_shown(v)}" for q, v in zip(lines_by, row, strict=True))

        values = list(frame[keys[1:]].itertuples(index=False, name=None))
        frame["line"] = [label(row) for row in values]
        ordered = sorted(set(values), key=lambda r: tuple(map(_order_key, r)))
        lines = list(dict.fromkeys(label(row) for row in ordered))
        for i, label in enumerate(lines):
            part = frame[frame["line"] == label]
            part = part.sort_values("x", key=lambda s: s.map(_order_key))
            style: dict = {"marker": "o", "capsize": 3, "label": label or None}
            if numeric:
                xs = part["x"]
            else:  # side by side around each category, no line joining two categories
                xs = part["x"].map(position) + (i - (len(lines) - 1) / 2) * 0.5 / len(lines)
                style["linestyle"] = "none"
            ax.errorbar(xs, part["mean"], yerr=part["ci"], **style)
        if lines_by:
            ax.legend(fontsize="small")
    if numeric:
        xs = frame["x"].astype(float)
        if (xs > 0).all() and xs.max() / xs.min() >= 100:
            ax.set_xscale("log")
    else:
        ax.set_xticks(range(len(categories)), [str(c) for c in categories])
    ax.ticklabel_format(axis="y", useOffset=False, style="plain")
    ax.set_xlabel(p + _unit(view, p, param=True))
    ax.set_ylabel(metric + unit)
    ax.set_title(f"{metric} vs {p} ({sweep})", fontsize="medium")
    n_fig[0] += 1
    if seeded:
        caption = (
            f"Mean of {metric} over seeds; error bars: {CONFIDENCE:.0%} confidence interval of "
            f"the mean over seeds (Student's t), drawn from {MIN_REPS} seeds or more."
        )
    else:
        caption = f"{metric} of each point (this study takes no seeds)."
    if per_config:
        caption += (
            " One mark per configuration"
            + (
                f" (the other varying parameters, {', '.join(others)}, not averaged)"
                if others
                else ""
            )
            + "."
        )
    elif lines_by:
        caption += f" One line per value of {', '.join(lines_by)}."
    return save_figure(
        fig,
        figdir,
        f"fig{n_fig[0]:03d}_{view.table}_{_slug(sweep)}_{_slug(p)}_{_slug(metric)}",
        f"{metric} vs {p}",
        caption,
        "figures/",
    )


# A metric kept in nanoseconds is drawn in the unit that gives its values a few digits.
_TIME_UNITS = ((1e9, "s"), (1e6, "ms"), (1e3, "µs"), (1.0, "ns"))


def _scaled_unit(view: _StudyView, metric: str, largest: float) -> tuple[str, float]:
    """The axis label's unit and the divisor that brings `metric`'s values into it."""
    unit = _unit(view, metric)
    if unit != " (ns)" or not largest or math.isnan(largest):
        return unit, 1.0
    scale, name = next((f, n) for f, n in _TIME_UNITS if largest >= f or f == 1.0)
    return f" ({name})", scale


def _unit(view: _StudyView, name: str, param: bool = False) -> str:
    if view.study is None:
        return ""
    if param:
        p = view.study.param(name)
        return f" ({p.unit})" if p is not None and p.unit else ""
    m = next((m for m in view.study.metrics if m.name == name), None)
    return f" ({m.unit})" if m is not None and m.unit else ""


def _slug(text: str) -> str:
    return "".join(c if c.isalnum() else "_" for c in text)[:40]


def _config_table(view: _StudyView, sweep: str, varying: list[str], headline: list[str]) -> Table:
    t = _ident(view.table)
    keys = ", ".join(_ident(p) for p in varying) if varying else "sweep"
    aggs = ", ".join(
        f"avg({_ident(m)}) AS {_ident(m + ' mean')}, stddev_samp({_ident(m)}) AS "
        f"{_ident(m + ' sd')}"
        for m in headline
    )
    frame = view.store.con.execute(
        f"SELECT {keys}, count(*) AS seeds{', ' + aggs if aggs else ''} FROM {t} "
        f"WHERE sweep = ? GROUP BY {keys}",
        [sweep],
    ).df()
    total = len(frame)
    for m in headline:  # a time kept in ns in the figures' unit, named in its column's header
        if _unit(view, m) == " (ns)":
            unit, scale = _scaled_unit(view, m, frame[f"{m} mean"].abs().max())
            for stat in ("mean", "sd"):
                frame[f"{m} {stat}"] /= scale
            frame = frame.rename(
                columns={f"{m} mean": f"{m} mean{unit}", f"{m} sd": f"{m} sd{unit}"}
            )
    if varying:
        frame = frame.sort_values(varying, key=lambda s: s.map(_order_key))
    frame = frame.head(MAX_TABLE_ROWS)
    rows = [[_fmt(v) for v in r] for r in frame.to_numpy(dtype=object).tolist()]
    more = f" (first {MAX_TABLE_ROWS} of {total:,})" if total > MAX_TABLE_ROWS else ""
    return Table(
        [str(c) for c in frame.columns],
        rows,
        title=f"Configurations{more}",
        caption="Mean and sample standard deviation over the seeds of each configuration.",
    )


MAX_FAILURES_LISTED = 50


def _failures(store: Store, table: str, sweep: str) -> Table | None:
    if "failures" not in store.views():
        return None
    frame = store.con.execute(
        "SELECT key, seed, params, error FROM failures "
        "WHERE replace(study, ' ', '_') = ? AND sweep = ? ORDER BY key LIMIT ?",
        [table, sweep, MAX_FAILURES_LISTED],
    ).df()
    if frame.empty:
        return None
    return Table.from_dataframe(frame, title=f"Failed points (first {len(frame)})")


def _overview(store: Store) -> list[Text | Table]:
    """Points and failures per study and sweep (a sweep may have either alone)."""
    views = store.views()
    ok = (
        "SELECT study, sweep, count(*) AS points, count(DISTINCT params) AS configurations, "
        "count(DISTINCT seed) AS seeds FROM points GROUP BY ALL"
        if "points" in views
        else "SELECT NULL AS study, NULL AS sweep, 0 AS points, 0 AS configurations, "
        "0 AS seeds WHERE false"
    )
    failed = (
        "SELECT study, sweep, count(*) AS failed FROM failures GROUP BY ALL"
        if "failures" in views
        else "SELECT NULL AS study, NULL AS sweep, 0 AS failed WHERE false"
    )
    frame = store.con.execute(
        f"SELECT study, sweep, coalesce(points, 0) AS points, coalesce(configurations, 0) AS "
        f"configurations, coalesce(seeds, 0) AS seeds, coalesce(failed, 0) AS failed "
        f"FROM ({ok}) FULL JOIN ({failed}) USING (study, sweep) ORDER BY study, sweep"
    ).df()
    return [Table.from_dataframe(frame, title="What the store holds")]


def _failed_sweeps(store: Store, table: str) -> list[str]:
    rows = store.con.execute(
        "SELECT DISTINCT sweep FROM failures WHERE replace(study, ' ', '_') = ? ORDER BY 1",
        [table],
    ).fetchall()
    return [r[0] for r in rows]


def _shown_path(store_path: str | Path) -> str:
    """The store as the report names it: the path the user gave if relative, else its name, so
    two reports of the same store are the same bytes whatever the directory they ran in."""
    path = Path(store_path)
    return path.name if path.is_absolute() else str(path)


def _schema(store: Store, shown: str) -> Section:
    items: list[Text | Table] = [
        Text(
            f'Query the store with `qoslab store query {shown} "SQL"` or '
            f'`qoslab.store.open("{shown}")`; these are its views and their columns.'
        )
    ]
    rows = []
    for view in store.views():
        cols = store.con.execute(f"DESCRIBE {_ident(view)}").fetchall()
        n = store.con.execute(f"SELECT count(*) FROM {_ident(view)}").fetchone()[0]
        rows.append([view, n, ", ".join(f"{c[0]} {c[1]}" for c in cols)])
    items.append(Table(["view", "rows", "columns"], rows, title="Views"))
    return Section("Querying the store", items)


def build_report(store_path: str | Path, out: str | Path) -> Path:
    """Writes DIR/report.html (figures inline; PNG and SVG copies in DIR/figures)."""
    with Store(store_path) as store:
        out = Path(out)
        with staged_dir(
            out, is_earlier_output=earlier_output("report.html"), refusal=_REFUSAL
        ) as tmp:
            figdir = tmp / "figures"
            figdir.mkdir()
            sections: list[Section] = []
            shown = _shown_path(store_path)
            facts: dict[str, Any] = {"store": shown}
            views = store.views()
            if "points" in views or "failures" in views:
                sections.append(Section("Overview", _overview(store)))
            else:
                sections.append(Section("Overview", [Text("The store holds no points yet.")]))
            if "points" in views:
                n = store.con.execute("SELECT count(*) FROM points").fetchone()[0]
                facts["points"] = f"{n:,}"
                builds = store.con.execute(
                    "SELECT DISTINCT qoslab_version, qoslab_commit FROM points ORDER BY ALL"
                ).fetchall()
                facts["qoslab"] = "; ".join(f"{v} ({c[:12] or 'no commit'})" for v, c in builds)
            if "failures" in views:
                n = store.con.execute("SELECT count(*) FROM failures").fetchone()[0]
                facts["failed points"] = f"{n:,}"
            n_fig = [0]
            for table in store.studies:
                if table not in views:
                    # Only failures so far: the overview counts them; list them here.
                    failed = [
                        t
                        for sweep in _failed_sweeps(store, table)
                        if (t := _failures(store, table, sweep)) is not None
                    ]
                    if failed:
                        sections.append(Section(f"{table}: failed points", failed))
                    continue
                view = _StudyView(store, table)
                if view.study is not None and view.study.figures is not None:
                    figures = view.study.figures(store, table, figdir)
                    if figures:
                        help_text = Text(view.study.help)
                        sections.append(
                            Section(f"{view.study.name}: figures", [help_text, *figures])
                        )
                for sweep in view.sweeps:
                    sections.append(_sweep_section(view, sweep, figdir, n_fig))
            sections.append(_schema(store, shown))
            write_report(
                tmp / "report.html",
                f"qoslab results: {store.path.name}",
                sections,
                facts=facts,
            )
    return out / "report.html"
