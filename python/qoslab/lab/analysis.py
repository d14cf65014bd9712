"""Little's law and the knee of the throughput-latency curve.

Little's law: with `iodepth` I/Os always outstanding, the mean number in flight is
L = IOPS x mean latency, so L / iodepth near 1 says fio kept the queue full and the numbers are
self-consistent; well below 1 points at a host bottleneck (CPU, submission batching) rather
than the device.

The knee (rule of `KneeRule`): walking up the queue-depth sweep, the knee is the last depth
before the first step where
  1. the IOPS gained per doubling of depth falls below `min_gain` (default 10 %), and
  2. p99 latency grows faster than `tail_ratio` (default 1) times the IOPS gain.
Growth is normalised per doubling, (x_i / x_{i-1}) ** (1 / log2(d_i / d_{i-1})) - 1, so sweeps
that skip depths are judged alike. Past the knee, more depth mostly buys queueing delay.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass

import pandas as pd


@dataclass(frozen=True)
class KneeRule:
    min_gain: float = 0.10
    tail_ratio: float = 1.0

    def describe(self) -> str:
        return (
            f"the last depth before the first doubling that adds less than "
            f"{self.min_gain:.0%} IOPS while p99 grows more than {self.tail_ratio:g}x as fast "
            f"as IOPS"
        )


@dataclass(frozen=True)
class Knee:
    depth: int | None  # None: not reached within the sweep
    iops: float
    p99_us: float
    rule: KneeRule

    def as_dict(self) -> dict:
        return {**asdict(self), "rule": {**asdict(self.rule), "text": self.rule.describe()}}


def _per_doubling(ratio: float, doublings: float) -> float:
    if ratio <= 0 or doublings <= 0 or not math.isfinite(ratio):
        return math.nan
    return ratio ** (1.0 / doublings) - 1.0


def knee_steps(sweep: pd.DataFrame, rule: KneeRule) -> pd.DataFrame:
    """Per step of the sweep (columns qd, iops, p99_us): growth per doubling and the verdict."""
    s = sweep.sort_values("qd").reset_index(drop=True)
    rows = []
    for i in range(1, len(s)):
        prev, cur = s.iloc[i - 1], s.iloc[i]
        doublings = math.log2(cur.qd / prev.qd)
        iops_gain = _per_doubling(cur.iops / prev.iops, doublings)
        p99_growth = _per_doubling(cur.p99_us / prev.p99_us, doublings)
        flagged = iops_gain < rule.min_gain and p99_growth > rule.tail_ratio * iops_gain
        rows.append(
            {
                "from_qd": int(prev.qd),
                "to_qd": int(cur.qd),
                "iops_gain_per_doubling": iops_gain,
                "p99_growth_per_doubling": p99_growth,
                "past_knee": bool(flagged),
            }
        )
    return pd.DataFrame(
        rows,
        columns=[
            "from_qd",
            "to_qd",
            "iops_gain_per_doubling",
            "p99_growth_per_doubling",
            "past_knee",
        ],
    )


def find_knee(sweep: pd.DataFrame, rule: KneeRule) -> Knee:
    steps = knee_steps(sweep, rule)
    flagged = steps[steps.past_knee]
    if flagged.empty:
        return Knee(depth=None, iops=math.nan, p99_us=math.nan, rule=rule)
    depth = int(flagged.iloc[0].from_qd)
    row = sweep[sweep.qd == depth].iloc[0]
    return Knee(depth=depth, iops=float(row.iops), p99_us=float(row.p99_us), rule=rule)


def add_littles_law(table: pd.DataFrame) -> pd.DataFrame:
    """Adds `qd` (iodepth x numjobs) and `littles_ratio` (L of the whole run / qd) per row."""
    table = table.copy()
    table["qd"] = table["iodepth"].astype("Int64") * table["numjobs"].astype("Int64")
    run_l = table.groupby(["run", "job_index"])["littles_l"].transform("sum")
    table["littles_ratio"] = run_l / table["qd"].astype(float)
    return table
