"""Minimised reproducers: delta debugging over a failing run's commands and schedule steps.

A candidate is a workload (a subset of the run's commands) plus a schedule (a subset of its
step lines, possibly with simpler parameters and draws). Removing commands or steps usually
leaves a schedule that the replay rules reject, so every candidate goes through the model's
lenient replay, which repairs it (rule-forced choices, missing draws as 0, surplus steps
dropped) and returns the schedule it actually followed: that schedule is feasible, replays
strictly, and is what the DUT is given. A candidate is kept when the DUT still fails it the same
way (same status). ddmin (Zeller and Hildebrandt, 2002) runs alternately over commands and
steps until neither shrinks; then parameters and draws are simplified where that keeps the
failure.
"""

from __future__ import annotations

import json
import shlex
import time
from dataclasses import dataclass, replace
from pathlib import Path

from qoslab import nvmelite
from qoslab._core import nvmelite as _core
from qoslab.dut.options import MINIMIZED_STATUSES, DiffOptions
from qoslab.dut.results import RunReport, csv_text
from qoslab.dut.runner import BatchRunner, Outcome, SingleRunner, make_task

MAX_PROBES = 3000  # DUT runs per reproducer
MAX_SECONDS = 60.0


@dataclass(frozen=True)
class Case:
    seed_id: str
    commands: tuple[str, ...]  # each command object as JSON text
    header: tuple[tuple[str, str], ...]  # schedule header (key, value), values unescaped
    steps: tuple[str, ...]

    def workload_json(self) -> bytes:
        body = ",\n    ".join(self.commands)
        inner = f"\n    {body}\n  " if self.commands else ""
        return (
            "{\n"
            f'  "seed_id": {json.dumps(self.seed_id, ensure_ascii=False)},\n'
            f'  "commands": [{inner}]\n'
            "}\n"
        ).encode()

    def schedule_text(self) -> str:
        return _core.schedule_compose(dict(self.header), list(self.steps))

    def with_param(self, key: str, value: str) -> Case:
        return replace(self, header=tuple((k, value if k == key else v) for k, v in self.header))

    def param(self, key: str) -> str:
        return dict(self.header)[key]


def parse_schedule(text: str) -> tuple[tuple[tuple[str, str], ...], tuple[str, ...]]:
    header, steps = _core.schedule_split(text)
    return tuple(header.items()), tuple(steps)


class _Prober:
    """Runs candidates on the model (lenient replay) and the DUT, with a cache and a budget."""

    def __init__(self, runner, target: str, workdir: Path):
        self.runner = runner
        self.target = target
        self.workdir = workdir
        self.cache: dict[tuple[bytes, str], tuple[Case, object, Outcome] | None] = {}
        self.probes = 0
        self.deadline = time.monotonic() + MAX_SECONDS

    def exhausted(self) -> bool:
        return self.probes >= MAX_PROBES or time.monotonic() > self.deadline

    def probe(self, case: Case, force: bool = False) -> tuple[Case, object, Outcome] | None:
        """(the case as the model followed it, the model's result, the DUT's outcome) if the
        DUT still fails it the same way; else None."""
        key = (case.workload_json(), case.schedule_text())
        if key in self.cache:
            return self.cache[key]
        if self.exhausted() and not force:
            return None
        self.probes += 1
        found = None
        try:
            w = nvmelite.Workload.from_json(key[0])
            result = nvmelite.replay(w, key[1], False)
        except (nvmelite.ScheduleError, nvmelite.ParamsError, _core.WorkloadError, ValueError):
            result = None
        if result is not None:
            # A new name per candidate: a batch DUT may cache workloads by path (protocol).
            path = self.workdir / f"candidate-{self.probes}.json"
            path.write_bytes(key[0])
            task = make_task(result.run_id, str(path), result)
            outcome = self.runner.run(task, keep_output=True)
            path.unlink()
            if outcome.status == self.target:
                header, steps = parse_schedule(result.schedule)
                found = (replace(case, header=header, steps=steps), result, outcome)
        self.cache[key] = found
        return found

    def check(self, case: Case) -> Case | None:
        found = self.probe(case)
        return found[0] if found else None


def _ddmin(items: tuple[str, ...], test) -> tuple[str, ...]:
    """The 1-minimal sublist of `items` for which `test` holds (ddmin, complements first)."""
    if test(()):
        return ()
    n = 2
    while len(items) >= 2:
        size = -(-len(items) // n)
        chunks = [items[i : i + size] for i in range(0, len(items), size)]
        for i in range(len(chunks)):
            complement = tuple(x for j, c in enumerate(chunks) if j != i for x in c)
            if test(complement):
                items, n = complement, max(n - 1, 2)
                break
        else:
            for chunk in chunks:
                if len(chunks) > 2 and test(chunk):
                    items, n = chunk, 2
                    break
            else:
                if n >= len(items):
                    break
                n = min(2 * n, len(items))
    return items


def minimize_case(case: Case, prober: _Prober) -> Case:
    best = prober.check(case) or case

    def accept(candidate: Case) -> bool:
        nonlocal best
        got = prober.check(candidate)
        if got is not None and _size(got) <= _size(best):
            best = got
            return True
        return False

    for key, simpler in (
        ("fault_mode", "NONE"),
        ("bound_k", "inf"),
        ("submit_window", "inf"),
        ("policy", "FIFO"),
    ):
        if best.param(key) != simpler:
            accept(best.with_param(key, simpler))
    for _ in range(4):
        before = _size(best)
        _ddmin(best.commands, lambda cmds: accept(replace(best, commands=cmds)))
        _ddmin(best.steps, lambda steps: accept(replace(best, steps=steps)))
        if _size(best) == before or prober.exhausted():
            break
    # Draws of 0 read best; try them all at once, then one by one.
    drawn = [i for i, s in enumerate(best.steps) if "draw=" in s and " draw=0 " not in f"{s} "]
    if drawn and not accept(replace(best, steps=tuple(_zero_draw(s) for s in best.steps))):
        for i in drawn:
            steps = list(best.steps)
            if i < len(steps):
                steps[i] = _zero_draw(steps[i])
                accept(replace(best, steps=tuple(steps)))
    return best


def _zero_draw(step: str) -> str:
    return "complete draw=0" if step.startswith("complete draw=") else step


def _size(case: Case) -> tuple[int, int]:
    return (len(case.commands), len(case.steps))


def _safe_name(run_id: str) -> str:
    return "".join("_" if c in "/\\\0" else c for c in run_id) or "_"


def write_reproducers(
    reports: list[RunReport], argv: list[str], opts: DiffOptions, out_tmp: Path, workdir: Path
) -> list[dict]:
    """DIR/minimal/<run_id>/ for the first `opts.minimize` failing runs (report order)."""
    chosen = [r for r in reports if r.outcome.status in MINIMIZED_STATUSES and r.task]
    chosen = chosen[: max(0, opts.minimize)]
    if not chosen:
        return []
    if opts.batch:
        runner = BatchRunner(argv, opts.timeout_s)
    else:
        runner = SingleRunner(argv, opts.timeout_s, workdir)
    made = []
    try:
        for report in chosen:
            made.append(_reproduce(report, runner, opts, out_tmp, workdir))
    finally:
        runner.close()
    return made


def _reproduce(report: RunReport, runner, opts: DiffOptions, out_tmp: Path, workdir: Path):
    task = report.task
    original = json.loads(Path(task.workload_path).read_bytes())
    commands = tuple(json.dumps(c, ensure_ascii=False) for c in original["commands"])
    header, steps = parse_schedule(task.schedule.decode())
    case = Case(original["seed_id"], commands, header, steps)
    prober = _Prober(runner, report.outcome.status, workdir)
    best = minimize_case(case, prober)
    final = prober.probe(best, force=True)  # the run the reproducer shows
    name = _safe_name(report.run_id)
    folder = out_tmp / "minimal" / name
    folder.mkdir(parents=True)
    (folder / "workload.json").write_bytes(best.workload_json())
    (folder / "schedule.sched").write_text(best.schedule_text(), encoding="utf-8")
    rows = []
    if final is not None:
        _, result, outcome = final
        (folder / "expected.log").write_bytes(result.log)
        if outcome.output:
            (folder / "got.log").write_bytes(outcome.output)
        rows = [[result.run_id, d.line, d.expected, d.got] for d in outcome.rows]
        if outcome.status != "diverged":
            rows.insert(0, [result.run_id, "", "", f"[{outcome.status}] {outcome.detail}"])
    (folder / "divergences.csv").write_text(
        csv_text(["run_id", "line", "expected", "got"], rows), encoding="utf-8"
    )
    final_dir = opts.out.resolve() / "minimal" / name
    command = " ".join(
        [
            "qoslab nvmelite diff",
            shlex.quote(str(final_dir / "workload.json")),
            "--schedule",
            shlex.quote(str(final_dir / "schedule.sched")),
            "--dut",
            shlex.quote(opts.dut),
            *(["--dut-batch"] if opts.batch else []),
            "--timeout-s",
            f"{opts.timeout_s:g}",
            "--out",
            shlex.quote(str(final_dir / "rerun")),
        ]
    )
    (folder / "command.txt").write_text(command + "\n", encoding="utf-8")
    return {
        "run_id": report.run_id,
        "status": report.outcome.status,
        "commands": len(best.commands),
        "steps": len(best.steps),
        "probes": prober.probes,
        "still_fails": final is not None,
        "command": command,
    }
