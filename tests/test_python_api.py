"""qoslab in a notebook: `qoslab.sim` and friends return pandas DataFrames (docs/python.md)."""

from __future__ import annotations

import contextlib
import gzip
import io
import json
import math
import re

import pandas as pd
import pytest

import qoslab
from conftest import ROOT
from qoslab.errors import InputError

DOC = (ROOT / "docs" / "python.md").read_text()


def erlang_quantile(n: int, mean_ns: float, q: float) -> float:
    """The q-quantile of the sum of n exponential times of mean `mean_ns` (bisection on the
    Erlang CDF 1 - sum_{k<n} e^-x x^k / k!)."""

    def cdf(t: float) -> float:
        x = t / mean_ns
        return 1 - sum(math.exp(-x) * x**k / math.factorial(k) for k in range(n))

    lo, hi = 0.0, 100.0 * n * mean_ns
    for _ in range(200):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if cdf(mid) < q else (lo, mid)
    return lo


def worked_example() -> tuple[str, str]:
    """The example's code and the output the docs print for it."""
    code = re.search(r"```python\n(.*?)```", DOC, re.S).group(1)
    shown = re.search(r"<!-- python-example:begin -->\n```text\n(.*?)```", DOC, re.S).group(1)
    return code, shown


def test_the_worked_example_prints_what_the_docs_show_and_obeys_the_closed_forms():
    code, shown = worked_example()
    scope: dict = {}
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        exec(code, scope)
    assert out.getvalue() == shown
    df = scope["df"]
    assert df.job.tolist() == ["qd1", "qd4", "qd16"] and (df.op == "read").all()
    for depth, row in zip((1, 4, 16), df.itertuples(), strict=True):
        # One exponential server of mean 10 us, always busy: 100,000 I/Os per second, and a
        # request's latency is the sum of `depth` service times (200,000 draws: about 0.3 %).
        assert row.iops == pytest.approx(100_000, rel=0.01)
        assert row.lat_mean_us == pytest.approx(10 * depth, rel=0.02)
        assert row.p99_us == pytest.approx(erlang_quantile(depth, 10_000, 0.99) / 1000, rel=0.03)
        assert row.littles_l == pytest.approx(depth, rel=0.01)


def test_sim_json_is_the_report_and_the_frame_has_units_in_its_columns():
    job = "[w]\nioengine=libaio\ndirect=1\nrw=randwrite\nbs=8k\niodepth=2\nnumber_ios=5000\n"
    report = qoslab.sim_json(text=job, device="ideal", set={"media.service_mean_ns": 20_000})
    write = report["jobs"][0]["write"]
    assert write["total_ios"] == 5000 and write["io_bytes"] == 5000 * 8192
    # Twice the service time: half the rate.
    assert write["iops"] == pytest.approx(50_000, rel=0.03)
    df = qoslab.sim(text=job, device="ideal", set=["media.service_mean_ns=20000"])
    assert len(df) == 1 and df.op[0] == "write"
    for column in ("iops", "bw_bytes_s", "lat_mean_us", "p99_us", "runtime_ms", "io_bytes"):
        assert column in df.columns
    assert df.iops[0] == pytest.approx(write["iops"])
    assert df.bw_bytes_s[0] == pytest.approx(write["bw_bytes"], abs=1)


def test_warnings_and_errors_are_pythons():
    with pytest.warns(UserWarning, match="ignored by the simulator: thread"):
        qoslab.sim(text="[j]\nthread\ndirect=1\nnumber_ios=10\n", device="ideal")
    with pytest.raises(InputError, match="<text>:2: option 'bs'"):
        qoslab.sim(text="[j]\nbs=4q\n")
    with pytest.raises(InputError, match="give a job file"):
        qoslab.sim_json()


def test_the_nvmelite_matrix_is_the_published_runs_table_with_each_runs_cell():
    expected_dir = ROOT / "tests" / "data" / "nvmelite" / "expected"
    runs = qoslab.nvmelite.matrix(expected_dir / "config.yaml")
    published = gzip.decompress((expected_dir / "runs.csv.gz").read_bytes())
    expected = pd.read_csv(io.BytesIO(published), dtype={"run_id": str})
    cell = ["seed_id", "policy", "bound_k", "schedule_seed", "fault_mode"]
    assert list(runs.columns) == ["run_id", *cell, *expected.columns[1:]]
    pd.testing.assert_frame_equal(runs.drop(columns=cell), expected)
    # config.yaml: one workload, 4 policies x 7 bounds x 3 faults, schedule seeds 0-29.
    assert set(runs.seed_id) == {"seed_001"}
    assert set(runs.policy) == {"FIFO", "RANDOM", "ADVERSARIAL", "BATCHED"}
    assert set(runs.bound_k) == {"0", "1", "2", "3", "5", "10", "inf"}
    assert set(runs.fault_mode) == {"NONE", "TIMEOUT", "RESET"}
    assert runs.schedule_seed.dtype == "uint64" and set(runs.schedule_seed) == set(range(30))
    assert runs.groupby(["policy", "bound_k", "fault_mode"]).size().eq(30).all()
    # The spec's run id (section 7.1) is the cell's parts joined by '_'.
    rebuilt = runs[cell].astype(str).agg("_".join, axis=1)
    assert rebuilt.tolist() == runs.run_id.tolist()


def test_the_nvmelite_matrix_splits_a_seed_id_holding_underscores(tmp_path):
    workload = {"seed_id": "my_long_id", "commands": [{"type": "FENCE"}]}
    (tmp_path / "w.json").write_text(json.dumps(workload))
    (tmp_path / "config.yaml").write_text(
        'seeds: ["w.json"]\npolicies: [FIFO]\nbounds: ["inf"]\nfaults: [RESET]\n'
        'schedule_seeds: "18446744073709551615-18446744073709551615"\nscheduler_version: "v1.0"\n'
    )
    runs = qoslab.nvmelite.matrix(tmp_path / "config.yaml")
    assert runs.run_id.tolist() == ["my_long_id_FIFO_inf_18446744073709551615_RESET"]
    assert runs.loc[0, ["seed_id", "policy", "bound_k", "fault_mode"]].tolist() == [
        "my_long_id", "FIFO", "inf", "RESET",
    ]  # fmt: skip
    assert runs.schedule_seed[0] == 2**64 - 1


def test_sim_takes_the_values_of_a_jobs_environment_variables_as_env(monkeypatch):
    # fio reads ${NAME} from the environment; a notebook gives it as env= (names it lacks come
    # from the process environment, as `QD=4 qoslab sim job.fio` would).
    job = "[j]\nioengine=libaio\ndirect=1\nrw=randread\niodepth=${QD}\nnumber_ios=${N}\n"
    monkeypatch.setenv("N", "300")
    report = qoslab.sim_json(text=job, device="ideal", env={"QD": 4})
    j = report["jobs"][0]
    assert j["job options"]["iodepth"] == "4" and j["job options"]["number_ios"] == "300"
    assert j["read"]["total_ios"] == 300 and j["iodepth_level"]["4"] == 99.0
    df = qoslab.sim(text=job, device="ideal", env={"QD": 8, "N": 1000})
    assert df.total_ios[0] == 1000 and df.iodepth[0] == 8
    monkeypatch.delenv("N")
    # Unset, it reads as nothing (as in fio), which leaves number_ios bad: the error says why.
    with pytest.raises(
        InputError,
        match=r"^<text>:6: option 'number_ios': .* \(environment variable 'N' is not set: fio "
        r"reads it as nothing\)$",
    ):
        qoslab.sim(text=job, device="ideal", env={"QD": 4})


def test_library_errors_are_the_commands_one_line_errors(tmp_path):
    # Matrix.write into a path under a file: the InputError the command prints, not an OSError.
    (tmp_path / "file").write_text("")
    expected_dir = ROOT / "tests" / "data" / "nvmelite" / "expected"
    matrix = qoslab.nvmelite.load_matrix(expected_dir / "config.yaml")
    with pytest.raises(InputError) as err:
        matrix.write(str(tmp_path / "file" / "out"), logs=False)
    message = str(err.value)
    assert message.startswith(f"cannot write: {tmp_path / 'file'}") and "\n" not in message
    assert "Not a directory" in message
    with pytest.raises(InputError, match="env: expected a dict"):
        qoslab.sim(text="[j]\ndirect=1\n", env=["QD=4"])
    # A bad run parameter or schedule: the typed error (its args as before) is an InputError
    # too, whose text is one line.
    workload = qoslab.nvmelite.load_workload(ROOT / "tests" / "data" / "nvmelite" / "seed_001.json")
    with pytest.raises(InputError) as err:
        qoslab.nvmelite.run(workload, policy="LIFO", bound_k=1)
    assert isinstance(err.value, qoslab.nvmelite.ParamsError)
    assert err.value.args[1:] == ("policy", None)
    assert str(err.value) == (
        "policy: expected a policy: FIFO, RANDOM, BATCHED or ADVERSARIAL, got 'LIFO'"
    )
    with pytest.raises(InputError) as err:
        qoslab.nvmelite.replay(workload, "nonsense\n")
    assert isinstance(err.value, qoslab.nvmelite.ScheduleError) and err.value.args[1] == 1
    assert (
        str(err.value) == "schedule line 1: expected the first line 'qoslab-nvmelite-schedule v1'"
    )
