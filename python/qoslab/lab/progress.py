"""One progress display for the lab's long work (filling files, fio runs), on stderr.

Shown on a terminal only: a stderr redirected to a file or a pipe gets no bars, so that a log
of the run holds only its messages.
"""

from __future__ import annotations

from rich.console import Console
from rich.progress import (
    BarColumn,
    Progress,
    TaskProgressColumn,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)


def lab_progress(quiet: bool = False) -> Progress:
    console = Console(stderr=True)
    return Progress(
        TextColumn("[bold]{task.description}"),
        BarColumn(),
        TaskProgressColumn(),
        TimeElapsedColumn(),
        TextColumn("remaining"),
        TimeRemainingColumn(),
        console=console,
        disable=quiet or not console.is_terminal,
        transient=False,
    )
