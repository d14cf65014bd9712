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
`bar.add_task("writing f", total=nbytes)` and `bar.update(task, completed=n)`. Work that holds
the main thread (the simulator's runs, in Rust) is shown by a function `polled` calls from a
thread meanwhile.

fio's own rules are there for the commands that take fio's options (`qoslab sim`): `eta`
(`--eta`: auto, always, never), `refresh_s` (`--eta-interval`) and `lines_every`
(`--eta-newline`).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager

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


# fio's --eta values: when the bar is drawn.
ETA = ("always", "never", "auto")


def progress_bar(
    quiet: bool = False,
    console: Console | None = None,
    *,
    eta: str = "auto",
    refresh_s: float | None = None,
) -> Progress:
    """The bar, to use as a context manager; drawn only on a terminal and not under `quiet`.

    `eta` is fio's `--eta`: `auto` is the rule above, `never` never draws, and `always` draws
    into a file or a pipe too (its redrawn lines, terminal codes included, as fio's ETA line
    with its carriage returns). `refresh_s` is how often the bar is redrawn (fio's
    `--eta-interval`; rich's default is 10 times a second)."""
    if eta not in ETA:
        raise ValueError(f"eta: expected one of {ETA}, got {eta!r}")
    if console is None:
        console = Console(stderr=True, force_terminal=True if eta == "always" else None)
    drawn = not quiet and eta != "never" and console.is_terminal
    return Progress(
        TextColumn("[bold]{task.description}"),
        BarColumn(),
        _Amount(),
        TimeElapsedColumn(),
        TextColumn("ETA"),
        TimeRemainingColumn(),
        console=console,
        disable=not drawn,
        refresh_per_second=10 if refresh_s is None else 1 / refresh_s,
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


@contextmanager
def polled(update: Callable[[], None], every_s: float = 0.1, at_end: bool = True) -> Iterator[None]:
    """Calls `update` every `every_s` seconds from a thread while the block runs, and once
    more when it ends (unless not `at_end`): for work that holds the main thread (the
    simulator's runs, in Rust, with Python's lock released), whose state `update` reads into
    the bar."""
    stop = threading.Event()

    def keep() -> None:
        while not stop.wait(every_s):
            update()

    thread = threading.Thread(target=keep, name="qoslab-progress", daemon=True)
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join()
        if at_end:
            update()


@contextmanager
def lines_every(bar: Progress, seconds: float | None) -> Iterator[None]:
    """fio's `--eta-newline`: every `seconds` the bar as it stands is also printed as a line
    of its own that stays, above the bar (a record of the pace); nothing when the bar is not
    drawn or `seconds` is None."""
    if seconds is None or bar.disable:
        yield
        return
    with polled(lambda: bar.console.print(bar.make_tasks_table(bar.tasks)), seconds, False):
        yield
