"""The one study runner: a study command's planned points through the sweep engine.

A study command (`qoslab sched study`, ...) states its points as configurations of its
adapter's parameters (`qoslab.sweep.studies.<module>`) and seeds (`planned_spec`), and
`run_planned` runs them as any sweep runs: the points the store lacks (a rerun, or the run
after an interrupted one, runs only the rest), on `jobs` local worker processes, under the
sweep's progress bar, each stored row keyed to the qoslab that ran it. It returns the rows in
the order the command planned them (`Rows`), from which the command writes its own outputs,
so what it writes does not depend on the workers or on what the store held before. A point that
fails stops the command with that point's error, one line (after every point has run, or at
once for a study that stops on its first failure).
"""

from __future__ import annotations

import os
import shutil
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from qoslab.errors import InputError
from qoslab.options import set_options
from qoslab.sweep.runner import Outcome, _Points, run_sweep
from qoslab.sweep.spec import Spec
from qoslab.sweep.study import Study


@dataclass
class Rows:
    """A planned sweep's rows, in plan order. `points`: one row per point (`point`, its index
    in the plan, then `seed`, the parameters and the metrics); `details`: each detail table
    with the `point` its rows belong to, a point's rows in the order its run gave them (their
    stored `row`)."""

    points: Any
    details: dict[str, Any] = field(default_factory=dict)
    outcome: Outcome | None = None


def default_store(out: str | os.PathLike) -> Path:
    """A study command's store when `--store` is not given: beside its output, `<out>.store`."""
    out = Path(out)
    return out.with_name(out.name + ".store")


def provenance(spec: Spec, store: str | os.PathLike, rows: Rows) -> dict[str, Any]:
    """What a study command's meta.json says of its points: the store that keeps them, the
    sweep that ran them (its spec is in the store's sweeps/), how many ran now and how many
    the store held already."""
    outcome = rows.outcome or Outcome()
    return {
        "store": str(store),
        "sweep": spec.name,
        "points": {"total": len(spec), "run": outcome.done, "already_stored": outcome.stored},
    }


def set_param(study: Study, text: str) -> tuple[str, str]:
    """A command's `--set SECTION.KEY=VALUE` as the study's parameter `set.SECTION.KEY` and its
    value (for a study whose `param_for` takes `qoslab sim`'s tunables, as `sim` does); an
    InputError for anything else, or for a key no tunable has, before anything runs."""
    [(key, value)] = set_options([text])
    if study.param(f"set.{key}") is None:
        raise InputError(f"--set: no tunable {key!r} (qoslab sim --list-tunables)")
    return f"set.{key}", value


def _stored(files: list[Path]):
    """The rows of `files` (one stored table's parts, in part order) as one Arrow table."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    tables = [pq.read_table(f) for f in files]
    return pa.concat_tables(tables, promote_options="permissive") if tables else None


def _in_plan(table, keys):
    """`table`'s rows of the plan's `keys`, with the `point` each belongs to, in plan order
    (a detail table's rows of one point in their `row` order, which it then drops)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    point = pc.index_in(table.column("key"), value_set=keys)
    table = table.append_column("point", point).filter(pc.is_valid(point))
    order = [("point", "ascending")]
    if "row" in table.column_names:
        order.append(("row", "ascending"))
    table = table.take(pc.sort_indices(table, order))
    point = table.column("point").cast(pa.int64())
    drop = [c for c in ("key", "point", "row") if c in table.column_names]
    return table.drop_columns(drop).add_column(0, "point", point)


def read_rows(spec: Spec, store: str | os.PathLike, outcome: Outcome | None = None) -> Rows:
    """Every point of `spec` as `store` holds it, in plan order; an InputError with the error
    of the first point (in plan order) that the store holds no row of."""
    import pyarrow.compute as pc

    from qoslab.store import Store, layout

    keys = _Points(spec).keys
    table = spec.study.table
    with Store(store) as s:
        parts = s.snapshot.parts.get(table, [])
        stored = _stored(layout.files(parts, layout.POINTS))
        if stored is not None:
            # A point stored twice (its configuration planned twice) is read once.
            unique = pc.unique(stored.column("key"))
            stored = stored.take(pc.index_in(unique, value_set=stored.column("key")))
        found = None if stored is None else pc.index_in(keys, value_set=stored.column("key"))
        missing = (
            list(range(len(keys)))
            if found is None
            else pc.indices_nonzero(pc.is_null(found)).to_pylist()
        )
        if missing:
            failures = _stored(layout.files(parts, layout.FAILURES))
            error = "no row stored"
            if failures is not None:
                at = pc.index_in(keys[missing[0]], value_set=failures.column("key"))
                if at.is_valid:
                    error = failures.column("error")[at.as_py()].as_py()
            raise InputError(f"{spec.study.name}: point {missing[0] + 1} of {len(keys)}: {error}")
        points = _in_plan(stored, keys)
        drop = [c for c in ("sweep", "study", "params") if c in points.column_names]
        rows = Rows(points.drop_columns(drop).to_pandas(), outcome=outcome)
        for name in sorted(spec.details):
            files = layout.files(parts, f"{layout.DETAIL_PREFIX}{name}.parquet")
            detail = _stored(files)
            if detail is not None:
                rows.details[name] = _in_plan(detail, keys).to_pandas()
    return rows


def run_planned(
    spec: Spec, store: str | os.PathLike, *, jobs: int = 1, quiet: bool = False
) -> Rows:
    """Runs the points of `spec` that `store` lacks (with the sweep's progress bar unless
    `quiet`, and its closing line on stderr) and returns every point's rows in plan order.

    A point that failed stops the command with its error alone (one line: no closing line);
    a store this call made and left without a point's rows goes too (a bad value that fails
    every point, such as a `--set`'s, leaves nothing behind, as any bad input)."""
    from qoslab.sweep.progress import SweepProgress, summary_line

    made = not Path(store).exists()
    progress = SweepProgress(spec.name, quiet)
    try:
        with progress:
            outcome = run_sweep(spec, store, jobs=jobs, progress=progress)
    except KeyboardInterrupt:
        print(
            f"{spec.name}: interrupted; the points stored in {store} stay, a rerun runs the rest",
            file=sys.stderr,
        )
        raise
    except Exception:
        # A study that stops on its first failure (`Study.stop_on_failure`) stops here.
        if made and (progress.outcome is None or progress.outcome.done == 0):
            shutil.rmtree(store, ignore_errors=True)
        raise
    try:
        rows = read_rows(spec, store, outcome)
    except InputError:
        if made and outcome.done == 0:
            shutil.rmtree(store, ignore_errors=True)
        raise
    if not quiet:
        print(summary_line(spec.name, outcome, store), file=sys.stderr)
    return rows
