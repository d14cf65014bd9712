"""Calling the Rust simulator; its outputs are written through `qoslab.outputs`."""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

from qoslab import _core
from qoslab.errors import InputError
from qoslab.outputs import staged_file

DEFAULT_DEVICE = "nvme-analytic"


def _input_error(err: Exception) -> InputError:
    message, path, line = err.args
    return InputError(message, path=path, line=line)


def run(
    jobfile: str | Path | None = None,
    *,
    trace: str | Path | list[str | Path] | None = None,
    trace_format: str | None = None,
    speed: float = 1.0,
    qd_cap: int = 0,
    device: str = DEFAULT_DEVICE,
    sets: list[str] | None = None,
    seed: int = 1,
    repeat: int = 1,
    output_format: str = "json",
    timeseries: str | Path | None = None,
    log_avg_msec: float = 100.0,
    progress: bool = False,
) -> dict[str, Any]:
    """Runs one simulation; returns {"text", "ios", "events", "max_outstanding"}.

    `trace` is one block trace or a list of them, trace i replayed on host i.

    With `timeseries`, the per-interval series (every `log_avg_msec`, unless a job sets its
    own) is written there as CSV, or as Parquet when the name ends in .parquet."""
    if repeat < 1:
        raise InputError(f"--repeat: expected at least 1, got {repeat}")
    if seed < 0:
        raise InputError(f"--seed: expected a non-negative integer, got {seed}")
    if qd_cap < 0:
        raise InputError(f"--qd-cap: expected a non-negative integer, got {qd_cap}")
    core_args = dict(
        jobfile=None if jobfile is None else str(jobfile),
        trace=None if trace is None else [str(t) for t in _as_list(trace)],
        trace_format=trace_format,
        speed=speed,
        qd_cap=qd_cap,
        series_interval_ms=log_avg_msec,
        progress=progress,
    )
    if timeseries is None:
        return _sim_run(device, sets, seed, repeat, output_format, None, core_args)
    series = Path(timeseries)
    check_writable(series)
    with staged_file(series) as staged:
        if series.suffix != ".parquet":
            return _sim_run(device, sets, seed, repeat, output_format, staged, core_args)
        # Parquet is converted from a CSV the simulator streams beside it, batch by batch.
        with tempfile.NamedTemporaryFile(dir=staged.parent, prefix=staged.name, suffix=".csv") as f:
            scratch = Path(f.name)
            result = _sim_run(device, sets, seed, repeat, output_format, scratch, core_args)
            _csv_to_parquet(scratch, staged)
        return result


def _as_list(x: Any) -> list:
    return list(x) if isinstance(x, (list, tuple)) else [x]


def _sim_run(
    device: str,
    sets: list[str] | None,
    seed: int,
    repeat: int,
    output_format: str,
    series: Path | None,
    core_args: dict[str, Any],
) -> dict[str, Any]:
    try:
        return _core.sim_run(
            device,
            list(sets or []),
            seed,
            repeat,
            output_format,
            series_path=None if series is None else str(series),
            **core_args,
        )
    except _core.SimInputError as err:
        raise _input_error(err) from None


# Column types of the series, fixed rather than inferred, so that every file has the same
# schema (a series whose intervals all happen to be whole ms is still float `interval_ms`).
SERIES_COLUMN_TYPES = {
    "seed": "int64",
    "time_ms": "int64",
    "interval_ms": "float64",
    "job": "string",
    "job_index": "int64",
    "op": "string",
    "ios": "int64",
    "bytes": "int64",
    "iops": "float64",
    "bytes_per_s": "float64",
    "lat_mean_ns": "float64",
    "lat_p99_ns": "int64",
}
# CSV read per batch when converting to Parquet; each batch becomes one row group (about
# 25,000 rows). Measured on series of 2 to 8 million rows: the conversion's peak RSS stays at
# 166 MB with 1 MiB batches, but grows with the file's length with 4 MiB ones.
PARQUET_BATCH_BYTES = 1 << 20


def _csv_to_parquet(csv_path: Path, out: Path) -> None:
    """Converts the series CSV to Parquet one batch at a time (memory stays at one batch)."""
    import pyarrow as pa
    import pyarrow.csv as pacsv
    import pyarrow.parquet as pq

    types = {name: pa.type_for_alias(t) for name, t in SERIES_COLUMN_TYPES.items()}
    reader = pacsv.open_csv(
        csv_path,
        read_options=pacsv.ReadOptions(block_size=PARQUET_BATCH_BYTES),
        convert_options=pacsv.ConvertOptions(column_types=types),
    )
    with pq.ParquetWriter(out, reader.schema) as writer:
        for batch in reader:
            writer.write_batch(batch)


def presets() -> list[tuple[str, str]]:
    """(name, description) of the device presets shipped in configs/devices."""
    return _core.sim_presets()


def preset_text(name: str) -> str | None:
    return _core.sim_preset_text(name)


def tunables() -> list[tuple[str, str, str, str, str]]:
    """(section, key, unit, default, help) of every device-file tunable."""
    return _core.sim_tunables()


def tunables_markdown(models: list[str] | None = None) -> str:
    """The tunables reference as Markdown; media models in `models` only (all when None)."""
    return _core.sim_tunables_markdown(models)


def check_writable(path: Path) -> None:
    """Fails with an input error, before a long run, if `path` could not be written."""
    path = Path(path)
    directory = path.parent if str(path.parent) else Path(".")
    if not directory.is_dir():
        raise InputError("the folder does not exist", path=directory)
    if path.is_dir():
        raise InputError("is a folder; expected the name of a file", path=path)


def stage_counters(report: dict[str, Any], stage: str) -> dict[str, Any]:
    """The counters of the path's stage called `stage` in a JSON report (`qoslab.stages`);
    `"media"` names the last stage, whatever the model."""
    stages = report["qoslab"]["stages"]
    if stage == "media":
        return stages[-1]["counters"]
    for s in stages:
        if s["stage"] == stage:
            return s["counters"]
    raise KeyError(f"no stage '{stage}' in the report (stages: {[s['stage'] for s in stages]})")
