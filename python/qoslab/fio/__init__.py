"""fio output as data: the JSON reader and tidy tables used by the lab and the simulator alike.

    from qoslab.fio import read_fio_json, jobs_table
    table = jobs_table([read_fio_json("run.json")])

The reader understands fio 2.x and 3.x JSON and json+ (see `qoslab.fio.reader`); the tables
have one row per job and data direction with latencies in µs (see `qoslab.fio.tables`).
"""

from qoslab.fio.histogram import percentiles_from_bins, plat_index_to_value
from qoslab.fio.reader import (
    FioOutput,
    JobStats,
    Latency,
    OpStats,
    parse_fio_json,
    read_fio_json,
)


def jobs_table(outputs):
    """One row per (output, job, op); see `qoslab.fio.tables.jobs_table`."""
    from qoslab.fio.tables import jobs_table as _jobs_table

    return _jobs_table(outputs)


def bins_table(outputs):
    """json+ latency bins, one row per bucket; see `qoslab.fio.tables.bins_table`."""
    from qoslab.fio.tables import bins_table as _bins_table

    return _bins_table(outputs)


__all__ = [
    "FioOutput",
    "JobStats",
    "Latency",
    "OpStats",
    "bins_table",
    "jobs_table",
    "parse_fio_json",
    "percentiles_from_bins",
    "plat_index_to_value",
    "read_fio_json",
]
