"""`qoslab report STORE --out DIR`: the HTML report of a results store."""

from __future__ import annotations

from pathlib import Path

import typer


def report(
    store: Path = typer.Argument(..., help="Results store directory (qoslab sweep --store)."),
    out: Path = typer.Option(..., "--out", help="Output directory (replaced atomically)."),
) -> None:
    """One self-contained HTML report of everything the store holds; prints its path."""
    from qoslab.sweep.report import build_report

    print(build_report(store, out))


def register(app: typer.Typer) -> None:
    app.command("report")(report)
