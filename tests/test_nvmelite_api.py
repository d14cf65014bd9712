"""The Python API other parts build on (`qoslab.nvmelite`): matrix iteration in runs.csv
order, replay in strict and lenient mode, errors as exceptions."""

from __future__ import annotations

import gzip
import hashlib
import json

import pytest
from qoslab._core import nvmelite as _core

from conftest import ROOT
from qoslab import nvmelite
from qoslab.errors import InputError
from test_nvmelite_run import EX_A  # the spec's worked example A (section 13)

EXPECTED = ROOT / "tests" / "data" / "nvmelite" / "expected"


def ex_a():
    return nvmelite.Workload.from_json(json.dumps(EX_A).encode())


def test_matrix_iteration_yields_every_run_in_runs_csv_order():
    matrix = nvmelite.load_matrix(EXPECTED / "config.yaml")
    assert len(matrix) == 2520
    rows = gzip.decompress((EXPECTED / "runs.csv.gz").read_bytes()).decode().split("\r\n")[1:-1]
    runs = list(matrix.iter_runs(log=True, schedule=True, chunk=500))
    assert [r.row for r in runs] == rows
    workload = nvmelite.load_workload(ROOT / "tests" / "data" / "nvmelite" / "seed_001.json")
    for r in runs[::97]:
        assert hashlib.sha256(r.log).hexdigest() == r.log_sha256
        assert nvmelite.replay(workload, r.schedule).log == r.log
    published = (EXPECTED / "logs" / "seed_001_BATCHED_2_5_NONE.log").read_bytes()
    assert next(r for r in runs if r.run_id == "seed_001_BATCHED_2_5_NONE").log == published


def test_matrix_iteration_without_logs_still_hashes():
    matrix = nvmelite.load_matrix(EXPECTED / "config.yaml")
    first = next(iter(matrix.iter_runs(log=False, schedule=False, jobs=1)))
    assert first.log is None and first.schedule is None
    assert first.run_id == "seed_001_ADVERSARIAL_0_0_NONE"
    assert first.log_sha256 == ("85d0e85c983b9583127e6353a42aabbc438e58be1f28105bdf5ac13f7ff22276")
    assert first.metrics["pending_area"] == 10


def test_run_result_fields():
    r = nvmelite.run(ex_a(), policy="RANDOM", bound_k="inf", schedule_seed=4, schedule=True)
    assert r.run_id == "ex_a_RANDOM_inf_4_NONE"
    assert r.metrics["RD"] == pytest.approx(1 / 6)
    assert r.metrics["n_ok"] == 4
    assert r.rng_draws == 9
    assert r.schedule.startswith("qoslab-nvmelite-schedule v1\nseed_id=ex_a\n")
    assert r.reference_schedule is None


def test_lenient_replay_of_an_empty_step_list_completes_at_every_choice():
    r = nvmelite.run(ex_a(), policy="RANDOM", bound_k="inf", schedule_seed=4, schedule=True)
    header = r.schedule.split("steps\n")[0] + "steps\n"
    with pytest.raises(nvmelite.ScheduleError) as err:
        nvmelite.replay(ex_a(), header + "end\n")
    message, line = err.value.args
    assert line == 11  # the `end` line
    assert message == "nothing is pending: expected 'submit', got 'the end of the steps'"
    # Missing steps count as `complete` with draw 0: submit, complete, submit, complete, ...
    repaired = nvmelite.replay(ex_a(), header, strict=False)
    events = repaired.log.decode().splitlines()[1:-1]
    assert [e.split("(")[0] for e in events] == ["SUBMIT", "COMPLETE"] * 4
    assert repaired.schedule.count("complete draw=0 # pick 0 of 1") == 4
    assert nvmelite.replay(ex_a(), repaired.schedule).log == repaired.log


def test_lenient_replay_replaces_forbidden_steps_and_drops_surplus():
    r = nvmelite.run(ex_a(), policy="RANDOM", bound_k="inf", schedule_seed=4, schedule=True)
    # A completion where nothing is pending becomes the forced submit; surplus steps vanish.
    edited = r.schedule.replace("steps\nsubmit\n", "steps\ncomplete draw=5\n").replace(
        "end\n", "submit\nsubmit\nend\n"
    )
    repaired = nvmelite.replay(ex_a(), edited, strict=False)
    assert repaired.log == r.log
    assert repaired.schedule == r.schedule
    # A draw-less completion under RANDOM counts as draw 0.
    no_draw = r.schedule.replace("complete draw=10823043122334066145", "complete")
    repaired = nvmelite.replay(ex_a(), no_draw, strict=False)
    assert "complete draw=0 # pick 0 of 2: cmd 1" in repaired.schedule


def test_load_errors_are_input_errors(tmp_path):
    bad = tmp_path / "w.json"
    bad.write_text('{"seed_id": "a", "commands": [{"type": "READ", "lba": 1, "len": -1}]}')
    with pytest.raises(InputError, match=r"w.json:1: commands\[0\].len"):
        nvmelite.load_workload(bad)
    with pytest.raises(nvmelite.ParamsError):
        nvmelite.run(ex_a(), policy="FIFO", bound_k="-1")


def test_schedule_files_split_into_header_and_steps_and_compose_back():
    workload = {"seed_id": "odd\nid \\ x", "commands": [{"type": "FENCE"}, {"type": "FENCE"}]}
    w = nvmelite.Workload.from_json(json.dumps(workload).encode())
    r = nvmelite.run(
        w, policy="RANDOM", bound_k="1", schedule_seed=7, git_commit="g=1", schedule=True
    )
    header, steps = _core.schedule_split(r.schedule)
    assert list(header) == list(_core.SCHEDULE_HEADER_KEYS)
    assert header["seed_id"] == "odd\nid \\ x" and header["git_commit"] == "g=1"
    assert steps[0] == "submit" and len(steps) == 4
    assert _core.schedule_compose(header, steps) == r.schedule
    with pytest.raises(KeyError):
        _core.schedule_compose({k: v for k, v in header.items() if k != "policy"}, steps)
    with pytest.raises(_core.ScheduleError):
        _core.schedule_split("qoslab-nvmelite-schedule v1\nseed_id=x\n")
