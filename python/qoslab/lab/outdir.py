"""A study's output directory appears whole or not at all.

Everything is written into a hidden sibling directory that is renamed to the requested name
only when the command succeeds; an error or Ctrl-C removes it and leaves an earlier result
with the same name untouched. An existing directory is replaced only if it is empty or an
earlier qoslab lab output (it has the `meta.json` and `report.html` qoslab writes): `--out ~`
must never delete a home directory.
"""

from __future__ import annotations

import contextlib
import os
import shutil
from collections.abc import Iterator
from pathlib import Path

from qoslab.errors import InputError

_OUR_FILES = ("meta.json", "report.html")


def _replaceable(out: Path) -> bool:
    entries = {p.name for p in out.iterdir()}
    return not entries or all(name in entries for name in _OUR_FILES)


@contextlib.contextmanager
def staged(out: Path) -> Iterator[Path]:
    out = Path(os.path.abspath(out))
    if out.exists() and not out.is_dir():
        raise InputError("exists and is not a directory", path=out)
    if out.is_dir() and not _replaceable(out):
        raise InputError(
            "exists and is not an earlier qoslab lab output; choose another --out", path=out
        )
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
    except OSError as err:
        raise InputError(f"cannot create the output directory: {err.strerror}", path=out) from None
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
