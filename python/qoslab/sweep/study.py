"""A study as a sweep sees it: one table of hooks and data, registered with one line.

A study adapter says which parameters a point of the study takes (a `Param` table: name,
kind, unit, default, help), which metrics its summary row has (a `Metric` table), which
optional detail tables it can store, and how to run points (`run_point`, or `run_batch` for
many points at once). Everything else (specs, keys, the store, workers, the report) is generic.
The registry (`qoslab.sweep.studies`) checks each table when it registers, as fio's
`check_engine_ops` checks an engine: contract version, a run hook, names that fit the store.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from qoslab.sweep.kinds import Kind

# Bumped when a hook's signature or a table's meaning changes; adapters state the version
# they were written for and the registry refuses any other.
CONTRACT_VERSION = 1

# Columns every stored row has; no parameter or metric may take these names.
FIXED_COLUMNS = (
    "key",
    "sweep",
    "study",
    "seed",
    "params",
    "error",
    "qoslab_version",
    "qoslab_commit",
    "point",
)

REQUIRED = object()  # the default of a parameter a spec must give


@dataclass(frozen=True)
class Param:
    """One parameter of a study point: the spec's key, its kind, unit, default and help."""

    name: str
    kind: Kind
    unit: str = ""
    default: Any = REQUIRED
    help: str = ""

    @property
    def required(self) -> bool:
        return self.default is REQUIRED


@dataclass(frozen=True)
class Metric:
    """One column of a study's summary row: name, Arrow type, unit and help."""

    name: str
    dtype: str
    unit: str = ""
    help: str = ""


@dataclass(frozen=True)
class Detail:
    """An optional per-point table a study can store besides its summary row."""

    name: str
    help: str
    default: bool = False


@dataclass
class PointResult:
    """What `run_point` returns: the metrics of the summary row, and the detail tables asked
    for (each a list of row dicts, or anything `pyarrow.Table.from_pandas` takes)."""

    metrics: dict[str, Any]
    details: dict[str, Any] = field(default_factory=dict)


@dataclass
class Batch:
    """Points to run: point i is `configs[config_index[i]]` with seed `seeds[i]` (None for a
    study without seeds). Parameter values are checked; file parameters are absolute paths."""

    configs: list[dict[str, Any]]
    config_index: list[int]
    seeds: list[int | None]
    details: frozenset[str] = frozenset()

    def __len__(self) -> int:
        return len(self.seeds)


@dataclass
class BatchResult:
    """What a batch produced: `metrics` (a pyarrow Table, one row per point in batch order, all
    null where the point failed), `errors` (None or the point's error, per point) and the detail
    tables, each a pyarrow Table whose `point` column is the point's index in the batch."""

    metrics: Any
    errors: list[str | None]
    details: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Study:
    """A study adapter: the ops table the sweep drives.

    Hooks (all but one run hook optional):
      run_point(params, seed, details) -> PointResult      one point; an exception fails it
      run_batch(batch) -> BatchResult                      many points (default: run_point each)
      param_for(name) -> Param | None                      parameters beyond the table (patterns)
      check_config(params) -> None                         cross-parameter checks (KindError)
      figures(store, table, directory) -> list[Figure]     the study's own report figures
    """

    name: str
    help: str
    params: tuple[Param, ...]
    metrics: tuple[Metric, ...]
    headline: tuple[str, ...]
    version: int
    run_point: Callable[[dict[str, Any], int | None, frozenset[str]], PointResult] | None = None
    run_batch: Callable[[Batch], BatchResult] | None = None
    param_for: Callable[[str], Param | None] | None = None
    check_config: Callable[[dict[str, Any]], None] | None = None
    figures: Callable[[Any, str, Path], list[Any]] | None = None
    details: tuple[Detail, ...] = ()
    # The families `param_for` accepts, as documentation (name patterns such as set.KEY).
    param_patterns: tuple[Param, ...] = ()
    seeded: bool = True
    seed_help: str = ""  # what a seed is to the study (its docs)
    # Points sent to a worker at once: many for a study whose point costs microseconds, one
    # for a study whose point costs seconds (so the points in flight stay few).
    batch_points: int = 1
    # Its points run in the Rust core with Python's lock released: local workers are threads
    # of the sweep's process (a Dask cluster still brings its own).
    threads: bool = False
    # The first point that fails stops the sweep with its exception (the points stored before
    # it stay): for a study whose points share one real device, where a failed run says the
    # next would fail too, each after its timeout.
    stop_on_failure: bool = False

    @property
    def table(self) -> str:
        """The study's table in the store: its name with spaces as underscores."""
        return self.name.replace(" ", "_")

    def param(self, name: str) -> Param | None:
        for p in self.params:
            if p.name == name:
                return p
        return self.param_for(name) if self.param_for else None


_NAME = re.compile(r"^[a-z][a-z0-9_]*( [a-z][a-z0-9_]*)*$")
_COLUMN = re.compile(r"^[A-Za-z][A-Za-z0-9_.]*$")


def check_study(study: Study) -> Study:
    """Refuses an adapter the sweep could not drive or store (a bug, not a user error)."""

    def fail(why: str) -> None:
        raise TypeError(f"study adapter '{study.name}': {why}")

    if study.version != CONTRACT_VERSION:
        fail(f"written for contract version {study.version}, this is {CONTRACT_VERSION}")
    if not _NAME.match(study.name):
        fail("name: expected lower-case words, as the command is typed")
    if study.run_point is None and study.run_batch is None:
        fail("has neither run_point nor run_batch")
    if study.batch_points < 1:
        fail("batch_points must be at least 1")
    if study.stop_on_failure and study.batch_points != 1:
        fail("stop_on_failure needs batch_points 1 (a failure would lose its batch's points)")
    names = [p.name for p in study.params] + [m.name for m in study.metrics]
    for name in names:
        if not _COLUMN.match(name) or name in FIXED_COLUMNS:
            fail(f"'{name}' cannot be a column name")
    if len({n.lower() for n in names}) != len(names):
        fail("parameter and metric names must differ (case-insensitively)")
    metric_names = {m.name for m in study.metrics}
    for h in study.headline:
        if h not in metric_names:
            fail(f"headline metric '{h}' is not one of its metrics")
    return study
