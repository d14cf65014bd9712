"""A study as a sweep sees it: one table of hooks and data, registered with one line.

A study adapter says which parameters a point of the study takes (a `Param` table: name,
kind, unit, default, help), which metrics its summary row has (a `Metric` table), which
optional detail tables it can store, and how to run points (`run_point`, or `run_batch` for
many points at once). Everything else (specs, keys, the store, workers, the report) is generic.
The registry (`qoslab.sweep.studies`) checks each table when it registers, as fio's
`check_engine_ops` checks an engine: contract version, a run hook, names that fit the store.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

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


class KindError(ValueError):
    """A value that is not what a parameter's kind expects; the message says what was."""


def _show(value: Any) -> str:
    return value if isinstance(value, str) else repr(value)


@dataclass(frozen=True)
class Kind:
    """What values a parameter takes. `check` returns the value as the study wants it (raising
    `KindError("expected ...")`); `dtype` is its column type in the store (an Arrow type name,
    or "" to take the type of the values given). A `file` kind's value is a path (unless it is
    one of `names`, such as a preset's), and a point's key holds `digest(path)`: the file's
    SHA-256, or for a file that names other files, a digest of them all."""

    expected: str
    check: Callable[[Any], Any]
    dtype: str
    file: bool = False
    names: tuple[str, ...] = ()
    digest: Callable[[str], str] | None = None

    def is_file(self, value: Any) -> bool:
        return self.file and value is not None and value not in self.names

    def __call__(self, value: Any) -> Any:
        return self.check(value)


def integer(minimum: int | None = None, maximum: int | None = None) -> Kind:
    lo = "" if minimum is None else f" >= {minimum}"
    hi = "" if maximum is None else f" <= {maximum}"
    expected = f"an integer{lo}{' and' if lo and hi else ''}{hi}"

    def check(v: Any) -> int:
        if isinstance(v, bool) or not isinstance(v, int | float) or v != int(v):
            raise KindError(f"expected {expected}, got '{_show(v)}'")
        v = int(v)
        if (minimum is not None and v < minimum) or (maximum is not None and v > maximum):
            raise KindError(f"expected {expected}, got {v}")
        return v

    return Kind(expected, check, "int64")


def real(minimum: float | None = None, positive: bool = False) -> Kind:
    expected = "a number" + (
        " > 0" if positive else f" >= {minimum}" if minimum is not None else ""
    )

    def check(v: Any) -> float:
        if isinstance(v, bool) or not isinstance(v, int | float) or not math.isfinite(v):
            raise KindError(f"expected {expected}, got '{_show(v)}'")
        if (positive and v <= 0) or (minimum is not None and v < minimum):
            raise KindError(f"expected {expected}, got {v}")
        return float(v)

    return Kind(expected, check, "float64")


def text() -> Kind:
    def check(v: Any) -> str:
        if isinstance(v, bool) or not isinstance(v, str | int | float):
            raise KindError(f"expected a string, got '{_show(v)}'")
        return v if isinstance(v, str) else _show(v)

    return Kind("a string", check, "string")


def choice(names: Sequence[str]) -> Kind:
    names = tuple(names)
    expected = "one of " + ", ".join(names)

    def check(v: Any) -> str:
        if not isinstance(v, str) or v not in names:
            raise KindError(f"expected {expected}, got '{_show(v)}'")
        return v

    return Kind(expected, check, "string")


def flag() -> Kind:
    def check(v: Any) -> bool:
        if not isinstance(v, bool):
            raise KindError(f"expected true or false, got '{_show(v)}'")
        return v

    return Kind("true or false", check, "bool")


def count_or_inf(minimum: int) -> Kind:
    """An integer >= `minimum` or `inf`, kept in the spelling a study's command takes."""
    expected = f"an integer >= {minimum} or inf"

    def check(v: Any) -> str:
        if v == "inf" or (isinstance(v, float) and math.isinf(v) and v > 0):
            return "inf"
        if isinstance(v, bool) or not isinstance(v, int) or v < minimum:
            raise KindError(f"expected {expected}, got '{_show(v)}'")
        return str(v)

    return Kind(expected, check, "string")


def file(names: Sequence[str] = (), digest: Callable[[str], str] | None = None) -> Kind:
    """A path (relative paths are taken from the spec's folder by the spec reader), or one of
    `names` (built-in inputs such as device presets); `digest` as in `Kind`."""

    def check(v: Any) -> str:
        if not isinstance(v, str) or not v:
            raise KindError(f"expected a file name, got '{_show(v)}'")
        return v

    return Kind("a file name", check, "string", file=True, names=tuple(names), digest=digest)


def scalar() -> Kind:
    """Any single value (a number or a string) passed on as text; the column takes its type."""

    def check(v: Any) -> Any:
        if v is None or not isinstance(v, str | int | float):
            raise KindError(f"expected a single number or string, got '{_show(v)}'")
        return v

    return Kind("a number or a string", check, "")


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
