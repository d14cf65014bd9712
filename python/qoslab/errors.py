"""The one error type a user sees.

Bad input stops with a single line naming the file, line or field and what was expected, and
exit status 2 (design.md, "Errors"). Everything that validates user input raises `InputError`;
the CLI turns it into that line. Any other exception (or a panic of the Rust core) is a bug:
the CLI writes its traceback to a file and prints one line that names the file and the
command that reproduces it, with exit status 1 (`internal_error`).
"""

import datetime
import difflib
import os
import shlex
import sys
import tempfile
import traceback

EXIT_BAD_INPUT = 2
EXIT_INTERNAL = 1


class InputError(Exception):
    """Invalid user input: a file, a line or a field that is not what was expected."""

    def __init__(self, message: str, *, path: object | None = None, line: int | None = None):
        where = ""
        if path is not None:
            where = f"{path}:{line}: " if line is not None else f"{path}: "
        super().__init__(where + message)


def did_you_mean(word: str, choices) -> str:
    """' (did you mean X?)' when one of `choices` is close to a mistyped `word`, else ''."""
    close = difflib.get_close_matches(word, list(choices), n=1)
    return f" (did you mean {close[0]}?)" if close else ""


def internal_error(err: BaseException, argv: list[str]) -> str:
    """The one line a user sees for a bug: what failed, where its traceback went, and the
    command that reproduces it. The traceback (and the Rust core's panic location, if any) is
    written to a new file in the temporary directory, never to the terminal."""
    command = shlex.join(["qoslab", *argv])
    what = f"{type(err).__name__}: {' '.join(str(err).split())}".rstrip(": ")
    report = "".join(traceback.format_exception(err))
    try:
        from qoslab._core import take_panic_report

        panic = take_panic_report()
    except Exception:  # an old build without it, or the core itself failing to load
        panic = None
    stamp = datetime.datetime.now(datetime.UTC).strftime("%Y%m%dT%H%M%SZ")
    text = (
        f"command: {command}\ncwd: {os.getcwd()}\npython: {sys.version.split()[0]}\n"
        + (f"rust panic: {panic}\n" if panic else "")
        + f"\n{report}"
    )
    try:
        fd, name = tempfile.mkstemp(prefix=f"qoslab-internal-error-{stamp}-", suffix=".txt")
        with os.fdopen(fd, "w") as f:
            f.write(text)
        where = f"traceback in {name}"
    except OSError as write_err:
        where = f"could not write the traceback ({write_err.strerror})"
    return f"qoslab: internal error, please report: {what} ({where}; reproduce with: {command})"
