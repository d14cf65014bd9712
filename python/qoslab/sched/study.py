"""`qoslab sched study`: the scheduler study of `qoslab lab sched`, run in the simulator.

The same two jobs as the lab's (`database_sim`, 4 KiB random reads at best effort 1, beside
`backup_sim`, 128 KiB sequential reads at best effort 7, built from the lab's own options) run
on each device and each I/O scheduler the block layer has registered, once per seed. A run
gives per job IOPS, MB/s and the p50/p99/p99.9 latency, the block layer's counters (time in
the scheduler, time at the device, merges, the scheduler's CPU cost per request by the cost
model of docs/block.md) and a time series. The constants section runs `prio` and
`prio-advanced` on the HDD with each of their tunables changed alone.

The study states its points (`plan`: configurations of the `sched` sweep study, each with every
seed) and runs them through the sweep engine (`qoslab.sweep.planned`): its store, beside the
output (`<out>.store` unless `--store`), keeps every run, so a rerun, or the run after an
interrupted one, runs only the points it lacks; the tables below are made from the store's
rows in plan order, so they do not depend on the workers or on what the store held.

Outputs (Parquet, one row per run and job; DuckDB reads them as they are): `runs.parquet`,
`series.parquet`, `constants.parquet`, `summary.csv` (mean, standard deviation and count over
seeds), `meta.json`, `report.html` with its figures. The directory is written whole or not at
all (`qoslab.outputs.staged_dir`).
"""

from __future__ import annotations

import json
import sys
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from qoslab._core import __version__
from qoslab.errors import InputError
from qoslab.lab.sched_jobs import SchedOptions
from qoslab.outputs import earlier_output, staged_dir
from qoslab.sim import api
from qoslab.sweep.planned import Rows, default_store, provenance, run_planned, set_param
from qoslab.sweep.spec import planned_spec
from qoslab.sweep.studies import sched as adapter
from qoslab.sweep.studies.sched import job_text, measure, registered_schedulers

HDD = "hdd-7200"
SSD = "enterprise-tlc-plp"
# A SATA disk is reached through libata: one hardware queue, NCQ depth 32 (device/queue_depth).
ATA = ("path.driver=ata",)
NCQ_DEPTH = 32
# The HDD's device/queue_depth where the constants are varied: the shallowest at which the
# disk still reorders (two commands), where the study's schedulers differ most.
CONSTANTS_DEPTH = 2
EMPIRICAL = "loop (empirical)"

# Block-layer counters kept per run (docs/block.md, "The counters").
BLOCK_COUNTERS = tuple(name for name, _unit, _help in adapter.BLOCK_COUNTERS)

# The tunables of the study's own schedulers that the document leaves open, each tried alone
# at a lower and a higher value than the default (docs/block.md gives the defaults' reasons).
CONSTANTS = {
    "prio": {"aging_expire": (50, 500, 5000)},
    "prio-advanced": {
        "aging_expire": (50, 500, 5000),
        "hdd_fifo_expire": (20, 200, 2000),
        "seq_gap_sectors": (8, 256, 4096),
        "seq_batch": (1, 8, 32),
    },
}


@dataclass(frozen=True)
class Device:
    """A device of the study: a preset or a device file, with `--set` overrides."""

    label: str
    device: str
    sets: tuple[str, ...] = ()
    about: str = ""
    # The region both jobs address: the lab's default (--size 10G), or all of a device that
    # is smaller (the lab's loop device, as `qoslab lab sched` caps it).
    size: str = "10g"


@dataclass(frozen=True)
class StudyOptions:
    devices: tuple[Device, ...]
    schedulers: tuple[str, ...]
    seeds: int = 5
    runtime_s: float = 3.0
    log_msec: int = 100
    jobs: int = 2
    constants: bool = True
    sets: tuple[str, ...] = ()
    lab: SchedOptions = field(default_factory=SchedOptions)


def hdd(queue_depth: int) -> Device:
    """hdd-7200 behind libata with `queue_depth` commands at the disk (device/queue_depth)."""
    return Device(
        f"{HDD} qd{queue_depth}",
        HDD,
        (*ATA, f"block.queue_depth={queue_depth}"),
        f"7200 rpm SATA disk (preset {HDD}) via libata, device/queue_depth {queue_depth}"
        + (" (NCQ's default)" if queue_depth == NCQ_DEPTH else ""),
    )


def devices_named(name: str, empirical: Path | None, hdd_depths: tuple[int, ...]) -> list[Device]:
    """The study's devices for one `--devices` name: hdd-7200 at each of `hdd_depths`, the
    SSD preset, `empirical` (the calibrated loop device), or any other preset or device file."""
    if name == HDD:
        return [hdd(d) for d in hdd_depths]
    if name == SSD:
        return [Device(SSD, SSD, (), f"NVMe flash SSD (preset {SSD}), a queue pair per job")]
    if name == "empirical" and empirical is not None:
        return [
            Device(
                EMPIRICAL,
                str(empirical),
                (),
                f"the lab's loop device as calibrated by `qoslab lab calibrate` ({empirical.name})",
                size="100%",
            )
        ]
    return [Device(name, name, (), f"device {name}")]


@dataclass(frozen=True)
class Point:
    device: Device
    scheduler: str
    seed: int
    sets: tuple[str, ...] = ()
    tunable: str = ""
    value: float = float("nan")


def config(device: Device, scheduler: str, opts: StudyOptions, sets=(), tunable="", value=None):
    """A configuration of the `sched` sweep study: one device and scheduler under `opts`, its
    device's and the point's `--set`s (a later one of a key wins, as on the command line)."""
    lab = opts.lab
    out: dict[str, Any] = {
        "device": device.device,
        "scheduler": scheduler,
        "size": device.size,
        "runtime_s": opts.runtime_s,
        "log_msec": opts.log_msec,
        "ioengine": lab.ioengine,
        "db_prio": lab.db_prio,
        "backup_prio": lab.backup_prio,
        "db_iodepth": lab.db_iodepth,
        "backup_iodepth": lab.backup_iodepth,
        "label": device.label,
    }
    if tunable:
        out |= {"tunable": tunable, "value": float(value)}
    for text in (*device.sets, *sets):
        name, v = set_param(adapter.STUDY, text)
        out.pop(name, None)
        out[name] = v
    return out


def tables(rows: Rows, first: int = 0, stop: int | None = None, constants: bool = False):
    """The study's tables of the points `first` to `stop` of `rows`: a row per run and job
    (the device's label, scheduler, seed, fio's statistics, the block counters, and for the
    constants section the tunable and its value) and the series."""
    points = rows.points.set_index("point")
    label = points["label"].where(points["label"].notna(), points["device"])

    def rows_of(table: pd.DataFrame) -> tuple[pd.DataFrame, np.ndarray]:
        mine = table[(table.point >= first) & (stop is None or table.point < stop)]
        at = mine.point.to_numpy()
        head = pd.DataFrame(
            {
                "device": label.loc[at].to_numpy(),
                "scheduler": points.scheduler.loc[at].to_numpy(),
                "seed": points.seed.loc[at].to_numpy().astype(np.int64),
            }
        )
        return pd.concat([head, mine.drop(columns="point").reset_index(drop=True)], axis=1), at

    runs, at = rows_of(rows.details["jobs"])
    for name in BLOCK_COUNTERS:
        runs[name] = points[name].loc[at].to_numpy()
    if constants:
        runs["tunable"] = points.tunable.loc[at].to_numpy()
        runs["value"] = points.value.loc[at].to_numpy()
    series, _ = rows_of(rows.details["series"])
    return runs, series


def run_point(p: Point, opts: StudyOptions) -> tuple[pd.DataFrame, pd.DataFrame]:
    """One simulation, outside any store: a row per job (fio's statistics, block counters)
    and its series, as the study's tables have them."""
    params = config(p.device, p.scheduler, opts, p.sets, p.tunable, p.value)
    counters, jobs, series = measure(params, p.seed)
    point = {"point": 0, "seed": p.seed, **params, **counters}
    rows = Rows(
        pd.DataFrame([point]),
        {"jobs": jobs.assign(point=0), "series": series.assign(point=0)},
    )
    return tables(rows, constants=bool(p.tunable))


def plan(opts: StudyOptions) -> tuple[list[dict], list[dict]]:
    """The study's configurations, and the constants section's (on the HDD, if it is
    studied); each runs with every seed."""
    main = [config(d, s, opts, opts.sets) for d in opts.devices for s in opts.schedulers]
    constants = []
    hdds = [d for d in opts.devices if d.device == HDD]
    at = [d for d in hdds if d.label == hdd(CONSTANTS_DEPTH).label] or hdds
    if opts.constants and at:
        for sched, table in CONSTANTS.items():
            if sched not in opts.schedulers:
                continue
            for tunable, values in table.items():
                for v in values:
                    sets = (*opts.sets, f"block.{sched}.{tunable}={v}")
                    constants.append(config(at[0], sched, opts, sets, tunable, v))
    return main, constants


def summarise(runs: pd.DataFrame, keys: list[str]) -> pd.DataFrame:
    """Mean, standard deviation and count over seeds of every measure, per `keys` and job."""
    measures = [
        c
        for c in runs.columns
        if c not in {*keys, "job", "seed", "tunable", "value"}
        and pd.api.types.is_numeric_dtype(runs[c])
    ]
    g = runs.groupby([*keys, "job"], sort=False)[measures]
    mean = g.mean().add_suffix("_mean")
    # One seed has no spread to tell: its sd stays empty, not 0.
    sd = g.std(ddof=1).add_suffix("_sd")
    n = g.size().rename("seeds")
    return pd.concat([n, mean, sd], axis=1).reset_index()


def run_study(
    opts: StudyOptions,
    out: Path,
    real: Path | None = None,
    quiet: bool = False,
    store: Path | None = None,
):
    """Runs the study into `out` (its runs into `store`); returns the path of the report."""
    from qoslab.sched.report import read_real, write_study_report

    for s in opts.schedulers:
        if s not in registered_schedulers():
            raise InputError(
                f"--schedulers: no scheduler {s!r} (registered: "
                f"{', '.join(registered_schedulers())})"
            )
    for d in opts.devices:
        if d.device not in dict(api.presets()) and not Path(d.device).is_file():
            raise InputError("no such device file or preset", path=d.device)
    real_runs = read_real(real) if real is not None else None
    main, constants = plan(opts)
    seeds = list(range(1, opts.seeds + 1))
    store = default_store(out) if store is None else Path(store)
    with staged_dir(
        out,
        is_earlier_output=earlier_output("runs.parquet", "meta.json"),
        refusal="exists, is not empty and is not an earlier study output",
    ) as tmp:
        spec = planned_spec("sched", "sched-study", main + constants, seeds, ["jobs", "series"])
        rows = run_planned(spec, store, jobs=opts.jobs, quiet=quiet)
        n_main = len(main) * len(seeds)
        runs, series = tables(rows, 0, n_main)
        summary = summarise(runs, ["device", "scheduler"])
        runs.to_parquet(tmp / "runs.parquet", index=False)
        series.to_parquet(tmp / "series.parquet", index=False)
        summary.to_csv(tmp / "summary.csv", index=False, float_format="%.6g")
        const = None
        if constants:
            const, _ = tables(rows, n_main, constants=True)
            const.to_parquet(tmp / "constants.parquet", index=False)
        (tmp / "jobs.fio").write_text(job_text(opts.runtime_s, opts.lab))
        meta = {
            "command": sys.argv,
            "qoslab_version": __version__,
            "options": {
                **{k: v for k, v in asdict(opts).items() if k not in ("devices", "lab")},
                "devices": [asdict(d) for d in opts.devices],
            },
            "real": None if real is None else str(real),
            **provenance(spec, store, rows),
        }
        (tmp / "meta.json").write_text(json.dumps(meta, indent=1) + "\n")
        write_study_report(tmp, opts, runs, summary, series, const, real_runs)
    return Path(out) / "report.html"
