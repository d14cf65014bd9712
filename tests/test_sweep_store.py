"""The results store: keys, skipping what is stored, failures, workers, queries."""

from __future__ import annotations

import fcntl
import hashlib
import json
import shutil

import pandas as pd
import pytest

from conftest import run_qoslab
from qoslab import __version__
from qoslab.errors import InputError
from qoslab.nvmelite.config import project_commit
from qoslab.sweep.keys import keys_for, point_key
from qoslab.sweep.runner import qoslab_build
from sweep_helpers import WORKLOAD, part_files, rows, sweep, write_spec

SELFTEST = """
study: selftest
parameters:
  x: [0.25, 0.5, 1.0]
  n: [1, 2]
seeds: {range: [0, SEEDS]}
"""


def _spec(tmp_path, seeds: int, name: str = "spec.yaml", extra: str = ""):
    return write_spec(tmp_path, SELFTEST.replace("SEEDS", str(seeds)) + extra, name)


def test_a_key_is_the_sha256_of_the_documented_canonical_json():
    params = {"policy": "FIFO", "bound": "inf", "x": 0.1, "label": "é"}
    text = json.dumps(
        {
            "params": params,
            "qoslab": {"commit": "abc", "version": "1.2"},
            "seed": 42,
            "study": "nvmelite run",
        },
        sort_keys=True,
        separators=(",", ":"),
    )
    want = hashlib.sha256(text.encode()).hexdigest()[:32]
    assert point_key("nvmelite run", params, 42, "1.2", "abc") == want
    fast = keys_for("nvmelite run", [params, {**params, "x": 0.2}], [41, 42], "1.2", "abc")
    fast = fast.to_pylist()
    assert fast[1] == want
    assert fast == [
        point_key("nvmelite run", p, s, "1.2", "abc")
        for p in (params, {**params, "x": 0.2})
        for s in (41, 42)
    ]


def test_stored_keys_name_the_study_parameters_seed_version_and_commit(tmp_path):
    sweep(_spec(tmp_path, 2), tmp_path / "store", "--jobs", "1")
    got = rows(tmp_path / "store", "selftest")
    for _, r in got.iterrows():
        params = json.loads(r["params"])
        assert r["key"] == point_key("selftest", params, int(r["seed"]), __version__,
                                     qoslab_build()[1])  # fmt: skip
    assert set(got["qoslab_version"]) == {__version__}
    assert set(got["qoslab_commit"]) == {qoslab_build()[1]}
    # In a clean checkout that is the commit; an edited one adds its changes' digest.
    assert qoslab_build()[1].split("+")[0] == project_commit()


def test_an_uncommitted_edit_of_the_source_is_a_build_of_its_own(tmp_path):
    import subprocess

    from qoslab.sweep.runner import uncommitted

    def git(*args):
        subprocess.run(["git", "-C", tmp_path, *args], check=True, capture_output=True)

    git("init", "-q")
    (tmp_path / "python").mkdir()
    (tmp_path / "python" / "m.py").write_text("A = 1\n")
    (tmp_path / "notes.txt").write_text("not source\n")
    git("add", ".")
    git("-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "-m", "c")
    assert uncommitted(tmp_path) == ""
    (tmp_path / "notes.txt").write_text("edited, but not source\n")
    assert uncommitted(tmp_path) == ""
    (tmp_path / "python" / "m.py").write_text("A = 2\n")
    one = uncommitted(tmp_path)
    (tmp_path / "python" / "m.py").write_text("A = 3\n")
    two = uncommitted(tmp_path)
    (tmp_path / "python" / "new.py").write_text("B = 1\n")  # untracked source counts too
    three = uncommitted(tmp_path)
    assert len({one, two, three}) == 3 and all(
        d.startswith("+") and len(d) == 13 for d in (one, two, three)
    )
    (tmp_path / "python" / "new.py").unlink()
    assert uncommitted(tmp_path) == two


def test_a_rerun_skips_every_stored_point_and_runs_only_the_new_ones(tmp_path):
    store = tmp_path / "store"
    first = sweep(_spec(tmp_path, 3), store, "--jobs", "1")
    assert "18 points: 18 run, 0 failed, 0 already stored" in first.stderr
    again = sweep(_spec(tmp_path, 3), store, "--jobs", "1")
    assert "18 points: 0 run, 0 failed, 18 already stored" in again.stderr
    more = sweep(_spec(tmp_path, 5), store, "--jobs", "1")
    assert "30 points: 12 run, 0 failed, 18 already stored" in more.stderr
    got = rows(store, "selftest")
    assert len(got) == got["key"].nunique() == 30
    assert sorted(got["seed"].unique()) == [0, 1, 2, 3, 4]
    dry = run_qoslab("sweep", _spec(tmp_path, 6), "--store", store, "--dry-run")
    assert "36 points (6 configurations x 6 seeds); 30 in" in dry.stdout
    assert "6 to run" in dry.stdout


def test_a_moved_input_keeps_its_points_and_an_edited_one_gets_new_ones(tmp_path):
    workload = tmp_path / "w.json"
    shutil.copy(WORKLOAD, workload)
    text = """
    study: nvmelite run
    parameters: {workload: WL, policy: RANDOM, bound: [1, inf]}
    seeds: [0, 1]
    """
    store = tmp_path / "store"
    sweep(write_spec(tmp_path, text.replace("WL", "w.json")), store, "--jobs", "1")
    moved = tmp_path / "elsewhere.json"
    workload.rename(moved)
    again = sweep(write_spec(tmp_path, text.replace("WL", "elsewhere.json")), store, "--jobs", "1")
    assert "4 points: 0 run, 0 failed, 4 already stored" in again.stderr
    # The same commands under another seed_id: another workload, other logs.
    data = json.loads(moved.read_text())
    data["seed_id"] = "renamed"
    moved.write_text(json.dumps(data))
    edited = sweep(write_spec(tmp_path, text.replace("WL", "elsewhere.json")), store, "--jobs", "1")
    assert "4 points: 4 run, 0 failed, 0 already stored" in edited.stderr


def test_a_failed_point_is_recorded_with_its_error_and_does_not_stop_the_sweep(tmp_path):
    spec = _spec(tmp_path, 2, extra="zip: [{label: [ok, bad], fail: [false, true]}]\n")
    store = tmp_path / "store"
    done = sweep(spec, store, "--jobs", "1", check=False)
    assert done.returncode == 1
    assert "24 points: 12 run, 12 failed, 0 already stored" in done.stderr
    assert "SELECT key, error FROM failures" in done.stderr
    ok, failed = rows(store, "selftest"), rows(store, "failures")
    assert set(ok["label"]) == {"ok"} and len(ok) == 12
    assert set(failed["label"]) == {"bad"} and len(failed) == 12
    assert set(failed["error"]) == {"RuntimeError: failed on purpose"}
    # A rerun tries the failed points again (they fail again) and skips the others; the
    # failures view still holds one row per point.
    again = sweep(spec, store, "--jobs", "1", check=False)
    assert "24 points: 0 run, 12 failed, 12 already stored" in again.stderr
    assert len(rows(store, "failures")) == 12


def test_a_store_of_failures_alone_lists_them_and_has_an_empty_points_view(tmp_path):
    spec = write_spec(
        tmp_path, "study: selftest\nparameters: {fail: true, x: [1, 2]}\nseeds: [1]\n"
    )
    done = sweep(spec, tmp_path / "store", "--jobs", "1", check=False)
    assert done.returncode == 1
    failed = rows(tmp_path / "store", "failures")
    assert sorted(failed["x"]) == [1.0, 2.0]
    assert set(failed["error"]) == {"RuntimeError: failed on purpose"}
    # The points view is there too, empty, with the columns every point has.
    import qoslab.store

    with qoslab.store.open(tmp_path / "store") as s:
        assert s.views() == ["failures", "points"]
        points = s.df("points")
        assert len(points) == 0
        assert list(points.columns) == [c for c, _ in qoslab.store.POINT_COLUMNS]
        assert "key" in points.columns and "error" not in points.columns


def test_two_workers_store_the_same_bytes_as_one(tmp_path):
    spec = _spec(tmp_path, 40)
    sweep(spec, tmp_path / "one", "--jobs", "1", "--batch", "16")
    sweep(spec, tmp_path / "two", "--jobs", "2", "--batch", "16")
    one, two = part_files(tmp_path / "one"), part_files(tmp_path / "two")
    assert len(one) == 240 // 16
    assert one == two


def test_store_query_answers_sql_and_store_open_gives_dataframes(tmp_path):
    import qoslab.store

    store = tmp_path / "store"
    sweep(_spec(tmp_path, 2), store, "--jobs", "1")
    done = run_qoslab(
        "store", "query", store,
        "SELECT n, sum(x_times_n) AS total FROM selftest GROUP BY n ORDER BY n", "--format", "csv",
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert done.stdout == "n,total\n1,3.5\n2,7.0\n"
    with qoslab.store.open(store) as s:
        assert s.views() == ["failures", "points", "selftest"]
        frame = s.query("SELECT count(*) AS n FROM points WHERE study = 'selftest'")
        assert isinstance(frame, pd.DataFrame) and frame["n"].item() == 12
        assert s.con.execute("SELECT count(DISTINCT key) FROM selftest").fetchone()[0] == 12


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["SELECT nosuch FROM selftest"], "SQL: Binder Error"),
        (["SELECT 1", "--format", "xml"], "--format: expected text, csv or json"),
    ],
)
def test_store_query_errors_are_one_line(tmp_path, args, message):
    store = tmp_path / "store"
    sweep(_spec(tmp_path, 1), store, "--jobs", "1")
    done = run_qoslab("store", "query", store, *args)
    assert done.returncode == 2
    assert done.stderr.startswith(f"qoslab: error: {message}")
    assert done.stderr.count("\n") == 1


def test_a_directory_that_is_not_a_store_is_refused_and_left_alone(tmp_path):
    import qoslab.store

    other = tmp_path / "home"
    other.mkdir()
    (other / "notes.txt").write_text("mine")
    done = run_qoslab("sweep", _spec(tmp_path, 1), "--store", other)
    assert done.returncode == 2
    assert "not a qoslab store" in done.stderr
    assert [p.name for p in other.iterdir()] == ["notes.txt"]
    with pytest.raises(InputError, match="not a qoslab store"):
        qoslab.store.open(other)


def test_a_store_in_use_by_another_sweep_is_refused(tmp_path):
    store = tmp_path / "store"
    sweep(_spec(tmp_path, 1), store, "--jobs", "1")
    with open(store / "lock") as held:
        fcntl.flock(held, fcntl.LOCK_EX)
        done = run_qoslab("sweep", _spec(tmp_path, 2), "--store", store)
    assert done.returncode == 2
    assert "in use by another sweep" in done.stderr
    assert len(rows(store, "selftest")) == 6


def test_many_small_parts_are_merged_into_one_and_a_kill_mid_merge_loses_nothing(
    tmp_path, monkeypatch
):
    from qoslab.store import layout, writer
    from qoslab.store.writer import StoreWriter
    from qoslab.sweep.runner import run_sweep
    from qoslab.sweep.spec import load_spec

    store = tmp_path / "store"
    spec = _spec(tmp_path, 12)  # 72 points, one part each
    monkeypatch.setattr(writer, "MERGE_AT_SMALL_PARTS", 10**6)
    run_sweep(load_spec(spec), store, jobs=1, batch_points=1)
    study = store / "parts" / "selftest"
    assert len(list(study.iterdir())) == 72
    before = rows(store, "selftest")
    # A merge killed after its part appeared and before the parts it replaces were removed:
    # readers already ignore them.
    monkeypatch.setattr(writer, "MERGE_AT_SMALL_PARTS", 64)
    monkeypatch.setattr(writer, "_remove_replaced", lambda study_dir: None)
    with StoreWriter(store) as w:
        merged = w.merge_small_parts("selftest")
    assert len(list(study.iterdir())) == 73
    assert len(layout.replaced_by(merged)) == 72
    pd.testing.assert_frame_equal(rows(store, "selftest"), before)
    # The next writer removes them; the merged part holds every row once, in key order.
    monkeypatch.undo()
    StoreWriter(store).close()
    assert [p.name for p in study.iterdir()] == [merged.name]
    pd.testing.assert_frame_equal(rows(store, "selftest"), before)
    again = sweep(spec, store, "--jobs", "1")
    assert "72 points: 0 run, 0 failed, 72 already stored" in again.stderr


def test_on_a_terminal_a_progress_bar_counts_done_failed_and_skipped_with_an_eta(tmp_path):
    import os
    import pty
    import subprocess

    from conftest import QOSLAB

    store = tmp_path / "store"
    zipped = "zip: [{busy_us: [20000, 20000], fail: [false, true]}]\n"
    # 24 points, 12 stored and 12 failed; then 48, of which those 12 are skipped.
    sweep(_spec(tmp_path, 2, extra=zipped), store, "--jobs", "1", check=False)
    spec = _spec(tmp_path, 4, extra=zipped)
    leader, follower = pty.openpty()
    # The terminal is read while the sweep runs: a terminal's buffer is a few KiB, and a sweep
    # slowed by a loaded machine draws more frames than fit, then waits on its writes for ever.
    done = subprocess.Popen(
        [QOSLAB, "sweep", spec, "--store", store, "--jobs", "1", "--batch", "1"],
        stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=follower,
    )  # fmt: skip
    os.close(follower)
    shown = b""
    while True:
        try:
            chunk = os.read(leader, 1 << 16)
        except OSError:  # the terminal closed
            break
        if not chunk:
            break
        shown += chunk
    os.close(leader)
    text = shown.decode(errors="replace")
    assert done.wait(timeout=60) == 1  # the failed points
    assert "sweep spec" in text and "ETA" in text
    # The last frame: 36 points run (12 of them failed before and fail again), 24 failed.
    assert "36/36" in text and "failed 24" in text and "skipped 12" in text
