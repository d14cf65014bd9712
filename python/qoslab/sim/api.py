"""Calling the Rust simulator and writing its outputs safely."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path
from typing import Any

from qoslab import _core
from qoslab.errors import InputError

DEFAULT_DEVICE = "nvme-analytic"


def _input_error(err: Exception) -> InputError:
    message, path, line = err.args
    return InputError(message, path=path, line=line)


def run(
    jobfile: str | Path | None = None,
    *,
    trace: str | Path | None = None,
    trace_format: str | None = None,
    speed: float = 1.0,
    qd_cap: int = 0,
    device: str = DEFAULT_DEVICE,
    sets: list[str] | None = None,
    seed: int = 1,
    repeat: int = 1,
    output_format: str = "json",
    log_avg_msec: float | None = None,
    progress: bool = False,
) -> dict[str, Any]:
    """Runs one simulation; returns {"text", "series_csv", "ios", "events", "max_outstanding"}."""
    if repeat < 1:
        raise InputError(f"--repeat: expected at least 1, got {repeat}")
    if seed < 0:
        raise InputError(f"--seed: expected a non-negative integer, got {seed}")
    if qd_cap < 0:
        raise InputError(f"--qd-cap: expected a non-negative integer, got {qd_cap}")
    try:
        return _core.sim_run(
            device,
            list(sets or []),
            seed,
            repeat,
            output_format,
            jobfile=None if jobfile is None else str(jobfile),
            trace=None if trace is None else str(trace),
            trace_format=trace_format,
            speed=speed,
            qd_cap=qd_cap,
            series_interval_ms=log_avg_msec,
            progress=progress,
        )
    except _core.SimInputError as err:
        raise _input_error(err) from None


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


def write_atomically(path: Path, data: str | bytes) -> None:
    """Writes `data` to a temporary file next to `path`, then renames it over `path`."""
    path = Path(path)
    directory = path.parent if str(path.parent) else Path(".")
    if not directory.is_dir():
        raise InputError("the folder does not exist", path=directory)
    fd, tmp = tempfile.mkstemp(dir=directory, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data.encode() if isinstance(data, str) else data)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def write_timeseries(path: Path, csv_text: str) -> None:
    """Writes the per-interval series as CSV, or as Parquet when `path` ends in .parquet."""
    path = Path(path)
    if path.suffix != ".parquet":
        write_atomically(path, csv_text)
        return
    import io

    import pyarrow.csv as pacsv
    import pyarrow.parquet as pq

    table = pacsv.read_csv(io.BytesIO(csv_text.encode()))
    sink = io.BytesIO()
    pq.write_table(table, sink)
    write_atomically(path, sink.getvalue())
