"""`qoslab sweep SPEC.yaml`: run every point of a spec that the store lacks."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import typer

from qoslab.errors import InputError

DEFAULT_STORE = Path("out/store")


def sweep(
    spec: Path | None = typer.Argument(None, help="Sweep spec (YAML).", show_default=False),
    store: Path = typer.Option(DEFAULT_STORE, "--store", help="Results store directory."),
    jobs: int | None = typer.Option(
        None, "--jobs", min=1, help="Local worker processes.", show_default="all cores"
    ),
    scheduler: str | None = typer.Option(
        None,
        "--scheduler",
        help="Run on a Dask cluster instead: its address, tcp://HOST:8786.",
        show_default="local processes",
    ),
    batch: int | None = typer.Option(
        None, "--batch", min=1, help="Points per task.", show_default="the study's own"
    ),
    dry_run: bool = typer.Option(
        False, "--dry-run", help="Check the spec and count its points; run nothing."
    ),
    list_studies: bool = typer.Option(
        False, "--list-studies", help="List the studies and their parameters and metrics."
    ),
    quiet: bool = typer.Option(False, "--quiet", help="No progress bar."),
) -> None:
    """Run a sweep: every point of SPEC the store lacks; a rerun resumes."""
    from qoslab.sweep.spec import load_spec

    if list_studies:
        from qoslab.sweep.docs import studies_text

        typer.echo(studies_text(), nl=False)
        return
    if spec is None:
        raise InputError("give a sweep spec (SPEC.yaml), or --list-studies")
    if jobs is not None and scheduler:
        raise InputError("--jobs and --scheduler: give one (a cluster brings its own workers)")
    loaded = load_spec(spec)
    from qoslab.sweep.progress import SweepProgress, summary_line
    from qoslab.sweep.runner import run_sweep

    if dry_run:
        o = run_sweep(loaded, store, dry_run=True)
        typer.echo(
            f"{spec}: study '{loaded.study.name}', sweep '{loaded.name}': {o.total:,} points "
            f"({loaded.n_configs:,} configurations x {loaded.n_seeds:,} seeds); "
            f"{o.stored:,} in {store}; {o.pending:,} to run"
        )
        return
    try:
        with SweepProgress(loaded.name, quiet) as progress:
            o = run_sweep(
                loaded,
                store,
                jobs=jobs or os.cpu_count() or 1,
                scheduler=scheduler,
                batch_points=batch,
                progress=progress,
            )
    except KeyboardInterrupt:
        print(
            f"sweep {loaded.name}: interrupted; the points stored stay, a rerun runs the rest",
            file=sys.stderr,
        )
        raise
    print(summary_line(loaded.name, o, store), file=sys.stderr)
    if o.failed:
        print(
            f"sweep {loaded.name}: {o.failed:,} points failed; their errors: "
            f'qoslab store query {store} "SELECT key, error FROM failures"',
            file=sys.stderr,
        )
        raise typer.Exit(1)


def register(app: typer.Typer) -> None:
    app.command("sweep")(sweep)
