"""Appending to a store: one sweep at a time, one whole batch at a time (from any thread).

A batch's tables are written into a fresh directory under tmp/, flushed to disk, and renamed
into parts/<study>/ in one step: `kill -9` (or a power cut) at any moment leaves every batch
either stored whole or absent, never a half row. A point is run only if its key is in no
stored part, and only the sweep holding the store's lock writes, so no point is stored twice.
"""

from __future__ import annotations

import fcntl
import hashlib
import os
import shutil
import tempfile
import threading
from pathlib import Path

import numpy as np

from qoslab.errors import InputError
from qoslab.outputs import DIR_MODE, FILE_MODE, write_file
from qoslab.store import layout

PARQUET_COMPRESSION = "zstd"
# Parts of fewer rows are small; once a study has this many small parts they are merged into
# one (a store of one part per point would make every query open thousands of files).
SMALL_PART_ROWS = 10_000
MERGE_AT_SMALL_PARTS = 64


def _fsync(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _digest_of(strings) -> str:
    """SHA-256 (hex) of a pyarrow string array's values, end to end."""
    offsets = np.frombuffer(strings.buffers()[1], dtype=np.int32)
    start, end = offsets[strings.offset], offsets[strings.offset + len(strings)]
    return hashlib.sha256(memoryview(strings.buffers()[2])[start:end]).hexdigest()


def _remove_replaced(study_dir: Path) -> None:
    """Removes the parts merged parts replace, a part only after those it replaces itself
    (removing it first would bring them back to life)."""
    while True:
        parts = {p.name: p for p in study_dir.iterdir() if p.is_dir()}
        replaced = {name for p in parts.values() for name in layout.replaced_by(p)}
        removable = [
            parts[n]
            for n in sorted(replaced & parts.keys())
            if not set(layout.replaced_by(parts[n])) & parts.keys()
        ]
        if not removable:
            return
        for p in removable:
            shutil.rmtree(p)
        _fsync(study_dir)


class StoreWriter:
    """Holds the store's lock from construction to `close()`."""

    def __init__(self, path: str | Path):
        self.path = Path(os.path.abspath(path))
        self._naming = threading.Lock()
        # The lock first, then the marker: of two sweeps creating one new store, the second
        # finds the lock held (not a directory without its marker yet).
        self._open_dir()
        self._lock = open(self.path / "lock", "a")  # noqa: SIM115 (held until close)
        try:
            fcntl.flock(self._lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            self._lock.close()
            raise InputError("in use by another sweep (its lock is held)", path=self.path) from None
        try:
            self._create_or_check()
        except BaseException:
            self._lock.close()
            raise
        # Parts a killed sweep left half-written: never renamed, so never seen; removed here,
        # with parts a merge replaced that a kill kept from being removed.
        tmp = self.path / "tmp"
        shutil.rmtree(tmp, ignore_errors=True)
        tmp.mkdir(mode=DIR_MODE)
        for study_dir in layout.study_dirs(self.path):
            _remove_replaced(study_dir)

    def _open_dir(self) -> None:
        """Makes the store's directory if there is none; refuses a file, or a directory that
        is neither empty nor a store (nor one being made: its lock is there), before putting
        a lock file into it."""
        p = self.path
        if p.exists() and not p.is_dir():
            raise InputError("--store: exists and is not a directory", path=p)
        try:
            p.mkdir(parents=True, exist_ok=True, mode=DIR_MODE)
        except OSError as err:
            raise InputError(f"--store: cannot create the store: {err.strerror}", path=p) from None
        names = {q.name for q in p.iterdir()}
        if names and not names & {layout.MARKER, "lock"}:
            layout.check_store(p)

    def _create_or_check(self) -> None:
        """Under the lock: checks the store, or makes one in a directory that has nothing but
        what a killed creation left (its lock, parts/, sweeps/)."""
        p = self.path
        if (p / layout.MARKER).exists() or {q.name for q in p.iterdir()} - {
            "lock",
            "parts",
            "sweeps",
        }:
            layout.check_store(p)
            return
        try:
            for sub in ("parts", "sweeps"):
                (p / sub).mkdir(exist_ok=True, mode=DIR_MODE)
        except OSError as err:
            raise InputError(f"--store: cannot create the store: {err.strerror}", path=p) from None
        write_file(p / layout.MARKER, layout.marker_text())

    def close(self) -> None:
        shutil.rmtree(self.path / "tmp", ignore_errors=True)
        self._lock.close()

    def __enter__(self) -> StoreWriter:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    # -- reading what is there ---------------------------------------------------------------

    def pending(self, table: str, keys) -> np.ndarray:
        """Indices (ascending) of `keys` that no stored part of `table` holds as a point."""
        import duckdb
        import pyarrow as pa

        n = len(keys)
        files = layout.files(layout.live_parts(self.path / "parts" / table), layout.POINTS)
        if not files:
            return np.arange(n, dtype=np.int64)
        cand = pa.table({"i": pa.array(np.arange(n, dtype=np.int64)), "key": keys})
        con = duckdb.connect()
        try:
            con.register("cand", cand)
            stored = [str(f) for f in files]
            return con.execute(
                "SELECT i FROM cand ANTI JOIN read_parquet(?, union_by_name=true) s "
                "USING (key) ORDER BY i",
                [stored],
            ).fetchnumpy()["i"]
        finally:
            con.close()

    # -- writing ---------------------------------------------------------------------------------

    def record_sweep(self, name: str, spec_text: str) -> None:
        safe = "".join(c if c.isalnum() or c in "-_." else "_" for c in name)
        write_file(self.path / "sweeps" / f"{safe}.yaml", spec_text)

    def commit(
        self, table: str, keys, tables: dict[str, object], unique_columns: set[str] = frozenset()
    ) -> Path:
        """Stores one batch: `tables` maps a file name (points.parquet, failures.parquet,
        detail-NAME.parquet) to a pyarrow Table; `keys` (a pyarrow string array) are the
        batch's points. Columns in `unique_columns` (every value different) are written
        without a dictionary or statistics, which would cost time and save nothing. Returns
        the part's directory once it is in place."""
        import pyarrow.parquet as pq

        # Named by its points, so the same batch gets the same name however it was computed.
        name = _digest_of(keys)[:16]
        staging = Path(tempfile.mkdtemp(prefix="part-", dir=self.path / "tmp"))
        staging.chmod(DIR_MODE)
        for file_name, t in tables.items():
            target = staging / file_name
            coded = [c for c in t.column_names if c not in unique_columns]
            pq.write_table(
                t,
                target,
                compression=PARQUET_COMPRESSION,
                use_dictionary=coded,
                write_statistics=coded,
            )
            target.chmod(FILE_MODE)
            _fsync(target)
        _fsync(staging)
        parent = self.path / "parts" / table
        with self._naming:
            parent.mkdir(exist_ok=True, mode=DIR_MODE)
        # The same points are stored again only after all of them failed: the new part takes
        # the next free name (the store's lock keeps other sweeps away, this one's threads
        # take turns).
        with self._naming:
            final, attempt = parent / name, 1
            while final.exists():
                attempt += 1
                final = parent / f"{name}-{attempt}"
            staging.rename(final)
        _fsync(parent)
        return final

    def merge_small_parts(self, table: str) -> Path | None:
        """Merges the study's small parts into one when there are many; returns the new part.

        The merged part is written beside the others and renamed in like any part; its
        replaces.txt makes readers ignore the parts it holds from that moment, and they are
        removed after. Rows are in key order, so the merge of the same parts is the same file.
        """
        import duckdb
        import pyarrow.parquet as pq

        study_dir = self.path / "parts" / table
        small = [
            p
            for p in layout.live_parts(study_dir)
            if sum(pq.ParquetFile(f).metadata.num_rows for f in p.glob("*.parquet"))
            < SMALL_PART_ROWS
        ]
        if len(small) < MERGE_AT_SMALL_PARTS:
            return None
        staging = Path(tempfile.mkdtemp(prefix="merge-", dir=self.path / "tmp"))
        staging.chmod(DIR_MODE)
        names = sorted({f.name for p in small for f in p.glob("*.parquet")})
        con = duckdb.connect()
        try:
            con.execute("SET threads = 1")  # one writer, rows in key order: the same bytes
            for name in names:
                sources = ", ".join(
                    "'" + str(f).replace("'", "''") + "'" for f in layout.files(small, name)
                )
                target = str(staging / name).replace("'", "''")
                con.execute(
                    f"COPY (SELECT * FROM read_parquet([{sources}], union_by_name=true) "
                    f"ORDER BY ALL) TO '{target}' (FORMAT parquet, COMPRESSION zstd)"
                )
        finally:
            con.close()
        (staging / layout.REPLACES).write_text("".join(f"{p.name}\n" for p in small))
        for f in staging.iterdir():
            f.chmod(FILE_MODE)
            _fsync(f)
        _fsync(staging)
        name = "merged-" + hashlib.sha256("".join(p.name for p in small).encode()).hexdigest()[:16]
        with self._naming:
            final = study_dir / name
            staging.rename(final)
        _fsync(study_dir)
        _remove_replaced(study_dir)
        return final
