"""Honest statistics for every study's report: no error bar, interval or verdict from fewer
than `MIN_REPS` repetitions, and every interval named (Welch's t, `LEVEL`).

A standard deviation from one or two runs says nothing about the next one: a report that
draws it as an error bar, or calls a difference significant because of it, claims what it has
not measured. So the helpers here give NaN (no bar drawn) or None (no verdict) instead.
"""

from __future__ import annotations

import math

# Fewer repetitions than this give no error bar, interval or verdict.
MIN_REPS = 3
# The level of every interval the reports draw or state.
LEVEL = 0.95
INTERVAL_NAME = "95 % Welch t interval"


def shown_sd(sd: float, n: int) -> float:
    """`sd` where it comes from at least MIN_REPS repetitions, else NaN (no error bar)."""
    return sd if n >= MIN_REPS else math.nan


def welch_interval(
    a: tuple[float, float, int], b: tuple[float, float, int], level: float = LEVEL
) -> tuple[float, float] | None:
    """The `level` interval of mean(a) - mean(b) by Welch's t (no equal variances assumed),
    each side given as (mean, standard deviation, repetitions); None when a side has fewer
    than MIN_REPS repetitions."""
    (m1, s1, n1), (m2, s2, n2) = a, b
    if min(n1, n2) < MIN_REPS:
        return None
    diff = m1 - m2
    v1, v2 = s1 * s1 / n1, s2 * s2 / n2
    if v1 + v2 == 0:
        return (diff, diff)
    from scipy.stats import t

    df = (v1 + v2) ** 2 / (v1 * v1 / (n1 - 1) + v2 * v2 / (n2 - 1))
    half = float(t.ppf(0.5 + level / 2, df)) * math.sqrt(v1 + v2)
    return (diff - half, diff + half)


def order_of(interval: tuple[float, float] | None) -> str:
    """What an interval of a - b says: 'a lower', 'a higher', 'not resolved' (it holds 0), or
    'too few repetitions' (no interval)."""
    if interval is None:
        return f"too few repetitions (under {MIN_REPS})"
    lo, hi = interval
    if hi < 0:
        return "a lower"
    if lo > 0:
        return "a higher"
    return "not resolved"
