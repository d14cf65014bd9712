"""`qoslab plm study`: the PLM coordinator's evaluation (Roy et al., PLMC, section IV) run
through the simulator.

Three hosts (classes high, medium, low) share one controller of MQSim's default SSD (the
simulator the document used; preset `mqsim-default`). Each dataset of Table I gives each
host's mean 4 KiB requests per 100 ms; DS4 is DS1 with the medium and low hosts' traffic
200 ms and 400 ms later. Each config of Table II gives the deterministic-window counts
C = factor x M_DC (M_DC: the mean of the three hosts' summed demand per window) and the window
length T_DW. Every dataset runs the two baselines on the bare SSD (no PLM, one NVM set):
*shared* (the three hosts together) and *isolated* (each host alone); every dataset and config
runs PLM with two copies on two NVM sets, the coordinator's predictor host-directed (HoD) or
coordinator-directed (CoD, EWMA) and its policy strict priority (sp) or fixed ratio (fr).

The document's trace (SYSTOR '17 VDI) is not shipped; the default demand is a bursty,
synchronised generator whose means are Table I's (see `generate`); a user's SYSTOR '17 CSV
files (one per host) replay instead.
"""

from __future__ import annotations

import json
import math
import os
import tempfile
import zlib
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from qoslab.errors import InputError

CLASSES = ("high", "medium", "low")

# Table I: the high host's mean 4 KiB requests per 100 ms, and the medium and low hosts' as
# fractions of it; DS4 is DS1 with the medium and low traffic 200 and 400 ms later.
DATASETS: dict[str, tuple[float, float, float, tuple[int, int, int]]] = {
    "DS1": (420.0, 0.78, 0.71, (0, 0, 0)),
    "DS2": (480.0, 0.83, 0.72, (0, 0, 0)),
    "DS3": (165.0, 0.85, 0.70, (0, 0, 0)),
    "DS4": (420.0, 0.78, 0.71, (0, 200, 400)),
}
# Table II: DC = factor x M_DC, and T_DW in ms.
CONFIGS: dict[int, tuple[float, int]] = {1: (1.2, 100), 2: (1.4, 100), 3: (2.0, 400), 4: (2.5, 400)}
POLICIES = ("sp", "fr")
PREDICTORS = {"HoD": "exact", "CoD": "ewma"}

# The generator's constants. Table I gives means only; the document calls its traffic "very
# highly bursty and synchronised". Each 100 ms slot's intensity is the Table I mean times a
# factor shared by the three hosts (lognormal, sigma 1: a coefficient of variation of 1.31,
# so that a slot at the 90th percentile carries about 2.7 times the mean) and a factor of each
# host's own (lognormal, sigma 0.25); both have mean 1. Within a slot, requests arrive as a
# Poisson process. These are assumptions, stated in docs/plm.md, not fitted to any result.
SLOT_MS = 100
SHARED_SIGMA = 1.0
OWN_SIGMA = 0.25
# VDI traffic is read-intensive; the document gives no write share. Writes are what the
# drive defers in a DTWin (destaging), so some are needed for windows to matter at all.
WRITE_FRACTION = 0.1
REQUEST_BYTES = 4096
SPAN_BYTES = 1 << 30

DEVICE = "mqsim-default"
# The drive in use, not fresh: 75 % of its logical pages written (MQSim's workload.xml sets
# Initial_Occupancy_Percentage 75) by random overwrites, which leave each plane at the floor
# of its free blocks, in GC's steady state (media.precondition). GC then runs throughout the
# run, as on the document's drive: the bare SSD pays for it in its read tail, PLM defers it to
# the NDWin of each copy.
FILL = 0.75
BARE = [f"media.precondition.fill={FILL}", "path.hosts=3"]
# The copies hand over this long before the DTWin of the one in it runs out: the copy asked in
# next finishes the programs it has in flight (MQSim's tPROG is 750 us, a die may hold a few)
# and the host's 1 ms poll sees it, while the other is still deterministic. Without it a
# copy's DTWin ends at DTWIN Time Maximum before the next is in, and the reads of that gap go
# to copies that are destaging.
HANDOVER_MS = 10
PLM = [
    "media.nvm_sets=2",
    "media.gc.gate=plm",
    "host.replicas=plm",
    "host.plm.copies=2",
    "host.plm.classes=high,medium,low",
    "host.plm.zeta=0.5",
    "host.plm.min_share=0.5",
]


@dataclass(frozen=True)
class Run:
    """One simulation of the study."""

    dataset: str
    variant: str  # shared, isolated, HoD, CoD
    config: int | None = None
    policy: str | None = None
    host: int | None = None  # isolated: which host runs alone

    @property
    def name(self) -> str:
        parts = [self.dataset, self.variant]
        if self.config is not None:
            parts.append(f"config{self.config}")
        if self.policy is not None:
            parts.append(self.policy)
        if self.host is not None:
            parts.append(CLASSES[self.host])
        return "-".join(parts)


def _rng(seed: int, stream: str) -> np.random.Generator:
    """The named stream `stream` of the run seed."""
    key = zlib.crc32(stream.encode())
    return np.random.Generator(np.random.PCG64(np.random.SeedSequence(seed, spawn_key=(key,))))


def generate(dataset: str, duration_ms: int, seed: int) -> list[np.ndarray]:
    """Each host's requests as rows of (arrival ns, is_write), sorted by time; the first at 0."""
    high, med, low, offsets = DATASETS[dataset]
    means = (high, high * med, high * low)
    max_offset = max(offsets) // SLOT_MS
    slots = math.ceil(duration_ms / SLOT_MS)
    # The shared factor of slot s; an offset host sees the slot `offset` earlier.
    shared = _rng(seed, "plm/study/shared").lognormal(
        -(SHARED_SIGMA**2) / 2, SHARED_SIGMA, slots + max_offset
    )
    hosts = []
    for h, mean in enumerate(means):
        rng = _rng(seed, f"plm/study/host{h}")
        lag = offsets[h] // SLOT_MS
        own = rng.lognormal(-(OWN_SIGMA**2) / 2, OWN_SIGMA, slots)
        rate = mean * shared[max_offset - lag : max_offset - lag + slots] * own
        counts = rng.poisson(rate)
        slot_ns = SLOT_MS * 1_000_000
        at = np.repeat(np.arange(slots, dtype=np.int64) * slot_ns, counts)
        at += (rng.random(at.size) * slot_ns).astype(np.int64)
        at.sort()
        if at.size:
            at[0] = 0  # replay times count from a trace's first record: align it to 0
        writes = rng.random(at.size) < WRITE_FRACTION
        hosts.append(np.column_stack([at, writes.astype(np.int64)]))
    return hosts


def write_systor(path: Path, requests: np.ndarray, seed: int, stream: str) -> None:
    """Writes requests as a SYSTOR '17 CSV (Timestamp in s, Response, IOType, LUN, Offset,
    Size), 4 KiB at random aligned offsets in the first GiB."""
    rng = _rng(seed, stream)
    offsets = rng.integers(0, SPAN_BYTES // REQUEST_BYTES, len(requests)) * REQUEST_BYTES
    lines = ["Timestamp,Response,IOType,LUN,Offset,Size"]
    for (at, w), off in zip(requests.tolist(), offsets.tolist(), strict=True):
        lines.append(f"{at / 1e9:.9f},0,{'W' if w else 'R'},0,{off},{REQUEST_BYTES}")
    path.write_text("\n".join(lines) + "\n")


SYSTOR_COLUMNS = ("Timestamp", "Response", "IOType", "LUN", "Offset", "Size")


def read_systor(path: Path) -> np.ndarray:
    """A SYSTOR '17 CSV's requests as rows of (arrival ns since its first record, is_write);
    records with a blank IOType are skipped (as the replay skips them)."""
    import pandas as pd

    try:
        frame = pd.read_csv(path, dtype="string", keep_default_na=False)
    except (OSError, UnicodeDecodeError, pd.errors.ParserError) as err:
        raise InputError(f"cannot read a SYSTOR '17 CSV: {err}", path=path) from None
    if tuple(frame.columns) != SYSTOR_COLUMNS:
        raise InputError(
            f"expected the header {','.join(SYSTOR_COLUMNS)}, got {','.join(frame.columns)}",
            path=path,
            line=1,
        )
    kind = frame["IOType"].str.strip()
    bad = ~kind.isin(["R", "W", ""])
    if bad.any():
        i = int(np.flatnonzero(bad.to_numpy())[0])
        raise InputError(
            f"field 'IOType': expected R, W or blank, got '{kind.iloc[i]}'", path=path, line=i + 2
        )
    # Seconds with a fraction, read exactly (a float loses the nanoseconds of an epoch time).
    parts = frame["Timestamp"].str.strip().str.extract(r"^(\d+)(?:\.(\d{0,9})\d*)?$")
    bad_stamp = parts[0].isna().to_numpy()
    if bad_stamp.any():
        i = int(np.flatnonzero(bad_stamp)[0])
        raise InputError(
            f"field 'Timestamp': expected seconds, got '{frame['Timestamp'].iloc[i]}'",
            path=path,
            line=i + 2,
        )
    frac = parts[1].fillna("").str.ljust(9, "0").astype("int64").to_numpy()
    stamp = parts[0].astype("int64").to_numpy() * 1_000_000_000 + frac
    if (np.diff(stamp) < 0).any():
        i = int(np.flatnonzero(np.diff(stamp) < 0)[0]) + 1
        raise InputError("field 'Timestamp': goes back in time", path=path, line=i + 2)
    keep = (kind != "").to_numpy()
    at = stamp - (stamp[0] if stamp.size else 0)
    writes = (kind == "W").to_numpy()
    return np.column_stack([at[keep], writes[keep].astype(np.int64)])


def window_demand(hosts: list[np.ndarray], window_ms: int, windows: int) -> np.ndarray:
    """Reads of each host in each window: [window][host]."""
    out = np.zeros((windows, len(hosts)), dtype=np.int64)
    for h, req in enumerate(hosts):
        reads = req[req[:, 1] == 0, 0] // (window_ms * 1_000_000)
        reads = reads[reads < windows]
        out[:, h] = np.bincount(reads, minlength=windows)
    return out


def _write_demands(path: Path, demand: np.ndarray) -> None:
    lines = ["window,host,class,demand"]
    for n, row in enumerate(demand.tolist()):
        lines += [f"{n},{CLASSES[h]},{CLASSES[h]},{d}" for h, d in enumerate(row)]
    path.write_text("\n".join(lines) + "\n")


def plan(datasets: list[str], configs: list[int], policies: list[str]) -> list[Run]:
    runs: list[Run] = []
    for ds in datasets:
        runs.append(Run(ds, "shared"))
        runs += [Run(ds, "isolated", host=h) for h in range(3)]
        for c in configs:
            for pred in PREDICTORS:
                runs += [Run(ds, pred, c, p) for p in policies]
    return runs


def _simulate(job: tuple) -> dict:
    """Runs one simulation in a scratch folder; returns what the study keeps of it."""
    from qoslab.sim import api

    run, traces, window_ms, capacity, seed, extra = job
    with tempfile.TemporaryDirectory(prefix="qoslab-plm-") as d:
        folder = Path(d)
        sets = list(BARE)
        paths = [Path(t) for t in traces]
        if run.variant == "isolated":
            paths = [paths[run.host]]
            sets[1] = "path.hosts=1"
        if run.variant in PREDICTORS:
            sets += [
                *PLM,
                # Windows of T_DW: the drive allows a DTWin of T_DW + the handover.
                f"media.gc.plm.dtwin_time_max_ns={window_ms + HANDOVER_MS}ms",
                f"host.plm.handover_ns={HANDOVER_MS}ms",
                f"media.gc.plm.dtwin_reads_typical={capacity}",
                f"host.plm.policy={run.policy}",
                f"host.plm.predictor={PREDICTORS[run.variant]}",
            ]
            if run.variant == "HoD":
                demands = folder / "demands.csv"
                hosts = [_load(p) for p in paths]
                span = max((int(h[-1, 0]) for h in hosts if len(h)), default=0)
                windows = span // (window_ms * 1_000_000) + 2
                _write_demands(demands, window_demand(hosts, window_ms, windows))
                sets.append(f"host.plm.demands={demands}")
        sets += extra
        series = folder / "series.csv"
        result = api.run(
            trace=[str(p) for p in paths],
            trace_format="systor17",
            device=DEVICE,
            sets=sets,
            seed=seed,
            output_format="json",
            timeseries=series,
            log_avg_msec=float(window_ms),
        )
        report = json.loads(result["text"])
        frame = api.read_series(series)
    return _summarise(run, report, frame, window_ms, capacity)


_LOADED: dict[str, np.ndarray] = {}


def _load(path: Path) -> np.ndarray:
    key = str(path)
    if key not in _LOADED:
        _LOADED[key] = read_systor(path)
    return _LOADED[key]


def _summarise(run: Run, report: dict, frame, window_ms: int, capacity: int) -> dict:
    from qoslab.sim.api import stage_counters

    hosts = [run.host] if run.variant == "isolated" else [0, 1, 2]
    splits = report["qoslab"].get("latency_split", [])
    counters = {}
    if run.variant in PREDICTORS:
        counters = stage_counters(report, "nvme-host")
    rows = []
    for i, h in enumerate(hosts):
        job = report["jobs"][i]
        read = job["read"]
        pct = read["clat_ns"].get("percentile", {})
        split = splits[i]["read"] if i < len(splits) and "read" in splits[i] else {}
        row = dict(
            run=run.name,
            dataset=run.dataset,
            variant=run.variant,
            config=run.config or 0,
            policy=run.policy or "",
            window_ms=window_ms,
            capacity=capacity,
            cls=CLASSES[h],
            reads=int(read["total_ios"]),
            writes=int(job["write"]["total_ios"]),
            lat_mean_us=read["lat_ns"]["mean"] / 1e3,
            p99_us=pct.get("99.000000", 0) / 1e3,
            p9999_us=pct.get("99.990000", 0) / 1e3,
            host_us=split.get("host_ns", 0.0) / 1e3,
            transport_us=split.get("transport_ns", 0.0) / 1e3,
            queueing_us=split.get("queueing_ns", 0.0) / 1e3,
            device_us=split.get("device_ns", 0.0) / 1e3,
        )
        for key in ("utilization_p10", "utilization_min", "deficiency_p50", "deficiency_p90"):
            row[key] = float(counters.get(f"host{h}_{key}", float("nan")))
        row["covered_reads"] = int(counters.get(f"host{h}_covered_reads", 0))
        row["windows"] = int(counters.get(f"host{h}_windows", 0))
        rows.append(row)
    series = frame[frame["op"] == "read"][["time_ms", "job_index", "lat_p99_ns", "ios"]].copy()
    series["cls"] = [CLASSES[hosts[int(j)]] for j in series["job_index"]]
    # The typical window's tail (the paper's Fig. 10 compares medians of per-window tails).
    busy = series[series["ios"] > 0]
    for row in rows:
        p99 = busy.loc[busy["cls"] == row["cls"], "lat_p99_ns"]
        row["window_p99_median_us"] = float(p99.median()) / 1e3 if len(p99) else math.nan
    series["run"] = run.name
    # The slow-read diagnostic (media.diag.slow_reads), when a run asked for it.
    slow = {k: v for k, v in stage_counters(report, "ssd").items() if k.startswith("slowest")}
    if slow:
        slow = dict(run=run.name, **slow)
        for key in ("plm_reads_to_dtwin", "plm_reads_to_ndwin", "plm_late_windows"):
            if key in counters:
                slow[key] = counters[key]
    return dict(
        rows=rows,
        series=series.drop(columns=["job_index"]).to_dict("list"),
        host=counters,
        slow=slow,
    )


def run_study(
    *,
    datasets: list[str],
    configs: list[int],
    policies: list[str],
    duration_ms: int,
    seed: int,
    traces: list[Path] | None,
    workers: int,
    scratch: Path,
    sets: list[str] = (),
):
    """Runs every simulation of the plan with the device keys `sets` added to each; returns
    (results, series, slow reads) DataFrames (the last empty unless `sets` turned on the
    slow-read diagnostic, media.diag.slow_reads)."""
    import pandas as pd

    if traces:
        loaded = {"trace": [read_systor(p) for p in traces]}
        for p, req in zip(traces, loaded["trace"], strict=True):
            if len(req) == 0:
                raise InputError("no read or write to replay", path=p)
        datasets = ["trace"]
    else:
        loaded = {ds: generate(ds, duration_ms, seed) for ds in datasets}
    trace_paths: dict[str, list[str]] = {}
    for ds, hosts in loaded.items():
        if traces:
            trace_paths[ds] = [str(Path(p).resolve()) for p in traces]
            continue
        paths = []
        for h, req in enumerate(hosts):
            p = scratch / f"{ds}-{CLASSES[h]}.csv"
            write_systor(p, req, seed, f"plm/study/{ds}/offsets{h}")
            paths.append(str(p))
        trace_paths[ds] = paths
    jobs = []
    for run in plan(datasets, configs, policies):
        hosts = loaded[run.dataset]
        factor, window_ms = CONFIGS[run.config or 2]
        capacity = 0
        if run.config is not None:
            span = max(int(h[-1, 0]) for h in hosts if len(h)) + 1
            windows = max(1, span // (window_ms * 1_000_000))
            m_dc = window_demand(hosts, window_ms, windows).sum(axis=1).mean()
            capacity = max(1, round(factor * m_dc))
        jobs.append((run, trace_paths[run.dataset], window_ms, capacity, seed, list(sets)))
    if workers > 1 and len(jobs) > 1:
        with ProcessPoolExecutor(max_workers=min(workers, len(jobs))) as pool:
            done = list(pool.map(_simulate, jobs))
    else:
        done = [_simulate(j) for j in jobs]
    results = pd.DataFrame([r for d in done for r in d["rows"]])
    series = pd.concat([pd.DataFrame(d["series"]) for d in done], ignore_index=True)
    slow = pd.DataFrame([d["slow"] for d in done if d["slow"]])
    return results, series, slow


def default_workers() -> int:
    return max(1, min(2, os.cpu_count() or 1))
