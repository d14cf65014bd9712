"""The sweep's progress bar (qoslab.progress's, on a terminal) and its closing line (always),
on stderr."""

from __future__ import annotations

from qoslab.progress import Count, progress_bar
from qoslab.sweep.runner import Outcome


class SweepProgress:
    """Called with the sweep's `Outcome` after each stored batch: the points this sweep runs,
    those already stored counted as "skipped"."""

    def __init__(self, name: str, quiet: bool = False):
        self.name = name
        self.bar = progress_bar(quiet)
        self.points = Count(self.bar, self._description(0, 0))
        self.outcome: Outcome | None = None  # the last one reported

    def _description(self, failed: int, skipped: int) -> str:
        return f"sweep {self.name}  failed {failed:,}  skipped {skipped:,}"

    def __enter__(self) -> SweepProgress:
        self.bar.__enter__()
        return self

    def __exit__(self, *exc: object) -> None:
        self.bar.__exit__(*exc)

    def __call__(self, o: Outcome) -> None:
        self.outcome = o
        self.points(o.done + o.failed, o.pending, self._description(o.failed, o.stored))


def summary_line(name: str, o: Outcome, store: object) -> str:
    ran = o.done + o.failed
    rate = f", {ran / o.seconds:,.0f} points/s" if ran and o.seconds > 0 else ""
    return (
        f"sweep {name}: {o.total:,} points: {o.done:,} run, {o.failed:,} failed, "
        f"{o.stored:,} already stored; {o.seconds:.1f} s{rate}; store {store}"
    )
