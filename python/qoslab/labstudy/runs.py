"""A lab command's fio runs through the sweep engine: each run a point of the `lab run` adapter
(`qoslab.sweep.studies.lab`), its files written into the command's output.

The store keeps every run's files as they are measured, so a study killed midway (Ctrl-C,
`kill -9`, a lost machine) and started again with the same options on the same target measures
only the runs it lacks. It is `<out>.store` unless `--store` names one; the default one goes once
the output is written (a measurement is not a computation: the next study measures again).
`on_target` is the frame both lab commands run in (the target, the bar, the staged output).
"""

from __future__ import annotations

import contextlib
import json
import shutil
import sys
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from qoslab.fio import FioOutput, read_fio_json
from qoslab.lab.outdir import staged
from qoslab.lab.registry import Registry
from qoslab.lab.runner import find_fio, fio_version
from qoslab.lab.target import prepare_target, release_target
from qoslab.progress import progress_bar
from qoslab.sweep.planned import default_store, provenance, run_planned
from qoslab.sweep.spec import planned_spec
from qoslab.sweep.studies.lab import COMMAND, InCommand, target_params


@contextlib.contextmanager
def on_target(
    target_arg: str,
    size: int,
    out: Path,
    quiet: bool,
    destructive_ok: str | None,
    precondition: bool,
    *,
    block: bool = False,
    keep: bool = False,
) -> Iterator[tuple[Any, Path, Any]]:
    """The frame of a lab command: fio found before anything is created or written, the bar,
    the partial output folder (`staged`: it becomes `out` only once complete) and the target
    prepared (`prepare_target`; `block`: it must be a block device), released at the end (a
    scratch file made here is removed unless `keep`). Yields the bar, the folder and the
    target."""
    find_fio()
    registry = Registry()
    with progress_bar(quiet) as progress, staged(out) as tmp:
        target = prepare_target(
            target_arg,
            size,
            registry=registry,
            destructive_ok=destructive_ok,
            precondition=precondition,
            require_block=block,
            progress=progress,
        )
        try:
            yield progress, tmp, target
        finally:
            release_target(target, registry, keep)


@dataclass(frozen=True)
class FioRun:
    """One run to make: its name (its files' names), the job file, its expected seconds and
    the I/O scheduler to select first (None: the queue's as it is)."""

    run_id: str
    job_file: str
    expected_s: float
    scheduler: str | None = None


@dataclass
class LabRuns:
    """The fio runs of one command on one prepared target, into the output folder `out_dir`,
    advancing the command's bar by fio's seconds (`total_s` in all)."""

    out_dir: Path
    target: Any  # qoslab.lab.target.Target
    out: Path  # the command's --out (the default store sits beside it)
    store: Path | None  # --store, or None for the default
    progress: Any
    total_s: float
    quiet: bool = False
    fio_version: str = ""
    points: dict[str, int] = field(default_factory=lambda: {"run": 0, "already_stored": 0})

    def __post_init__(self) -> None:
        self.fio_version = fio_version(find_fio())
        self.task = self.progress.add_task("fio", total=max(self.total_s, 1e-9))
        self.done_s = 0.0
        self.kept = self.store is not None
        self.store = self.store if self.store is not None else default_store(self.out)

    def run(self, name: str, runs: list[FioRun]) -> list[tuple[FioOutput, dict]]:
        """Makes `runs` (those the store lacks), writes their files into the output and
        returns each run's fio output and metadata, in order."""
        base = target_params(self.target.describe())
        configs = [
            {
                "run": r.run_id,
                "job_file": r.job_file,
                "expected_s": r.expected_s,
                **base,
                "scheduler": r.scheduler,
            }
            for r in runs
        ]
        spec = planned_spec("lab run", name, configs, None, ["files"])
        lent = COMMAND.set(InCommand(self.progress, self.task, self.out_dir))
        try:
            rows = run_planned(spec, self.store, jobs=1, quiet=True)
        finally:
            COMMAND.reset(lent)
        # Runs taken from the store moved no bar: the bar catches up with them.
        self.done_s += sum(r.expected_s for r in runs)
        self.progress.update(self.task, completed=self.done_s)
        stored = provenance(spec, self.store, rows)["points"]
        self.points["run"] += stored["run"]
        self.points["already_stored"] += stored["already_stored"]
        if stored["already_stored"] and not self.quiet:
            print(
                f"qoslab: note: {stored['already_stored']} of {len(runs)} runs taken from "
                f"{self.store}, as an earlier command measured them on this target",
                file=sys.stderr,
            )
        for f in rows.details["files"].itertuples():
            path = self.out_dir / f.file
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(f.data)
        raw = self.out_dir / "raw"
        return [
            (
                read_fio_json(raw / f"{r.run_id}.json"),
                json.loads((raw / f"{r.run_id}.meta.json").read_text()),
            )
            for r in runs
        ]

    def provenance(self) -> dict[str, Any]:
        """What meta.json says of the runs: the store that keeps them (None: the default store,
        removed by `finish`), how many were measured now and how many taken from it."""
        return {"store": str(self.store) if self.kept else None, "points": dict(self.points)}

    def finish(self) -> None:
        """After the output is written: the default store goes."""
        if not self.kept:
            shutil.rmtree(self.store, ignore_errors=True)
