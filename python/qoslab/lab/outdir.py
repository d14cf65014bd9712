"""A lab study's output directory appears whole or not at all (`qoslab.outputs.staged_dir`).

An existing directory is replaced only if it is empty or an earlier qoslab lab output (it has
the `meta.json`, `summary.json` and `results.parquet` every study writes, with or without its
report).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path

from qoslab.outputs import earlier_output, staged_dir


@contextlib.contextmanager
def staged(out: Path) -> Iterator[Path]:
    """The partial folder is in the lab's journal while it exists: `qoslab lab restore`
    removes it after a `kill -9` (as does the next run into the same folder)."""
    from qoslab.lab.journal import Journal

    with (
        staged_dir(
            out,
            is_earlier_output=earlier_output("meta.json", "summary.json", "results.parquet"),
            refusal="exists and is not an earlier qoslab lab output; choose another --out",
        ) as tmp,
        Journal().change("partial", path=str(tmp)),
    ):
        yield tmp
