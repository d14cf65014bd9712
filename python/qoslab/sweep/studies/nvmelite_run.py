"""`nvmelite run` in a sweep: a point is one run of the NVMe-lite step model.

Its summary row is the run's runs.csv row (the same numbers `qoslab nvmelite run` prints and
`qoslab nvmelite matrix` writes). Points are run a batch at a time by the Rust core
(`qoslab._core.nvmelite.run_batch`): a run costs a few microseconds, a Python call per run
would cost more than the run.
"""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path

from qoslab._core import nvmelite as _core
from qoslab.sweep.kinds import choice, count_or_inf, file, text
from qoslab.sweep.study import CONTRACT_VERSION, REQUIRED, Batch, BatchResult, Metric, Param, Study

FAULT_MODES = ("NONE", "TIMEOUT", "RESET")

PARAMS = (
    Param("workload", file(), "", REQUIRED, "workload JSON file (seed_id + commands)"),
    Param("policy", choice([n for n, _ in _core.POLICIES]), "", REQUIRED, "completion policy"),
    Param("bound", count_or_inf(0), "commands", REQUIRED, "reordering bound k"),
    Param("fault", choice(FAULT_MODES), "", "NONE", "fault mode"),
    Param("submit_window", count_or_inf(1), "commands", "inf", "most commands pending at once"),
    Param("scheduler_version", text(), "", "v1.0", "the log header's scheduler_version"),
    Param("git_commit", text(), "", "", "the log header's git_commit"),
)

# The metrics as docs/nvmelite.md defines them (latencies in scheduler steps).
_HELP = {
    "p95_latency_step": ("steps", "95th percentile latency, Lat[floor(0.95 (N-1))]"),
    "mean_latency_step": ("steps", "mean latency"),
    "max_latency_step": ("steps", "largest latency"),
    "RD": ("", "reordering degree: inversions of the completion order / (m(m-1)/2)"),
    "FE": ("", "fence effectiveness: fraction of pairs across a fence completed in order"),
    "pending_peak": ("commands", "most commands pending after a submit"),
    "pending_area": ("commands", "sum of the backlog after each submit and complete"),
    "n_ok": ("commands", "COMPLETE lines with status OK"),
    "n_err": ("commands", "COMPLETE lines with status ERR"),
    "n_timeout": ("commands", "COMPLETE lines with status TIMEOUT"),
    "completion_rate": ("", "n_ok / n_cmds"),
}
_DTYPES = {"f64": "float64", "u64": "uint64"}

METRICS = (
    Metric("run_id", "string", "", "the run's id (workload_POLICY_k_seed_FAULT)"),
    *(Metric(n, _DTYPES[t], *_HELP[n]) for n, t in _core.BATCH_METRICS),
    Metric("log_sha256", "string", "", "SHA-256 of the run's log text (hex)"),
)


@lru_cache(maxsize=64)
def _workload(path: str, mtime_ns: int):
    from qoslab.nvmelite import load_workload

    return load_workload(path)


def run_batch(batch: Batch) -> BatchResult:
    import os

    import numpy as np
    import pyarrow as pa

    paths = sorted({c["workload"] for c in batch.configs})
    index = {p: i for i, p in enumerate(paths)}
    workloads = [_workload(p, os.stat(p).st_mtime_ns) for p in paths]
    configs = [
        (
            index[c["workload"]],
            c["policy"],
            c["bound"],
            c["fault"],
            c["submit_window"],
            c["scheduler_version"],
            c["git_commit"],
        )
        for c in batch.configs
    ]
    out = _core.run_batch(workloads, configs, batch.config_index, batch.seeds)
    n = len(batch)
    columns = {}
    offsets = pa.py_buffer(out["run_id_offsets"])
    columns["run_id"] = pa.LargeStringArray.from_buffers(
        n, offsets, pa.py_buffer(out["run_id"])
    ).cast(pa.string())
    for name, kind in _core.BATCH_METRICS:
        dtype = "<f8" if kind == "f64" else "<u8"
        columns[name] = pa.array(np.frombuffer(out[name], dtype=dtype))
    hex_offsets = np.arange(0, 64 * (n + 1), 64, dtype=np.int32)
    columns["log_sha256"] = pa.StringArray.from_buffers(
        n, pa.py_buffer(hex_offsets.tobytes()), pa.py_buffer(out["log_sha256"])
    )
    return BatchResult(pa.table(columns), [None] * n)


CLIFF_RISE = 0.20  # a bound whose mean p95 is over 20 % above the previous bound's (matrix)
MAX_HEATMAPS = 4


def _bound_order(value: str) -> float:
    return float("inf") if value == "inf" else float(value)


def _figures(store, table, directory):
    """The risk-cliff heatmap of `qoslab nvmelite matrix`, from the sweep's own runs: mean p95
    over seeds per policy and bound, one panel per workload, fault and submit window."""
    from qoslab.report.figures import pyplot, save_figure

    cells = store.query(
        "SELECT workload, fault, submit_window, policy, bound, avg(p95_latency_step) AS p95 "
        f'FROM "{table}" GROUP BY ALL ORDER BY ALL'
    )
    if cells.empty or cells["bound"].nunique() < 2:
        return []
    plt = pyplot()
    figures = []
    groups = cells.groupby(["workload", "fault", "submit_window"], sort=True)
    for (workload, fault, window), part in list(groups)[:MAX_HEATMAPS]:
        bounds = sorted(part["bound"].unique(), key=_bound_order)
        policies = sorted(part["policy"].unique())
        means = part.set_index(["policy", "bound"])["p95"]
        grid = [[means.get((p, b), float("nan")) for b in bounds] for p in policies]
        fig, ax = plt.subplots(figsize=(7.2, 0.5 * len(policies) + 1.8))
        im = ax.imshow(grid, cmap="viridis", aspect="auto")
        ax.set_xticks(range(len(bounds)), bounds)
        ax.set_yticks(range(len(policies)), policies)
        ax.grid(False)
        for y, row in enumerate(grid):
            for x, v in enumerate(row):
                ax.text(x, y, f"{v:.2f}", ha="center", va="center", fontsize="small", color="w")
                if x and row[x - 1] > 0 and v > row[x - 1] * (1 + CLIFF_RISE):
                    ax.add_patch(
                        plt.Rectangle((x - 0.5, y - 0.5), 1, 1, fill=False, edgecolor="red", lw=2.5)
                    )
        ax.set_xlabel("reordering bound k")
        ax.set_title(f"{Path(workload).name}, fault {fault}, window {window}: mean p95 (steps)")
        fig.colorbar(im, ax=ax, shrink=0.8)
        stem = f"nvmelite_run_cliffs_{len(figures)}"
        figures.append(
            save_figure(
                fig,
                directory,
                stem,
                f"Risk cliffs: {Path(workload).name}, fault {fault}, submit window {window}",
                "Mean p95 latency over the seeds of each policy and bound; a red outline marks "
                "a bound whose mean p95 is more than 20 % above the previous bound's.",
                "figures/",
            )
        )
    return figures


STUDY = Study(
    name="nvmelite run",
    help="One run of the NVMe-lite step model (the runs.csv row of `qoslab nvmelite run`).",
    params=PARAMS,
    metrics=METRICS,
    headline=("p95_latency_step", "RD"),
    version=CONTRACT_VERSION,
    seed_help="the schedule seed (0..2^64-1)",
    run_batch=run_batch,
    figures=_figures,
    batch_points=16384,
)
