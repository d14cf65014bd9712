"""The range of every number qoslab reads, and the one check that applies it.

A number from the command line, a job file, a device TOML, MQSim's XML, a YAML config or a CSV
is finite and within its unit's range, checked before it is used. A value outside is a
one-line `InputError` naming the field (exit status 2), never a saturated or wrapped value:

- a time is at most `MAX_TIME_NS` (2^62 ns, about 146 years): the simulated clock's range, the
  Rust core's `qoslab_engine::time::MAX_TIME_NS`, which the core applies to device files, job
  files, traces and `--set` itself;
- a count or a size in bytes is at most `MAX_INT` (2^63 - 1, what a file's integer can say);
- a seed is at most `MAX_SEED` (2^64 - 1: the core's seeds are u64);
- a number of workers (`--jobs`, `--workers`) is at most `MAX_WORKERS` (1024);
- a real number is finite: no NaN, no infinity;
- a timeout (a time the program waits for) is at most `MAX_WAIT_S` (24.8 days).

The command line's integer and real options get these ranges from `bound_options`, which the
entry point applies once to the whole command tree, so that no command repeats them; a
command states only the range of its own meaning (`min=1`, `max=...`).
"""

from __future__ import annotations

import copy
import math

from qoslab._core import MAX_TIME_NS
from qoslab.errors import InputError

MAX_TIME_S = MAX_TIME_NS / 1e9
MAX_INT = 2**63 - 1
MAX_SEED = 2**64 - 1
MAX_U32 = 2**32 - 1
# A time the program itself waits for (a timeout): the kernel's poll takes a 32-bit count of
# ms, about 24.8 days.
MAX_WAIT_S = (2**31 - 1) // 1000
# Processes or threads at once (`--jobs`, `--workers`): more than this is never what a machine
# can run, and each one costs memory before it does anything.
MAX_WORKERS = 1024
TIME_LIMIT_TEXT = "4611686018 s (2^62 ns, 146 years)"


def number(
    value: object,
    field: str,
    *,
    lo: float | None = 0,
    hi: float | None = None,
    integer: bool = False,
    path: object | None = None,
    line: int | None = None,
) -> int | float:
    """`value` (a number or its text) as an int (`integer`) or a float, finite and within
    [lo, hi] (`hi` defaults to `MAX_INT` for an integer); else an `InputError` naming `field`
    (and `path`, `line` where the value was read)."""
    kind = "an integer" if integer else "a number"
    if integer and hi is None:
        hi = MAX_INT
    span = (
        f" between {lo} and {hi}"
        if lo is not None and hi is not None
        else f" >= {lo}"
        if lo is not None
        else f" <= {hi}"
        if hi is not None
        else ""
    )

    def bad() -> InputError:
        return InputError(f"{field}: expected {kind}{span}, got {value!r}", path=path, line=line)

    if isinstance(value, bool):
        raise bad()
    if isinstance(value, str):
        text = value.strip().replace("_", "")
        try:
            parsed: int | float = int(text) if integer else float(text)
        except ValueError:
            try:
                parsed = float(text)
            except ValueError:
                raise bad() from None
    elif isinstance(value, int | float):
        parsed = value
    else:
        raise bad()
    if isinstance(parsed, float):
        if not math.isfinite(parsed):
            raise bad()
        if integer:
            if parsed != int(parsed):
                raise bad()
            parsed = int(parsed)
    if (lo is not None and parsed < lo) or (hi is not None and parsed > hi):
        raise bad()
    return parsed


def seconds(value: object, field: str, **where) -> float:
    """A time in seconds: finite, >= 0 and at most `MAX_TIME_S`."""
    return float(number(value, field, lo=0, hi=MAX_TIME_S, **where))


def _bounded(kind, lo: float | None, hi: float | None):
    """A copy of the option type `kind` whose values must also be finite and within [lo, hi].
    (The type is copied, not replaced: click's type objects are shared, and its range types
    print their declared range in the help, which stays as declared.)"""
    inner = kind.convert
    bounded = copy.copy(kind)

    def convert(value, param, ctx):
        v = inner(value, param, ctx)
        if isinstance(v, float) and not math.isfinite(v):
            bounded.fail(f"{value!r} is not a finite number.", param, ctx)
        if (lo is not None and v < lo) or (hi is not None and v > hi):
            bounded.fail(f"{value!r} is not in the range {lo}..{hi}.", param, ctx)
        return v

    bounded.convert = convert
    bounded.qoslab_bounded = True
    return bounded


def bound_options(command) -> None:
    """Gives every integer and real parameter of the click `command` and its sub-commands the
    range of its unit: integers from 0 (no option counts below zero) to `MAX_INT` (`MAX_SEED`
    for a seed, `MAX_WORKERS` for `--jobs` and `--workers`), reals finite (a timeout at most
    `MAX_WAIT_S`). A value outside is click's usage error, naming the option."""
    for sub in getattr(command, "commands", {}).values():
        bound_options(sub)
    for param in command.params:
        kind = param.type
        if getattr(kind, "qoslab_bounded", False):
            continue
        if kind.name in ("int", "int range", "integer", "integer range"):
            name = param.name or ""
            hi = (
                MAX_SEED
                if name.endswith("seed")
                else MAX_WORKERS
                if name in ("jobs", "workers")
                else MAX_INT
            )
            param.type = _bounded(kind, 0, hi)
        elif kind.name in ("float", "float range"):
            timeout = "timeout" in (param.name or "")
            param.type = _bounded(kind, 0 if timeout else None, MAX_WAIT_S if timeout else None)
