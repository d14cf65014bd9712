"""fio's logs (`write_lat_log`, `write_bw_log`, `write_iops_log`).

In fio 3.33 a line is `time_ms, value, data direction, block size, priority`, or with
`log_offset=1` `time_ms, value, data direction, block size, offset, priority`. Without
`log_avg_msec` a line is one I/O: latencies in ns, bandwidth as fio's `bytes * 1e6 / clat_ns`,
IOPS 1. With it a line is the mean over one window, with block size, offset and priority 0;
bandwidth in KiB/s, IOPS in I/Os per second. The simulator writes the latency logs and the
per-I/O ones itself (`qoslab_sim::iolog` in crates/sim); the averaged bandwidth and IOPS logs,
fio's periodic samples, are made here from the run's time series.
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


# The averaged logs made from a simulated run's per-interval series
# (`qoslab.sim.api.SERIES_COLUMN_TYPES`): per log kind, its file suffix and the series column
# it averages.
SIMULATED_LOGS = {
    "bw": ("bw", "bytes_per_s"),
    "iops": ("iops", "iops"),
}
DDIR_NUMBERS = {name: number for number, name in DDIR_NAMES.items()}


def fio_log_text(rows) -> str:
    """Averaged log lines as fio writes them (`time, value, ddir, 0, 0`), from rows of
    (end of the window in ms since the job's first window began, value, op name)."""
    return "".join(f"{int(t)}, {round(float(v))}, {DDIR_NUMBERS[op]}, 0, 0\n" for t, v, op in rows)


def simulated_logs(series, jobs: list[dict]) -> dict[Path, str]:
    """fio's averaged bandwidth and IOPS logs of a simulated run: file name -> text.

    `series` is the run's per-interval series (a DataFrame; with several seeds, the first
    seed's rows are used) and `jobs` the jobs as the simulator read them. A job clone's logs
    are `PREFIX_bw.N.log` and `PREFIX_iops.N.log`, N counting the clones of the whole file
    from 1 (fio's job number), PREFIX the option's value or the job's name. Only jobs with
    `log_avg_msec` get them here: a window with no I/O of a direction has no line for it;
    bandwidth is in KiB/s, as in fio.
    """
    if "seed" in series:
        series = series[series.seed == series.seed.iloc[0]]
    files: dict[Path, str] = {}
    number = 0
    for job in jobs:
        for _ in range(job["numjobs"]):
            clone = series[series.job_index == number]
            number += 1
            if not job["log_avg_msec"] or clone.empty:
                continue
            start = clone.time_ms.min()
            rows = clone[clone.ios > 0]
            end = (rows.time_ms - start + rows.interval_ms).round()
            for option, (suffix, column) in SIMULATED_LOGS.items():
                prefix = job[f"write_{option}_log"]
                if prefix is None:
                    continue
                value = rows[column] / 1024 if option == "bw" else rows[column]
                name = f"{prefix or job['name']}_{suffix}.{number}.log"
                files[Path(name)] = fio_log_text(zip(end, value, rows.op, strict=True))
    return files
