"""The exact worst case under a bound k, and risk cliffs found by bisection over k.

The search runs in Rust (`qoslab._core.nvmelite.worst`, branch and bound over the step loop's
decisions, docs/nvmelite.md "The worst case under a bound k"); this module reads its limits,
turns its errors into `InputError` and finds cliffs: the worst-case p95 `W(k)` never falls as
k grows (a larger bound allows every schedule a smaller one does), so the smallest k with
`W(k) > (1 + threshold) W(base)` is found by bisection, and the next cliff is sought from there.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from qoslab._core import nvmelite as _core
from qoslab.errors import InputError

METRICS = tuple(name for name, _ in _core.METRICS)
_DURATION = re.compile(r"(\d+(?:\.\d*)?)(ms|s|m)?")
_SECONDS = {"ms": 0.001, "s": 1.0, "m": 60.0, None: 1.0}


def parse_time_limit(text: str, option: str = "--time-limit") -> float | None:
    """`60s`, `500ms`, `2m`, `45` (seconds) or `none`."""
    if text.lower() == "none":
        return None
    m = _DURATION.fullmatch(text.strip())
    if not m or float(m.group(1)) <= 0:
        raise InputError(f"{option}: expected a duration like 60s, 500ms or 2m, got '{text}'")
    return float(m.group(1)) * _SECONDS[m.group(2)]


def worst(
    workload,
    *,
    metric: str = "p95",
    bound_k: str | int,
    fault_mode: str = "NONE",
    submit_window: str | int = "inf",
    time_limit_s: float | None = 60.0,
    node_limit: int | None = None,
    scheduler_version: str = "v1.0",
    git_commit: str = "",
):
    """The schedule with the largest `metric` (a `WorstResult`); bad parameters raise
    InputError naming the option."""
    try:
        return _core.worst(
            workload,
            metric,
            str(bound_k),
            fault_mode,
            str(submit_window),
            time_limit_s=time_limit_s,
            node_limit=node_limit,
            scheduler_version=scheduler_version,
            git_commit=git_commit,
        )
    except _core.ParamsError as err:
        message, name, _ = err.args
        raise InputError(f"--{name}: {message}") from None
    except ValueError as err:
        raise InputError(str(err)) from None


@dataclass
class Cliff:
    """A bound at which the exact worst-case p95 rises above (1 + threshold) x the base's."""

    k: int
    base_k: int
    worst: object  # WorstResult at k
    below: object  # WorstResult at k - 1
    base: object  # WorstResult at base_k


@dataclass
class CliffSearch:
    k_max: int  # bounds >= this allow every schedule (k = inf)
    threshold_pct: int
    results: dict[int, object] = field(default_factory=dict)  # k -> WorstResult
    cliffs: list[Cliff] = field(default_factory=list)
    undecided: list[str] = field(default_factory=list)


def find_cliffs(
    workload,
    *,
    fault_mode: str = "NONE",
    submit_window: str = "inf",
    threshold_pct: int = 20,
    time_limit_s: float | None = 60.0,
) -> CliffSearch:
    """Every risk cliff of the exact worst-case p95 over k = 0 .. n-1, by bisection."""
    k_max = max(workload.n_cmds - 1, 0)
    found = CliffSearch(k_max, threshold_pct)

    def at(k: int):
        if k not in found.results:
            found.results[k] = worst(
                workload,
                bound_k=k,
                fault_mode=fault_mode,
                submit_window=submit_window,
                time_limit_s=time_limit_s,
            )
        return found.results[k]

    def exceeds(k: int, base_k: int) -> bool | None:
        """W(k) > (1 + t) W(base) in exact integers; None when the search left it open."""
        w, b = at(k), at(base_k)
        scale = 100 + threshold_pct
        if (w.value or 0) * 100 > scale * b.upper_bound:
            return True
        if w.upper_bound * 100 <= scale * (b.value or 0):
            return False
        return None

    base = 0
    while base < k_max:
        lo, hi = base, k_max  # exceeds(lo) is false; find the smallest k in (lo, hi] that does
        top = exceeds(hi, base)
        if top is None:
            found.undecided.append(f"k={hi} against k={base}")
            break
        if not top:
            break
        while hi - lo > 1:
            mid = (lo + hi) // 2
            verdict = exceeds(mid, base)
            if verdict is None:
                found.undecided.append(f"k={mid} against k={base}")
                return found
            lo, hi = (lo, mid) if verdict else (mid, hi)
        found.cliffs.append(Cliff(hi, base, at(hi), at(hi - 1), at(base)))
        base = hi
    return found
