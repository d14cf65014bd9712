"""Running a sweep: the points a store lacks, in batches, on local processes or a Dask cluster.

The coordinator (this process) expands the spec, keys every point, asks the store which keys
it lacks, and sends those points to workers a batch at a time; each finished batch becomes one
part of the store (written by a committer thread while the next results arrive). A worker
computes a batch from its points alone, so what is stored does not depend on how many workers
there are or in which order they finish: batches are cut from the point list in order, and a
part is named by its points' keys.
"""

from __future__ import annotations

import concurrent.futures as cf
import contextlib
import json
import multiprocessing
import multiprocessing.connection
import os
import signal
import socket
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import numpy as np

from qoslab.errors import InputError
from qoslab.store import layout
from qoslab.store.writer import StoreWriter
from qoslab.sweep.keys import keys_for
from qoslab.sweep.spec import Spec, file_digest, resolve_files
from qoslab.sweep.study import Batch, BatchResult, Study

# Batches in flight per worker: one running, one waiting, so a worker never idles while the
# coordinator stores the previous result.
INFLIGHT_PER_WORKER = 2
# Threads storing finished batches (encoding Parquet and flushing it), beside the coordinator.
COMMIT_THREADS = 2


# What decides a point's result in a checkout: the Python package and the Rust core's source.
SOURCE_PATHS = ("python", "crates", "Cargo.toml", "Cargo.lock")


@lru_cache(maxsize=1)
def qoslab_build() -> tuple[str, str]:
    """(version, commit) of the qoslab running here; both enter every point's key. The commit
    of a checkout with uncommitted changes to its source carries `+` and a digest of them
    (`uncommitted`), so a study rerun after an edit is not served the points its store holds
    from before the edit."""
    from qoslab._core import __version__
    from qoslab.nvmelite.config import project_commit

    commit = project_commit()
    if commit:
        commit += uncommitted(Path(__file__).resolve().parents[3])
    return __version__, commit


def uncommitted(top: Path) -> str:
    """ "" for a checkout whose source (SOURCE_PATHS) is as committed; otherwise `+` and the
    first 12 hex digits of the SHA-256 of its changes against HEAD and of its untracked,
    not ignored source files (names and contents)."""
    import hashlib
    import subprocess

    def git(*args: str) -> bytes:
        done = subprocess.run(
            ["git", "-C", str(top), *args, "--", *SOURCE_PATHS], capture_output=True, timeout=60
        )
        return done.stdout if done.returncode == 0 else b""

    h = hashlib.sha256(git("diff", "HEAD", "--binary"))
    untracked = [
        n for n in git("ls-files", "-z", "--others", "--exclude-standard").split(b"\0") if n
    ]
    for name in untracked:
        h.update(b"\0" + name + b"\0")
        with contextlib.suppress(OSError):  # removed meanwhile: its name alone counts
            h.update((top / os.fsdecode(name)).read_bytes())
    if h.digest() == hashlib.sha256(b"").digest():
        return ""
    return "+" + h.hexdigest()[:12]


# ---- the worker's side ------------------------------------------------------------------------


def _one_line(err: BaseException) -> str:
    text = " ".join(str(err).split())
    if isinstance(err, InputError):
        return text
    return f"{type(err).__name__}: {text}" if text else type(err).__name__


def _arrow_type(dtype: str):
    import pyarrow as pa

    return pa.type_for_alias(dtype)


def _details_table(rows: Any, point: int):
    import pyarrow as pa

    if isinstance(rows, pa.Table):
        table = rows
    elif isinstance(rows, list):
        table = pa.Table.from_pylist(rows)
    else:
        table = pa.Table.from_pandas(rows, preserve_index=False)
    return table.add_column(0, "point", pa.array(np.full(table.num_rows, point, dtype=np.int64)))


def run_points(study: Study, batch: Batch) -> BatchResult:
    """A batch through `run_point`, one point at a time; an exception fails only its point."""
    import pyarrow as pa

    names = {m.name for m in study.metrics}
    rows: list[dict[str, Any]] = []
    errors: list[str | None] = []
    details: dict[str, list] = {}
    for i, (ci, seed) in enumerate(zip(batch.config_index, batch.seeds, strict=True)):
        try:
            result = study.run_point(batch.configs[ci], seed, batch.details)
            if set(result.metrics) - names or set(result.details) - batch.details:
                raise TypeError(
                    f"run_point returned metrics {sorted(result.metrics)} and details "
                    f"{sorted(result.details)}; the study has {sorted(names)}, the spec asked "
                    f"for {sorted(batch.details)}"
                )
            tables = {name: _details_table(t, i) for name, t in result.details.items()}
        except Exception as err:  # a point's failure is recorded, and the sweep goes on
            if study.stop_on_failure:
                raise
            rows.append({})
            errors.append(_one_line(err))
            continue
        rows.append(result.metrics)
        errors.append(None)
        for name, t in tables.items():
            details.setdefault(name, []).append(t)
    metrics = pa.table(
        {
            m.name: pa.array([r.get(m.name) for r in rows], type=_arrow_type(m.dtype))
            for m in study.metrics
        }
    )
    merged = {
        name: pa.concat_tables(ts, promote_options="permissive") for name, ts in details.items()
    }
    return BatchResult(metrics, errors, merged)


def run_task(study_name: str, batch: Batch, build: tuple[str, str]) -> BatchResult:
    """What a worker runs (a local process or a Dask worker): one batch of one study."""
    from qoslab.sweep.studies import STUDIES

    if qoslab_build() != build:
        raise RuntimeError(
            f"this worker runs qoslab {qoslab_build()[0]} (commit {qoslab_build()[1] or '?'}); "
            f"the sweep's points are keyed to {build[0]} (commit {build[1] or '?'})"
        )
    study = STUDIES[study_name]
    if study.run_batch is not None:
        return study.run_batch(batch)
    return run_points(study, batch)


def _worker_init() -> None:
    # Ctrl-C reaches the whole process group; the coordinator alone decides what stops.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    # A coordinator killed with SIGKILL cannot stop its workers: each one leaves by itself
    # when its parent's end of the sentinel pipe closes.
    parent = multiprocessing.parent_process()
    if parent is not None:

        def watch() -> None:
            multiprocessing.connection.wait([parent.sentinel])
            os._exit(1)

        threading.Thread(target=watch, name="qoslab-parent-watch", daemon=True).start()


# ---- executors -------------------------------------------------------------------------------


def preload(study_name: str) -> None:
    """Imports a study's adapter in a worker before its first batch arrives."""
    from qoslab.sweep.studies import STUDIES

    if study_name in STUDIES:
        qoslab_build()


class _Executor:
    """Runs `run_task` on batches; `wait_one` returns a finished future of those given."""

    workers = 1
    inflight_per_worker = INFLIGHT_PER_WORKER

    def preload(self, study: str) -> None:
        pass

    def submit(self, study: str, batch: Batch, build: tuple[str, str]) -> Any:
        raise NotImplementedError

    def wait_one(self, futures: list[Any]) -> Any:
        done, _ = cf.wait(futures, return_when=cf.FIRST_COMPLETED)
        return next(iter(done))

    def result(self, future: Any) -> BatchResult:
        return future.result()

    def close(self, cancel: bool) -> None:
        pass


class _InProcess(_Executor):
    # A batch runs as it is submitted: a second one in flight would only run before the first
    # one's result is looked at (and, for a study that stops on failure, after a failure).
    inflight_per_worker = 1

    def submit(self, study, batch, build):
        f: cf.Future = cf.Future()
        try:
            f.set_result(run_task(study, batch, build))
        except Exception as err:
            f.set_exception(err)
        return f


class _LocalPool(_Executor):
    def __init__(self, jobs: int):
        self.workers = jobs
        self._new_pool()

    def _new_pool(self) -> None:
        # spawn, not fork: the coordinator runs DuckDB and Arrow threads, which fork would copy
        # in whatever state they were in.
        self.pool = cf.ProcessPoolExecutor(
            self.workers,
            mp_context=multiprocessing.get_context("spawn"),
            initializer=_worker_init,
        )

    def preload(self, study):
        for _ in range(self.workers):
            self.pool.submit(preload, study)

    def submit(self, study, batch, build):
        try:
            return self.pool.submit(run_task, study, batch, build)
        except cf.process.BrokenProcessPool:
            # A worker died (a crash in a point): the batches it held are recorded as failed
            # and the sweep goes on with a new pool.
            self.pool.shutdown(wait=False, cancel_futures=True)
            self._new_pool()
            return self.pool.submit(run_task, study, batch, build)

    def close(self, cancel):
        self.pool.shutdown(wait=not cancel, cancel_futures=cancel)


class _LocalThreads(_Executor):
    """Threads of this process, for a study whose points run in the Rust core with Python's
    lock released (`Study.threads`): no worker process to start and no second import of
    qoslab per worker, which costs a short study more than its points (sched: ~2 CPU s a
    worker)."""

    def __init__(self, jobs: int):
        self.workers = jobs
        self.pool = cf.ThreadPoolExecutor(jobs, thread_name_prefix="qoslab-point")

    def submit(self, study, batch, build):
        return self.pool.submit(run_task, study, batch, build)

    def close(self, cancel):
        self.pool.shutdown(wait=not cancel, cancel_futures=cancel)


class _Dask(_Executor):
    def __init__(self, address: str):
        def unreachable(err: BaseException) -> InputError:
            return InputError(
                f"--scheduler: cannot reach the Dask scheduler at {address}: {_one_line(err)}"
            )

        # A refused connection is known at once; Dask's client would retry until its timeout.
        url = urlsplit(address if "://" in address else f"tcp://{address}")
        if url.scheme == "tcp":
            try:
                socket.create_connection((url.hostname, url.port or 8786), timeout=10).close()
            except (OSError, ValueError) as err:
                raise unreachable(err) from None
        try:
            from distributed import Client

            self.client = Client(address, timeout="30s")
        except (OSError, TimeoutError, ValueError) as err:
            raise unreachable(err) from None
        self.workers = max(1, sum(self.client.nthreads().values()))

    def submit(self, study, batch, build):
        return self.client.submit(run_task, study, batch, build, pure=False)

    def wait_one(self, futures):
        from distributed import wait

        done, _ = wait(futures, return_when="FIRST_COMPLETED")
        return next(iter(done))

    def close(self, cancel):
        self.client.close()


def executor(jobs: int, scheduler: str | None, threads: bool = False) -> _Executor:
    if scheduler:
        return _Dask(scheduler)
    if jobs <= 1:
        return _InProcess()
    return _LocalThreads(jobs) if threads else _LocalPool(jobs)


# ---- the coordinator ------------------------------------------------------------------------


@dataclass
class Outcome:
    total: int = 0  # points the spec names
    stored: int = 0  # of those, already in the store when the sweep started
    done: int = 0  # run now and stored
    failed: int = 0  # run now and failed (recorded with their error)
    seconds: float = 0.0

    @property
    def pending(self) -> int:
        return self.total - self.stored


class _Points:
    """Every point of a spec, columnar: configurations x seeds, keyed."""

    def __init__(self, spec: Spec):
        import pyarrow as pa

        self.spec = spec
        study = spec.study
        self.configs = spec.configs()
        self.run_configs = [resolve_files(spec, c) for c in self.configs]
        digests: dict[str, str] = {}

        def key_value(name: str, value: Any, run_value: Any) -> Any:
            p = study.param(name)
            if p is not None and p.kind.is_file(value):
                if run_value not in digests:
                    digests[run_value] = (p.kind.digest or file_digest)(run_value)
                return digests[run_value]
            return value

        key_params = [
            {n: key_value(n, v, rc[n]) for n, v in c.items()}
            for c, rc in zip(self.configs, self.run_configs, strict=True)
        ]
        self.seeds = spec.seeds
        self.n_seeds = spec.n_seeds
        self.seed_array = None if self.seeds is None else np.array(self.seeds, dtype=np.uint64)
        self.build = qoslab_build()
        seeds = self.seeds if self.seeds is not None else [None]
        self.keys = keys_for(study.name, key_params, seeds, *self.build)
        # In the spec's order (the report draws the first parameters the spec varies).
        self.params_json = pa.array([json.dumps(c, separators=(",", ":")) for c in self.configs])
        self.param_columns = {}
        for name in spec.names:
            p = study.param(name)
            values = [c[name] for c in self.configs]
            dtype = p.kind.dtype if p is not None else ""
            try:
                array = pa.array(values, type=_arrow_type(dtype) if dtype else None)
            except (pa.ArrowInvalid, pa.ArrowTypeError):  # numbers and words: all as text
                array = pa.array([None if v is None else str(v) for v in values], pa.string())
            if pa.types.is_null(array.type):
                array = array.cast(pa.string())
            self.param_columns[name] = array
        # Columns whose every value differs: no dictionary, no min/max statistics.
        self.unique_columns = {"key"} | {m.name for m in study.metrics if m.dtype == "string"}

    def __len__(self) -> int:
        return len(self.keys)

    def seeds_of(self, indices: np.ndarray) -> np.ndarray | None:
        return None if self.seed_array is None else self.seed_array[indices % self.n_seeds]

    def batch(self, indices: np.ndarray) -> tuple[Batch, np.ndarray]:
        config_of = indices // self.n_seeds
        unique, inverse = np.unique(config_of, return_inverse=True)
        seeds = self.seeds_of(indices)
        batch = Batch(
            [self.run_configs[u] for u in unique.tolist()],
            inverse.tolist(),
            [None] * len(indices) if seeds is None else seeds.tolist(),
            self.spec.details,
        )
        return batch, config_of

    def tables(self, indices: np.ndarray, config_of: np.ndarray, result: BatchResult):
        """The batch's keys and the part's files (points, failures, detail tables)."""
        import pyarrow as pa
        import pyarrow.compute as pc

        study = self.spec.study
        n = len(indices)
        if len(result.errors) != n or result.metrics.num_rows != n:
            raise RuntimeError(
                f"study '{study.name}' returned {len(result.errors)} results for {n} points"
            )
        cfg = pa.array(config_of)
        keys = self.keys.take(pa.array(indices))
        seeds = self.seeds_of(indices)
        head = {
            "key": keys,
            "sweep": _constant(self.spec.name, n),
            "study": _constant(study.name, n),
            "seed": pa.nulls(n, pa.uint64()) if seeds is None else pa.array(seeds),
        }
        params = {name: col.take(cfg) for name, col in self.param_columns.items()}
        params["params"] = self.params_json.take(cfg)
        tail = {
            "qoslab_version": _constant(self.build[0], n),
            "qoslab_commit": _constant(self.build[1], n),
        }
        metrics = {}
        for m in study.metrics:
            have = m.name in result.metrics.column_names
            column = result.metrics.column(m.name) if have else pa.nulls(n)
            metrics[m.name] = column.cast(_arrow_type(m.dtype))
        n_failed = sum(e is not None for e in result.errors)
        failed = pa.array([e is not None for e in result.errors])
        files = {}
        if n_failed < n:
            rows = pa.table({**head, **params, **metrics, **tail})
            files[layout.POINTS] = rows if n_failed == 0 else rows.filter(pc.invert(failed))
        if n_failed:
            error = {"error": pa.array(result.errors, pa.string())}
            files[layout.FAILURES] = pa.table({**head, **params, **error, **tail}).filter(failed)
        for name, table in sorted(result.details.items()):
            # A failed point has no details (run_points keeps none; a batch hook may).
            table = table.filter(pc.invert(failed.take(table.column("point"))))
            point = table.column("point")
            files[f"{layout.DETAIL_PREFIX}{name}.parquet"] = (
                table.drop_columns(["point"])
                .add_column(0, "key", keys.take(point))
                .add_column(1, "row", pa.array(_row_within(point.to_numpy())))
            )
        return keys, files, n_failed


def _row_within(point: np.ndarray) -> np.ndarray:
    """Each detail row's place among its point's rows (0, 1, ...), in the order the study gave
    them: the store keeps rows in key order (a merge sorts them), so `row` is what keeps a
    point's own order (a job's rows, a series' intervals)."""
    order = np.argsort(point, kind="stable")
    ranked = point[order]
    starts = np.flatnonzero(np.r_[True, ranked[1:] != ranked[:-1]])
    lengths = np.diff(np.r_[starts, len(ranked)])
    row = np.empty(len(point), dtype=np.int64)
    row[order] = np.arange(len(ranked)) - np.repeat(starts, lengths)
    return row


def _constant(value: str, n: int):
    import pyarrow as pa

    return pa.DictionaryArray.from_arrays(
        pa.array(np.zeros(n, dtype=np.int32)), pa.array([value], pa.string())
    )


def batches(pending: np.ndarray, size: int) -> Iterator[np.ndarray]:
    for start in range(0, len(pending), size):
        yield pending[start : start + size]


def run_sweep(
    spec: Spec,
    store: str | os.PathLike,
    *,
    jobs: int = 1,
    scheduler: str | None = None,
    batch_points: int | None = None,
    progress: Callable[[Outcome], None] | None = None,
    dry_run: bool = False,
) -> Outcome:
    """Runs every point of `spec` that `store` lacks; returns the counts."""
    t0 = time.perf_counter()
    if dry_run:
        points = _Points(spec)
        return Outcome(total=len(points), stored=_count_stored(store, spec.study.table, points))
    # The cluster (or the pool) first: an unreachable scheduler stops the sweep before the
    # store is touched.
    ex = executor(jobs, scheduler, spec.study.threads)
    cancel = True
    try:
        with StoreWriter(store) as writer:
            # The workers start (and import their study) while the points are keyed.
            ex.preload(spec.study.name)
            points = _Points(spec)
            outcome = Outcome(total=len(points))
            pending = writer.pending(spec.study.table, points.keys)
            outcome.stored = len(points) - len(pending)
            writer.record_sweep(spec.name, spec.text)
            if progress:
                progress(outcome)
            _drive(ex, spec, points, pending, writer, outcome, progress, batch_points)
            cancel = False
            writer.merge_small_parts(spec.study.table)
    finally:
        ex.close(cancel)
    outcome.seconds = time.perf_counter() - t0
    return outcome


def _drive(ex, spec, points, pending, writer, outcome, progress, batch_points) -> None:
    """Keeps every worker busy with batches; each result is stored by a committer thread
    while the next results arrive (Arrow and Parquet work outside the GIL)."""
    window = ex.workers * ex.inflight_per_worker
    inflight: dict[Any, tuple[np.ndarray, np.ndarray]] = {}
    todo = batches(pending, batch_points or spec.study.batch_points)

    def refill() -> None:
        while len(inflight) < window:
            indices = next(todo, None)
            if indices is None:
                return
            batch, config_of = points.batch(indices)
            inflight[ex.submit(spec.study.name, batch, points.build)] = (indices, config_of)

    def store(indices: np.ndarray, config_of: np.ndarray, result: BatchResult) -> tuple[int, int]:
        keys, files, n_failed = points.tables(indices, config_of, result)
        writer.commit(spec.study.table, keys, files, unique_columns=points.unique_columns)
        return len(indices) - n_failed, n_failed

    def count(done: set) -> None:
        for c in done:
            ok, failed = c.result()  # a failed commit (a full disk, ...) stops the sweep
            outcome.done += ok
            outcome.failed += failed
        if done and progress:
            progress(outcome)

    commits: set[cf.Future] = set()
    with cf.ThreadPoolExecutor(COMMIT_THREADS, thread_name_prefix="qoslab-commit") as committer:
        try:
            refill()
            while inflight:
                future = ex.wait_one(list(inflight))
                indices, config_of = inflight.pop(future)
                try:
                    result = ex.result(future)
                except Exception as err:  # the whole batch failed (its worker died, ...)
                    if spec.study.stop_on_failure:
                        raise
                    result = _all_failed(spec.study, len(indices), _one_line(err))
                refill()
                commits.add(committer.submit(store, indices, config_of, result))
                done = {c for c in commits if c.done()}
                if len(commits) - len(done) > COMMIT_THREADS:  # results wait in memory: bounded
                    finished, _ = cf.wait(commits - done, return_when=cf.FIRST_COMPLETED)
                    done |= finished
                count(done)
                commits -= done
        finally:
            # Also when a failure stops the sweep: what was stored before it is counted.
            count(set(cf.wait(commits).done))


def _all_failed(study: Study, n: int, error: str) -> BatchResult:
    import pyarrow as pa

    metrics = pa.table({m.name: pa.nulls(n, _arrow_type(m.dtype)) for m in study.metrics})
    return BatchResult(metrics, [error] * n)


def _count_stored(store: str | os.PathLike, table: str, points: _Points) -> int:
    import pyarrow as pa

    from qoslab.store import Store

    if not (Path(store) / layout.MARKER).is_file():
        return 0
    with Store(store) as s:
        if table not in s.views():
            return 0
        s.con.register("cand", pa.table({"key": points.keys}))
        return s.con.execute(
            f'SELECT count(*) FROM cand SEMI JOIN "{table}" USING (key)'
        ).fetchone()[0]
