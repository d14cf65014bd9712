"""`qoslab plm coordinate`: the coordinator's allocation, window by window, over a demand CSV."""

from __future__ import annotations

import math
from pathlib import Path

from qoslab import _core
from qoslab.errors import InputError
from qoslab.outputs import write_file

COLUMNS = (
    "window",
    "host",
    "predicted",
    "requested",
    "allocated",
    "extra",
    "consumed",
    "deficiency",
    "utilization",
)
PREDICTORS = ("exact", "ewma")


def policies() -> list[str]:
    """The allocation policies' names (sp, fr, then this project's additions)."""
    return [name for name, _ in _core.plm_policies()]


def parse_ratios(text: str) -> tuple[float, float, float]:
    """`--ratios 0.5,0.3,0.2`: the shares of the high, medium and low classes."""
    try:
        values = [float(x) for x in text.split(",")]
    except ValueError:
        raise InputError(
            f"--ratios: expected three numbers like 0.5,0.3,0.2, got '{text}'"
        ) from None
    if len(values) != 3 or not all(0.0 <= v <= 1.0 for v in values):
        raise InputError(
            f"--ratios: expected three shares in [0, 1] (high,medium,low), got '{text}'"
        )
    if sum(values) > 1.0 + 1e-9:
        raise InputError(f"--ratios: the shares add up to {sum(values):g}, more than 1")
    return values[0], values[1], values[2]


def coordinate(
    demands: Path,
    *,
    capacity: int,
    predictor: str = "ewma",
    zeta: float = 0.5,
    policy: str = "sp",
    ratios: tuple[float, float, float] = (0.5, 0.3, 0.2),
    min_share: float = 0.5,
    initial: float | None = None,
) -> list[tuple]:
    """The rows of ALLOC.csv (see COLUMNS), by window then host in order of first appearance."""
    if capacity < 0:
        raise InputError(f"--capacity: expected a count of at least 0, got {capacity}")
    if predictor not in PREDICTORS:
        raise InputError(f"--predictor: expected exact or ewma, got '{predictor}'")
    if not (0.0 <= zeta <= 1.0):
        raise InputError(f"--zeta: expected a number in [0, 1], got {zeta:g}")
    if not (0.0 <= min_share <= 1.0):
        raise InputError(f"--min-share: expected a number in [0, 1], got {min_share:g}")
    if initial is not None and not (initial >= 0 and math.isfinite(initial)):
        raise InputError(f"--initial: expected a number of at least 0, got {initial:g}")
    names = policies()
    if policy not in names:
        raise InputError(f"--policy: expected one of {', '.join(names)}, got '{policy}'")
    try:
        return _core.plm_coordinate(
            str(demands), capacity, predictor, zeta, policy, list(ratios), min_share, initial
        )
    except _core.SimInputError as err:
        message, path, line = err.args
        raise InputError(message, path=path, line=line) from None


def alloc_csv(rows: list[tuple]) -> str:
    """ALLOC.csv's text: counts as integers, the rest with 6 decimals."""
    out = [",".join(COLUMNS)]
    for window, host, predicted, requested, allocated, extra, consumed, deficiency, util in rows:
        out.append(
            f"{window},{host},{predicted:.6f},{requested},{allocated},{extra},{consumed},"
            f"{deficiency:.6f},{util:.6f}"
        )
    return "\n".join(out) + "\n"


def write_alloc(rows: list[tuple], out: Path) -> None:
    write_file(out, alloc_csv(rows))
