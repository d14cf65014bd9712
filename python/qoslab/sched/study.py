"""`qoslab sched study`: the scheduler study of `qoslab lab sched`, run in the simulator.

The same two jobs as the lab's (`database_sim`, 4 KiB random reads at best effort 1, beside
`backup_sim`, 128 KiB sequential reads at best effort 7, built from the lab's own options) run
on each device and each I/O scheduler the block layer has registered, once per seed. A run
gives per job IOPS, MB/s and the p50/p99/p99.9 latency, the block layer's counters (time in
the scheduler, time at the device, merges, the scheduler's CPU cost per request by the cost
model of docs/block.md) and a time series. The constants section runs `prio` and
`prio-advanced` on the HDD with each of their tunables changed alone.

Outputs (Parquet, one row per run and job; DuckDB reads them as they are): `runs.parquet`,
`series.parquet`, `constants.parquet`, `summary.csv` (mean, standard deviation and count over
seeds), `meta.json`, `report.html` with its figures. The directory is written whole or not at
all (`qoslab.outputs.staged_dir`).
"""

from __future__ import annotations

import json
import re
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from pathlib import Path

import pandas as pd

from qoslab._core import __version__
from qoslab.errors import InputError
from qoslab.fio import jobs_table, parse_fio_json
from qoslab.lab.sched import SchedOptions, prio_options
from qoslab.outputs import staged_dir
from qoslab.progress import Count, progress_bar
from qoslab.sim import api

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
BLOCK_COUNTERS = (
    "read_sched_wait_mean_ns",
    "read_sched_wait_p99_ns",
    "read_sched_wait_max_ns",
    "read_device_mean_ns",
    "read_device_p99_ns",
    "read_merges",
    "read_ios",
    "queued_max",
    "in_flight_max",
    "sched_cpu_ns_per_request",
)

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


def registered_schedulers() -> list[str]:
    """The block layer's schedulers, from its registry as the tunables table shows it: the
    default of `block.scheduler`, then each scheduler's `[block.NAME]` section, in registry
    order. (A scheduler without tunables other than the default has no section.)"""
    from qoslab import _core

    names: list[str] = []
    for section, key, _unit, default, _help in _core.sim_tunables():
        if section == "block" and key == "scheduler":
            names.insert(0, default)
        m = re.fullmatch(r'block\.[^ ]+ \(scheduler = "([^"]+)"\)', section)
        if m and m.group(1) not in names:
            names.append(m.group(1))
    return names


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


def job_text(runtime_s: float, lab: SchedOptions, size: str = "10g") -> str:
    """The lab's two jobs (`qoslab.lab.sched`) as a job file for the simulator."""
    jobs = {
        "database_sim": {
            "rw": "randread",
            "bs": "4k",
            "iodepth": lab.db_iodepth,
            **prio_options(lab.db_prio, "--db-prio"),
        },
        "backup_sim": {
            "rw": "read",
            "bs": "128k",
            "iodepth": lab.backup_iodepth,
            **prio_options(lab.backup_prio, "--backup-prio"),
        },
    }
    lines = [
        "[global]",
        f"ioengine={lab.ioengine}",
        "direct=1",
        # As the lab's runs: percentiles of the total latency, which includes the time a
        # request waits in the scheduler (the simulator's clat starts when the driver has it).
        "lat_percentiles=1",
        f"size={size}",
        "time_based=1",
        f"runtime={round(runtime_s * 1000)}ms",
    ]
    for name, opts in jobs.items():
        lines += ["", f"[{name}]", *(f"{k}={v}" for k, v in opts.items())]
    return "\n".join(lines) + "\n"


@dataclass(frozen=True)
class Point:
    device: Device
    scheduler: str
    seed: int
    sets: tuple[str, ...] = ()
    tunable: str = ""
    value: float = float("nan")


def run_point(p: Point, opts: StudyOptions) -> tuple[pd.DataFrame, pd.DataFrame]:
    """One simulation: a row per job (fio's statistics, block counters) and its series."""
    text = job_text(opts.runtime_s, opts.lab, p.device.size)
    device_text, _ = api.device_file(p.device.device)
    sets = [f"block.scheduler={p.scheduler}", *p.device.sets, *p.sets]
    with tempfile.TemporaryDirectory(prefix="qoslab-sched-") as tmp:
        series_path = Path(tmp) / "series.csv"
        result = api.run(
            jobtext=text,
            jobname="sched-study.fio",
            device=p.device.device,
            device_text=device_text,
            sets=sets,
            seed=p.seed,
            timeseries=series_path,
            log_avg_msec=opts.log_msec,
        )
        series = api.read_series(series_path)
    report = json.loads(result["text"])
    table = jobs_table([parse_fio_json(result["text"], path="sched-study.json")])
    table = table[table.op == "read"]
    block = api.stage_counters(report, "block")
    rows = pd.DataFrame(
        {
            "device": p.device.label,
            "scheduler": p.scheduler,
            "seed": p.seed,
            "job": table.job.to_numpy(),
            "iops": table.iops.to_numpy(),
            "mb_s": table.mb_s.to_numpy(),
            "lat_mean_us": table.lat_mean_us.to_numpy(),
            "p50_us": table.p50_us.to_numpy(),
            "p99_us": table.p99_us.to_numpy(),
            "p99_9_us": table.p99_9_us.to_numpy(),
        }
    )
    for name in BLOCK_COUNTERS:
        rows[name] = float(block[name])
    if p.tunable:
        rows["tunable"] = p.tunable
        rows["value"] = p.value
    s = series[series.op == "read"]
    ts = pd.DataFrame(
        {
            "device": p.device.label,
            "scheduler": p.scheduler,
            "seed": p.seed,
            "job": s.job.to_numpy(),
            "time_ms": s.time_ms.to_numpy(),
            "iops": s.iops.to_numpy(),
            "lat_mean_us": s.lat_mean_ns.to_numpy() / 1000.0,
            "lat_p99_us": s.lat_p99_ns.to_numpy() / 1000.0,
        }
    )
    return rows, ts


def _run_all(points: list[Point], opts: StudyOptions, progress) -> list:
    with ThreadPoolExecutor(max_workers=max(1, opts.jobs)) as pool:
        futures = [pool.submit(run_point, p, opts) for p in points]
        out = []
        for f in futures:  # in point order: the tables do not depend on the worker count
            out.append(f.result())
            progress()
    return out


def plan(opts: StudyOptions) -> tuple[list[Point], list[Point]]:
    """The study's runs, and the constants section's (on the HDD, if it is studied)."""
    seeds = range(1, opts.seeds + 1)
    main = [
        Point(d, s, seed, opts.sets)
        for d in opts.devices
        for s in opts.schedulers
        for seed in seeds
    ]
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
                    constants += [
                        Point(at[0], sched, seed, sets, tunable, float(v)) for seed in seeds
                    ]
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


def _is_earlier_output(out: Path) -> bool:
    return (out / "runs.parquet").is_file() and (out / "meta.json").is_file()


def run_study(opts: StudyOptions, out: Path, real: Path | None = None, quiet: bool = False):
    """Runs the study into `out`; returns the path of the report."""
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
    with (
        progress_bar(quiet) as bar,
        staged_dir(
            out,
            is_earlier_output=_is_earlier_output,
            refusal="exists, is not empty and is not an earlier study output",
        ) as tmp,
    ):
        done = Count(bar, "sched study", total=len(main) + len(constants))
        results = _run_all(main + constants, opts, done.advance)
        runs = pd.concat([r for r, _ in results[: len(main)]], ignore_index=True)
        series = pd.concat([s for _, s in results[: len(main)]], ignore_index=True)
        summary = summarise(runs, ["device", "scheduler"])
        runs.to_parquet(tmp / "runs.parquet", index=False)
        series.to_parquet(tmp / "series.parquet", index=False)
        summary.to_csv(tmp / "summary.csv", index=False, float_format="%.6g")
        const = None
        if constants:
            const = pd.concat([r for r, _ in results[len(main) :]], ignore_index=True)
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
        }
        (tmp / "meta.json").write_text(json.dumps(meta, indent=1) + "\n")
        write_study_report(tmp, opts, runs, summary, series, const, real_runs)
    return Path(out) / "report.html"
