"""The scheduler study beside the real kernel: `qoslab lab sched` on a loop device, then
`qoslab sched study --real` on the device calibrated from the lab's loop device (about 20 s)."""

from __future__ import annotations

import pandas as pd
import pytest

from conftest import ROOT
from lab_helpers import lab_env, needs_root, qoslab_device
from qoslab.sched.report import rank_agreement, read_real

pytestmark = [pytest.mark.root, needs_root]

SCHEDULERS = "none,mq-deadline"


@pytest.fixture(scope="module")
def real_and_sim(tmp_path_factory):
    from conftest import run_qoslab

    tmp = tmp_path_factory.mktemp("sched-real")
    state = tmp / "state"
    with qoslab_device(run_qoslab, state, tmp / "backing.img", size="128M") as device:
        real = tmp / "real"
        done = run_qoslab("lab", "sched", "--target", device, "--schedulers", SCHEDULERS,
                          "--reps", "3", "--runtime", "1s", "--ramp", "250ms", "--out", real,
                          "--quiet", env=lab_env(state))  # fmt: skip
        assert done.returncode == 0, done.stderr
    sim = tmp / "sim"
    done = run_qoslab("sched", "study", "--devices", "empirical",
                      "--empirical", ROOT / "configs" / "sched" / "loop-empirical.toml",
                      "--schedulers", SCHEDULERS, "--seeds", "3", "--runtime", "1s",
                      "--real", real, "--out", sim, "--quiet")  # fmt: skip
    assert done.returncode == 0, done.stderr
    return real, sim


def test_the_report_puts_real_and_simulated_side_by_side(real_and_sim):
    _, sim = real_and_sim
    html = (sim / "report.html").read_text()
    assert "Simulated beside the real kernel" in html
    assert (sim / "figures" / "sim-vs-real.svg").is_file()


def test_where_the_real_difference_is_resolved_the_simulation_ranks_alike(real_and_sim):
    real, sim = real_and_sim
    pairs = rank_agreement(read_real(real), pd.read_parquet(sim / "runs.parquet"))
    assert len(pairs) == 1  # none against mq-deadline
    resolved = pairs[pairs.real_order.isin(["a lower", "a higher"])]
    assert (resolved.sim_order != "opposite").all(), resolved.to_string()
    # Nothing waits in the scheduler on a 128-deep loop queue with 20 I/Os out: the simulated
    # none and mq-deadline do the same, to the last digit (the report says so).
    assert (pairs.sim_order == "tie").all(), pairs.to_string()
    # The real p99 is measured on every repetition (3): its interval is a real one.
    assert (pairs.real_reps == 3).all()
    assert (pairs.real_ci_high > pairs.real_ci_low).all(), pairs.to_string()
