"""The one error type a user sees.

Bad input stops with a single line naming the file, line or field and what was expected, and
exit status 2 (design.md, "Errors"). Everything that validates user input raises `InputError`;
the CLI turns it into that line. Any other exception is a bug and keeps its traceback.
"""

import difflib

EXIT_BAD_INPUT = 2


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
