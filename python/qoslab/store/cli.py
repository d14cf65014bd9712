"""`qoslab store query STORE "SQL"`: ad-hoc questions to a results store."""

from __future__ import annotations

import sys
from pathlib import Path

import typer

from qoslab.errors import InputError

FORMATS = ("text", "csv", "json")

app = typer.Typer(name="store", help="Query a sweep's results store.", no_args_is_help=True)


@app.command()
def query(
    store: Path = typer.Argument(..., help="Results store directory."),
    sql: str = typer.Argument(..., help="DuckDB SQL over the store's views (points, ...)."),
    output_format: str = typer.Option("text", "--format", help="text, csv or json."),
) -> None:
    """Run SQL on the store (views: points, failures, one per study, e.g. nvmelite_run)."""
    import duckdb

    from qoslab.store import open as open_store

    if output_format not in FORMATS:
        raise InputError(f"--format: expected text, csv or json, got '{output_format}'")
    with open_store(store) as s:
        try:
            frame = s.query(sql)
        except duckdb.Error as err:
            views = ", ".join(s.views()) or "none yet"
            raise InputError(f"SQL: {' '.join(str(err).split())} (views: {views})") from None
    if output_format == "csv":
        frame.to_csv(sys.stdout, index=False)
    elif output_format == "json":
        sys.stdout.write(frame.to_json(orient="records", lines=True))
    else:
        import pandas as pd

        with pd.option_context(
            "display.max_rows", None, "display.max_columns", None, "display.width", 200
        ):
            sys.stdout.write(frame.to_string(index=False) + "\n")
