"""The results store of sweeps: Parquet files in one directory, queried with DuckDB.

    import qoslab.store
    with qoslab.store.open("out/store") as store:
        df = store.query("SELECT policy, avg(p95_latency_step) FROM nvmelite_run GROUP BY 1")
        con = store.con  # the DuckDB connection, for anything else

Views (`points` and `failures` always, the others once the store holds such rows):
    points                every study's summary rows (columns of all studies, by name)
    failures              points that failed and have not succeeded since, with `error`
    <study>               one study's rows, e.g. `nvmelite_run`, `sim`
    <study>__<detail>     a study's detail table, e.g. `sim__fio_json`; `key` joins it

A store is read as it was when it was opened (`layout.Snapshot`): a sweep merging parts
meanwhile changes nothing for the reader. The directory layout is in `qoslab.store.layout`;
appending is `qoslab.store.writer`.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from qoslab.store import layout

# The columns of every failure row (docs/sweep.md, "Columns of every row").
FAILURE_COLUMNS = (
    ("key", "VARCHAR"),
    ("sweep", "VARCHAR"),
    ("study", "VARCHAR"),
    ("seed", "UBIGINT"),
    ("params", "VARCHAR"),
    ("error", "VARCHAR"),
    ("qoslab_version", "VARCHAR"),
    ("qoslab_commit", "VARCHAR"),
)
# The columns every point has (a failure's, but its error).
POINT_COLUMNS = tuple(c for c in FAILURE_COLUMNS if c[0] != "error")


def _empty(columns) -> str:
    """A query of no rows with `columns` (name, type)."""
    return "SELECT " + ", ".join(f"NULL::{t} AS {c}" for c, t in columns) + " WHERE false"


def _quote(path: Path | str) -> str:
    return "'" + str(path).replace("'", "''") + "'"


def _scan(files: list[Path]) -> str:
    # The parts' files by name (not a glob): a reader sees the parts that were live when it
    # opened the store, merged ones excluded.
    return f"read_parquet([{', '.join(_quote(f) for f in files)}], union_by_name=true)"


def _ident(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


class Store:
    """A read-only view of a store: a DuckDB connection with the store's views."""

    def __init__(self, path: str | Path):
        import duckdb

        self.path = layout.check_store(Path(path).resolve())
        self.snapshot = layout.Snapshot(self.path)
        self.con = duckdb.connect()
        self.studies: list[str] = []
        self.details: dict[str, list[str]] = {}
        self._create_views()

    def _create_views(self) -> None:
        points, failures = [], []
        for table, parts in self.snapshot.parts.items():
            mine = layout.files(parts, layout.POINTS)
            failed = layout.files(parts, layout.FAILURES)
            if not (mine or failed):
                continue
            self.studies.append(table)
            if mine:
                self._view(table, mine)
                points += mine
            failures += failed
            self.details[table] = layout.detail_names(parts)
            for detail in self.details[table]:
                name = f"{layout.DETAIL_PREFIX}{detail}.parquet"
                self._view(f"{table}__{detail}", layout.files(parts, name))
        if points:
            self._view("points", points)
        else:
            # Nothing stored yet, or failures alone: the view is there, empty.
            self.con.execute(f"CREATE VIEW points AS {_empty(POINT_COLUMNS)}")
        if failures:
            succeeded = "SELECT key FROM points"
            # A point fails again on each rerun until it succeeds: one row per point, the
            # error of any attempt (a deterministic failure repeats itself).
            self.con.execute(
                f"CREATE VIEW failures AS SELECT DISTINCT ON (key) * FROM {_scan(failures)} "
                f"WHERE key NOT IN ({succeeded}) ORDER BY key, error"
            )
        else:
            # No failure yet: the view is there, empty, with the columns every row has.
            self.con.execute(f"CREATE VIEW failures AS {_empty(FAILURE_COLUMNS)}")

    def _view(self, name: str, files: list[Path]) -> None:
        self.con.execute(f"CREATE VIEW {_ident(name)} AS SELECT * FROM {_scan(files)}")

    def views(self) -> list[str]:
        rows = self.con.execute(
            "SELECT view_name FROM duckdb_views() WHERE NOT internal ORDER BY view_name"
        ).fetchall()
        return [r[0] for r in rows]

    def query(self, sql: str, params: Any = None) -> Any:
        """The result of `sql` as a pandas DataFrame."""
        return self.con.execute(sql, params).df()

    def df(self, view: str) -> Any:
        """A whole view as a DataFrame, rows in key order."""
        order = " ORDER BY key" if view in self.views() and self._has_key(view) else ""
        return self.query(f"SELECT * FROM {_ident(view)}{order}")

    def _has_key(self, view: str) -> bool:
        cols = self.con.execute(f"DESCRIBE {_ident(view)}").fetchall()
        return any(c[0] == "key" for c in cols)

    def close(self) -> None:
        self.con.close()
        self.snapshot.close()

    def __enter__(self) -> Store:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def open(path: str | Path) -> Store:
    """Opens the store at `path` for queries; an InputError if it is not a store."""
    return Store(path)


__all__ = ["Store", "open"]
