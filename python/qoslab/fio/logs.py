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


# The averaged logs a simulated run writes, from its per-interval series
# (`qoslab.sim.api.SERIES_COLUMN_TYPES`): per log kind, its file suffix and the series column
# it averages.
SIMULATED_LOGS = {
    "lat": ("clat", "lat_mean_ns"),
    "bw": ("bw", "bytes_per_s"),
    "iops": ("iops", "iops"),
}
DDIR_NUMBERS = {name: number for number, name in DDIR_NAMES.items()}


def fio_log_text(rows) -> str:
    """Averaged log lines as fio writes them (`time, value, ddir, 0, 0`), from rows of
    (end of the window in ms since the job's first window began, value, op name)."""
    return "".join(f"{int(t)}, {round(float(v))}, {DDIR_NUMBERS[op]}, 0, 0\n" for t, v, op in rows)


def simulated_logs(series, jobs: list[dict]) -> dict[Path, str]:
    """fio's averaged logs of a simulated run: file name -> text.

    `series` is the run's per-interval series (a DataFrame; with several seeds, the first
    seed's rows are used) and `jobs` the jobs as the simulator read them. A job clone's logs
    are `PREFIX_clat.N.log`, `PREFIX_bw.N.log` and `PREFIX_iops.N.log`, N counting the clones
    of the whole file from 1 (fio's job number), PREFIX the option's value or the job's name.
    Only jobs with `log_avg_msec` get logs: a window with no I/O of a direction has no line
    for it; bandwidth is in KiB/s, latency in ns (the completion latency), as in fio.
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
