"""Reading fio's JSON and json+ output, whichever fio version (or qoslab's simulator) wrote it.

Shapes understood, all normalised to nanoseconds and bytes:

- fio 3.x: `slat_ns`/`clat_ns`/`lat_ns` in ns; `io_bytes` in bytes (`io_kbytes` beside it);
  `bw_bytes` in B/s; percentiles under `clat_ns` and, with `lat_percentiles=1`, under
  `lat_ns`; json+ `bins` keyed by bucket value in ns.
- fio 2.x: `slat`/`clat`/`lat` in µs; `io_bytes` in KiB (fio shifted it by 10 before 3.0);
  `bw` in KiB/s; json+ `bins` keyed by bucket value in µs or, before 2.15, by bucket index
  with the `FIO_IO_U_PLAT_BITS/VAL/NR` constants; unused percentile slots as `"0.00": 0`.
- `mixed` instead of `read`/`write`/`trim` under `unified_rw_reporting`; `client_stats`
  instead of `jobs` from `fio --client`; text before the JSON document (fio's notes, a terse
  line from `--output-format=json,terse`) and after it (normal output) is skipped.

Anything else is an `InputError` naming the file (and line, for broken JSON).
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from qoslab.errors import InputError
from qoslab.fio.histogram import FIO_PLAT_BITS, plat_index_to_value

# fio's data directions as JSON keys; "mixed" replaces them under unified_rw_reporting.
OPS = ("read", "write", "trim", "mixed")
LATENCY_KINDS = ("slat", "clat", "lat")
_PLAT_CONSTANTS = ("FIO_IO_U_PLAT_BITS", "FIO_IO_U_PLAT_VAL", "FIO_IO_U_PLAT_NR")


@dataclass(frozen=True)
class Latency:
    """One of fio's latency blocks (slat, clat or lat), converted to nanoseconds."""

    min_ns: float
    max_ns: float
    mean_ns: float
    stddev_ns: float
    samples: int | None
    percentiles_ns: dict[float, float] = field(default_factory=dict)
    bins_ns: dict[float, int] | None = None  # json+: bucket value (ns) -> count


@dataclass(frozen=True)
class OpStats:
    """What one job did in one data direction."""

    op: str
    io_bytes: int
    total_ios: int
    runtime_ms: int
    iops: float
    bw_bytes: float  # bytes per second
    latency: dict[str, Latency]  # "slat", "clat", "lat" (those the output had)


@dataclass(frozen=True)
class JobStats:
    """One entry of fio's `jobs` array."""

    index: int
    name: str
    groupid: int
    error: int
    options: dict[str, str]  # global options overlaid with the job's own
    usr_cpu: float
    sys_cpu: float
    ctx: int
    ops: dict[str, OpStats]
    # >1 when fio merged several jobs into this entry (group_reporting over numjobs clones).
    grouped_jobs: int = 1


@dataclass(frozen=True)
class FioOutput:
    """A whole fio JSON document."""

    path: Path
    fio_version: str
    timestamp: int | None
    global_options: dict[str, str]
    jobs: list[JobStats]
    latency_unit: str  # "ns" (fio 3.x) or "us" (fio 2.x) in the original file


def read_fio_json(path: str | Path) -> FioOutput:
    """Reads one fio `--output-format=json` or `json+` file."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except OSError as err:
        raise InputError(f"cannot read fio output: {err.strerror}", path=path) from None
    return parse_fio_json(text, path)


def parse_fio_json(text: str, path: str | Path = "<fio output>") -> FioOutput:
    """Parses fio JSON text; `path` only names the source in errors."""
    path = Path(path)
    doc = _decode(text, path)
    if not isinstance(doc, dict):
        raise InputError("not fio JSON output: the document is not a JSON object", path=path)
    raw_jobs = doc.get("jobs")
    if raw_jobs is None:
        raw_jobs = [j for j in doc.get("client_stats", []) if j.get("jobname") != "All clients"]
        if "client_stats" not in doc:
            raise InputError(
                "not fio JSON output: no 'jobs' array (expected fio --output-format=json)",
                path=path,
            )
    if not isinstance(raw_jobs, list):
        raise InputError("field 'jobs': expected an array", path=path)
    global_options = _options(doc.get("global options", {}), "global options", path)
    unit = "ns"
    jobs = []
    for i, raw in enumerate(raw_jobs):
        job, job_unit = _job(raw, i, global_options, path)
        jobs.append(job)
        if job_unit == "us":
            unit = "us"
    jobs = _mark_grouped(jobs)
    version = doc.get("fio version", "")
    timestamp = doc.get("timestamp")
    return FioOutput(
        path=path,
        fio_version=str(version),
        timestamp=int(timestamp) if isinstance(timestamp, int | float) else None,
        global_options=global_options,
        jobs=jobs,
        latency_unit=unit,
    )


class _NotFinite(ValueError):
    def __init__(self, literal: str):
        super().__init__(literal)
        self.literal = literal


def _finite(literal: str) -> float:
    # Python's json reads 1e309 as inf and accepts NaN/Infinity, which fio never writes; an
    # infinite count would overflow where it is used (groupid, timestamp), so it stops here.
    value = float(literal)
    if not math.isfinite(value):
        raise _NotFinite(literal)
    return value


def _not_a_number(literal: str) -> float:
    raise _NotFinite(literal)


def _decode(text: str, path: Path) -> Any:
    if not text.strip():
        raise InputError("empty file: expected fio JSON output", path=path)
    start = _document_start(text)
    if start is None:
        first = text.strip().splitlines()[0][:60]
        raise InputError(
            f"not fio JSON output: no line starts with '{{' (first line: {first!r}); "
            "run fio with --output-format=json or json+",
            path=path,
        )
    try:
        decoder = json.JSONDecoder(parse_float=_finite, parse_constant=_not_a_number)
        doc, _end = decoder.raw_decode(text, start)
    except _NotFinite as err:
        line = text.count("\n", 0, max(text.find(err.literal, start), 0)) + 1
        raise InputError(
            f"number {err.literal[:40]} is not a finite number (fio writes none)",
            path=path,
            line=line,
        ) from None
    except RecursionError:
        raise InputError("invalid JSON: nested too deeply", path=path) from None
    except json.JSONDecodeError as err:
        if err.pos >= len(text.rstrip()):
            raise InputError(
                "truncated fio JSON output: the document ends before its closing '}' "
                "(was fio killed or the disk full?)",
                path=path,
                line=err.lineno,
            ) from None
        raise InputError(f"invalid JSON: {err.msg}", path=path, line=err.lineno) from None
    return doc


def _document_start(text: str) -> int | None:
    """Offset of the first line that opens a JSON object."""
    offset = 0
    for line in text.splitlines(keepends=True):
        if line.lstrip().startswith("{"):
            return offset + (len(line) - len(line.lstrip()))
        offset += len(line)
    return None


def _options(raw: Any, where: str, path: Path) -> dict[str, str]:
    if not isinstance(raw, dict):
        raise InputError(f"field '{where}': expected an object", path=path)
    return {str(k): str(v) for k, v in raw.items()}


def _number(block: dict, key: str, where: str, path: Path, default: float | None = None) -> float:
    value = block.get(key, default)
    if isinstance(value, bool) or not isinstance(value, int | float):
        if value is None:
            raise InputError(f"field '{where}.{key}': missing", path=path)
        raise InputError(f"field '{where}.{key}': expected a number, got {value!r}", path=path)
    return value


def _job(raw: Any, index: int, global_options: dict, path: Path) -> tuple[JobStats, str]:
    where = f"jobs[{index}]"
    if not isinstance(raw, dict):
        raise InputError(f"field '{where}': expected an object", path=path)
    name = raw.get("jobname")
    if not isinstance(name, str):
        raise InputError(f"field '{where}.jobname': expected a string", path=path)
    options = dict(global_options)
    options.update(_options(raw.get("job options", {}), f"{where}.job options", path))
    ops = {}
    unit = "ns"
    for op in OPS:
        if op not in raw:
            continue
        stats, op_unit = _op(raw[op], op, f"{where}.{op}", path)
        if op_unit == "us":
            unit = "us"
        if stats.total_ios > 0 or stats.io_bytes > 0:
            ops[op] = stats
    job = JobStats(
        index=index,
        name=name,
        groupid=int(_number(raw, "groupid", where, path, 0)),
        error=int(_number(raw, "error", where, path, 0)),
        options=options,
        usr_cpu=float(_number(raw, "usr_cpu", where, path, 0.0)),
        sys_cpu=float(_number(raw, "sys_cpu", where, path, 0.0)),
        ctx=int(_number(raw, "ctx", where, path, 0)),
        ops=ops,
    )
    return job, unit


def _op(raw: Any, op: str, where: str, path: Path) -> tuple[OpStats, str]:
    if not isinstance(raw, dict):
        raise InputError(f"field '{where}': expected an object", path=path)
    legacy = "clat_ns" not in raw and "lat_ns" not in raw and ("clat" in raw or "lat" in raw)
    unit = "us" if legacy else "ns"
    latency = {}
    for kind in LATENCY_KINDS:
        key = kind if legacy else f"{kind}_ns"
        if key in raw:
            latency[kind] = _latency(raw[key], 1000.0 if legacy else 1.0, f"{where}.{key}", path)
    io_bytes = _number(raw, "io_bytes", where, path)
    if legacy and "io_kbytes" not in raw:
        io_bytes *= 1024  # fio before 3.0 wrote io_bytes in KiB
    runtime_ms = _number(raw, "runtime", where, path, 0)
    iops = float(_number(raw, "iops", where, path))
    if "total_ios" in raw:
        total_ios = int(_number(raw, "total_ios", where, path))
    else:  # fio before 2.10 had no total_ios
        total_ios = round(iops * runtime_ms / 1000.0)
    if "bw_bytes" in raw:
        bw_bytes = float(_number(raw, "bw_bytes", where, path))
    else:
        bw_bytes = float(_number(raw, "bw", where, path)) * 1024.0  # KiB/s
    stats = OpStats(
        op=op,
        io_bytes=int(io_bytes),
        total_ios=total_ios,
        runtime_ms=int(runtime_ms),
        iops=iops,
        bw_bytes=bw_bytes,
        latency=latency,
    )
    return stats, unit


def _latency(raw: Any, scale: float, where: str, path: Path) -> Latency:
    if not isinstance(raw, dict):
        raise InputError(f"field '{where}': expected an object", path=path)
    samples = raw.get("N")
    percentiles = {}
    for key, value in (raw.get("percentile") or {}).items():
        try:
            p = float(key)
        except ValueError:
            raise InputError(
                f"field '{where}.percentile': key {key!r} is not a percentile", path=path
            ) from None
        if p <= 0.0:  # fio 2.x pads unused percentile slots with "0.00": 0
            continue
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise InputError(
                f"field '{where}.percentile.{key}': expected a number, got {value!r}", path=path
            )
        percentiles[p] = value * scale
    bins = None
    if isinstance(raw.get("bins"), dict):
        bins = _bins(raw["bins"], scale, f"{where}.bins", path)
    return Latency(
        min_ns=_number(raw, "min", where, path) * scale,
        max_ns=_number(raw, "max", where, path) * scale,
        mean_ns=_number(raw, "mean", where, path) * scale,
        stddev_ns=_number(raw, "stddev", where, path, 0.0) * scale,
        samples=int(samples) if isinstance(samples, int | float) else None,
        percentiles_ns=percentiles,
        bins_ns=bins,
    )


def _bins(raw: dict, scale: float, where: str, path: Path) -> dict[float, int]:
    indexed = "FIO_IO_U_PLAT_BITS" in raw
    bits = int(raw.get("FIO_IO_U_PLAT_BITS", FIO_PLAT_BITS))
    bins: dict[float, int] = {}
    for key, count in raw.items():
        if key in _PLAT_CONSTANTS:
            continue
        try:
            k = int(key)
        except ValueError:
            raise InputError(f"field '{where}': key {key!r} is not a bucket", path=path) from None
        if not isinstance(count, int) or count < 0:
            raise InputError(f"field '{where}.{key}': expected a count, got {count!r}", path=path)
        if count == 0:
            continue
        value = (plat_index_to_value(k, bits) if indexed else k) * scale
        bins[value] = bins.get(value, 0) + count
    return bins


def _mark_grouped(jobs: list[JobStats]) -> list[JobStats]:
    """Flags entries that stand for several jobs: fio's group_reporting over numjobs clones.

    fio's JSON does not say group_reporting was on; it shows as fewer entries named like a job
    than that job's numjobs.
    """
    seen: dict[str, int] = {}
    for job in jobs:
        seen[job.name] = seen.get(job.name, 0) + 1
    out = []
    for job in jobs:
        try:
            numjobs = int(job.options.get("numjobs", "1"))
        except ValueError:
            numjobs = 1
        if numjobs > seen[job.name]:
            job = JobStats(**{**job.__dict__, "grouped_jobs": numjobs // seen[job.name]})
        out.append(job)
    return out
