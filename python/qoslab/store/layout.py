"""Where things live in a store directory.

    STORE/
      qoslab-store.json                 marks the directory as a store (format and version)
      parts/<study>/<part>/             one directory per committed batch of points:
          points.parquet                  the summary rows of the points that succeeded
          failures.parquet                the points that failed, with their error
          detail-<name>.parquet           a detail table, joined to its point by `key`
          replaces.txt                    (a merged part) the parts it holds, one name a line
      sweeps/<sweep>.yaml               the spec each sweep ran, as its user wrote it
      tmp/                              parts being written (never read; emptied by a sweep)
      readers/<pid>-<id>/<study>/<part>/  a reader's snapshot: hard links to the live parts'
                                        files, removed when it closes (or, after a kill, by
                                        the next reader or sweep)
      lock                              held by the sweep writing the store

A part appears by renaming a complete directory from tmp/ into parts/, so a reader sees all of
a batch or none of it; a part is never modified. Many small parts (a study whose points each
take long runs one point per batch) are merged into one: the merged part lists the parts it
holds in replaces.txt, so from the moment it appears readers ignore them, and they are
removed afterwards (by the next sweep if a kill comes first). A reader links the files of the
parts live when it opens the store into a snapshot of its own (`Snapshot`), so a merge that
removes parts while it reads takes nothing from under it.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import tempfile
import weakref
from pathlib import Path

from qoslab.errors import InputError

MARKER = "qoslab-store.json"
FORMAT = "qoslab-store"
VERSION = 1
POINTS = "points.parquet"
FAILURES = "failures.parquet"
DETAIL_PREFIX = "detail-"
REPLACES = "replaces.txt"
READERS = "readers"


def marker_text() -> str:
    return json.dumps({"format": FORMAT, "version": VERSION}, indent=2) + "\n"


def check_store(path: Path) -> Path:
    """`path` if it is a store this qoslab can read; an InputError otherwise."""
    marker = path / MARKER
    if not path.is_dir():
        raise InputError("no such store (expected a directory made by qoslab sweep)", path=path)
    try:
        info = json.loads(marker.read_text())
    except (OSError, ValueError):
        raise InputError(f"not a qoslab store (no valid {MARKER})", path=path) from None
    if not isinstance(info, dict) or info.get("format") != FORMAT:
        raise InputError(f"not a qoslab store ({MARKER} has another format)", path=path)
    if info.get("version") != VERSION:
        raise InputError(
            f"store format version {info.get('version')}; this qoslab reads version {VERSION}",
            path=path,
        )
    return path


def study_dirs(path: Path) -> list[Path]:
    parts = path / "parts"
    return sorted(p for p in parts.iterdir() if p.is_dir()) if parts.is_dir() else []


def replaced_by(part: Path) -> list[str]:
    try:
        return (part / REPLACES).read_text().split()
    except FileNotFoundError:
        return []


def live_parts(study_dir: Path) -> list[Path]:
    """The parts of a study that count: all but those a merged part replaces."""
    parts = sorted(p for p in study_dir.iterdir() if p.is_dir()) if study_dir.is_dir() else []
    replaced = {name for p in parts for name in replaced_by(p)}
    return [p for p in parts if p.name not in replaced]


def files(parts: list[Path], name: str) -> list[Path]:
    return [p / name for p in parts if (p / name).is_file()]


def detail_names(parts: list[Path]) -> list[str]:
    names = set()
    for part in parts:
        for f in part.glob(f"{DETAIL_PREFIX}*.parquet"):
            names.add(f.name[len(DETAIL_PREFIX) : -len(".parquet")])
    return sorted(names)


def _remove(snapshot: Path, readers: Path) -> None:
    """Removes a snapshot, and readers/ with it when no other reader has one (so a store read
    and left looks as it did)."""
    shutil.rmtree(snapshot, ignore_errors=True)
    with contextlib.suppress(OSError):
        readers.rmdir()


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's process
        return True
    return True


def reap_snapshots(store: Path) -> None:
    """Removes the snapshots of readers that are gone (killed before they closed)."""
    readers = store / READERS
    if not readers.is_dir():
        return
    for d in readers.iterdir():
        pid = d.name.split("-", 1)[0]
        if pid.isdigit() and not _alive(int(pid)):
            _remove(d, readers)


class Snapshot:
    """The live parts of a store as they were when it was opened, for as long as the reader
    needs them: each live part's files hard-linked under `readers/<pid>-<id>/`, so a merge
    that removes parts meanwhile (its rows are in the merged part) leaves this reader's files
    in place. A part removed while the links are being made (a merge finished in between)
    makes it start again, and the merged part is live then.

    A store this process cannot write to (read-only media, another user's) is read in place,
    without a snapshot: there is no sweep merging it either, unless it is another user's.
    """

    ATTEMPTS = 20

    def __init__(self, store: Path):
        self.dir: Path | None = None
        self.parts: dict[str, list[Path]] = {}
        self._readers = store / READERS
        reap_snapshots(store)
        for _ in range(self.ATTEMPTS):
            try:
                self._readers.mkdir(exist_ok=True)
                self.dir = Path(tempfile.mkdtemp(prefix=f"{os.getpid()}-", dir=self._readers))
            except FileNotFoundError:  # another reader removed readers/ in between
                continue
            except OSError:  # a store this process cannot write to
                self._in_place(store)
                return
            self._cleanup = weakref.finalize(self, _remove, self.dir, self._readers)
            try:
                self.parts = self._link(store, self.dir)
                return
            except FileNotFoundError:  # a merge removed a part meanwhile
                self.close()
            except OSError:  # no hard links here (another user's files, the file system)
                self.close()
                self._in_place(store)
                return
        raise InputError(
            f"the store changed under every one of {self.ATTEMPTS} attempts to read it; try again",
            path=store,
        )

    def _in_place(self, store: Path) -> None:
        self.parts = {d.name: live_parts(d) for d in study_dirs(store)}

    @staticmethod
    def _link(store: Path, into: Path) -> dict[str, list[Path]]:
        parts: dict[str, list[Path]] = {}
        for study_dir in study_dirs(store):
            mine = parts.setdefault(study_dir.name, [])
            for part in live_parts(study_dir):
                copy = into / study_dir.name / part.name
                copy.mkdir(parents=True)
                # listdir (unlike glob) fails on a part that is gone.
                for name in sorted(os.listdir(part)):
                    if name.endswith(".parquet"):
                        os.link(part / name, copy / name)
                mine.append(copy)
        return parts

    def close(self) -> None:
        if self.dir is not None:
            self._cleanup()
            self.dir = None
