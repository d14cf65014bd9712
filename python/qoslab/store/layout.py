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
      lock                              held by the sweep writing the store

A part appears by renaming a complete directory from tmp/ into parts/, so a reader sees all of
a batch or none of it; a part is never modified. Many small parts (a study whose points each
take long runs one point per batch) are merged into one: the merged part lists the parts it
holds in replaces.txt, so from the moment it appears readers ignore them, and they are
removed afterwards (by the next sweep if a kill comes first).
"""

from __future__ import annotations

import json
from pathlib import Path

from qoslab.errors import InputError

MARKER = "qoslab-store.json"
FORMAT = "qoslab-store"
VERSION = 1
POINTS = "points.parquet"
FAILURES = "failures.parquet"
DETAIL_PREFIX = "detail-"
REPLACES = "replaces.txt"


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
