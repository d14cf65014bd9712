"""`qoslab plm study`: the PLM coordinator's evaluation (Roy et al., PLMC, section IV) run
through the simulator.

Three hosts (classes high, medium, low) share one controller of MQSim's default SSD (the
simulator the document used; preset `mqsim-default`). Each dataset of Table I gives each
host's *read intensity*: mean 4 KiB reads per 100 ms; DS4 is DS1 with the medium and low
hosts' traffic 200 ms and 400 ms later. Each config of Table II gives the deterministic-window
counts C = factor x M_DC (M_DC: the mean of the three hosts' summed read demand per window)
and the window length T_DW. Every dataset runs the two baselines on the bare SSD (no PLM, one
NVM set): *shared* (the three hosts together) and *isolated* (each host alone); every dataset
and config runs PLM with two copies on two NVM sets, the coordinator's predictor
host-directed (HoD) or coordinator-directed (CoD, EWMA) and its policy strict priority (sp) or
fixed ratio (fr).

The document's trace (SYSTOR '17 VDI) is not shipped; the default demand is a generator whose
means are Table I's and whose window-to-window burstiness is fitted to the document's Fig. 6
(`qoslab.plm.fit`); a user's SYSTOR '17 CSV files (one per host) replay instead. Either way the
requests stream to files in chunks: nothing the size of the run is held in memory.
"""

from __future__ import annotations

import contextlib
import itertools
import json
import math
import os
import tempfile
import zlib
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from qoslab.errors import InputError

CLASSES = ("high", "medium", "low")

# Table I: the high host's read intensity (mean 4 KiB reads per 100 ms) and the medium and low
# hosts' as fractions of it; DS4 is DS1 with the medium and low traffic 200 and 400 ms later.
DATASETS: dict[str, tuple[float, float, float, tuple[int, int, int]]] = {
    "DS1": (420.0, 0.78, 0.71, (0, 0, 0)),
    "DS2": (480.0, 0.83, 0.72, (0, 0, 0)),
    "DS3": (165.0, 0.85, 0.70, (0, 0, 0)),
    "DS4": (420.0, 0.78, 0.71, (0, 200, 400)),
}
# A dataset with offsets draws no requests of its own: the document makes Dataset4 "from
# Dataset1 by adding an offset of 200 ms and 400 ms to 'Medium' and 'Low' traffic" (IV-C), so
# each of its hosts replays the requests of that host of DS1, every one the host's offset
# later. The offsets are whole 100 ms slots.
SHIFTED_FROM = {"DS4": "DS1"}
# Table II: DC = factor x M_DC, and T_DW in ms.
CONFIGS: dict[int, tuple[float, int]] = {1: (1.2, 100), 2: (1.4, 100), 3: (2.0, 400), 4: (2.5, 400)}
POLICIES = ("sp", "fr")
PREDICTORS = {"HoD": "exact", "CoD": "ewma"}
# PLM without the coordinator: every read to the copy in DTWin (the first dataset only).
UNCOORDINATED = "uncoordinated"
PLM_VARIANTS = (*PREDICTORS, UNCOORDINATED)
# `--set` keys that only the PLM runs take: the host library's and the plm gate's.
PLM_ONLY_KEYS = ("host.plm.", "media.gc.plm.")
WINDOWS_MS = sorted({w for _, w in CONFIGS.values()})

# The generator. Each 100 ms slot's read intensity is the Table I mean times a factor shared by
# the three hosts (lognormal of mean 1 and sigma BURST_SIGMA: the traffic is synchronised) and
# a factor of each host's own (lognormal, mean 1, sigma OWN_SIGMA); requests arrive as a
# Poisson process within the slot. BURST_SIGMA is the least-squares fit of the coordinator's
# utilization and deficiency to every cell of Fig. 6 (qoslab.plm.fit, `qoslab plm fit`; its
# grid and residuals are configs/plm/burst-fit.csv and the report's "Burstiness" section);
# OWN_SIGMA is an assumption (the document gives no per-host figure).
SLOT_MS = 100
BURST_SIGMA = 0.30
OWN_SIGMA = 0.25
UNIT_BYTES = 4096
SPAN_BYTES = 1 << 30
# Slots generated and written at once (100 s of traffic): memory stays at one chunk.
CHUNK_SLOTS = 1000

DEFAULT_DURATION_MS = 15 * 60_000
QUICK_DURATION_MS = 2_000
# Repetitions of every run (seeds --seed, --seed + 1, ...): the report's means and intervals
# are over them, and it gives no verdict from fewer than MIN_SEEDS.
SEEDS = 3
MIN_SEEDS = 3

DEVICE = "mqsim-default"
# The drive in use, not fresh: 75 % of its logical pages written (MQSim's workload.xml sets
# Initial_Occupancy_Percentage 75) by random overwrites that GC kept pace with, so that each
# plane's free pool sits at the GC threshold (media.precondition.free_pool = threshold): the
# steady state of the GC policy under a load like the study's. The write cache follows MQSim's
# WRITE_CACHE rule: a page leaves it once written to flash (no read hits on destaged pages).
FILL = 0.75
BARE = [
    f"media.precondition.fill={FILL}",
    "media.precondition.free_pool=threshold",
    "media.cache.keep_destaged=false",
    "path.hosts=3",
]
# The copies hand over this long before the DTWin of the one in it runs out, so that the copy
# asked in next is in DTWin before the other's ends: more than the longest wait for entry the
# drive advertises (NDWIN Time Minimum Low: 6 ms on mqsim-default, an erase and its channel
# transfers) plus the host's 1 ms poll.
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
# The write-fraction sensitivity: the first dataset's shared baseline and CoD sp on Configs 2
# and 4 (those of them the study runs).
SENSITIVITY_CONFIGS = (2, 4)


@dataclass(frozen=True)
class Workload:
    """What the generator makes besides Table I's means: the share of requests that are
    writes (the document's scope is reads: 0 by default), the request sizes with their weights
    (Table I counts 4 KiB units, so larger reads mean fewer requests), and the burstiness."""

    write_fraction: float = 0.0
    sizes: tuple[tuple[int, float], ...] = ((UNIT_BYTES, 1.0),)
    burst_sigma: float = BURST_SIGMA
    own_sigma: float = OWN_SIGMA

    def mean_units(self) -> float:
        return sum(w * math.ceil(s / UNIT_BYTES) for s, w in self.sizes)

    def describe(self) -> str:
        mix = ", ".join(f"{s // 1024} KiB x {w:g}" for s, w in self.sizes)
        return (
            f"writes {self.write_fraction:g} of requests; sizes {mix}; burstiness sigma "
            f"{self.burst_sigma:g} shared, {self.own_sigma:g} per host"
        )


def parse_sizes(text: str) -> tuple[tuple[int, float], ...]:
    """`--sizes 4k:0.7,16k:0.2,64k:0.1`: request sizes (multiples of 4 KiB) and their weights."""
    from qoslab.units import parse_size

    out = []
    for part in (p.strip() for p in text.split(",") if p.strip()):
        size_text, _, weight_text = part.partition(":")
        try:
            size = int(parse_size(size_text))
            weight = float(weight_text) if weight_text else 1.0
        except ValueError:
            raise InputError(f"--sizes: expected SIZE:WEIGHT like 4k:0.7, got '{part}'") from None
        if size <= 0 or size % UNIT_BYTES or size > SPAN_BYTES:
            raise InputError(f"--sizes: a size must be a multiple of 4 KiB, got '{size_text}'")
        if not (weight > 0 and math.isfinite(weight)):
            raise InputError(f"--sizes: a weight must be above 0, got '{weight_text}'")
        out.append((size, weight))
    if not out:
        raise InputError("--sizes: expected at least one SIZE:WEIGHT")
    total = sum(w for _, w in out)
    return tuple((s, w / total) for s, w in out)


@dataclass(frozen=True)
class Run:
    """One simulation of the study."""

    dataset: str
    variant: str  # shared, isolated, HoD, CoD, uncoordinated
    config: int | None = None
    policy: str | None = None
    host: int | None = None  # isolated: which host runs alone
    write_fraction: float | None = None  # the sensitivity's; None: the study's own

    @property
    def name(self) -> str:
        parts = [self.dataset, self.variant]
        if self.config is not None:
            parts.append(f"config{self.config}")
        if self.policy is not None:
            parts.append(self.policy)
        if self.host is not None:
            parts.append(CLASSES[self.host])
        if self.write_fraction is not None:
            parts.append(f"writes{self.write_fraction:g}")
        return "-".join(parts)

    @property
    def demand(self) -> str:
        """The key of the traces it replays."""
        if self.write_fraction is None:
            return self.dataset
        return f"{self.dataset}-writes{self.write_fraction:g}"


def _rng(seed: int, stream: str) -> np.random.Generator:
    """The named stream `stream` of the run seed."""
    key = zlib.crc32(stream.encode())
    return np.random.Generator(np.random.PCG64(np.random.SeedSequence(seed, spawn_key=(key,))))


def _base(dataset: str) -> tuple[str, list[int]]:
    """The dataset whose requests `dataset` replays, and each host's lag in slots."""
    offsets = DATASETS[dataset][3]
    return SHIFTED_FROM.get(dataset, dataset), [o // SLOT_MS for o in offsets]


def _own_intensity(dataset: str, slots: int, before: int, seed: int, workload: Workload):
    """Each host's mean read units in slots -before to slots - 1 of a dataset that draws its
    own requests: [before + slot][host]. The slots before 0 (the traffic just before the run's,
    which a shifted dataset has in its first slots) draw from streams of their own, so that the
    run's slots are the same whatever `before` is."""
    high, med, low, _ = DATASETS[dataset]
    means = (high, high * med, high * low)
    # The shared factor of slot n is shared[lead + n] (n from -lead).
    lead = max(o // SLOT_MS for d in DATASETS.values() for o in d[3])
    s = workload.burst_sigma
    shared = _rng(seed, "plm/study/shared").lognormal(-(s**2) / 2, s, slots + lead)
    out = np.empty((before + slots, 3))
    o = workload.own_sigma
    for h, mean in enumerate(means):
        own = _rng(seed, f"plm/study/own{h}").lognormal(-(o**2) / 2, o, slots)
        # Slot -k's own factor is earlier[k - 1].
        earlier = _rng(seed, f"plm/study/own{h}/before").lognormal(-(o**2) / 2, o, before)
        out[:, h] = (
            mean * shared[lead - before : lead + slots] * np.concatenate([earlier[::-1], own])
        )
    return out


def slot_intensity(dataset: str, slots: int, seed: int, workload: Workload) -> np.ndarray:
    """Each host's mean 4 KiB read units in each 100 ms slot: [slot][host]; a shifted
    dataset's host `lag` slots late has in slot n its base dataset's slot n - lag."""
    base, lags = _base(dataset)
    before = max(lags)
    full = _own_intensity(base, slots, before, seed, workload)
    out = np.empty((slots, 3))
    for h, lag in enumerate(lags):
        out[:, h] = full[before - lag : before - lag + slots, h]
    return out


class DemandCounter:
    """Read units per window of each length in WINDOWS_MS, per host, counted chunk by chunk."""

    def __init__(self, hosts: int):
        self.hosts = hosts
        self.units = {w: np.zeros((0, hosts), dtype=np.int64) for w in WINDOWS_MS}

    def add(self, host: int, at_ns: np.ndarray, units: np.ndarray) -> None:
        for w, table in self.units.items():
            idx = at_ns // (w * 1_000_000)
            if not idx.size:
                continue
            need = int(idx.max()) + 1
            if need > len(table):
                grown = np.zeros((need, self.hosts), dtype=np.int64)
                grown[: len(table)] = table
                self.units[w] = table = grown
            table[:, host] += np.bincount(idx, weights=units, minlength=len(table)).astype(np.int64)


@dataclass
class Traces:
    """One demand: a SYSTOR '17 file per host (times from 0), and what the study needs of it."""

    name: str
    paths: list[str]
    reads: list[int]
    writes: list[int]
    span_ns: int
    demand: dict[int, np.ndarray] = field(repr=False)

    def window_demand(self, window_ms: int) -> np.ndarray:
        """Read units per complete window: [window][host]."""
        windows = max(1, (self.span_ns + 1) // (window_ms * 1_000_000))
        table = self.demand[window_ms]
        out = np.zeros((windows, len(self.paths)), dtype=np.int64)
        n = min(windows, len(table))
        out[:n] = table[:n]
        return out

    def capacity(self, config: int) -> int:
        """C of a config: its factor times M_DC, the mean summed demand per window."""
        factor, window_ms = CONFIGS[config]
        return max(1, round(factor * self.window_demand(window_ms).sum(axis=1).mean()))


def _timestamps(at_ns: np.ndarray):
    """Seconds with nine decimals, as SYSTOR '17 writes them, formatted by Arrow."""
    import pyarrow as pa
    import pyarrow.compute as pc

    whole = pc.cast(pa.array(at_ns // 1_000_000_000), pa.string())
    frac = pc.utf8_lpad(pc.cast(pa.array(at_ns % 1_000_000_000), pa.string()), 9, "0")
    return pc.binary_join_element_wise(whole, frac, ".")


SYSTOR_HEADER = "Timestamp,Response,IOType,LUN,Offset,Size\n"


def _write_rows(out, at_ns, is_write, offsets, sizes, response=None, lun=None) -> None:
    import pyarrow as pa
    import pyarrow.csv as pcsv

    n = len(at_ns)
    if n == 0:
        return
    kinds = pa.DictionaryArray.from_arrays(
        pa.array(np.asarray(is_write, dtype=np.int8)), pa.array(["R", "W"])
    ).cast(pa.string())
    table = pa.table(
        {
            "Timestamp": _timestamps(np.asarray(at_ns, dtype=np.int64)),
            "Response": pa.array(np.zeros(n, dtype=np.int8)) if response is None else response,
            "IOType": kinds,
            "LUN": pa.array(np.zeros(n, dtype=np.int8)) if lun is None else lun,
            "Offset": pa.array(np.asarray(offsets, dtype=np.int64)),
            "Size": pa.array(np.asarray(sizes, dtype=np.int64)),
        }
    )
    pcsv.write_csv(table, out, pcsv.WriteOptions(include_header=False, quoting_style="none"))


def _requests(
    rate: np.ndarray, rng, place, workload: Workload, end_ns: int
) -> Iterator[tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]]:
    """One host's requests in time order, chunk by chunk, as (time in ns, is a write, size,
    offset): Poisson in each 100 ms slot (slot i from i x 100 ms) with `rate` read units, before
    `end_ns`; its first request at time 0, as a replay counts from a trace's first record."""
    slot_ns = SLOT_MS * 1_000_000
    sizes = np.array([s for s, _ in workload.sizes], dtype=np.int64)
    weights = np.array([w for _, w in workload.sizes])
    wf = workload.write_fraction
    read_rate = rate / workload.mean_units()
    write_rate = read_rate * wf / (1 - wf) if wf > 0 else None
    first = True
    for c0 in range(0, len(rate), CHUNK_SLOTS):
        c1 = min(len(rate), c0 + CHUNK_SLOTS)
        nr = rng.poisson(read_rate[c0:c1])
        nw = rng.poisson(write_rate[c0:c1]) if write_rate is not None else 0 * nr
        per_slot = nr + nw
        total = int(per_slot.sum())
        if total == 0:
            continue
        starts = np.repeat(np.cumsum(per_slot) - per_slot, per_slot)
        is_write = (np.arange(total) - starts) >= np.repeat(nr, per_slot)
        slot = np.repeat(np.arange(c0, c1, dtype=np.int64), per_slot)
        at = slot * slot_ns + (rng.random(total) * slot_ns).astype(np.int64)
        if len(sizes) > 1:
            size = sizes[rng.choice(len(sizes), total, p=weights)]
        else:
            size = np.full(total, sizes[0], dtype=np.int64)
        order = np.argsort(at, kind="stable")
        at, is_write, size = at[order], is_write[order], size[order]
        if first:
            at[0] = 0
            first = False
        keep = at < end_ns
        at, is_write, size = at[keep], is_write[keep], size[keep]
        offsets = place.integers(0, (SPAN_BYTES - size) // UNIT_BYTES + 1) * UNIT_BYTES
        yield at, is_write, size, offsets


def generate(
    dataset: str, duration_ms: int, seed: int, workload: Workload, folder: Path, name: str = ""
) -> Traces:
    """Writes each host's requests of `duration_ms` as a SYSTOR '17 CSV in `folder` (4 KiB
    aligned at random offsets in the first GiB; each file's first request at time 0, as a replay
    counts from a trace's first record) and counts their read units per window. A shifted
    dataset's host `offset` late replays its base dataset's requests `offset` later; in its first
    `offset` it has the base host's traffic of the `offset` before the run (its own draws)."""
    name = name or dataset
    base, lags = _base(dataset)
    slots = math.ceil(duration_ms / SLOT_MS)
    end_ns = duration_ms * 1_000_000
    before = max(lags)
    intensity = _own_intensity(base, slots, before, seed, workload)
    counter = DemandCounter(3)
    paths, reads, writes, span = [], [], [], 0
    for h, lag in enumerate(lags):
        shift_ns = lag * SLOT_MS * 1_000_000
        # The traffic before the run's first slot, then the base dataset's own.
        earlier = _requests(
            intensity[before - lag : before, h],
            _rng(seed, f"plm/study/host{h}/before"),
            _rng(seed, f"plm/study/{base}/offsets{h}/before"),
            workload,
            shift_ns,
        )
        own = (
            (at + shift_ns, *rest)
            for at, *rest in _requests(
                intensity[before:, h],
                _rng(seed, f"plm/study/host{h}"),
                _rng(seed, f"plm/study/{base}/offsets{h}"),
                workload,
                end_ns,
            )
        )
        path = folder / f"{name}-{CLASSES[h]}.csv"
        n_reads = n_writes = 0
        first = True
        with open(path, "wb") as out:
            out.write(SYSTOR_HEADER.encode())
            for at, is_write, size, offsets in itertools.chain(earlier, own):
                keep = at < end_ns
                at, is_write, size, offsets = at[keep], is_write[keep], size[keep], offsets[keep]
                if not len(at):
                    continue
                if first:
                    # The replay counts from the file's first record, so it must be at time 0
                    # for the offset to survive it (it is, unless no traffic came before).
                    at[0] = 0
                    first = False
                r = ~is_write
                counter.add(h, at[r], -(-size[r] // UNIT_BYTES))
                n_reads += int(r.sum())
                n_writes += int(is_write.sum())
                span = max(span, int(at[-1]))
                _write_rows(out, at, is_write, offsets, size)
        paths.append(str(path))
        reads.append(n_reads)
        writes.append(n_writes)
    return Traces(name, paths, reads, writes, max(span, end_ns - 1), counter.units)


SYSTOR_COLUMNS = ("Timestamp", "Response", "IOType", "LUN", "Offset", "Size")
# Records read from a user's trace at once.
READ_CHUNK = 500_000


def _systor_chunks(path: Path) -> Iterator[tuple[int, object]]:
    """A SYSTOR '17 CSV's records in chunks of strings, with the file line of each chunk's
    first record; one-line errors for a file that is not one."""
    import pandas as pd

    try:
        reader = pd.read_csv(path, dtype="string", keep_default_na=False, chunksize=READ_CHUNK)
        line = 2
        for frame in reader:
            if tuple(frame.columns) != SYSTOR_COLUMNS:
                raise InputError(
                    f"expected the header {','.join(SYSTOR_COLUMNS)}, got "
                    f"{','.join(frame.columns)}",
                    path=path,
                    line=1,
                )
            yield line, frame
            line += len(frame)
    except (OSError, UnicodeDecodeError, pd.errors.ParserError) as err:
        raise InputError(f"cannot read a SYSTOR '17 CSV: {err}", path=path) from None
    except pd.errors.EmptyDataError:
        raise InputError("cannot read a SYSTOR '17 CSV: the file is empty", path=path) from None


def scan_systor(
    path: Path, duration_ns: int | None, out_path: Path | None, counter: DemandCounter, host: int
) -> tuple[int, int, int]:
    """Checks a SYSTOR '17 CSV record by record, chunk by chunk; writes the records within
    `duration_ns` of its first one to `out_path` with times from 0 (if given) and counts their
    read units. Returns (reads, writes, last time in ns). Records with a blank IOType are
    skipped, as the replay skips them."""
    reads = writes = 0
    first = None
    last = -1
    previous = None  # the last timestamp of the chunk before
    with contextlib.ExitStack() as stack:
        out = None
        if out_path is not None:
            out = stack.enter_context(open(out_path, "wb"))
            out.write(SYSTOR_HEADER.encode())
        for line, frame in _systor_chunks(path):
            kind = frame["IOType"].str.strip()
            bad = ~kind.isin(["R", "W", ""])
            if bad.any():
                i = int(np.flatnonzero(bad.to_numpy())[0])
                raise InputError(
                    f"field 'IOType': expected R, W or blank, got '{kind.iloc[i]}'",
                    path=path,
                    line=line + i,
                )
            # Seconds with a fraction, read exactly (a float loses an epoch time's nanoseconds).
            parts = frame["Timestamp"].str.strip().str.extract(r"^(\d+)(?:\.(\d{0,9})\d*)?$")
            bad_stamp = parts[0].isna().to_numpy()
            if bad_stamp.any():
                i = int(np.flatnonzero(bad_stamp)[0])
                raise InputError(
                    f"field 'Timestamp': expected seconds, got '{frame['Timestamp'].iloc[i]}'",
                    path=path,
                    line=line + i,
                )
            frac = parts[1].fillna("").str.ljust(9, "0").astype("int64").to_numpy()
            stamp = parts[0].astype("int64").to_numpy() * 1_000_000_000 + frac
            if not stamp.size:
                continue
            if first is None:
                first = previous = int(stamp[0])
            back = np.flatnonzero(np.diff(stamp, prepend=previous) < 0)
            if back.size:
                raise InputError(
                    "field 'Timestamp': goes back in time", path=path, line=line + int(back[0])
                )
            previous = int(stamp[-1])
            at = stamp - first
            last = int(at[-1])
            keep = (kind != "").to_numpy()
            if duration_ns is not None:
                keep &= at < duration_ns
            rows = np.flatnonzero(keep)
            sz = pd_int(frame["Size"].iloc[rows], "Size", path, line, rows)
            off = pd_int(frame["Offset"].iloc[rows], "Offset", path, line, rows)
            at, w = at[keep], (kind == "W").to_numpy()[keep]
            counter.add(host, at[~w], np.maximum(1, -(-sz[~w] // UNIT_BYTES)))
            reads += int((~w).sum())
            writes += int(w.sum())
            if out is not None:
                import pyarrow as pa

                lun = pa.array(frame["LUN"].str.strip().to_numpy()[keep].astype(str))
                _write_rows(out, at, w, off, sz, lun=lun)
            if duration_ns is not None and last >= duration_ns:
                break  # the records after are all later
    return reads, writes, max(last, 0)


def pd_int(column, name: str, path: Path, line: int, rows: np.ndarray) -> np.ndarray:
    """A column of whole numbers (the chunk's rows `rows`, its first at file line `line`)."""
    text = column.str.strip()
    ok = text.str.fullmatch(r"\d+").to_numpy(dtype=bool)
    if not ok.all():
        i = int(np.flatnonzero(~ok)[0])
        raise InputError(
            f"field '{name}': expected a whole number, got '{column.iloc[i]}'",
            path=path,
            line=line + int(rows[i]),
        )
    return text.astype("int64").to_numpy()


def read_systor(path: Path) -> Traces:
    """A SYSTOR '17 CSV checked and counted (no copy written): one host's Traces."""
    counter = DemandCounter(1)
    reads, writes, last = scan_systor(path, None, None, counter, 0)
    return Traces(Path(path).stem, [str(path)], [reads], [writes], last, counter.units)


def replay(traces: list[Path], duration_ms: int | None, folder: Path) -> Traces:
    """A user's three SYSTOR '17 files, checked, cut to `duration_ms` from each one's first
    record and copied with times from 0 into `folder`."""
    counter = DemandCounter(len(traces))
    paths, reads, writes, span = [], [], [], 0
    duration_ns = None if duration_ms is None else duration_ms * 1_000_000
    for h, p in enumerate(traces):
        out = folder / f"trace-{CLASSES[h]}.csv"
        r, w, last = scan_systor(Path(p), duration_ns, out, counter, h)
        if r + w == 0:
            raise InputError("no read or write to replay", path=p)
        paths.append(str(out))
        reads.append(r)
        writes.append(w)
        span = max(span, last if duration_ns is None else min(last, duration_ns - 1))
    return Traces("trace", paths, reads, writes, span, counter.units)


def write_demands(path: Path, demand: np.ndarray) -> None:
    """The HoD predictor's input: `window,host,class,demand` rows."""
    with open(path, "w") as out:
        out.write("window,host,class,demand\n")
        for n, row in enumerate(demand.tolist()):
            out.write("".join(f"{n},{CLASSES[h]},{CLASSES[h]},{d}\n" for h, d in enumerate(row)))


def plan(
    datasets: list[str],
    configs: list[int],
    policies: list[str],
    sensitivity: list[float] = (),
) -> list[Run]:
    runs: list[Run] = []
    for ds in datasets:
        runs.append(Run(ds, "shared"))
        runs += [Run(ds, "isolated", host=h) for h in range(3)]
        for c in configs:
            for pred in PREDICTORS:
                runs += [Run(ds, pred, c, p) for p in policies]
    base = datasets[0]
    runs += [Run(base, UNCOORDINATED, c) for c in configs]
    chosen = [c for c in configs if c in SENSITIVITY_CONFIGS] or configs[:1]
    for wf in sensitivity:
        runs.append(Run(base, "shared", write_fraction=wf))
        runs += [Run(base, "CoD", c, "sp", write_fraction=wf) for c in chosen]
    return runs


@dataclass(frozen=True)
class Job:
    """What a worker needs to run one simulation."""

    run: Run
    paths: tuple[str, ...]
    window_ms: int
    capacity: int
    demands: str | None
    seed: int
    sets: tuple[str, ...]
    end_ns: int


def run_keys(run: Run, keys) -> list[str]:
    """The `--set` keys that `run` takes: the host library's (host.plm.*) exist on the PLM
    runs' path only, and the plm gate's (media.gc.plm.*) on their drive only (the bare drive
    has no such gate and would refuse them)."""
    plm = run.variant in PLM_VARIANTS
    return [kv for kv in keys if plm or not kv.startswith(PLM_ONLY_KEYS)]


def _simulate(job: Job) -> dict:
    """Runs one simulation in a scratch folder; returns what the study keeps of it."""
    from qoslab.sim import api

    run = job.run
    with tempfile.TemporaryDirectory(prefix="qoslab-plm-") as d:
        folder = Path(d)
        sets = list(BARE)
        paths = list(job.paths)
        if run.variant == "isolated":
            paths = [paths[run.host]]
            sets[-1] = "path.hosts=1"
        if run.variant in PLM_VARIANTS:
            sets += [
                *PLM,
                # Windows of T_DW: the drive allows a DTWin of T_DW + the handover.
                f"media.gc.plm.dtwin_time_max_ns={job.window_ms + HANDOVER_MS}ms",
                f"host.plm.handover_ns={HANDOVER_MS}ms",
                f"media.gc.plm.dtwin_reads_typical={job.capacity}",
            ]
        if run.variant == UNCOORDINATED:
            sets.append("host.plm.coordinate=false")
        elif run.variant in PREDICTORS:
            sets += [
                f"host.plm.policy={run.policy}",
                f"host.plm.predictor={PREDICTORS[run.variant]}",
            ]
            if run.variant == "HoD":
                sets.append(f"host.plm.demands={job.demands}")
        sets += run_keys(run, job.sets)
        series = folder / "series.csv"
        result = api.run(
            trace=paths,
            trace_format="systor17",
            device=DEVICE,
            sets=sets,
            seed=job.seed,
            output_format="json",
            timeseries=series,
            log_avg_msec=float(job.window_ms),
        )
        report = json.loads(result["text"])
        frame = api.read_series(series)
    return summarise(job, report, frame)


def _per_window_p9999(p9999_ns: np.ndarray) -> float:
    """The document's metric: the p99.99 of each window's p99.99 ("we compute the tail latency
    during each DTWin and then report the top 99.99 % values"), nearest rank: with fewer than
    10,000 windows, the largest."""
    if not len(p9999_ns):
        return math.nan
    return float(np.quantile(p9999_ns, 0.9999, method="inverted_cdf")) / 1e3


def _sets_sum(ssd: dict, counter: str) -> float:
    """The SSD's per-set counter `set<N>_<counter>` summed over its NVM sets."""
    return float(sum(v for k, v in ssd.items() if k.startswith("set") and k.endswith(counter)))


def summarise(job: Job, report: dict, frame) -> dict:
    from qoslab.sim.api import stage_counters

    run = job.run
    hosts = [run.host] if run.variant == "isolated" else [0, 1, 2]
    splits = report["qoslab"].get("latency_split", [])
    ssd = stage_counters(report, "ssd")
    plm = run.variant in PLM_VARIANTS
    host = stage_counters(report, "nvme-host") if plm else {}
    nan = math.nan
    if plm:
        end_ms = job.end_ns / 1e6
        open_since = ssd.get("no_dtwin_open_since_ms", -1.0)
        no_dtwin = ssd.get("no_dtwin_ms", 0.0) + (end_ms - open_since if open_since >= 0 else 0)
        no_dtwin_frac = min(1.0, max(0.0, no_dtwin / end_ms))
    reads_series = frame[frame["op"] == "read"]
    rows = []
    for i, h in enumerate(hosts):
        jobj = report["jobs"][i]
        read = jobj["read"]
        pct = read["clat_ns"].get("percentile", {})
        split = splits[i]["read"] if i < len(splits) and "read" in splits[i] else {}
        mine = reads_series[(reads_series["job_index"] == i) & (reads_series["ios"] > 0)]
        reads = int(read["total_ios"])
        row = dict(
            run=run.name,
            seed=job.seed,
            dataset=run.dataset,
            variant=run.variant,
            config=run.config or 0,
            policy=run.policy or "",
            write_fraction=run.write_fraction if run.write_fraction is not None else nan,
            window_ms=job.window_ms,
            capacity=job.capacity,
            cls=CLASSES[h],
            reads=reads,
            writes=int(jobj["write"]["total_ios"]),
            lat_mean_us=read["lat_ns"]["mean"] / 1e3 if reads else nan,
            p99_us=pct.get("99.000000", 0) / 1e3,
            p9999_us=pct.get("99.990000", 0) / 1e3,
            p9999_per_dtwin_us=_per_window_p9999(mine["lat_p9999_ns"].to_numpy()),
            # The same of the time from the host driver's dispatch to completion: the
            # document's component (d), without a wait at the host before it (a).
            p9999_per_dtwin_dispatch_us=_per_window_p9999(mine["dispatch_lat_p9999_ns"].to_numpy()),
            window_p99_median_us=float(mine["lat_p99_ns"].median()) / 1e3 if len(mine) else nan,
            host_us=split.get("host_ns", 0.0) / 1e3,
            transport_us=split.get("transport_ns", 0.0) / 1e3,
            queueing_us=split.get("queueing_ns", 0.0) / 1e3,
            device_us=split.get("device_ns", 0.0) / 1e3,
            gc_victims=int(ssd.get("gc_victims", 0)),
            write_amplification=float(ssd.get("write_amplification", 0.0)),
            reads_outside_dtwin=(
                host.get(f"host{h}_reads_to_ndwin", 0) / max(1, host.get(f"host{h}_reads", 0))
                if plm
                else nan
            ),
            no_dtwin_time_frac=no_dtwin_frac if plm else nan,
            entry_wait_p50_ms=ssd.get("dtwin_entry_wait_p50_ms", nan) if plm else nan,
            entry_wait_max_ms=ssd.get("dtwin_entry_wait_max_ms", nan) if plm else nan,
            ndwin_min_advertised_ms=(
                ssd.get("ndwin_time_min_low_advertised_ms", nan) if plm else nan
            ),
            # DTWins the drive ended on its own, over both sets: on their reads (DTWIN Reads
            # Typical passed) and at DTWIN Time Maximum.
            dtwin_exits_reads=_sets_sum(ssd, "dtwin_exits_reads") if plm else nan,
            dtwin_exits_time=_sets_sum(ssd, "dtwin_exits_time") if plm else nan,
            dtwin_exits_excursion=_sets_sum(ssd, "dtwin_exits_excursion") if plm else nan,
            # With counts_run_out = hold: the class's reads the host held for a window's
            # counts; the run's: their wait at the host, mean and longest, the most released at
            # one instant, those released to the previous copy (the window's still entering
            # DTWin) and the mean over the instants that released any.
            reads_held=float(host.get(f"host{h}_reads_held", nan)),
            held_wait_mean_ms=float(host.get("plm_held_wait_mean_ms", nan)),
            held_wait_max_ms=float(host.get("plm_held_wait_max_ms", nan)),
            held_release_max=float(host.get("plm_held_release_max", nan)),
            held_released_to_previous=float(host.get("plm_held_released_to_previous", nan)),
            held_release_mean=float(
                host.get("plm_held_released", nan)
                / max(1, host.get("plm_held_release_instants", 1))
            ),
        )
        for key in ("utilization_p10", "utilization_min", "deficiency_p50", "deficiency_p90"):
            row[key] = float(host.get(f"host{h}_{key}", nan))
        row["covered_reads"] = int(host.get(f"host{h}_covered_reads", 0))
        row["windows"] = int(host.get(f"host{h}_windows", 0))
        rows.append(row)
    cols = ["time_ms", "job_index", "ios", "lat_p99_ns", "lat_p9999_ns", "lat_max_ns",
            "dispatch_lat_p9999_ns", "dispatch_lat_max_ns"]  # fmt: skip
    series = reads_series[cols].copy()
    series["cls"] = [CLASSES[hosts[int(j)]] for j in series["job_index"]]
    series["run"] = run.name
    series["seed"] = job.seed
    series = series.drop(columns=["job_index"])
    # The slow-read diagnostic (media.diag.slow_reads), when a run asked for it.
    slow = {k: v for k, v in ssd.items() if k.startswith("slowest")}
    if slow:
        slow = dict(run=run.name, seed=job.seed, **slow)
        for key in ("plm_reads_to_dtwin", "plm_reads_to_ndwin", "plm_late_windows"):
            if key in host:
                slow[key] = host[key]
    return dict(rows=rows, series=series, slow=slow)


def demand_for(
    run: Run, seed: int, duration_ms: int, workload: Workload, traces, folder: Path
) -> Traces:
    """The demand `run` replays with `seed`, written into `folder`: the generator's for its
    dataset (with the run's own write fraction, if it has one) and seed, or the replayed
    `traces` (the same demand whatever the seed: only the simulator's draws differ from one
    repetition to the next)."""
    if traces:
        return replay(traces, duration_ms, folder)
    wl = workload
    if run.write_fraction is not None:
        wl = Workload(run.write_fraction, wl.sizes, wl.burst_sigma, wl.own_sigma)
    return generate(run.dataset, duration_ms, seed, wl, folder, f"{run.demand}-seed{seed}")


def job_for(run: Run, seed: int, t: Traces, sets, folder: Path) -> Job:
    """What one simulation of `run` with `seed` needs, over the demand `t` written in `folder`
    (where a host-directed run's demand file goes too)."""
    window_ms = CONFIGS[run.config][1] if run.config is not None else SLOT_MS
    capacity = t.capacity(run.config) if run.config is not None else 0
    demand_file = None
    if run.variant == "HoD":
        p = folder / f"demands-{run.demand}-seed{seed}-{window_ms}ms.csv"
        if not p.exists():
            # Every window the replay reaches, the last partial one too.
            write_demands(p, _all_windows(t, window_ms))
        demand_file = str(p)
    return Job(run, tuple(t.paths), window_ms, capacity, demand_file, seed, tuple(sets),
               t.span_ns + 1)  # fmt: skip


def series_schema():
    """series.parquet's columns: each run's per-window read latencies of each host."""
    import pyarrow as pa

    return pa.schema(
        [
            ("run", pa.string()),
            ("seed", pa.int64()),
            ("cls", pa.string()),
            ("time_ms", pa.int64()),
            ("ios", pa.int64()),
            ("lat_p99_ns", pa.int64()),
            ("lat_p9999_ns", pa.int64()),
            ("lat_max_ns", pa.int64()),
            ("dispatch_lat_p9999_ns", pa.int64()),
            ("dispatch_lat_max_ns", pa.int64()),
        ]
    )


def _all_windows(t: Traces, window_ms: int) -> np.ndarray:
    windows = t.span_ns // (window_ms * 1_000_000) + 2
    out = np.zeros((windows, len(t.paths)), dtype=np.int64)
    table = t.demand[window_ms]
    n = min(windows, len(table))
    out[:n] = table[:n]
    return out


def default_workers() -> int:
    return max(1, min(2, os.cpu_count() or 1))
