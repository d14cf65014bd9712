"""fio's logs (`write_lat_log`, `write_bw_log`, `write_iops_log`).

In fio 3.33 a line is `time_ms, value, data direction, block size, priority`, or with
`log_offset=1` `time_ms, value, data direction, block size, offset, priority`. Without
`log_avg_msec` a line is one I/O: latencies in ns, bandwidth as fio's `bytes * 1e6 / clat_ns`,
IOPS 1. With it a line is the mean over one window, with block size, offset and priority 0;
bandwidth in KiB/s, IOPS in I/Os per second (fio's periodic samples, every `log_avg_msec`). The
simulator writes them all (`qoslab_sim::iolog` in crates/sim); this module reads them.
"""

from __future__ import annotations

from pathlib import Path

from qoslab.errors import InputError

# The columns of a line with and without `log_offset`.
LOG_COLUMNS = {
    5: ["time_ms", "value", "ddir", "bs", "prio"],
    6: ["time_ms", "value", "ddir", "bs", "offset", "prio"],
}
DDIR_NAMES = {0: "read", 1: "write", 2: "trim"}


def read_fio_log(path: str | Path):
    """A fio log as a DataFrame with columns time_ms, value, op, bs, prio (and offset with
    `log_offset=1`)."""
    import pandas as pd

    path = Path(path)
    try:
        frame = pd.read_csv(
            path, header=None, skipinitialspace=True, dtype="float64", on_bad_lines="error"
        )
    except FileNotFoundError:
        raise InputError("no such fio log", path=path) from None
    except pd.errors.EmptyDataError:
        return pd.DataFrame({"time_ms": [], "value": [], "op": [], "bs": [], "prio": []})
    except (ValueError, pd.errors.ParserError) as err:
        raise InputError(
            f"not a fio log (expected 'time, value, ddir, bs, offset' lines): {err}", path=path
        ) from None
    if not 5 <= frame.shape[1] <= 6:
        raise InputError(
            f"not a fio log: {frame.shape[1]} columns per line, expected 5 or 6", path=path
        )
    frame.columns = LOG_COLUMNS[frame.shape[1]]
    frame["op"] = frame["ddir"].astype(int).map(DDIR_NAMES).fillna("other")
    keep = ["time_ms", "value", "op", "bs"] + (["offset"] if "offset" in frame else [])
    return frame[[*keep, "prio"]]
