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
# The interval of one mean over repetitions (Student's t with n - 1 degrees of freedom).
MEAN_INTERVAL_NAME = "95 % t interval"


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


def mean_interval(
    values: list[float], level: float = LEVEL
) -> tuple[float, tuple[float, float] | None]:
    """The mean of `values` and its `level` interval by Student's t (n - 1 degrees of
    freedom); no interval (None) from fewer than MIN_REPS values."""
    n = len(values)
    m = math.fsum(values) / n if n else math.nan
    if n < MIN_REPS:
        return m, None
    sd = math.sqrt(math.fsum((v - m) ** 2 for v in values) / (n - 1))
    if sd == 0:
        return m, (m, m)
    from scipy.stats import t

    half = float(t.ppf(0.5 + level / 2, n - 1)) * sd / math.sqrt(n)
    return m, (m - half, m + half)


def band_verdict(
    interval: tuple[float, float] | None,
    lo: float | None = None,
    hi: float | None = None,
    *,
    lo_open: bool = False,
) -> str:
    """What an interval says of a band [lo, hi] (None: unbounded on that side; `lo_open`: the
    band excludes lo): 'inside' (the whole interval is in the band), 'outside' (none of it),
    'undecided' (it straddles an edge), or 'no verdict' (no interval: too few repetitions)."""
    if interval is None:
        return "no verdict"
    a, b = interval

    def above_lo(x: float) -> bool:
        return lo is None or (x > lo if lo_open else x >= lo)

    def below_hi(x: float) -> bool:
        return hi is None or x <= hi

    if above_lo(a) and below_hi(b):
        return "inside"
    if not above_lo(b) or not below_hi(a):
        return "outside"
    return "undecided"


def all_verdict(verdicts: list[str]) -> str:
    """Several verdicts that must all hold: 'outside' if any is, 'inside' if all are, else
    'no verdict' if any has none, else 'undecided'."""
    if "outside" in verdicts:
        return "outside"
    if all(v == "inside" for v in verdicts):
        return "inside"
    return "no verdict" if "no verdict" in verdicts else "undecided"
