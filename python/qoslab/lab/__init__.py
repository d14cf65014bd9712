"""The real-device fio lab: loop devices, characterisation studies, kernel schedulers.

A study's tables, in a notebook: `results(out)` (one row per run, job and direction, as
results.parquet) and `bins(out)` (the json+ latency histograms), for the output folder of
`qoslab lab study`.
"""

from __future__ import annotations

from pathlib import Path


def _table(out: str | Path, name: str):
    import pandas as pd

    from qoslab.errors import InputError

    path = Path(out) / name
    if not path.is_file():
        raise InputError(f"no {name}: not the output folder of a lab study", path=out)
    return pd.read_parquet(path)


def results(out: str | Path):
    """A lab study's results: one row per run, job and direction (IOPS, MB/s, latencies in
    µs, the Little's-law check; see `qoslab.fio.tables`), with the study's point columns."""
    return _table(out, "results.parquet")


def bins(out: str | Path):
    """A lab study's json+ latency histograms: one row per run, job, direction and bucket."""
    return _table(out, "bins.parquet")


__all__ = ["bins", "results"]
