"""One progress display for the lab's long work (filling files, fio runs), on stderr."""

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
    return Progress(
        TextColumn("[bold]{task.description}"),
        BarColumn(),
        TaskProgressColumn(),
        TimeElapsedColumn(),
        TextColumn("remaining"),
        TimeRemainingColumn(),
        console=Console(stderr=True),
        disable=quiet,
        transient=False,
    )
