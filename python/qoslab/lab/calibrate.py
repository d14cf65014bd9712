"""`qoslab lab calibrate`: fit the simulator's empirical device to a measured queue-depth sweep.

The fit (docs/lab.md, "Calibration"):

1. From a study's qd-sweep (4K random read, one fio run per depth), take each depth's
   latency distribution from fio's json+ histogram: the quantiles in `PROFILE_PERCENTILES`,
   by fio's own percentile rule, with the run's min and max as the 0th and 100th. The
   distribution is fio's total latency (`lat` = submission + completion), the time the
   application waits: how fio splits it into slat and clat shifts with depth (a loop device
   does much of its work inside io_submit at QD 1), and IOPS = depth / mean total latency,
   so a device drawing total latencies also reproduces the measured IOPS. The simulated host
   costs nothing, so the simulator's clat is that total latency again.
2. Hold some depths out (default: every second depth strictly between the shallowest and the
   deepest) and keep the others as the profile's points.
3. Per quantile, make latency non-decreasing in depth across the kept points (pool adjacent
   violators): more outstanding I/O never makes a device faster, so a dip is measurement
   noise, and letting it through would bend the interpolation at the depths in between.
4. Write the profile (format `qoslab-empirical-1`, docs/sim.md) and a device file using it
   behind a cost-free host and controller (the measured latencies hold the real host's costs).
5. Run `qoslab sim` with that device at every measured depth and compare its p50 and p99
   with the measurement: the held-out depths show how well the device predicts what it was
   not fitted to. With several sweeps, the comparison also gives each depth's *spread*, how
   far the sweeps disagree with each other ((largest - smallest) / merged value): a
   prediction cannot be judged more finely than the measurement repeats.

Outputs beside `--out device.toml`: `device.profile.toml`, `device.calibration.csv` (one row per
depth: measured and predicted p50/p99, errors) and `device.calibration.html` (the figure and
the table).
"""

from __future__ import annotations

import json
import tempfile
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from qoslab.errors import InputError
from qoslab.fio import parse_fio_json, percentiles_from_bins
from qoslab.outputs import staged_file, write_file

PROFILE_FORMAT = "qoslab-empirical-1"
PROFILE_PERCENTILES = [float(p) for p in range(0, 100)] + [99.5, 99.9, 99.95, 99.99, 100.0]
COMPARED = {"p50": 50.0, "p99": 99.0}


@dataclass
class Measured:
    """One depth of the sweep(s): its latency distribution and what fio measured."""

    iodepth: int
    bs_bytes: int
    iops: float
    samples: int
    quantiles_ns: np.ndarray  # at PROFILE_PERCENTILES
    p50_ns: float
    p99_ns: float
    # (largest - smallest) / merged value over the separate sweeps: how repeatable the
    # measurement itself is at this depth (0 with a single sweep).
    p50_spread: float = 0.0
    p99_spread: float = 0.0


def _spread(values: list[float], merged: float) -> float:
    return (max(values) - min(values)) / merged if len(values) > 1 and merged > 0 else 0.0


def _read_study(results_dir: Path) -> tuple[pd.DataFrame, pd.DataFrame, dict]:
    need = [results_dir / n for n in ("results.parquet", "bins.parquet", "meta.json")]
    for path in need:
        if not path.exists():
            raise InputError(
                "not a `qoslab lab study` output directory (expected results.parquet, "
                f"bins.parquet and meta.json; {path.name} is missing)",
                path=results_dir,
            )
    table = pd.read_parquet(need[0])
    sweep = table[(table.study == "qd-sweep") & (table.op == "read")]
    if sweep.iodepth.nunique() < 2:
        raise InputError(
            "no qd-sweep with at least two depths here; run `qoslab lab study qd-sweep` first",
            path=results_dir,
        )
    bins = pd.read_parquet(need[1])
    bins = bins[bins.run.isin(sweep.run) & (bins.op == "read")]
    return sweep, bins, json.loads(need[2].read_text())


def load_sweeps(results_dirs: list[Path]) -> tuple[list[Measured], list[dict]]:
    """The qd-sweeps of one or more study output directories, merged per depth.

    Several sweeps of the same device, taken one after the other, average out interference
    that comes and goes (other tenants of a shared disk): their histograms are added.
    """
    sweeps, histograms, metas = [], [], []
    for d in results_dirs:
        sweep, bins, meta = _read_study(d)
        sweep = sweep.assign(source_dir=str(d))
        bins = bins.assign(source_dir=str(d))
        kind = "lat" if (bins.kind == "lat").any() else "clat"
        sweeps.append(sweep)
        histograms.append(bins[bins.kind == kind])
        metas.append(meta)
    sweep, bins = pd.concat(sweeps), pd.concat(histograms)
    if sweep.bs_bytes.nunique() != 1:
        raise InputError("the sweeps use different block sizes; calibrate one block size")
    measured = []
    for depth, rows in sweep.groupby("iodepth"):
        hist_rows = bins.merge(rows[["run", "source_dir"]], on=["run", "source_dir"])
        if hist_rows.empty:
            raise InputError(f"no latency histogram for QD {depth}", path=results_dirs[0])
        counts = hist_rows.groupby("value_ns")["count"].sum()
        hist = counts.to_dict()
        q = percentiles_from_bins(hist, PROFILE_PERCENTILES)
        values = np.array([q[p] for p in PROFILE_PERCENTILES])
        values[0], values[-1] = min(hist), max(hist)
        seconds = (rows.runtime_ms / 1000.0).sum()
        per_sweep = [
            percentiles_from_bins(g.groupby("value_ns")["count"].sum().to_dict(), (50.0, 99.0))
            for _key, g in hist_rows.groupby(["source_dir", "run"])
        ]
        measured.append(
            Measured(
                iodepth=int(depth),
                bs_bytes=int(rows.bs_bytes.iloc[0]),
                iops=float(rows.total_ios.sum() / seconds),
                samples=int(counts.sum()),
                quantiles_ns=np.maximum.accumulate(values),
                p50_ns=q[50.0],
                p99_ns=q[99.0],
                p50_spread=_spread([p[50.0] for p in per_sweep], q[50.0]),
                p99_spread=_spread([p[99.0] for p in per_sweep], q[99.0]),
            )
        )
    return measured, metas


def default_holdout(depths: list[int]) -> list[int]:
    """Every second depth strictly inside the sweep: 1..128 in doublings holds out 2, 8, 32."""
    return [d for i, d in enumerate(depths) if i % 2 == 1 and i < len(depths) - 1]


def monotone_in_depth(values: np.ndarray, weights: np.ndarray) -> np.ndarray:
    """Weighted least-squares non-decreasing fit of each column over the rows (depths).

    Pool adjacent violators, written out because it is a dozen lines and the project has no
    statistics library that offers it.
    """
    out = np.empty_like(values)
    for col in range(values.shape[1]):
        blocks: list[list[float]] = []  # [mean, weight, count]
        for v, w in zip(values[:, col], weights, strict=True):
            blocks.append([v, w, 1])
            while len(blocks) > 1 and blocks[-2][0] > blocks[-1][0]:
                m2, w2, n2 = blocks.pop()
                m1, w1, n1 = blocks.pop()
                blocks.append([(m1 * w1 + m2 * w2) / (w1 + w2), w1 + w2, n1 + n2])
        out[:, col] = np.concatenate([[m] * n for m, _w, n in blocks])
    return out


def _toml_list(values) -> str:
    return "[" + ", ".join(f"{v:g}" if isinstance(v, float) else str(v) for v in values) + "]"


def profile_text(points: list[Measured], quantiles: np.ndarray, source: str, capacity: int) -> str:
    lines = [
        "# Empirical device profile written by `qoslab lab calibrate` (docs/lab.md).",
        f'format = "{PROFILE_FORMAT}"',
        f"source = {json.dumps(source)}",
        f"capacity_bytes = {capacity}",
    ]
    for m, q in zip(points, quantiles, strict=True):
        lines += [
            "",
            "[[point]]",
            'op = "read"',
            f"iodepth = {m.iodepth}",
            f"bs_bytes = {m.bs_bytes}",
            f"iops = {m.iops:.1f}",
            f"percentiles = {_toml_list(PROFILE_PERCENTILES)}",
            f"clat_ns = {_toml_list([round(float(v)) for v in q])}",
        ]
    return "\n".join(lines) + "\n"


def device_text(profile_name: str, source: str) -> str:
    return (
        f'description = """\nEmpirical device fitted by `qoslab lab calibrate` to {source}.\n'
        "Host and controller cost nothing: the measured latencies already hold "
        'the real host\'s costs.\n"""\n\n'
        f'[media]\nmodel = "empirical"\nprofile = "{profile_name}"\n'
    )


def predict(device: Path, depths: list[int], bs_bytes: int, runtime_s: float, seed: int):
    """`qoslab sim` of a 4K random-read job at each depth: {depth: (p50_ns, p99_ns, iops)}.

    The simulated submission costs nothing (slat = 0), so its clat is its total latency.
    """
    from qoslab.sim import api

    jobs = [
        "[global]",
        "ioengine=libaio",
        "direct=1",
        "rw=randread",
        f"bs={bs_bytes}",
        "time_based",
        f"runtime={round(runtime_s * 1000)}ms",
        "clat_percentiles=1",
    ]
    for d in depths:
        jobs += ["", f"[qd{d}]", f"iodepth={d}", "stonewall"]
    with tempfile.TemporaryDirectory() as tmp:
        job_file = Path(tmp) / "sweep.fio"
        job_file.write_text("\n".join(jobs) + "\n")
        result = api.run(job_file, device=str(device), seed=seed, output_format="json")
    out = parse_fio_json(result["text"], "qoslab sim output")
    predicted = {}
    for job in out.jobs:
        clat = job.ops["read"].latency["clat"]
        d = int(job.options.get("iodepth", "0"))
        predicted[d] = (clat.percentiles_ns[50.0], clat.percentiles_ns[99.0], job.ops["read"].iops)
    return predicted


def calibrate(
    results_dirs: list[Path],
    out: Path,
    holdout: list[int] | None = None,
    sim_runtime_s: float = 2.0,
    seed: int = 1,
) -> pd.DataFrame:
    out = Path(out)
    if out.suffix != ".toml":
        raise InputError("--out: expected a device file name ending in .toml", path=out)
    if not out.parent.is_dir():
        raise InputError("no such directory", path=out.parent)
    measured, metas = load_sweeps(results_dirs)
    meta = metas[0]
    depths = [m.iodepth for m in measured]
    held = default_holdout(depths) if holdout is None else holdout
    unknown = sorted(set(held) - set(depths))
    if unknown:
        raise InputError(f"--holdout: depths {unknown} are not in the sweep (it has {depths})")
    fit = [m for m in measured if m.iodepth not in held]
    if not fit:
        raise InputError("--holdout: every depth held out; nothing left to fit")
    weights = np.array([m.samples for m in fit], dtype=float)
    quantiles = monotone_in_depth(np.array([m.quantiles_ns for m in fit]), weights)
    target = meta.get("target", {})
    sweeps = f"{len(metas)} qd-sweeps" if len(metas) > 1 else "a qd-sweep"
    source = (
        f"{meta.get('fio_version', 'fio')}, {sweeps} of {target.get('path', '?')} "
        f"({', '.join(f'QD {m.iodepth}' for m in fit)}; measured {meta.get('started_at', '')})"
    )
    capacity = int(target.get("size_bytes") or (1 << 30))
    profile_path = out.with_name(f"{out.stem}.profile.toml")
    write_file(profile_path, profile_text(fit, quantiles, source, capacity))
    write_file(out, device_text(profile_path.name, source))
    predicted = predict(out, depths, fit[0].bs_bytes, sim_runtime_s, seed)
    rows = []
    for m in measured:
        p50, p99, iops = predicted[m.iodepth]
        rows.append(
            {
                "iodepth": m.iodepth,
                "role": "held out" if m.iodepth in held else "fitted",
                "measured_p50_us": m.p50_ns / 1e3,
                "predicted_p50_us": p50 / 1e3,
                "p50_error": p50 / m.p50_ns - 1.0,
                "p50_spread": m.p50_spread,
                "measured_p99_us": m.p99_ns / 1e3,
                "predicted_p99_us": p99 / 1e3,
                "p99_error": p99 / m.p99_ns - 1.0,
                "p99_spread": m.p99_spread,
                "measured_iops": m.iops,
                "predicted_iops": iops,
            }
        )
    comparison = pd.DataFrame(rows)
    csv_path = out.with_name(f"{out.stem}.calibration.csv")
    with staged_file(csv_path) as tmp:
        comparison.to_csv(tmp, index=False, float_format="%.6g")
    _report(out, comparison, source)
    return comparison


def _report(out: Path, comparison: pd.DataFrame, source: str) -> None:
    from qoslab.lab import figures
    from qoslab.lab.report import frame_table
    from qoslab.report import Section, Text, write_report

    fig_dir = out.parent / f"{out.stem}.figures"
    figure = figures.calibration(comparison, fig_dir / "calibration.png")
    figure.caption = "Measured vs predicted p50 and p99 per queue depth (hollow: held out)"
    held = comparison[comparison.role == "held out"]
    worst = (
        f"At the held-out depths the worst p50 error is {held.p50_error.abs().max():.1%} and "
        f"the worst p99 error {held.p99_error.abs().max():.1%}."
        if not held.empty
        else "No depth was held out."
    )
    sections = [
        Section(
            "Calibration",
            [
                Text(
                    f"Empirical device fitted to {source}. Each depth's "
                    "total-latency distribution became one profile point (latency made "
                    "non-decreasing in depth per quantile); `qoslab sim` then ran a 4K random "
                    f"read at every measured depth with that device. {worst}"
                ),
                Text(
                    "p50_spread and p99_spread: how far the separate sweeps disagree with each "
                    "other at that depth, (largest - smallest) / merged value. On a shared or "
                    "virtual disk the tail comes and goes with other load, and a prediction "
                    "cannot be judged more finely than the measurement repeats."
                ),
                figure,
                frame_table(comparison, "Measured vs predicted"),
            ],
        )
    ]
    write_report(
        out.with_name(f"{out.stem}.calibration.html"),
        "qoslab lab calibrate",
        sections,
        facts=[("device file", out.name), ("profile", f"{out.stem}.profile.toml")],
    )
