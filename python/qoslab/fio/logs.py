"""fio's per-interval logs (`write_lat_log`, `write_bw_log`, `write_iops_log`).

Each line is `time_ms, value, data direction, block size, offset` and, with `log_prio` (or in
newer fio versions), a sixth column with the I/O priority. With `log_avg_msec` a line is the
mean over one window and block size and offset are 0. Latency values are in ns (fio 3.x),
bandwidth in KiB/s, IOPS in I/Os per second.
"""

from __future__ import annotations

from pathlib import Path

from qoslab.errors import InputError

LOG_COLUMNS = ["time_ms", "value", "ddir", "bs", "offset", "prio"]
DDIR_NAMES = {0: "read", 1: "write", 2: "trim"}


def read_fio_log(path: str | Path):
    """A fio log as a DataFrame with columns time_ms, value, op (and prio when present)."""
    import pandas as pd

    path = Path(path)
    try:
        frame = pd.read_csv(
            path, header=None, skipinitialspace=True, dtype="float64", on_bad_lines="error"
        )
    except FileNotFoundError:
        raise InputError("no such fio log", path=path) from None
    except pd.errors.EmptyDataError:
        return pd.DataFrame({"time_ms": [], "value": [], "op": []})
    except (ValueError, pd.errors.ParserError) as err:
        raise InputError(
            f"not a fio log (expected 'time, value, ddir, bs, offset' lines): {err}", path=path
        ) from None
    if not 5 <= frame.shape[1] <= 6:
        raise InputError(
            f"not a fio log: {frame.shape[1]} columns per line, expected 5 or 6", path=path
        )
    frame.columns = LOG_COLUMNS[: frame.shape[1]]
    frame["op"] = frame["ddir"].astype(int).map(DDIR_NAMES).fillna("other")
    keep = ["time_ms", "value", "op"] + (["prio"] if "prio" in frame else [])
    return frame[keep]
