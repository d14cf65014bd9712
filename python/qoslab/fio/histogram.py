"""fio's log-linear latency histogram: bucket values and percentiles from json+ bins.

fio keeps completion latencies in `FIO_IO_U_PLAT_NR` buckets (stat.h): the first
`2 * 2^bits` buckets hold one value each, then every group of `2^bits` buckets spans one power
of two, so a bucket's width is 1/2^bits of its group's base (about 1.6 % with fio's `bits=6`).
fio 3.x writes json+ bins keyed by the bucket's representative value; fio 2.x before 2.15
keyed them by bucket index and added the `FIO_IO_U_PLAT_*` constants, so that index form is
decoded here. The percentile rule is fio's own (stat.c `calc_clat_percentiles`): the value of
the first bucket whose cumulative count reaches p/100 of all samples.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

import numpy as np

FIO_PLAT_BITS = 6


def plat_index_to_value(index: int, bits: int = FIO_PLAT_BITS) -> int:
    """The representative value (bucket midpoint, truncated) of fio histogram bucket `index`."""
    exact = 1 << (bits + 1)
    if index < exact:
        return index
    group = index >> bits
    error_bits = group - 1
    base = 1 << (error_bits + bits)
    offset = index % (1 << bits)
    return int(base + (offset + 0.5) * (1 << error_bits))


def percentiles_from_bins(
    bins: Mapping[float, int], percentiles: Iterable[float]
) -> dict[float, float]:
    """fio's percentile rule over a histogram {bucket value: count}; empty bins give NaN."""
    values = np.array(sorted(bins), dtype=float)
    counts = np.array([bins[v] for v in sorted(bins)], dtype=float)
    out: dict[float, float] = {}
    total = counts.sum()
    cumulative = np.cumsum(counts)
    for p in percentiles:
        if total <= 0:
            out[p] = float("nan")
            continue
        i = int(np.searchsorted(cumulative, p / 100.0 * total, side="left"))
        out[p] = float(values[min(i, len(values) - 1)])
    return out
