"""Tidy tables from fio output: one row per job and data direction, and one per latency bin.

Column names carry their unit. Latencies are in µs. `lat_mean_us` is fio's total latency
(submission + completion; clat + slat where an output has no `lat` block) and is the `W` of
Little's law: `littles_l = iops * lat_mean_us / 1e6` is the mean number of I/Os in flight, to
be compared with the job's iodepth. Percentiles come from `lat` when fio reported them there
(`lat_percentiles=1`) and from `clat` otherwise; `pct_of` says which. A percentile fio did not
list is computed from the json+ bins by fio's own rule, or left empty without bins.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable

import pandas as pd

from qoslab.fio.histogram import percentiles_from_bins
from qoslab.fio.reader import FioOutput, JobStats, Latency, OpStats

# Table column -> percentile.
PERCENTILE_COLUMNS = {"p50_us": 50.0, "p95_us": 95.0, "p99_us": 99.0, "p99_9_us": 99.9}

JOB_COLUMNS = [
    "source",
    "fio_version",
    "job",
    "job_index",
    "groupid",
    "op",
    "rw",
    "bs",
    "bs_bytes",
    "iodepth",
    "numjobs",
    "rwmixread",
    "io_bytes",
    "total_ios",
    "runtime_ms",
    "iops",
    "bw_bytes_s",
    "mb_s",
    "lat_mean_us",
    "lat_stddev_us",
    "lat_min_us",
    "lat_max_us",
    "clat_mean_us",
    "slat_mean_us",
    *PERCENTILE_COLUMNS,
    "pct_of",
    "littles_l",
    "usr_cpu",
    "sys_cpu",
    "ctx",
    "error",
    "grouped_jobs",
]


def jobs_table(outputs: Iterable[FioOutput]) -> pd.DataFrame:
    """One row per (fio output, job, op) with IOPS, MB/s and latency statistics in µs."""
    rows = [_row(out, job, op) for out in outputs for job in out.jobs for op in job.ops.values()]
    table = pd.DataFrame(rows, columns=JOB_COLUMNS)
    for col in ("iodepth", "numjobs", "rwmixread"):
        table[col] = table[col].astype("Int64")
    return table


def bins_table(outputs: Iterable[FioOutput]) -> pd.DataFrame:
    """json+ latency histograms: one row per (output, job, op, kind, bucket) with its count."""
    rows = []
    for out in outputs:
        for job in out.jobs:
            for op in job.ops.values():
                for kind, lat in op.latency.items():
                    for value_ns, count in sorted((lat.bins_ns or {}).items()):
                        rows.append(
                            (str(out.path.name), job.name, job.index, op.op, kind, value_ns, count)
                        )
    return pd.DataFrame(
        rows, columns=["source", "job", "job_index", "op", "kind", "value_ns", "count"]
    )


def _int_option(job: JobStats, name: str, default: int | None) -> int | None:
    try:
        return int(job.options[name])
    except (KeyError, ValueError):
        return default


def _percentile_source(op: OpStats) -> tuple[str, Latency | None]:
    lat = op.latency.get("lat")
    if lat is not None and (lat.percentiles_ns or lat.bins_ns):
        return "lat", lat
    clat = op.latency.get("clat")
    if clat is not None and (clat.percentiles_ns or clat.bins_ns):
        return "clat", clat
    return "", None


def _percentiles_us(source: Latency | None) -> dict[str, float]:
    if source is None:
        return {col: math.nan for col in PERCENTILE_COLUMNS}
    wanted = PERCENTILE_COLUMNS.values()
    missing = [p for p in wanted if p not in source.percentiles_ns]
    from_bins = percentiles_from_bins(source.bins_ns, missing) if missing and source.bins_ns else {}
    out = {}
    for col, p in PERCENTILE_COLUMNS.items():
        ns = source.percentiles_ns.get(p, from_bins.get(p, math.nan))
        out[col] = ns / 1000.0
    return out


_FIO_SIZE = re.compile(r"^(\d+)([kmgtp]?)(i?)b?$", re.IGNORECASE)
_DDIR_INDEX = {"read": 0, "write": 1, "trim": 2}


def _block_size(option: str, op: OpStats) -> float:
    """The op's block size from fio's `bs` option (`4k`, `4096`, `4k,64k` per direction).

    fio's default kb_base=1024 reads `k` as 1024 and, for compatibility, `KiB` as 1000.
    Where the option is absent or not a fixed size, the mean size fio actually issued.
    """
    parts = option.split(",") if option else []
    if parts:
        part = parts[min(_DDIR_INDEX.get(op.op, 0), len(parts) - 1)].strip()
        m = _FIO_SIZE.match(part)
        if m:
            shift = " kmgtp".index(m.group(2).lower() or " ")
            return float(int(m.group(1)) * (1000 if m.group(3) else 1024) ** shift)
    return op.io_bytes / op.total_ios if op.total_ios else math.nan


def _row(out: FioOutput, job: JobStats, op: OpStats) -> dict:
    lat, clat, slat = (op.latency.get(k) for k in ("lat", "clat", "slat"))
    if lat is not None:
        lat_mean_ns = lat.mean_ns
    elif clat is not None:
        lat_mean_ns = clat.mean_ns + (slat.mean_ns if slat is not None else 0.0)
    else:
        lat_mean_ns = math.nan
    pct_of, pct_source = _percentile_source(op)
    bs_option = job.options.get("bs", job.options.get("blocksize", ""))
    return {
        "source": str(out.path.name),
        "fio_version": out.fio_version,
        "job": job.name,
        "job_index": job.index,
        "groupid": job.groupid,
        "op": op.op,
        "rw": job.options.get("rw", job.options.get("readwrite", "read")),
        "bs": bs_option,
        "bs_bytes": _block_size(bs_option, op),
        "iodepth": _int_option(job, "iodepth", 1),
        "numjobs": _int_option(job, "numjobs", 1),
        "rwmixread": _int_option(job, "rwmixread", None),
        "io_bytes": op.io_bytes,
        "total_ios": op.total_ios,
        "runtime_ms": op.runtime_ms,
        "iops": op.iops,
        "bw_bytes_s": op.bw_bytes,
        "mb_s": op.bw_bytes / 1e6,
        "lat_mean_us": lat_mean_ns / 1000.0,
        "lat_stddev_us": (lat or clat).stddev_ns / 1000.0 if (lat or clat) else math.nan,
        "lat_min_us": (lat or clat).min_ns / 1000.0 if (lat or clat) else math.nan,
        "lat_max_us": (lat or clat).max_ns / 1000.0 if (lat or clat) else math.nan,
        "clat_mean_us": clat.mean_ns / 1000.0 if clat else math.nan,
        "slat_mean_us": slat.mean_ns / 1000.0 if slat else math.nan,
        **_percentiles_us(pct_source),
        "pct_of": pct_of,
        "littles_l": op.iops * lat_mean_ns / 1e9,
        "usr_cpu": job.usr_cpu,
        "sys_cpu": job.sys_cpu,
        "ctx": job.ctx,
        "error": job.error,
        "grouped_jobs": job.grouped_jobs,
    }
