"""A study's output directory appears whole or not at all.

Everything is written into a hidden sibling directory that is renamed to the requested name
only when the command succeeds; an error or Ctrl-C removes it and leaves an earlier result
with the same name untouched.
"""

from __future__ import annotations

import contextlib
import os
import shutil
from collections.abc import Iterator
from pathlib import Path

from qoslab.errors import InputError


@contextlib.contextmanager
def staged(out: Path) -> Iterator[Path]:
    out = Path(os.path.abspath(out))
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
    except OSError as err:
        raise InputError(f"cannot create the output directory: {err.strerror}", path=out) from None
    if out.exists() and not out.is_dir():
        raise InputError("exists and is not a directory", path=out)
    tmp = out.parent / f".{out.name}.partial-{os.getpid()}"
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir()
    try:
        yield tmp
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    old = out.parent / f".{out.name}.old-{os.getpid()}"
    if out.exists():
        out.rename(old)
    tmp.rename(out)
    shutil.rmtree(old, ignore_errors=True)
