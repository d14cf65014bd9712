"""Each study through `qoslab sweep`, its stored rows checked against something independent:
the C implementation of NVMe-lite, the `nvmelite matrix` command's own files, and closed forms
of a closed queueing loop on the simulator's ideal device."""

from __future__ import annotations

import json
import os
import subprocess

import numpy as np
import pandas as pd
import pytest

from conftest import QOSLAB, run_qoslab
from qoslab.sweep.study import Study, check_study
from sweep_helpers import C_NVMELITE, WORKLOAD, rows, sweep, write_spec


def test_nvmelite_run_rows_are_the_runs_of_the_c_implementation(tmp_path):
    spec = write_spec(
        tmp_path,
        f"""
        study: nvmelite run
        parameters:
          workload: {WORKLOAD}
          policy: [FIFO, RANDOM, ADVERSARIAL, BATCHED]
          bound: [0, 1, 3, inf]
          fault: [NONE, TIMEOUT, RESET]
        seeds: {{range: [0, 10]}}
        """,
    )
    sweep(spec, tmp_path / "store", "--jobs", "1")
    got = rows(tmp_path / "store", "nvmelite_run")
    subprocess.run(
        [C_NVMELITE, "matrix", "--out", tmp_path / "c", "--no-logs", "--bounds", "0,1,3,inf",
         "--seeds", "0-9", WORKLOAD],
        check=True,
    )  # fmt: skip
    want = pd.read_csv(tmp_path / "c" / "runs.csv", dtype=str)
    assert len(got) == len(want) == 4 * 4 * 3 * 10
    got = got.set_index("run_id").loc[want["run_id"]]
    for column in want.columns[1:]:
        if column == "log_sha256":
            mine = got[column]
        elif got[column].dtype.kind == "f":
            mine = got[column].map(lambda v: f"{v:.6f}")
        else:
            mine = got[column].astype(str)
        assert list(mine) == list(want[column]), column
    # The parameter columns say what each run was.
    first = got.loc["seed_001_long32_RANDOM_inf_7_RESET"]
    assert (first["policy"], first["bound"], first["fault"], first["seed"]) == (
        "RANDOM",
        "inf",
        "RESET",
        7,
    )


def test_nvmelite_matrix_points_total_the_matrix_commands_own_files(tmp_path):
    config = tmp_path / "matrix.yaml"
    config.write_text(
        f'seeds: ["{WORKLOAD}"]\npolicies: [FIFO, RANDOM, ADVERSARIAL]\n'
        'bounds: ["0", "2", "inf"]\nfaults: [NONE, TIMEOUT]\nschedule_seeds: "0-19"\n'
        'scheduler_version: "v1.0"\n'
    )
    spec = write_spec(
        tmp_path,
        """
        study: nvmelite matrix
        parameters:
          config: matrix.yaml
          submit_window: [inf, 3]
        """,
    )
    sweep(spec, tmp_path / "store", "--jobs", "1")
    points = rows(tmp_path / "store", "nvmelite_matrix").set_index("submit_window")
    cells = rows(tmp_path / "store", "nvmelite_matrix__cells")
    assert len(points) == 2
    for window in ("inf", "3"):
        out = tmp_path / f"m{window}"
        done = run_qoslab("nvmelite", "matrix", config, "--out", out, "--no-logs",
                          "--submit-window", window)  # fmt: skip
        assert done.returncode == 0, done.stderr
        runs = pd.read_csv(out / "runs.csv")
        point = points.loc[window]
        assert point["runs"] == len(runs) == 3 * 3 * 2 * 20
        assert point["cells"] == 18
        assert point["risk_cliffs"] == len(pd.read_csv(out / "risk_cliffs.csv"))
        assert point["p95_mean"] == pytest.approx(runs["p95_latency_step"].mean(), abs=2e-6)
        assert point["p95_max"] == runs["p95_latency_step"].max()
        assert point["RD_mean"] == pytest.approx(runs["RD"].mean(), abs=2e-6)
        assert point["completion_rate_mean"] == pytest.approx(
            runs["completion_rate"].mean(), abs=2e-6
        )
        cell = ["seed_id", "policy", "bound_k", "fault_mode"]
        stored = cells[cells["key"] == point["key"]].drop(columns=["key", "row"])
        want = pd.read_csv(out / "cells.csv")
        pd.testing.assert_frame_equal(
            stored.sort_values(cell).reset_index(drop=True),
            want.sort_values(cell).reset_index(drop=True),
        )


def test_a_matrix_point_is_new_when_a_workload_its_config_names_changes(tmp_path):
    import json

    workload = tmp_path / "w.json"
    workload.write_text(WORKLOAD.read_text())
    (tmp_path / "m.yaml").write_text(
        'seeds: ["w.json"]\npolicies: [FIFO]\nbounds: ["inf"]\nfaults: [NONE]\n'
        'schedule_seeds: "0-1"\nscheduler_version: "v1.0"\n'
    )
    spec = write_spec(tmp_path, "study: nvmelite matrix\nparameters: {config: m.yaml}\n")
    store = tmp_path / "store"
    assert "1 run" in sweep(spec, store, "--jobs", "1").stderr
    assert "1 already stored" in sweep(spec, store, "--jobs", "1").stderr
    data = json.loads(workload.read_text())
    data["seed_id"] = "edited"
    workload.write_text(json.dumps(data))
    assert "1 run" in sweep(spec, store, "--jobs", "1").stderr
    assert len(rows(store, "nvmelite_matrix")) == 2


SERVICE_NS = 10_000  # the ideal device: one exponential server of mean 10 us, a free path


def test_sim_points_follow_the_closed_loop_laws_of_the_ideal_device(tmp_path):
    # N I/Os always outstanding (no think time) at c exponential servers of mean S: the
    # throughput is min(N, c) / S and, by Little's law, the mean latency N / throughput.
    (tmp_path / "qd.fio").write_text(
        "[reader]\nioengine=libaio\ndirect=1\nrw=randread\nbs=4k\nsize=1g\niodepth=${QD}\n"
        "number_ios=20000\n"
    )
    spec = write_spec(
        tmp_path,
        """
        study: sim
        parameters:
          job: qd.fio
          device: ideal
          env.QD: [1, 4, 16]
          set.media.servers: [1, 4]
        seeds: [1, 2]
        details: [fio_json, timeseries]
        """,
    )
    sweep(spec, tmp_path / "store", "--jobs", "1")
    got = rows(tmp_path / "store", "sim")
    assert len(got) == 12
    for _, p in got.iterrows():
        n, c = p["env.QD"], p["set.media.servers"]
        iops = min(n, c) / (SERVICE_NS * 1e-9)
        assert p["read_ios"] == 20000
        assert p["read_iops"] == pytest.approx(iops, rel=0.05)
        assert p["read_clat_mean_ns"] == pytest.approx(n / iops * 1e9, rel=0.05)
        assert p["read_clat_p50_ns"] < p["read_clat_p99_ns"] <= p["read_clat_max_ns"]
        assert p["write_ios"] == 0
    # The stored fio JSON is what `qoslab sim` prints for the same point.
    point = got[(got["env.QD"] == 4) & (got["set.media.servers"] == 1) & (got["seed"] == 2)]
    key = point["key"].item()
    stored = rows(tmp_path / "store", "sim__fio_json").set_index("key").loc[key, "fio_json"]
    done = subprocess.run(
        [QOSLAB, "sim", tmp_path / "qd.fio", "--device", "ideal", "--set", "media.servers=1",
         "--seed", "2", "--output-format", "json+"],
        capture_output=True, text=True, env={**os.environ, "QD": "4"}, check=True,
    )  # fmt: skip
    assert json.loads(stored) == json.loads(done.stdout)
    series = rows(tmp_path / "store", "sim__timeseries")
    per_point = series.groupby("key")["ios"].sum()
    assert (per_point.loc[got["key"]].to_numpy() == got["read_ios"].to_numpy()).all()


def test_selftest_rows_hold_the_closed_forms_of_their_points(tmp_path):
    from qoslab.sweep.studies.selftest import uniform

    spec = write_spec(
        tmp_path,
        """
        study: selftest
        parameters:
          x: [0.5, 2.0]
          n: [0, 3]
          label: abc
        seeds: {range: [10, 15]}
        details: [steps]
        """,
    )
    sweep(spec, tmp_path / "store", "--jobs", "1")
    got = rows(tmp_path / "store", "selftest")
    assert len(got) == 20
    assert (got["x_times_n"] == got["x"] * got["n"]).all()
    assert (got["seed_mod_7"] == got["seed"] % 7).all()
    assert (got["label_length"] == 3).all()
    draws = [uniform(int(s)) for s in got["seed"]]
    assert got["u"].tolist() == draws
    assert len(set(draws)) == 5  # one draw per seed, different seeds different draws
    steps = rows(tmp_path / "store", "selftest__steps")
    assert len(steps) == 10 * 3  # n = 3 rows for each of the 10 points with n = 3
    assert (np.sort(steps["i_times_x"].unique()) == [0.0, 0.5, 1.0, 2.0, 4.0]).all()


def test_a_planned_spec_is_the_spec_file_of_the_same_points(tmp_path):
    # A study command's points, as `planned_spec` makes them: a null is a parameter not given.
    from qoslab.sweep.runner import _Points
    from qoslab.sweep.spec import load_spec, planned_spec

    job = tmp_path / "j.fio"
    job.write_text("[j]\nrw=randread\nsize=1m\n")
    configs = [{"job": "j.fio", "set.block.queue_depth": "2"}, {"job": "j.fio"}]
    spec = planned_spec("sim", "planned", configs, [3, 1], ["timeseries"], folder=tmp_path)
    assert [c["set.block.queue_depth"] for c in spec.configs()] == ["2", None]
    assert [c["device"] for c in spec.configs()] == [spec.study.param("device").default] * 2
    assert spec.seeds == [3, 1] and spec.details == {"timeseries"}
    (tmp_path / "planned.yaml").write_text(spec.text)
    again = load_spec(tmp_path / "planned.yaml")
    assert _Points(again).keys.to_pylist() == _Points(spec).keys.to_pylist()
    assert len(set(_Points(spec).keys.to_pylist())) == 4


def test_planned_rows_come_back_in_plan_order_whatever_the_store_held(tmp_path):
    from qoslab.sweep.planned import run_planned
    from qoslab.sweep.spec import planned_spec

    configs = [{"x": 0.5, "n": 3}, {"x": 2.0, "n": 0, "label": "ab"}, {"x": -1.0, "n": 2}]
    store = tmp_path / "store"
    # An earlier (or interrupted) run stored the last two configurations' points.
    run_planned(planned_spec("selftest", "part", configs[1:], [9, 4], ["steps"]), store, quiet=True)
    rows = run_planned(
        planned_spec("selftest", "all", configs, [9, 4], ["steps"]), store, quiet=True
    )
    assert (rows.outcome.total, rows.outcome.stored, rows.outcome.done) == (6, 4, 2)
    got = rows.points
    assert got.point.tolist() == list(range(6))
    assert got.seed.tolist() == [9, 4] * 3
    assert got.x.tolist() == [0.5, 0.5, 2.0, 2.0, -1.0, -1.0]
    assert got.x_times_n.tolist() == [1.5, 1.5, 0.0, 0.0, -2.0, -2.0]
    assert got.label_length.tolist() == [0, 0, 2, 2, 0, 0]
    steps = rows.details["steps"]
    assert steps.point.tolist() == [0, 0, 0, 1, 1, 1, 4, 4, 5, 5]
    assert steps.i.tolist() == [0, 1, 2, 0, 1, 2, 0, 1, 0, 1]
    assert steps.i_times_x.tolist() == [0.0, 0.5, 1.0, 0.0, 0.5, 1.0, 0.0, -1.0, 0.0, -1.0]


def test_a_planned_point_that_fails_stops_the_command_with_its_error(tmp_path):
    from qoslab.errors import InputError
    from qoslab.sweep.planned import run_planned
    from qoslab.sweep.spec import planned_spec

    spec = planned_spec("selftest", "failing", [{"x": 1.0}, {"fail": True}], [1, 2])
    error = r"^selftest: point 3 of 4: RuntimeError: failed on purpose$"
    with pytest.raises(InputError, match=error):
        run_planned(spec, tmp_path / "store", quiet=True)


def test_a_study_that_stops_on_failure_stops_at_its_first_failed_point(tmp_path, monkeypatch):
    # As the lab's fio runs do (`lab run`): the failed point's own exception, at once; the
    # points before it stay stored, those after it never run.
    import dataclasses

    from qoslab.sweep import studies
    from qoslab.sweep.planned import run_planned
    from qoslab.sweep.spec import planned_spec

    stops = dataclasses.replace(studies.STUDIES["selftest"], stop_on_failure=True, batch_points=1)
    monkeypatch.setitem(studies.STUDIES, "selftest", stops)
    configs = [{"x": 1.0}, {"fail": True}, {"x": 2.0}]
    store = tmp_path / "store"
    with pytest.raises(RuntimeError, match=r"^failed on purpose$"):
        run_planned(planned_spec("selftest", "stops", configs, [1]), store, quiet=True)
    rest = planned_spec("selftest", "rest", [configs[0], configs[2]], [1])
    rows = run_planned(rest, store, quiet=True)
    assert (rows.outcome.stored, rows.outcome.done) == (1, 1)
    assert rows.points.x.tolist() == [1.0, 2.0]
    # A store the command made is removed when its first point fails: nothing is left behind.
    with pytest.raises(RuntimeError):
        run_planned(planned_spec("selftest", "first", configs[1:], [1]), tmp_path / "s", quiet=True)
    assert not (tmp_path / "s").exists()
    # The engine refuses the flag with batches of several points, whose failure would lose them.
    with pytest.raises(TypeError, match="stop_on_failure needs batch_points 1"):
        studies.check_study(dataclasses.replace(stops, batch_points=2))


def test_the_registry_refuses_an_adapter_the_sweep_could_not_drive():
    from qoslab.sweep.kinds import text
    from qoslab.sweep.study import CONTRACT_VERSION, Metric, Param

    def study(**kw) -> Study:
        base = dict(
            name="toy",
            help="",
            params=(Param("a", text()),),
            metrics=(Metric("m", "float64"),),
            headline=("m",),
            version=CONTRACT_VERSION,
            run_point=lambda p, s, d: None,
        )
        return Study(**{**base, **kw})

    check_study(study())
    bad = [
        (dict(version=CONTRACT_VERSION + 1), "contract version"),
        (dict(run_point=None), "neither run_point nor run_batch"),
        (dict(params=(Param("key", text()),)), "'key' cannot be a column name"),
        (dict(metrics=(Metric("A", "float64"),), headline=()), "must differ"),
        (dict(headline=("nosuch",)), "headline metric 'nosuch'"),
        (dict(name="Toy Study"), "lower-case words"),
    ]
    for change, message in bad:
        with pytest.raises(TypeError, match=message):
            check_study(study(**change))


def test_the_batch_binding_gives_each_run_what_a_single_run_gives():
    from qoslab._core import nvmelite as core

    from qoslab import nvmelite

    w = nvmelite.load_workload(WORKLOAD)
    configs = [
        (0, "RANDOM", "3", "TIMEOUT", "4", "v2.0", "abc123"),
        (0, "ADVERSARIAL", "inf", "RESET", "inf", "v1.0", ""),
    ]
    index, seeds = [0, 1, 0, 1], [5, 5, 2**64 - 1, 0]
    out = core.run_batch([w], configs, index, seeds)
    offsets = np.frombuffer(out["run_id_offsets"], "<i8")
    for i, (c, seed) in enumerate(zip(index, seeds, strict=True)):
        _, policy, bound, fault, window, version, commit = configs[c]
        one = nvmelite.run(w, policy=policy, bound_k=bound, fault_mode=fault,
                           schedule_seed=seed, submit_window=window,
                           scheduler_version=version, git_commit=commit)  # fmt: skip
        assert out["run_id"][offsets[i] : offsets[i + 1]].decode() == one.run_id
        assert out["log_sha256"][64 * i : 64 * (i + 1)].decode() == one.log_sha256
        for name, kind in core.BATCH_METRICS:
            value = np.frombuffer(out[name], "<f8" if kind == "f64" else "<u8")[i]
            assert value == one.metrics[name], name
    with pytest.raises(core.ParamsError) as err:
        core.run_batch([w], [*configs, (0, "LIFO", "1", "NONE", "inf", "", "")], [2], [0])
    assert err.value.args[1:] == ("policy", 2)
