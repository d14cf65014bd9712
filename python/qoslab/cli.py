"""The `qoslab` command: one sub-command group per study."""

from __future__ import annotations

import os
import shutil
import sys

import typer

# `import typer` has loaded typer.main already. Imported here, not in main(): an import there
# would make `typer` a name local to main(), unbound in its `except typer.Abort` when
# registering a study fails first (a second traceback instead of the internal-error line).
import typer.main

from qoslab._core import __version__
from qoslab.errors import EXIT_BAD_INPUT, InputError

# Help is never cut: rich would otherwise fit it into 80 columns whenever stdout is not a
# terminal (a pipe, a file), shortening option names and defaults with an ellipsis. typer's
# help renderer reads the width from TERMINAL_WIDTH when it is first imported, which only
# printing help does (importing it here would cost every command its start-up time).
HELP_MIN_WIDTH = 120
if not os.environ.get("TERMINAL_WIDTH"):
    os.environ["TERMINAL_WIDTH"] = str(max(HELP_MIN_WIDTH, shutil.get_terminal_size().columns))

_app = typer.Typer(
    name="qoslab",
    help="NVMe and block-layer QoS: deterministic simulation and real-device fio studies.",
    add_completion=False,
    pretty_exceptions_enable=False,
)


@_app.callback(invoke_without_command=True)
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


def _register_nvmelite() -> None:
    from qoslab.dut.cli import register as register_diff
    from qoslab.nvmelite.cli import app as nvmelite

    register_diff(nvmelite)  # `qoslab nvmelite diff`
    _app.add_typer(nvmelite)


def _register_sim() -> None:
    from qoslab.sim.cli import register

    register(_app)  # `qoslab sim` and `qoslab mqsim`


def _register_sweep() -> None:
    from qoslab.sweep.cli import register

    register(_app)


def _register_report() -> None:
    from qoslab.sweep.report_cli import register

    register(_app)


def _group(module: str):
    def add() -> None:
        import importlib

        _app.add_typer(importlib.import_module(module).app)

    return add


# Each study owns its commands; importing its CLI module is the whole registration. In help
# order, with the top-level command names each one adds.
STUDIES = (
    (("nvmelite",), _register_nvmelite),
    (("sim", "mqsim"), _register_sim),
    (("lab",), _group("qoslab.labstudy.cli")),
    (("sweep",), _register_sweep),
    (("store",), _group("qoslab.store.cli")),
    (("report",), _register_report),
    (("rio",), _group("qoslab.rio.cli")),
    (("fs",), _group("qoslab.fs.cli")),
    (("plm",), _group("qoslab.plmstudy.cli")),
    (("sched",), _group("qoslab.sched.cli")),
    (("vm",), _group("qoslab.vm.cli")),
)


def _register_studies(command: str | None = None) -> None:
    """Registers the study that owns `command`, or every study (for help, an unknown command,
    or `None`). A command runs with its own study's modules only, which keeps a short
    command's start-up short (a study's CLI imports its machinery: the simulator, Dask, ...)."""
    owners = [add for names, add in STUDIES if command in names]
    for add in owners or [add for _, add in STUDIES]:
        if add not in _registered:  # once per process (main() may run many times in one)
            _registered.append(add)
            add()


_registered: list = []


_whole_tree: list[typer.Typer] = []


def __getattr__(name: str):
    # `from qoslab.cli import app` (tests, embedding) gets the whole command tree.
    if name == "app":
        if not _whole_tree:
            _register_studies()
            _whole_tree.append(_app)
        return _whole_tree[0]
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def main(argv: list[str] | None = None) -> None:
    """Entry point: every user error is one line on stderr and exit status 2; every bug is one
    line and exit status 1.

    User errors are usage errors (unknown option, missing argument, bad or out-of-range value)
    and `InputError` from validating files and fields. Anything else, a Python exception or a
    panic of the Rust core, is a bug: one line says "internal error, please report" with the
    command that reproduces it, and its traceback goes to a file the line names.
    """
    args = sys.argv[1:] if argv is None else argv
    try:
        first = next((a for a in args if not a.startswith("-")), None)
        _register_studies(first)
        from qoslab.limits import bound_options

        command = typer.main.get_command(_app)
        bound_options(command)
        status = command.main(args=args, standalone_mode=False)
    except InputError as err:
        _fail(str(err))
    except typer.Abort:
        print("qoslab: aborted", file=sys.stderr)
        sys.exit(130)
    except typer.TyperException as err:  # click's usage errors
        _fail(err.format_message())
    except (SystemExit, KeyboardInterrupt):
        raise
    except BaseException as err:
        from qoslab.errors import EXIT_INTERNAL, internal_error

        print(internal_error(err, args), file=sys.stderr)
        sys.exit(EXIT_INTERNAL)
    sys.exit(status if isinstance(status, int) else 0)


# An error line quotes what was read; a line of input 100,000 characters long is cut in the
# middle of the quote, so that the error stays one readable line.
_LONGEST_ERROR = 2000


def _fail(message: str) -> None:
    line = " ".join(message.split())
    if len(line) > _LONGEST_ERROR:
        half = _LONGEST_ERROR // 2
        line = f"{line[:half]} [... {len(line) - 2 * half} characters ...] {line[-half:]}"
    print(f"qoslab: error: {line}", file=sys.stderr)
    sys.exit(EXIT_BAD_INPUT)
