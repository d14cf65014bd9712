"""`qoslab nvmelite diff`: the model's runs replayed on a device under test.

The model plans and runs the matrix (or a single workload + schedules); every run becomes a
`Task` (the workload file, the run's schedule file text, the model's log and runs.csv row);
`--jobs` worker threads each drive one DUT runner and compare its answer. Poison schedules
(spec §10.5: fault NONE, k = inf, highest p95) go first. Results are written in a fixed order
(poison runs, then runs.csv order), so the output does not depend on `--jobs`.
"""

from __future__ import annotations

import json
import queue
import shlex
import shutil
import subprocess
import threading
import time
from collections import Counter
from pathlib import Path

from qoslab import limits, nvmelite
from qoslab.dut.compare import STATUSES
from qoslab.dut.minimize import write_reproducers
from qoslab.dut.options import DiffOptions
from qoslab.dut.results import RunReport, csv_text
from qoslab.dut.runner import BatchRunner, DutStartError, SingleRunner, make_task
from qoslab.errors import InputError
from qoslab.nvmelite.config import read_input, workload_paths
from qoslab.outputs import earlier_output, staged_dir
from qoslab.progress import Count, progress_bar

ROOT = Path(__file__).resolve().parents[3]
BUILTIN_C = "builtin:c"
BUILTIN_C_BINARY = ROOT / "build" / "dut" / "nvmelite-c"


def dut_argv(spec: str) -> list[str]:
    """The DUT command line; `builtin:c` is the project's C implementation."""
    if spec == BUILTIN_C:
        if not BUILTIN_C_BINARY.exists() and (ROOT / "Makefile").exists():
            subprocess.run(["make", "-s", "-C", str(ROOT), "dut-build"], capture_output=True)
        if not BUILTIN_C_BINARY.exists():
            raise InputError(
                f"--dut {BUILTIN_C}: {BUILTIN_C_BINARY} is not built; run `make setup`"
            )
        return [str(BUILTIN_C_BINARY)]
    try:
        argv = shlex.split(spec)
    except ValueError as err:
        raise InputError(f"--dut: {err}") from None
    if not argv:
        raise InputError("--dut: empty command")
    if shutil.which(argv[0]) is None:
        raise InputError(f"--dut: cannot find an executable '{argv[0]}'")
    return argv


def _split_run_id(run_id: str) -> tuple[str, str, str, str, str]:
    seed_id, policy, bound, seed, fault = run_id.rsplit("_", 4)
    return seed_id, policy, bound, seed, fault


# ---- planning ---------------------------------------------------------------------------------


class Plan:
    """The runs to check, in report order, produced lazily (logs are not all kept)."""

    def __init__(self, total: int, produce, description: str):
        self.total = total
        self.produce = produce  # () -> iterator of (run_id, workload_path, RunResult, poison)
        self.description = description


def plan_matrix(config: Path, opts: DiffOptions) -> Plan:
    matrix = nvmelite.load_matrix(config, submit_window=opts.submit_window)
    paths: dict[str, str] = {}
    for path, line in workload_paths(config):
        seed_id = nvmelite.load_workload(path).seed_id
        if paths.setdefault(seed_id, str(path)) != str(path):
            raise InputError(
                f"seeds: two workloads share the seed_id '{seed_id}', so their runs cannot "
                "be told apart",
                path=config,
                line=line,
            )
    # Poison schedules: fault NONE, k = inf, by p95 descending, ties in run_id order.
    ranked = []
    for result in matrix.iter_runs(log=False, schedule=False):
        _, _, bound, _, fault = _split_run_id(result.run_id)
        if fault == "NONE" and bound == "inf":
            ranked.append((-result.metrics["p95_latency_step"], result.run_id))
    poison = {run_id for _, run_id in sorted(ranked)[: opts.top_k]}
    poison_order = [run_id for _, run_id in sorted(ranked)[: opts.top_k]]

    def produce():
        found = {}
        for result in matrix.iter_runs(log=True, schedule=True):
            if result.run_id in poison:
                found[result.run_id] = result
        for run_id in poison_order:
            yield run_id, paths[_split_run_id(run_id)[0]], found[run_id], True
        if opts.only == "poison":
            return
        for result in matrix.iter_runs(log=True, schedule=True):
            if result.run_id not in poison:
                yield result.run_id, paths[_split_run_id(result.run_id)[0]], result, False

    total = len(poison) if opts.only == "poison" else len(matrix)
    what = "poison schedules" if opts.only == "poison" else "runs"
    return Plan(total, produce, f"{total} {what} of {config} (submit window {opts.submit_window})")


def plan_schedules(workload: Path, opts: DiffOptions) -> Plan:
    """A single workload with one or more schedule files (`--schedule`)."""
    w = nvmelite.load_workload(workload)
    results = []
    for sched in opts.schedules:
        try:
            text = read_input(sched).decode("utf-8")
        except UnicodeDecodeError:
            raise InputError("not UTF-8 text", path=sched) from None
        try:
            result = nvmelite.replay(w, text, True)
        except nvmelite.ScheduleError as err:
            message, line = err.args
            raise InputError(message, path=sched, line=line) from None
        results.append(result)

    def produce():
        for result in results:
            yield result.run_id, str(workload), result, False

    return Plan(len(results), produce, f"{len(results)} schedule(s) of {workload}")


# ---- running ------------------------------------------------------------------------------------


def _make_runner(argv: list[str], opts: DiffOptions, workdir: Path):
    if opts.batch:
        return BatchRunner(argv, opts.timeout_s)
    return SingleRunner(argv, opts.timeout_s, workdir)


def run_plan(plan: Plan, argv: list[str], opts: DiffOptions, workdir: Path) -> list[RunReport]:
    tasks: queue.Queue = queue.Queue(maxsize=max(64, 32 * opts.jobs))
    reports: list[RunReport] = []
    lock = threading.Lock()
    errors: list[BaseException] = []
    failing = [0]
    bar = progress_bar()
    done = Count(bar, "diff (0 failing)", total=plan.total)

    def worker() -> None:
        # Whatever happens, a worker keeps taking tasks until its None: the producer never
        # blocks on a full queue that nobody drains.
        runner = _make_runner(argv, opts, workdir)
        try:
            while True:
                item = tasks.get()
                if item is None:
                    return
                if errors:
                    continue
                order, poison, task = item
                try:
                    outcome = runner.run(task)
                except Exception as err:  # DutStartError, or a bug: reported after the join
                    errors.append(err)
                    continue
                keep = task if outcome.status != "match" else None
                report = RunReport(order, task.run_id, poison, outcome, keep, task.workload_path)
                with lock:
                    reports.append(report)
                    failing[0] += outcome.status != "match"
                    done.advance(description=f"diff ({failing[0]} failing)")
        finally:
            runner.close()

    threads = [threading.Thread(target=worker, daemon=True) for _ in range(opts.jobs)]
    bar.start()
    for t in threads:
        t.start()
    try:
        for order, (run_id, wpath, result, poison) in enumerate(plan.produce()):
            if errors:
                break
            tasks.put((order, poison, make_task(run_id, wpath, result)))
    finally:
        for _ in threads:
            tasks.put(None)
        for t in threads:
            t.join()
        bar.stop()
    for err in errors:
        if isinstance(err, DutStartError):
            raise InputError(f"--dut: {err}")
        raise err
    reports.sort(key=lambda r: r.order)
    return reports


# ---- output -------------------------------------------------------------------------------------


def _divergence_rows(report: RunReport) -> list[list[str]]:
    o = report.outcome
    rows = [[report.run_id, d.line, d.expected, d.got] for d in o.rows]
    if o.status not in ("match", "diverged") and not o.rows:
        rows.append([report.run_id, "", "", f"[{o.status}] {o.detail}"])
    elif o.status not in ("match", "diverged"):
        rows.insert(0, [report.run_id, "", "", f"[{o.status}] {o.detail}"])
    return rows


def diff(target: Path, opts: DiffOptions) -> int:
    """Runs the whole command; returns the exit status (0 all match, 1 something differs)."""
    argv = dut_argv(opts.dut)
    if opts.jobs < 1:
        raise InputError("--jobs: expected at least 1")
    if opts.timeout_s <= 0:
        raise InputError("--timeout-s: expected a positive number of seconds")
    limits.number(opts.timeout_s, "--timeout-s", hi=limits.MAX_WAIT_S)
    if opts.schedules:
        plan = plan_schedules(target, opts)
    else:
        if target.suffix == ".json":
            raise InputError("a workload needs at least one --schedule FILE", path=target)
        plan = plan_matrix(target, opts)
    with staged_dir(
        opts.out,
        is_earlier_output=earlier_output("summary.json"),
        refusal="exists and is not the output of an earlier diff; choose another --out",
    ) as tmp:
        workdir = tmp / ".work"
        workdir.mkdir()
        t0 = time.monotonic()
        reports = run_plan(plan, argv, opts, workdir)
        elapsed = time.monotonic() - t0
        t1 = time.monotonic()
        minimized = write_reproducers(reports, argv, opts, tmp, workdir)
        min_elapsed = time.monotonic() - t1
        shutil.rmtree(workdir, ignore_errors=True)
        summary = _write_results(tmp, plan, reports, minimized, opts, elapsed, min_elapsed)
    print(summary, end="")
    return 0 if all(r.outcome.status == "match" for r in reports) else 1


def _write_results(tmp: Path, plan: Plan, reports, minimized, opts, elapsed, min_elapsed) -> str:
    div_rows = [row for r in reports if r.outcome.status != "match" for row in _divergence_rows(r)]
    (tmp / "divergences.csv").write_text(
        csv_text(["run_id", "line", "expected", "got"], div_rows), encoding="utf-8"
    )
    (tmp / "status.csv").write_text(
        csv_text(
            ["run_id", "status", "detail", "metrics", "poison"],
            (
                [
                    r.run_id,
                    r.outcome.status,
                    r.outcome.detail,
                    "yes" if r.outcome.metrics else "no",
                    "yes" if r.poison else "no",
                ]
                for r in reports
            ),
        ),
        encoding="utf-8",
    )
    counts = Counter(r.outcome.status for r in reports)
    failing = [r for r in reports if r.outcome.status != "match"]
    summary = {
        "dut": opts.dut,
        "mode": "batch" if opts.batch else "single-run",
        "plan": plan.description,
        "runs": len(reports),
        "statuses": {s: counts[s] for s in STATUSES if counts[s]},
        "metrics_compared": sum(r.outcome.metrics for r in reports),
        "poison_runs": sum(r.poison for r in reports),
        "first_failing": [
            {"run_id": r.run_id, "status": r.outcome.status, "detail": r.outcome.detail}
            for r in failing[:10]
        ],
        "reproducers": minimized,
        "diff_seconds": round(elapsed, 3),
        "minimize_seconds": round(min_elapsed, 3),
    }
    (tmp / "summary.json").write_text(json.dumps(summary, indent=2) + "\n", encoding="utf-8")
    lines = [
        f"qoslab nvmelite diff: {plan.description}",
        f"DUT: {opts.dut} ({summary['mode']} mode, {opts.jobs} job(s), "
        f"timeout {opts.timeout_s:g} s)",
        f"runs: {len(reports)}; "
        + ", ".join(f"{s}: {n}" for s, n in summary["statuses"].items())
        + f"; metrics compared for {summary['metrics_compared']}",
        f"time: {elapsed:.2f} s diff, {min_elapsed:.2f} s minimising",
    ]
    for r in failing[:10]:
        lines.append(f"  {r.outcome.status:12} {r.run_id}  {r.outcome.detail}")
    if len(failing) > 10:
        lines.append(f"  ... {len(failing) - 10} more in {opts.out}/status.csv")
    for m in minimized:
        lines.append(
            f"reproducer {m['run_id']}: {m['commands']} command(s), {m['steps']} step(s): "
            f"{m['command']}"
        )
    lines.append(f"results: {opts.out}/divergences.csv, status.csv, summary.json, summary.md")
    text = "\n".join(lines) + "\n"
    (tmp / "summary.md").write_text(
        "# NVMe-lite differential test\n\n```\n" + text + "```\n", encoding="utf-8"
    )
    return text
