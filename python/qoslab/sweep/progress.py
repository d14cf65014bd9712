"""The sweep's progress bar (on a terminal) and its closing line (always), on stderr."""

from __future__ import annotations

import sys

from qoslab.sweep.runner import Outcome


class SweepProgress:
    """Called with the sweep's `Outcome` after each stored batch."""

    def __init__(self, name: str, enabled: bool | None = None):
        self.bar = None
        if enabled if enabled is not None else sys.stderr.isatty():
            from rich.console import Console
            from rich.progress import (
                BarColumn,
                MofNCompleteColumn,
                Progress,
                TextColumn,
                TimeElapsedColumn,
                TimeRemainingColumn,
            )

            self.bar = Progress(
                TextColumn(f"[bold]sweep {name}"),
                BarColumn(),
                MofNCompleteColumn(),
                TextColumn("failed {task.fields[failed]:,}  skipped {task.fields[skipped]:,}"),
                TimeElapsedColumn(),
                TextColumn("ETA"),
                TimeRemainingColumn(),
                console=Console(stderr=True),  # stdout stays free for the summary's path
            )
            self.task = self.bar.add_task("points", total=None, failed=0, skipped=0)

    def __enter__(self) -> SweepProgress:
        if self.bar:
            self.bar.__enter__()
        return self

    def __exit__(self, *exc: object) -> None:
        if self.bar:
            self.bar.__exit__(*exc)

    def __call__(self, o: Outcome) -> None:
        # The bar counts the points this sweep runs; those already stored are "skipped".
        if self.bar:
            self.bar.update(
                self.task,
                total=o.pending,
                completed=o.done + o.failed,
                failed=o.failed,
                skipped=o.stored,
            )


def summary_line(name: str, o: Outcome, store: object) -> str:
    ran = o.done + o.failed
    rate = f", {ran / o.seconds:,.0f} points/s" if ran and o.seconds > 0 else ""
    return (
        f"sweep {name}: {o.total:,} points: {o.done:,} run, {o.failed:,} failed, "
        f"{o.stored:,} already stored; {o.seconds:.1f} s{rate}; store {store}"
    )
