"""`qoslab plm study`'s options checked, the study run, its outputs written as one folder."""

from __future__ import annotations

import json
import sys
import tempfile
from pathlib import Path

from qoslab.errors import InputError
from qoslab.limits import MAX_SEED
from qoslab.outputs import earlier_output, staged_dir
from qoslab.plm import report, study
from qoslab.sweep.planned import default_store, provenance, run_planned
from qoslab.sweep.spec import planned_spec
from qoslab.sweep.studies.plm import TRACES, sizes_text
from qoslab.units import parse_duration

OUTPUTS = ("report.html", "results.parquet", "fig6.csv", "targets.csv", "meta.json")


def _words(text: str, allowed, option: str) -> list:
    words = [w.strip() for w in text.split(",") if w.strip()]
    out = []
    for w in words:
        value = int(w) if isinstance(next(iter(allowed)), int) and w.isdigit() else w
        if value not in allowed:
            names = ", ".join(str(a) for a in allowed)
            raise InputError(f"{option}: expected a comma list of {names}, got '{w}'")
        out.append(value)
    if not out:
        raise InputError(f"{option}: expected at least one value")
    return out


def _fraction(text: str, option: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if not (0.0 <= value < 1.0):
        raise InputError(f"{option}: expected a fraction in [0, 1), got '{text}'")
    return value


# Files every study writes: a folder holding them is an earlier study's output.
STUDY_FILES = ("meta.json", "results.parquet")


def main(
    *,
    out: Path,
    datasets: str | None,
    configs: str,
    policies: str,
    duration: str | None,
    quick: bool = False,
    seed: int,
    seeds: int = study.SEEDS,
    traces: list[Path] | None,
    workers: int,
    writes: str = "0",
    write_sensitivity: str = "0.1",
    sizes: str = "4k:1",
    burst_sigma: float | None = None,
    sets: list[str] | None = None,
    slow_reads: int = 0,
    quiet: bool = False,
    store: Path | None = None,
) -> None:
    if datasets is not None and traces is not None:
        print(
            "qoslab: note: --datasets chooses the generator's demand; the --trace files "
            "replay as they are",
            file=sys.stderr,
        )
    ds = _words(datasets or ",".join(study.DATASETS), study.DATASETS, "--datasets")
    cs = _words(configs, study.CONFIGS, "--configs")
    ps = _words(policies, study.POLICIES, "--policies")
    if quick and duration is not None:
        raise InputError("--quick: sets the duration itself; give --quick or --duration")
    if duration is None:
        ms = study.QUICK_DURATION_MS if quick else study.DEFAULT_DURATION_MS
    else:
        try:
            seconds = parse_duration(duration, "--duration")
        except ValueError as err:
            raise InputError(str(err)) from None
        if seconds <= 0:
            raise InputError(f"--duration: expected more than 0, got '{duration}'")
        ms = round(seconds * 1000)
    if seed < 0:
        raise InputError(f"--seed: expected a non-negative integer, got {seed}")
    if seeds < 1:
        raise InputError(f"--seeds: expected at least 1, got {seeds}")
    if seed + seeds - 1 > MAX_SEED:
        raise InputError(f"--seeds: the last seed, --seed + {seeds - 1}, is above {MAX_SEED}")
    repetitions = list(range(seed, seed + seeds))
    if traces is not None:
        if len(traces) != 3:
            raise InputError(
                f"--trace: expected three files (high, medium, low host), got {len(traces)}"
            )
        for t in traces:
            if not Path(t).is_file():
                raise InputError("--trace: no such file", path=t)
    wf = _fraction(writes, "--writes")
    sensitivity = [
        _fraction(w, "--write-sensitivity") for w in write_sensitivity.split(",") if w.strip()
    ]
    sensitivity = [w for w in sensitivity if w != wf]
    if burst_sigma is not None and not (0.0 <= burst_sigma <= 5.0):
        raise InputError(f"--burst-sigma: expected a number in [0, 5], got {burst_sigma:g}")
    workload = study.Workload(
        write_fraction=wf,
        sizes=study.parse_sizes(sizes),
        burst_sigma=study.BURST_SIGMA if burst_sigma is None else burst_sigma,
    )
    workers = workers or study.default_workers()
    sets = list(sets or [])
    for kv in sets:
        if "=" not in kv or not kv.split("=", 1)[0].strip():
            raise InputError(f"--set: expected KEY=VALUE, got '{kv}'")
    if slow_reads < 0:
        raise InputError(f"--slow-reads: expected a non-negative integer, got {slow_reads}")
    if slow_reads:
        sets.append(f"media.diag.slow_reads={slow_reads}")
    store = default_store(out) if store is None else store
    with (
        staged_dir(
            out,
            is_earlier_output=earlier_output(*STUDY_FILES),
            refusal="not empty and not an earlier `qoslab plm study` output; choose another folder",
        ) as folder,
        tempfile.TemporaryDirectory(prefix="qoslab-plm-traces-") as scratch,
    ):
        if traces:
            # A trace that is not one stops the study before any run (one line, its file).
            study.replay(traces, ms, Path(scratch))
        spec = _planned(ds, cs, ps, ms, repetitions, traces, workload, sensitivity, sets)
        rows = run_planned(spec, store, jobs=workers, quiet=quiet)
        results, slow = _in_seed_order(rows, len(repetitions), folder / "series.parquet")
        if len(slow):
            slow.to_csv(folder / "slow_reads.csv", index=False, float_format="%.3f")
        results.to_parquet(folder / "results.parquet", index=False)
        report.fig6_table(results).to_csv(folder / "fig6.csv", index=False, float_format="%.6f")
        report.target_rows(results).to_csv(folder / "targets.csv", index=False, float_format="%.6f")
        meta = dict(
            datasets=ds if traces is None else ["trace"],
            configs=cs,
            policies=ps,
            duration_ms=ms,
            seed=seed,
            seeds=repetitions,
            traces=[str(t) for t in traces] if traces else None,
            device=study.DEVICE,
            workload=dict(
                write_fraction=workload.write_fraction,
                sizes=[list(x) for x in workload.sizes],
                burst_sigma=workload.burst_sigma,
                own_sigma=workload.own_sigma,
            ),
            write_sensitivity=sensitivity if traces is None else [],
            sets=sets,
            **provenance(spec, store, rows),
        )
        (folder / "meta.json").write_text(json.dumps(meta, indent=2) + "\n")
        _report(folder, results, meta)
    if not quiet:
        print(f"wrote {out}/report.html, results.parquet, series.parquet, fig6.csv, targets.csv")


def _planned(datasets, configs, policies, ms, seeds, traces, workload, sensitivity, sets):
    """The study's simulations as points of the sweep engine's `plm` study: every run of the
    plan (`study.plan`) with every seed."""
    if traces:
        datasets, sensitivity = ["trace"], []
    shared = {
        "duration_ms": ms,
        "writes": workload.write_fraction,
        "sizes": sizes_text(workload.sizes),
        "burst_sigma": workload.burst_sigma,
        "sets": "\n".join(sets),
    }
    if traces:
        shared |= {t: str(Path(p).resolve()) for t, p in zip(TRACES, traces, strict=True)}
    points = [
        {
            "dataset": r.dataset,
            "variant": r.variant,
            "config": r.config,
            "policy": r.policy,
            "host": r.host,
            "write_fraction": r.write_fraction,
            **shared,
        }
        for r in study.plan(datasets, configs, policies, sensitivity)
    ]
    return planned_spec("plm", "plm-study", points, seeds, ["rows", "series", "slow"])


def _in_seed_order(rows, n_seeds: int, series_path: Path):
    """The study's tables from its points' rows, seed by seed and each in plan order (the
    order of its outputs before the sweep engine ran it): the results and slow-read frames, and
    series.parquet written one row group a run."""
    import pandas as pd
    import pyarrow as pa
    import pyarrow.parquet as pq

    # The engine's plan order is the runs' order with each run's seeds innermost.
    order = sorted(range(len(rows.points)), key=lambda i: (i % n_seeds, i // n_seeds))
    rank = {point: k for k, point in enumerate(order)}

    def ordered(frame):
        frame = frame.assign(_rank=frame.point.map(rank)).sort_values("_rank", kind="stable")
        return frame.drop(columns=["point", "_rank"]).reset_index(drop=True)

    results = ordered(rows.details["rows"])
    slow = ordered(rows.details["slow"]) if "slow" in rows.details else pd.DataFrame()
    schema = study.series_schema()
    series = rows.details.get("series")
    with pq.ParquetWriter(series_path, schema) as writer:
        for point in order:
            if series is None:
                writer.write_table(schema.empty_table())
                continue
            part = series[series.point == point].drop(columns=["point"])
            table = pa.Table.from_pandas(part, preserve_index=False)
            writer.write_table(table.select(schema.names).cast(schema))
    return results, slow


def _report(folder: Path, results, meta: dict) -> None:
    w = meta["workload"]
    workload = study.Workload(
        w["write_fraction"], tuple(tuple(x) for x in w["sizes"]), w["burst_sigma"], w["own_sigma"]
    )
    facts = {
        "datasets": ", ".join(meta["datasets"]),
        "configs": ", ".join(map(str, meta["configs"])),
        "policies": ", ".join(meta["policies"]),
        "simulated time per run": f"{meta['duration_ms'] / 1000:g} s",
        "seeds": _seeds_text(meta.get("seeds", [meta["seed"]])),
        "device": meta["device"],
        "demand": "SYSTOR '17 trace" if meta["traces"] else "generator: " + workload.describe(),
    }
    report.write(folder, results, folder / "series.parquet", facts, workload)


def _seeds_text(seeds: list[int]) -> str:
    n = len(seeds)
    first = f"{seeds[0]}" if n == 1 else f"{seeds[0]} to {seeds[-1]}"
    return f"{first} ({n} repetition{'s' if n > 1 else ''} of every run)"


def rewrite(folder: Path) -> None:
    """Writes an earlier study's report.html, fig6.csv and targets.csv again from its tables
    (after a change to the report; nothing is simulated)."""
    import pandas as pd

    if not earlier_output(*STUDY_FILES)(folder):
        raise InputError("not a `qoslab plm study` output (no meta.json or results.parquet)",
                         path=folder)  # fmt: skip
    meta = json.loads((folder / "meta.json").read_text())
    results = pd.read_parquet(folder / "results.parquet")
    report.fig6_table(results).to_csv(folder / "fig6.csv", index=False, float_format="%.6f")
    report.target_rows(results).to_csv(folder / "targets.csv", index=False, float_format="%.6f")
    _report(folder, results, meta)
    print(f"wrote {folder}/report.html, fig6.csv, targets.csv")
