"""The `qoslab` command: one sub-command group per study."""

from __future__ import annotations

import sys

import typer

from qoslab import __version__
from qoslab.errors import EXIT_BAD_INPUT, InputError

app = typer.Typer(
    name="qoslab",
    help="NVMe and block-layer QoS: deterministic simulation and real-device fio studies.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)


@app.callback(invoke_without_command=True)
def _root(
    version: bool = typer.Option(False, "--version", help="Print the version and exit."),
) -> None:
    if version:
        typer.echo(f"qoslab {__version__}")
        raise typer.Exit()


def _register_studies() -> None:
    # Each study owns its sub-command group; importing it here is the whole registration.
    from qoslab.sim.cli import register as register_sim

    register_sim(app)


_register_studies()


def main(argv: list[str] | None = None) -> None:
    """Entry point: user errors become one line on stderr and exit status 2.

    Usage errors (unknown option, missing argument) are click's own and also exit 2.
    """
    try:
        app(args=argv)
    except InputError as err:
        print(f"qoslab: error: {err}", file=sys.stderr)
        sys.exit(EXIT_BAD_INPUT)
