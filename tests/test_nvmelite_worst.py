"""`qoslab nvmelite worst` and `cliffs` on the paper's 32-command workload: the exact worst case
at every bound of the paper, beside what the paper's sampling found, and schedules that replay.

(The search against brute force, on every small workload and with its certificate moved, is
crates/nvmelite/tests/search_exact.rs.)
"""

from __future__ import annotations

import hashlib

import pytest

from conftest import ROOT
from qoslab import nvmelite
from qoslab.nvmelite import search

SEEDS = ROOT / "configs" / "nvmelite" / "seeds"
LONG32 = SEEDS / "seed_001_long32.json"
PAPER_BOUNDS = ["0", "1", "2", "3", "5", "10", "inf"]
# The exact worst-case p95 of seed_001_long32 at fault NONE. k = inf: all 32 commands are
# submitted first (40 lines: 32 SUBMIT + 8 FENCE), then the three oldest non-FENCE commands
# (SUBMIT lines 0, 1 and 4) complete last, in submission order, at lines 69, 70, 71: latencies
# 69, 69, 67; the p95 of 24 latencies is the 3rd largest, 67. k = 0: completions in order, so
# command c waits at most for every SUBMIT line after its own and every completion before
# it: 40 - (FENCEs before c); the third largest of those is 39.
EXACT_P95 = {"0": 39, "1": 47, "2": 52, "3": 67, "5": 67, "10": 67, "inf": 67}


@pytest.fixture(scope="module")
def long32():
    return nvmelite.load_workload(LONG32)


@pytest.fixture(scope="module")
def sampled_max(long32):
    """Per policy and k: the largest p95 over the paper's schedule seeds 0-99, fault NONE."""
    m = nvmelite.load_matrix(ROOT / "configs" / "nvmelite" / "main.yaml")
    best: dict[tuple[str, str], float] = {}
    for r in m.iter_runs(log=False, schedule=False):
        _, policy, k, _, fault = r.run_id.rsplit("_", 4)
        if fault == "NONE":
            key = (policy, k)
            best[key] = max(best.get(key, 0.0), r.metrics["p95_latency_step"])
    return best


@pytest.mark.parametrize("k", PAPER_BOUNDS)
def test_exact_worst_p95_of_long32_at_the_papers_bounds(long32, sampled_max, k):
    # A node budget, not a clock: the certificate must not depend on the machine's speed.
    r = search.worst(long32, bound_k=k, time_limit_s=None, node_limit=2_000_000)
    assert (r.certificate, r.value, r.upper_bound) == ("optimal", EXACT_P95[k], EXACT_P95[k])
    for policy in ("FIFO", "RANDOM", "BATCHED", "ADVERSARIAL"):
        assert r.value >= sampled_max[(policy, k)]
    # The run replays to the value: the reported metric is the model's own.
    assert r.run.metrics["p95_latency_step"] == EXACT_P95[k]
    again = nvmelite.replay(long32, r.run.schedule)
    assert again.log == r.run.log


def test_sampling_missed_the_worst_case_the_papers_top_poison_schedule_is_64(sampled_max):
    assert max(sampled_max.values()) == 64.0
    assert sampled_max[("ADVERSARIAL", "inf")] == 64.0 < EXACT_P95["inf"]


def test_worst_command_writes_a_schedule_that_replays_byte_identically(qoslab, tmp_path):
    sched, log = tmp_path / "w.sched", tmp_path / "w.log"
    done = qoslab(
        "nvmelite", "worst", LONG32, "--bound", "2", "--schedule-out", sched, "--log", log,
        "--race", "20",
    )  # fmt: skip
    assert "worst p95 of seed_001_long32 at k=2, fault NONE: 52 (optimal)" in done.stdout
    assert "GUIDED" in done.stdout and "states/s" in done.stdout
    replayed = qoslab("nvmelite", "replay", LONG32, sched)
    assert replayed.stdout.encode() == log.read_bytes()
    assert "p95_latency_step: 52.000000" in replayed.stderr
    assert hashlib.sha256(log.read_bytes()).hexdigest() in qoslab(
        "nvmelite", "replay", LONG32, sched, "--log", tmp_path / "again.log"
    ).stderr.replace("log_sha256: ", "")


def test_a_node_limit_gives_a_best_found_with_an_upper_bound_above_the_optimum(long32):
    r = search.worst(long32, bound_k="2", time_limit_s=None, node_limit=500)
    assert r.certificate == "best found" and r.stop == "node limit"
    assert r.value <= EXACT_P95["2"] <= r.upper_bound
    assert r.run.metrics["p95_latency_step"] == r.value


@pytest.mark.parametrize("metric", ["max", "mean", "RD"])
def test_every_metric_is_searched_and_replays(long32, metric):
    r = search.worst(long32, metric=metric, bound_k="3", time_limit_s=None, node_limit=2_000_000)
    assert r.certificate == "optimal"
    column = {"max": "max_latency_step", "mean": "mean_latency_step", "RD": "RD"}[metric]
    assert r.run.metrics[column] == r.value


def test_cliffs_of_long32_by_bisection(qoslab, tmp_path):
    out = tmp_path / "cliffs"
    done = qoslab("nvmelite", "cliffs", LONG32, "--out", out)
    assert "cliff at k=1: worst p95 47 against 39 at k=0 (+20.5 %; k=0: 39)" in done.stdout
    assert "cliff at k=3: worst p95 67 against 47 at k=1 (+42.6 %; k=2: 52)" in done.stdout
    rows = (out / "cliffs.csv").read_text().splitlines()
    assert rows[0] == "k,worst_p95,certificate,upper_bound,states"
    assert {r.split(",")[0]: r.split(",")[1] for r in rows[1:]}["2"] == "52"
    # The schedules that prove each cliff replay to their worst case.
    for name, p95 in (("cliff_k3.sched", 67), ("below_k2.sched", 52), ("cliff_k1.sched", 47)):
        replayed = qoslab("nvmelite", "replay", LONG32, out / name)
        assert f"p95_latency_step: {p95}.000000" in replayed.stderr


def test_bad_inputs_are_one_line_errors(qoslab, tmp_path):
    for args, message in (
        (["--bound", "2", "--metric", "p99"], "--metric: expected p95, max, mean, RD, got 'p99'"),
        (["--bound", "x"], "--bound: expected a bound k"),
        (["--bound", "1", "--time-limit", "soon"], "--time-limit: expected a duration"),
    ):
        done = qoslab("nvmelite", "worst", LONG32, *args, check=False)
        assert done.returncode == 2 and message in done.stderr, done.stderr
        assert done.stderr.count("\n") == 1
    big = tmp_path / "big.json"
    fences = ", ".join(['{"type": "FENCE"}'] * 65)
    big.write_text(f'{{"seed_id": "big", "commands": [{fences}]}}')
    done = qoslab("nvmelite", "worst", big, "--bound", "1", check=False)
    assert done.returncode == 2
    assert "up to 64 commands, this one has 65" in done.stderr
