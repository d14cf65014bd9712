"""`kill -9` at any moment of a sweep loses at most the points in flight: the store stays
readable with no half row and no duplicate, and reruns finish it with exactly the rows of an
uninterrupted run."""

from __future__ import annotations

import os
import random
import signal
import subprocess
import time
from pathlib import Path

import pandas as pd

from conftest import QOSLAB
from sweep_helpers import WORKLOAD, rows, sweep, write_spec

SPEC = f"""
study: nvmelite run
parameters:
  workload: {WORKLOAD}
  policy: [FIFO, RANDOM, ADVERSARIAL, BATCHED]
  bound: [0, 1, 2, 3, 5, 10, inf]
  fault: [NONE, TIMEOUT, RESET]
seeds: {{range: [0, 60]}}
"""
POINTS = 4 * 7 * 3 * 60
BATCH = "48"  # 105 parts: many commits for a kill to land in
KILLS = 5
RNG_SEED = 20261124  # the kill moments are drawn from this test's own stream


def _parts(store: Path) -> int:
    return len(list((store / "parts").glob("*/*"))) if (store / "parts").is_dir() else 0


def _children(pid: int) -> list[int]:
    found = []
    for task in Path(f"/proc/{pid}/task").iterdir():
        text = (task / "children").read_text().split()
        found += [int(c) for c in text]
    return found


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, ProcessLookupError):
        return False
    return state != "Z"


def _check_partial(store: Path, reference: pd.DataFrame) -> int:
    """Whatever a kill left is whole: every stored row is the reference's row, once."""
    if not (store / "parts").is_dir() or _parts(store) == 0:
        return 0
    got = rows(store, "nvmelite_run")
    assert got["key"].is_unique
    want = reference.set_index("key").loc[got["key"]].reset_index()
    pd.testing.assert_frame_equal(got, want[got.columns])
    return len(got)


def test_sigkill_at_random_moments_then_reruns_give_the_uninterrupted_rows(tmp_path):
    spec = write_spec(tmp_path, SPEC)
    sweep(spec, tmp_path / "reference", "--jobs", "1", "--batch", BATCH)
    reference = rows(tmp_path / "reference", "nvmelite_run")
    assert len(reference) == POINTS

    rng = random.Random(RNG_SEED)
    store = tmp_path / "store"
    command = [QOSLAB, "sweep", spec, "--store", store, "--quiet", "--jobs", "2", "--batch", BATCH]
    stored_after_kill = []
    for kill in range(KILLS):
        proc = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        if kill == 0:
            # Somewhere in start-up: reading the spec, keying points, starting workers.
            time.sleep(rng.uniform(0.1, 1.0))
        else:
            # After a random number of further parts, then a random moment inside the next.
            target = _parts(store) + rng.randint(1, 12)
            deadline = time.monotonic() + 60
            while _parts(store) < target and proc.poll() is None and time.monotonic() < deadline:
                time.sleep(0.002)
            time.sleep(rng.uniform(0.0, 0.03))
        if proc.poll() is not None:
            break  # it finished first: nothing left to kill
        workers = _children(proc.pid)
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        assert proc.returncode == -signal.SIGKILL
        # The workers of a killed sweep leave by themselves.
        deadline = time.monotonic() + 15
        while any(_alive(w) for w in workers) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not any(_alive(w) for w in workers), "orphaned sweep workers"
        stored_after_kill.append(_check_partial(store, reference))

    # At least one kill landed in the middle, with part of the sweep stored.
    print("stored after each kill:", stored_after_kill)
    assert any(0 < n < POINTS for n in stored_after_kill), stored_after_kill
    assert stored_after_kill == sorted(stored_after_kill)  # nothing stored is ever lost
    before = _check_partial(store, reference)
    done = sweep(spec, store, "--jobs", "2", "--batch", BATCH)
    assert f"{POINTS - before:,} run, 0 failed, {before:,} already stored" in done.stderr
    final = rows(store, "nvmelite_run")
    assert len(final) == final["key"].nunique() == POINTS
    pd.testing.assert_frame_equal(final, reference)
    # Parts a kill left half-written are cleared by the next sweep and were never visible.
    assert not (store / "tmp").exists()
    assert os.listdir(store / "parts") == ["nvmelite_run"]
