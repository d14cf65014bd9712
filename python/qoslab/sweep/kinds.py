"""The kinds of value a study's parameter takes (`Param.kind`): each checks a value from a spec
and says its column type in the store. A study adapter builds its `Param` table from these
(`integer(0)`, `choice(NAMES)`, `file()`, ...); a spec's value that its kind refuses is the
spec's error, with the parameter's name (`KindError`).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any


class KindError(ValueError):
    """A value that is not what a parameter's kind expects; the message says what was."""


def _show(value: Any) -> str:
    return value if isinstance(value, str) else repr(value)


@dataclass(frozen=True)
class Kind:
    """What values a parameter takes. `check` returns the value as the study wants it (raising
    `KindError("expected ...")`); `dtype` is its column type in the store (an Arrow type name,
    or "" to take the type of the values given). A `file` kind's value is a path (unless it is
    one of `names`, such as a preset's), and a point's key holds `digest(path)`: the file's
    SHA-256, or for a file that names other files, a digest of them all."""

    expected: str
    check: Callable[[Any], Any]
    dtype: str
    file: bool = False
    names: tuple[str, ...] = ()
    digest: Callable[[str], str] | None = None

    def is_file(self, value: Any) -> bool:
        return self.file and value is not None and value not in self.names

    def __call__(self, value: Any) -> Any:
        return self.check(value)


def integer(minimum: int | None = None, maximum: int | None = None) -> Kind:
    lo = "" if minimum is None else f" >= {minimum}"
    hi = "" if maximum is None else f" <= {maximum}"
    expected = f"an integer{lo}{' and' if lo and hi else ''}{hi}"

    def check(v: Any) -> int:
        if isinstance(v, bool) or not isinstance(v, int | float) or v != int(v):
            raise KindError(f"expected {expected}, got '{_show(v)}'")
        v = int(v)
        if (minimum is not None and v < minimum) or (maximum is not None and v > maximum):
            raise KindError(f"expected {expected}, got {v}")
        return v

    return Kind(expected, check, "int64")


def real(minimum: float | None = None, positive: bool = False) -> Kind:
    expected = "a number" + (
        " > 0" if positive else f" >= {minimum}" if minimum is not None else ""
    )

    def check(v: Any) -> float:
        if isinstance(v, bool) or not isinstance(v, int | float) or not math.isfinite(v):
            raise KindError(f"expected {expected}, got '{_show(v)}'")
        if (positive and v <= 0) or (minimum is not None and v < minimum):
            raise KindError(f"expected {expected}, got {v}")
        return float(v)

    return Kind(expected, check, "float64")


def text() -> Kind:
    def check(v: Any) -> str:
        if isinstance(v, bool) or not isinstance(v, str | int | float):
            raise KindError(f"expected a string, got '{_show(v)}'")
        return v if isinstance(v, str) else _show(v)

    return Kind("a string", check, "string")


def choice(names: Sequence[str]) -> Kind:
    names = tuple(names)
    expected = "one of " + ", ".join(names)

    def check(v: Any) -> str:
        if not isinstance(v, str) or v not in names:
            raise KindError(f"expected {expected}, got '{_show(v)}'")
        return v

    return Kind(expected, check, "string")


def flag() -> Kind:
    def check(v: Any) -> bool:
        if not isinstance(v, bool):
            raise KindError(f"expected true or false, got '{_show(v)}'")
        return v

    return Kind("true or false", check, "bool")


def count_or_inf(minimum: int) -> Kind:
    """An integer >= `minimum` or `inf`, kept in the spelling a study's command takes."""
    expected = f"an integer >= {minimum} or inf"

    def check(v: Any) -> str:
        if v == "inf" or (isinstance(v, float) and math.isinf(v) and v > 0):
            return "inf"
        if isinstance(v, bool) or not isinstance(v, int) or v < minimum:
            raise KindError(f"expected {expected}, got '{_show(v)}'")
        return str(v)

    return Kind(expected, check, "string")


def file(names: Sequence[str] = (), digest: Callable[[str], str] | None = None) -> Kind:
    """A path (relative paths are taken from the spec's folder by the spec reader), or one of
    `names` (built-in inputs such as device presets); `digest` as in `Kind`."""

    def check(v: Any) -> str:
        if not isinstance(v, str) or not v:
            raise KindError(f"expected a file name, got '{_show(v)}'")
        return v

    return Kind("a file name", check, "string", file=True, names=tuple(names), digest=digest)


def scalar() -> Kind:
    """Any single value (a number or a string) passed on as text; the column takes its type."""

    def check(v: Any) -> Any:
        if v is None or not isinstance(v, str | int | float):
            raise KindError(f"expected a single number or string, got '{_show(v)}'")
        return v

    return Kind("a number or a string", check, "")
