"""`sim` in a sweep: a point is one run of the timed simulator (`qoslab sim`).

Parameters are the command's options, plus two families that reach inside its inputs:
`set.SECTION.KEY` overrides a device tunable (as `--set SECTION.KEY=VALUE` does) and
`env.NAME` gives the job file's `${NAME}` (fio's environment variables). The summary row
totals every job of the job file per direction (IOPS and bandwidth summed; latency
percentiles from the merged json+ histograms of completion latency, by fio's rule); the
whole fio JSON and the per-interval series can be stored as detail tables.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import re
import tempfile
import threading
from collections.abc import Iterator
from functools import lru_cache
from pathlib import Path
from typing import Any

from qoslab.sweep.kinds import KindError, choice, file, integer, real, scalar
from qoslab.sweep.study import CONTRACT_VERSION, Detail, Metric, Param, PointResult, Study

TRACE_FORMATS = ("auto", "msr", "systor17", "blkparse", "iolog2", "iolog3")
OPS = ("read", "write")
PERCENTILES = {"p50": 50.0, "p99": 99.0, "p99_9": 99.9}


@lru_cache(maxsize=1)
def _presets() -> tuple[str, ...]:
    from qoslab.sim import presets

    return tuple(n for n, _ in presets())


@lru_cache(maxsize=1)
def _tunables() -> dict[str, tuple[str, str]]:
    from qoslab.sim import tunables

    # Sections are listed per media model ('media (model = "ssd")'); --set names 'media.KEY'.
    return {f"{s.split()[0]}.{k}": (u, h) for s, k, u, d, h in tunables()}


def _params() -> tuple[Param, ...]:
    from qoslab.sim import DEFAULT_DEVICE

    return (
        Param("job", file(), "", None, "fio job file (or give trace)"),
        Param("trace", file(), "", None, "block trace to replay (or give job)"),
        Param("trace_format", choice(TRACE_FORMATS), "", "auto", "the trace's format"),
        Param("speed", real(positive=True), "x", 1.0, "trace replay speed"),
        Param("qd_cap", integer(0), "I/Os", 0, "most trace I/Os outstanding (0 = no cap)"),
        Param("device", file(_presets()), "", DEFAULT_DEVICE, "device preset or device TOML"),
        Param("log_avg_msec", real(positive=True), "ms", 100.0, "interval of the timeseries"),
    )


_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


def param_for(name: str) -> Param | None:
    if name.startswith("set."):
        found = _tunables().get(name[4:])
        if found is None:
            return None
        unit, help_text = found
        return Param(name, scalar(), unit, None, help_text)
    if name.startswith("env.") and _ENV_NAME.match(name[4:]):
        return Param(name, scalar(), "", None, f"the job file's ${{{name[4:]}}}")
    return None


def check_config(params: dict[str, Any]) -> None:
    if (params["job"] is None) == (params["trace"] is None):
        raise KindError("give either job or trace (one of them)")


def _metrics() -> tuple[Metric, ...]:
    out = [Metric("ios", "int64", "I/Os", "I/Os the run completed")]
    for op in OPS:
        out += [
            Metric(f"{op}_ios", "int64", "I/Os", f"{op} I/Os completed"),
            Metric(f"{op}_iops", "float64", "IO/s", f"{op} IOPS, summed over jobs"),
            Metric(f"{op}_bw_bytes_s", "float64", "B/s", f"{op} bandwidth, summed over jobs"),
            Metric(f"{op}_clat_mean_ns", "float64", "ns", f"mean {op} completion latency"),
            *(
                Metric(f"{op}_clat_{p}_ns", "float64", "ns", f"{op} completion latency {p}")
                for p in PERCENTILES
            ),
            Metric(f"{op}_clat_max_ns", "float64", "ns", f"largest {op} completion latency"),
        ]
    return tuple(out)


def _text(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


# The job file reads `${NAME}` from the process environment: runs that set it take turns.
_ENV_LOCK = threading.Lock()


@contextlib.contextmanager
def _environment(values: dict[str, str]) -> Iterator[None]:
    saved = {k: os.environ.get(k) for k in values}
    os.environ.update(values)
    try:
        yield
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def summary(fio_json: str) -> dict[str, Any]:
    """The summary row's latency and rate metrics from the simulator's json+ output."""
    from qoslab.fio import parse_fio_json, percentiles_from_bins

    out = parse_fio_json(fio_json)
    row: dict[str, Any] = {}
    for op in OPS:
        stats = [j.ops[op] for j in out.jobs if op in j.ops and j.ops[op].total_ios > 0]
        ios = sum(s.total_ios for s in stats)
        row[f"{op}_ios"] = ios
        row[f"{op}_iops"] = math.fsum(s.iops for s in stats)
        row[f"{op}_bw_bytes_s"] = math.fsum(s.bw_bytes for s in stats)
        clats = [s.latency["clat"] for s in stats if "clat" in s.latency]
        n = sum(c.samples or 0 for c in clats)
        bins: dict[float, int] = {}
        for c in clats:
            for value, count in (c.bins_ns or {}).items():
                bins[value] = bins.get(value, 0) + count
        pct = percentiles_from_bins(bins, PERCENTILES.values()) if bins else {}
        row[f"{op}_clat_mean_ns"] = (
            math.fsum(c.mean_ns * (c.samples or 0) for c in clats) / n if n else None
        )
        for name, p in PERCENTILES.items():
            row[f"{op}_clat_{name}_ns"] = pct.get(p)
        row[f"{op}_clat_max_ns"] = max((c.max_ns for c in clats), default=None)
    return row


def run_point(params: dict[str, Any], seed: int | None, details: frozenset[str]) -> PointResult:
    from qoslab.sim import run

    sets = [
        f"{name[4:]}={_text(v)}"
        for name, v in params.items()
        if name.startswith("set.") and v is not None
    ]
    env = {name[4:]: _text(v) for name, v in params.items() if name.startswith("env.")}
    with tempfile.TemporaryDirectory(prefix="qoslab-sweep-sim-") as scratch:
        series = Path(scratch) / "series.parquet" if "timeseries" in details else None
        with _ENV_LOCK, _environment(env):
            result = run(
                params["job"],
                trace=params["trace"],
                trace_format=params["trace_format"],
                speed=params["speed"],
                qd_cap=params["qd_cap"],
                device=params["device"],
                sets=sets,
                seed=seed,
                output_format="json+",
                timeseries=series,
                log_avg_msec=params["log_avg_msec"],
            )
        metrics = {"ios": result["ios"], **summary(result["text"])}
        tables: dict[str, Any] = {}
        if "fio_json" in details:
            tables["fio_json"] = [{"fio_json": _compact(result["text"])}]
        if series is not None:
            import pyarrow.parquet as pq

            tables["timeseries"] = pq.read_table(series)
    return PointResult(metrics, tables)


def _compact(text: str) -> str:
    return json.dumps(json.loads(text), separators=(",", ":"))


def _figures(store, table, directory):
    """Throughput against tail latency, the trade-off a QoS study is about: one mark per
    configuration (mean over seeds), error bars one standard deviation over seeds; within a
    sweep one curve per value of the varying parameters other than the one with the most values
    (a queue depth, say), whose marks it joins in that parameter's order when it is numeric."""
    from qoslab.report.figures import pyplot, save_figure

    figures = []
    plt = pyplot()
    for op in OPS:
        cells = store.query(
            f"SELECT sweep, params, avg({op}_iops) AS x, stddev_samp({op}_iops) AS dx, "
            f"avg({op}_clat_p99_ns) / 1e3 AS y, stddev_samp({op}_clat_p99_ns) / 1e3 AS dy "
            f'FROM "{table}" WHERE {op}_ios > 0 GROUP BY ALL ORDER BY ALL'
        )
        if cells.empty:
            continue
        fig, ax = plt.subplots(figsize=(6.4, 4.0))
        for sweep, part in cells.groupby("sweep", sort=True):
            for label, curve, joined in _curves(sweep, part):
                ax.errorbar(
                    curve["x"],
                    curve["y"],
                    xerr=curve["dx"].fillna(0),
                    yerr=curve["dy"].fillna(0),
                    marker="o",
                    linestyle="-" if joined else "none",
                    capsize=3,
                    label=label,
                )
        ax.set_xlabel(f"{op} IOPS")
        ax.set_ylabel(f"{op} p99 completion latency (µs)")
        ax.set_xlim(left=0)
        ax.set_ylim(bottom=0)
        ax.legend(fontsize="small", title="sweep")
        figures.append(
            save_figure(
                fig,
                directory,
                f"sim_{op}_iops_vs_p99",
                f"{op.capitalize()} IOPS against p99 latency",
                "One mark per configuration: the mean over its seeds; error bars are one "
                "standard deviation over the seeds. One curve per value of the sweep's other "
                "varying parameters, its marks joined in the order of the parameter with the "
                "most values when that one is numeric.",
                "figures/",
            )
        )
    return figures


def _curves(sweep: str, part):
    """(label, rows, joined) for each curve of one sweep's configurations."""
    import pandas as pd

    params = pd.DataFrame([json.loads(p) for p in part["params"]], index=part.index)
    distinct = {c: params[c].astype(str).nunique() for c in params.columns}
    varying = [c for c in params.columns if distinct[c] > 1]
    if not varying:
        yield sweep, part, False
        return
    along = max(varying, key=lambda c: distinct[c])
    numeric = pd.api.types.is_numeric_dtype(params[along])
    others = [c for c in varying if c != along]
    values = [tuple(r) for r in params[others].itertuples(index=False)]
    for key in sorted(set(values), key=lambda t: tuple(map(_order, t))):
        rows = part[[v == key for v in values]]
        if numeric:
            rows = rows.loc[params.loc[rows.index, along].sort_values(kind="stable").index]
        named = ", ".join(f"{c} = {v}" for c, v in zip(others, key, strict=True))
        yield (f"{sweep}: {named}" if others else sweep), rows, numeric


def _order(value) -> tuple:
    """Numbers by value, then anything else by its text."""
    if isinstance(value, int | float) and not isinstance(value, bool):
        return (0, float(value), "")
    return (1, 0.0, str(value))


STUDY = Study(
    name="sim",
    help="One run of the timed simulator on a job file or trace (`qoslab sim`).",
    params=_params(),
    metrics=_metrics(),
    headline=("read_clat_p99_ns", "read_iops", "write_clat_p99_ns", "write_iops"),
    version=CONTRACT_VERSION,
    seed_help="the run seed (every random stream of the run derives from it)",
    run_point=run_point,
    param_for=param_for,
    param_patterns=(
        Param(
            "set.SECTION.KEY", scalar(), "", None, "a device tunable (qoslab sim --list-tunables)"
        ),
        Param("env.NAME", scalar(), "", None, "the job file's ${NAME}"),
    ),
    check_config=check_config,
    figures=_figures,
    details=(
        Detail("fio_json", "the run's whole fio json+ output (one row, column fio_json)"),
        Detail("timeseries", "per-interval IOPS, bandwidth, mean and p99 latency per job"),
    ),
)


def set_param_for(name: str) -> Param | None:
    """`set.SECTION.KEY` alone: the device tunables, for a study whose point is one run."""
    return param_for(name) if name.startswith("set.") else None


# The fields a study shares whose point is one run of the simulator with the device's tunables
# as `set.SECTION.KEY` (`sched`, `fs`): its seed is the run's, and the run is in the Rust core,
# which releases Python's lock (its local workers are threads).
ONE_RUN: dict[str, Any] = {
    "version": CONTRACT_VERSION,
    "seed_help": STUDY.seed_help,
    "threads": True,
    "param_for": set_param_for,
    "param_patterns": tuple(p for p in STUDY.param_patterns if p.name.startswith("set.")),
}
