"""Command-line values the commands share: sizes, durations and lists of integers, read as the
user typed them. A bad one is an `InputError` naming the option, so every command words the
same mistake the same way.
"""

from __future__ import annotations

from qoslab.errors import InputError


def size_option(text: str, option: str) -> int:
    """Bytes from `4k`, `256M`, `10G` (fio's rules, see qoslab.units)."""
    from qoslab.units import parse_size

    try:
        return parse_size(text, option)
    except ValueError as err:
        raise InputError(str(err)) from None


def duration_option(text: str, option: str) -> float:
    """Seconds from `30s`, `500ms`, `2m` or a bare number of seconds."""
    from qoslab.units import parse_duration

    try:
        return parse_duration(text, option)
    except ValueError as err:
        raise InputError(str(err)) from None


def store_option(
    help: str = "The sweep store that keeps every run (a rerun runs only what it lacks).",
    show_default: str = "<out>.store",
):
    """`--store DIR` of a study command whose points run through the sweep engine
    (`qoslab.sweep.planned`)."""
    import typer

    return typer.Option(None, "--store", help=help, show_default=show_default)


def int_list_option(text: str, option: str) -> tuple[int, ...]:
    """Positive integers from `1,2,32`."""
    try:
        values = tuple(int(v) for v in text.split(","))
    except ValueError:
        raise InputError(f"{option}: expected comma-separated integers, got {text!r}") from None
    if not values or any(v < 1 for v in values):
        raise InputError(f"{option}: expected positive integers, got {text!r}")
    return values


def set_options(values: list[str]) -> list[tuple[str, str]]:
    """`KEY=VALUE` pairs of repeated `--set` options; the core checks each key and value."""
    pairs = []
    for item in values:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise InputError(f"--set: expected KEY=VALUE, got '{item}'")
        pairs.append((key.strip(), value.strip()))
    return pairs
