"""The `qoslab` command: one sub-command group per study."""

from __future__ import annotations

import os
import shutil
import sys

import typer

from qoslab._core import __version__
from qoslab.errors import EXIT_BAD_INPUT, InputError

# Help is never cut: rich would otherwise fit it into 80 columns whenever stdout is not a
# terminal (a pipe, a file), shortening option names and defaults with an ellipsis. typer's
# help renderer reads the width from TERMINAL_WIDTH when it is first imported, which only
# printing help does (importing it here would cost every command its start-up time).
HELP_MIN_WIDTH = 120
if not os.environ.get("TERMINAL_WIDTH"):
    os.environ["TERMINAL_WIDTH"] = str(max(HELP_MIN_WIDTH, shutil.get_terminal_size().columns))

app = typer.Typer(
    name="qoslab",
    help="NVMe and block-layer QoS: deterministic simulation and real-device fio studies.",
    add_completion=False,
    pretty_exceptions_enable=False,
)


@app.callback(invoke_without_command=True)
def _root(
    ctx: typer.Context,
    version: bool = typer.Option(False, "--version", help="Print the version and exit."),
) -> None:
    if version:
        typer.echo(f"qoslab {__version__}")
        raise typer.Exit()
    if ctx.invoked_subcommand is None:
        typer.echo(ctx.get_help())
        raise typer.Exit()


def _register_studies() -> None:
    # Each study owns its sub-command group; importing it here is the whole registration.
    from qoslab.dut.cli import register as register_diff
    from qoslab.lab.cli import app as lab
    from qoslab.nvmelite.cli import app as nvmelite
    from qoslab.plm.cli import app as plm
    from qoslab.report.cli import register as register_report
    from qoslab.rio.cli import app as rio
    from qoslab.sched.cli import app as sched
    from qoslab.sim.cli import register as register_sim
    from qoslab.store.cli import app as store
    from qoslab.sweep.cli import register as register_sweep

    register_diff(nvmelite)  # `qoslab nvmelite diff`
    app.add_typer(nvmelite)
    register_sim(app)
    app.add_typer(lab)
    register_sweep(app)
    app.add_typer(store)
    register_report(app)
    app.add_typer(rio)
    app.add_typer(plm)
    app.add_typer(sched)


_register_studies()


def main(argv: list[str] | None = None) -> None:
    """Entry point: every user error is one line on stderr and exit status 2.

    That covers usage errors (unknown option, missing argument, bad value) as well as
    `InputError` from validating files and fields. Any other exception is a bug and keeps its
    traceback.
    """
    try:
        status = app(args=argv, standalone_mode=False)
    except InputError as err:
        _fail(str(err))
    except typer.Abort:
        print("qoslab: aborted", file=sys.stderr)
        sys.exit(130)
    except typer.TyperException as err:  # click's usage errors
        _fail(err.format_message())
    sys.exit(status if isinstance(status, int) else 0)


def _fail(message: str) -> None:
    print(f"qoslab: error: {' '.join(message.split())}", file=sys.stderr)
    sys.exit(EXIT_BAD_INPUT)
