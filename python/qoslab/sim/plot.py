"""Figures of a simulation's time series (`qoslab sim --timeseries ... --plot FILE`)."""

from __future__ import annotations

import io
from pathlib import Path

from qoslab.outputs import write_file

# The columns the figure draws from.
COLUMNS = ["time_ms", "interval_ms", "job", "op", "ios", "iops", "lat_p99_ns"]


def timeseries_figure(series: Path, out: Path, title: str | None = None) -> None:
    """IOPS and p99 completion latency per job over simulated time, from the series file
    `series` (CSV, or Parquet by its suffix), one line per job and direction; written to `out`
    (PNG, SVG or PDF by its suffix). A job's last, partial interval is drawn only if it spans
    at least half an interval (a few I/Os completing just after a time-based job stops say
    little about a rate)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import pandas as pd

    series = Path(series)
    if series.suffix == ".parquet":
        df = pd.read_parquet(series, columns=COLUMNS)
    else:
        df = pd.read_csv(series, usecols=COLUMNS)
    df = df[(df["ios"] > 0) & (df["interval_ms"] >= df["interval_ms"].max() / 2)]
    fig, (top, bottom) = plt.subplots(2, 1, sharex=True, figsize=(8, 5.5), layout="constrained")
    for (job, op), part in df.groupby(["job", "op"], sort=False):
        label = f"{job} ({op})"
        mid = part["time_ms"] + part["interval_ms"] / 2
        top.plot(mid, part["iops"] / 1e3, marker=".", label=label)
        bottom.plot(mid, part["lat_p99_ns"] / 1e3, marker=".", label=label)
    top.set_ylabel("IOPS (thousands)")
    bottom.set_ylabel("p99 completion latency (µs)")
    bottom.set_xlabel("simulated time (ms)")
    for ax in (top, bottom):
        ax.grid(alpha=0.3)
        ax.set_ylim(bottom=0)
    top.legend(fontsize="small", ncols=2)
    if title:
        fig.suptitle(title)
    buf = io.BytesIO()
    fmt = Path(out).suffix.lstrip(".") or "png"
    # No creation date, no software tag and SVG ids hashed from a fixed salt (not random)
    # keep the file the same from run to run.
    meta = {"png": {"Software": None}, "svg": {"Date": None}, "pdf": {"CreationDate": None}}
    with plt.rc_context({"svg.hashsalt": "qoslab"}):
        fig.savefig(buf, format=fmt, dpi=110, metadata=meta.get(fmt, {}))
    plt.close(fig)
    write_file(out, buf.getvalue())
