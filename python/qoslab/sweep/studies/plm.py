"""`plm`: one simulation of the PLM study (`qoslab plm study`, docs/plm.md): a run of its plan
(a dataset's hosts on the bare drive, shared or one alone, or under PLM with the coordinator's
predictor and policy on a config of Table II) with one seed.

A point makes the demand its run replays (the generator's for its dataset and seed, or the
SYSTOR '17 traces given) and simulates it (`qoslab.plm.study`); its detail tables are what the
study keeps of the run: `rows` (one per host: latencies, the coordinator's figures), `series`
(per-window read latencies of each host) and `slow` (the slow-read diagnostic, when the run's
`sets` turn it on). A worker keeps the last demands it made, so the runs of one dataset and
seed that follow each other replay one generated demand, as the study's loop did.
"""

from __future__ import annotations

import collections
import contextlib
import os
import tempfile
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from qoslab.sweep.kinds import choice, file, integer, real, text
from qoslab.sweep.study import CONTRACT_VERSION, Detail, Metric, Param, PointResult, Study

# The study's vocabulary, as qoslab.plm.study names it (checked equal in tests/test_plm_study.py,
# where importing the study's machinery here would make every sweep pay for numpy's generator).
DATASETS = ("DS1", "DS2", "DS3", "DS4", "trace")
VARIANTS = ("shared", "isolated", "HoD", "CoD", "uncoordinated")
POLICIES = ("sp", "fr")
CLASSES = ("high", "medium", "low")
TRACES = tuple(f"trace_{c}" for c in CLASSES)

# Demands a worker keeps (each a folder of request files): the seeds of one dataset in a row.
# One that a running point replays is never removed (its thread holds it: `users`).
KEPT_DEMANDS = 8


@dataclass
class _Demand:
    made: Any  # qoslab.plm.study.Traces
    folder: tempfile.TemporaryDirectory
    users: int = 0


_demands: collections.OrderedDict[tuple, _Demand] = collections.OrderedDict()
_lock = threading.Lock()


def sizes_text(sizes: tuple[tuple[int, float], ...]) -> str:
    """A workload's request sizes and weights as the `sizes` parameter: `4096:0.7,...`, each
    weight as Python's repr of the float, so that it reads back exactly."""
    return ",".join(f"{s}:{w!r}" for s, w in sizes)


def _sizes(value: str) -> tuple[tuple[int, float], ...]:
    return tuple((int(s), float(w)) for s, w in (p.split(":") for p in value.split(",")))


@contextlib.contextmanager
def _demand(run, seed: int, params: dict[str, Any]) -> Iterator[_Demand]:
    """The demand of `run` with `seed`, made once per worker for the last KEPT_DEMANDS
    (dataset, write fraction, seed, workload, traces), held while the caller replays it."""
    from qoslab.plm import study as S

    traces = [params[t] for t in TRACES] if params["trace_high"] is not None else None
    workload = S.Workload(params["writes"], _sizes(params["sizes"]), params["burst_sigma"])
    # A replayed trace is the same demand whatever the seed, and another one once its file
    # changes (a worker may outlive an edit: a Dask worker, a test process).
    files = tuple((t, os.stat(t).st_mtime_ns, os.stat(t).st_size) for t in traces or ())
    key = (run.demand, None if traces else seed, params["duration_ms"], workload, files)
    with _lock:
        if key not in _demands:
            folder = tempfile.TemporaryDirectory(prefix="qoslab-plm-demand-")
            ms = params["duration_ms"]
            made = S.demand_for(run, seed, ms, workload, traces, Path(folder.name))
            _demands[key] = _Demand(made, folder)
        _demands.move_to_end(key)
        demand = _demands[key]
        demand.users += 1
    try:
        yield demand
    finally:
        with _lock:
            demand.users -= 1
            idle = [k for k, d in _demands.items() if d.users == 0]
            for k in idle[: max(0, len(_demands) - KEPT_DEMANDS)]:  # the oldest first
                _demands.pop(k).folder.cleanup()


def run_point(params: dict[str, Any], seed: int | None, details: frozenset[str]) -> PointResult:
    import math

    from qoslab.plm import study as S

    run = S.Run(
        params["dataset"],
        params["variant"],
        params["config"],
        params["policy"],
        params["host"],
        params["write_fraction"],
    )
    sets = [s for s in params["sets"].split("\n") if s]
    with _demand(run, seed, params) as demand:
        with _lock:  # a host-directed run writes its demand file into the shared folder once
            job = S.job_for(run, seed, demand.made, sets, Path(demand.folder.name))
        done = S._simulate(job)
    high = [r for r in done["rows"] if r["cls"] == "high"]
    metrics = {
        "reads": sum(r["reads"] for r in done["rows"]),
        "high_p99_us": high[0]["p99_us"] if high else math.nan,
        "high_p9999_per_dtwin_us": high[0]["p9999_per_dtwin_us"] if high else math.nan,
    }
    kept = {"rows": done["rows"], "series": done["series"]}
    if done["slow"]:
        kept["slow"] = [done["slow"]]
    return PointResult(metrics, {k: v for k, v in kept.items() if k in details})


STUDY = Study(
    name="plm",
    help="One simulation of the PLM study: a run of its plan (bare drive shared or one host "
    "alone, or PLM with the coordinator) on a dataset's demand, one seed (`qoslab plm study`).",
    params=(
        Param("dataset", choice(DATASETS), "", "DS1", "Table I's dataset, or trace (--trace)"),
        Param("variant", choice(VARIANTS), "", "shared", "the bare drive or PLM's run"),
        Param("config", integer(1, 4), "", None, "Table II's config (the PLM runs)"),
        Param("policy", choice(POLICIES), "", None, "the coordinator's policy (HoD, CoD)"),
        Param("host", integer(0, 2), "", None, "the host that runs alone (isolated)"),
        Param("write_fraction", real(0.0), "", None, "the sensitivity run's write fraction"),
        Param("duration_ms", integer(1), "ms", 2_000, "simulated time (the demand's length)"),
        Param("writes", real(0.0), "", 0.0, "the generator's share of writes (--writes)"),
        Param("sizes", text(), "", "4096:1.0", "request sizes and weights (--sizes), exact"),
        Param("burst_sigma", real(0.0), "", 0.30, "the generator's shared burstiness"),
        *(
            Param(t, file(), "", None, f"the {c} host's SYSTOR '17 trace")
            for t, c in zip(TRACES, CLASSES, strict=True)
        ),
        Param("sets", text(), "", "", "device keys KEY=VALUE, one a line (--set)"),
    ),
    metrics=(
        Metric("reads", "int64", "reads", "reads completed, every host"),
        Metric("high_p99_us", "float64", "us", "the high host's p99 read latency"),
        Metric("high_p9999_per_dtwin_us", "float64", "us", "its p99.99 of the windows' p99.99"),
    ),
    headline=("high_p9999_per_dtwin_us",),
    run_point=run_point,
    version=CONTRACT_VERSION,
    details=(
        Detail("rows", "one row per host: the study's results.parquet columns", True),
        Detail("series", "per-window read latencies of each host (series.parquet)", True),
        Detail("slow", "the slowest reads, when the run's sets ask (media.diag.slow_reads)", True),
    ),
    seed_help="the repetition: it draws the generator's demand and seeds the simulator",
    # The simulation runs in the Rust core with Python's lock released: workers are threads,
    # which share the demands they make. Spawned processes cost 25 % more CPU than the study's
    # forked pool did on its quick plan (each imports qoslab again and makes its own demands).
    threads=True,
)
