"""The one progress display of every command that can run for more than a couple of seconds.

A rich bar on stderr: what is being done, the bar, how much of it (`12/48` runs, or a percentage
of bytes or seconds), the time so far and an estimate of the time left. It is drawn on a
terminal only: under `--quiet`, or when stderr is a file or a pipe (a log of the run), nothing
is drawn, so a log holds only the command's own messages. Stdout stays free for what the
command prints (a report's path, a summary line).

    with progress_bar(quiet) as bar:
        runs = Count(bar, "sched study", total=len(points))
        for p in points:
            ...
            runs.advance()

Tasks that measure rather than count (bytes written, seconds of fio) are plain rich tasks:
`bar.add_task("writing f", total=nbytes)` and `bar.update(task, completed=n)`.
"""

from __future__ import annotations

from rich.console import Console
from rich.progress import (
    BarColumn,
    Progress,
    ProgressColumn,
    Task,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)
from rich.text import Text


class _Amount(ProgressColumn):
    """`done/total` for a task that counts (runs, points), a percentage for one that measures."""

    def render(self, task: Task) -> Text:
        if task.fields.get("count"):
            total = "?" if task.total is None else f"{task.total:.0f}"
            return Text(f"{task.completed:.0f}/{total}", style="progress.download")
        if task.total is None:
            return Text("")
        return Text(f"{task.percentage:>3.0f}%", style="progress.percentage")


def progress_bar(quiet: bool = False, console: Console | None = None) -> Progress:
    """The bar, to use as a context manager; drawn only on a terminal and not under `quiet`."""
    console = console or Console(stderr=True)
    return Progress(
        TextColumn("[bold]{task.description}"),
        BarColumn(),
        _Amount(),
        TimeElapsedColumn(),
        TextColumn("ETA"),
        TimeRemainingColumn(),
        console=console,
        disable=quiet or not console.is_terminal,
    )


class Count:
    """A task of `bar` that counts things done (runs, points), from any thread (rich's
    `Progress.update` takes its own lock)."""

    def __init__(self, bar: Progress, description: str, total: int | None = None):
        self.bar = bar
        self.task = bar.add_task(description, total=total, count=True)

    def __call__(self, done: int, total: int | None = None, description: str | None = None):
        """`done` of `total` so far (the total can change: resumed or skipped work)."""
        self.bar.update(self.task, completed=done, total=total, description=description)

    def advance(self, n: int = 1, description: str | None = None) -> None:
        self.bar.update(self.task, advance=n, description=description)
