"""`qoslab nvmelite run` and `replay` against the published logs and the spec's examples."""

from __future__ import annotations

import json

import pytest

from conftest import ROOT

DATA = ROOT / "tests" / "data" / "nvmelite"
EXPECTED = DATA / "expected"
SEED_001 = DATA / "seed_001.json"

# The spec's worked examples (section 13): workload, parameters, log sha256, runs.csv row.
EX_A = {
    "seed_id": "ex_a",
    "commands": [
        {"type": "WRITE", "lba": 0, "len": 2, "pattern": 5},
        {"type": "WRITE_VISIBLE", "lba": 0, "len": 2},
        {"type": "READ", "lba": 0, "len": 2},
        {"type": "READ", "lba": 1, "len": 1},
    ],
}
EX_B = {
    "seed_id": "ex_b",
    "commands": [
        {"type": "WRITE", "lba": 4, "len": 1, "pattern": 9},
        {"type": "READ", "lba": 4, "len": 1},
        {"type": "FENCE"},
        {"type": "WRITE", "lba": 1023, "len": 2, "pattern": 1},
    ],
}
WORKED_EXAMPLES = [
    (
        EX_A,
        ["--policy", "RANDOM", "--bound", "inf", "--fault", "NONE", "--seed", "4"],
        "ex_a_RANDOM_inf_4_NONE,3.000000,3.000000,5.000000,0.166667,1.000000,3,12,4,0,0,"
        "1.000000,e372cd33e7b56b04a7dae0e3c9f7a8e0bbca700416947921401c641cf74c3971",
    ),
    (
        EX_B,
        ["--policy", "ADVERSARIAL", "--bound", "1", "--fault", "TIMEOUT", "--seed", "0"],
        "ex_b_ADVERSARIAL_1_0_TIMEOUT,2.000000,2.666667,5.000000,0.166667,1.000000,2,5,2,1,1,"
        "0.500000,9cc3a0afd6ea9c5a34ebff31c52cb0de1c66418c7f6cb6d5ccbdb5d65f044261",
    ),
    (
        EX_B,
        [
            "--policy",
            "BATCHED",
            "--bound",
            "inf",
            "--fault",
            "RESET",
            "--seed",
            "3",
            "--submit-window",
            "2",
        ],
        "ex_b_BATCHED_inf_3_RESET,1.000000,1.000000,1.000000,0.000000,1.000000,2,3,2,0,0,"
        "0.500000,04b9bfa9a7bf368bcf41f70fa89ac1ea3f0777ab61c269a9410520d469c157f0",
    ),
]


def metrics_of(stderr: str) -> dict[str, str]:
    return dict(line.split(": ", 1) for line in stderr.splitlines())


@pytest.mark.parametrize("workload,args,row", WORKED_EXAMPLES)
def test_worked_examples_of_section_13(qoslab, tmp_path, workload, args, row):
    path = tmp_path / "w.json"
    path.write_text(json.dumps(workload))
    done = qoslab("nvmelite", "run", path, *args, check=True)
    m = metrics_of(done.stderr)
    fields = row.split(",")
    assert m["run_id"] == fields[0]
    assert m["log_sha256"] == fields[-1]
    got = [m[k] for k in ("p95_latency_step", "mean_latency_step", "max_latency_step", "RD")]
    assert got == fields[1:5]
    import hashlib

    assert hashlib.sha256(done.stdout.encode()).hexdigest() == fields[-1]


@pytest.mark.parametrize("log", sorted((EXPECTED / "logs").glob("*.log")), ids=lambda p: p.stem)
def test_published_logs_byte_for_byte(qoslab, tmp_path, log):
    _seed_id, policy, k, seed, fault = log.stem.rsplit("_", 4)
    out = tmp_path / "run.log"
    ref = tmp_path / "ref.json"
    sched = tmp_path / "run.sched"
    qoslab(
        "nvmelite", "run", SEED_001, "--policy", policy, "--bound", k, "--fault", fault,
        "--seed", seed, "--log", out, "--schedule-out", sched, "--reference-schedule", ref,
        check=True,
    )  # fmt: skip
    assert out.read_bytes() == log.read_bytes()
    published_record = EXPECTED / "schedules" / f"{log.stem}.json"
    if published_record.exists():
        assert ref.read_bytes() == published_record.read_bytes()
    # The schedule file replays to the same log, and re-writes the same record.
    replayed = tmp_path / "replayed.log"
    ref2 = tmp_path / "ref2.json"
    qoslab(
        "nvmelite", "replay", SEED_001, sched, "--log", replayed, "--reference-schedule", ref2,
        check=True,
    )  # fmt: skip
    assert replayed.read_bytes() == log.read_bytes()
    assert ref2.read_bytes() == ref.read_bytes()


def test_log_goes_to_stdout_and_metrics_to_stderr(qoslab):
    log = EXPECTED / "logs" / "seed_001_FIFO_inf_0_NONE.log"
    done = qoslab(
        "nvmelite", "run", SEED_001, "--policy", "fifo", "--bound", "INF", "--seed", "0",
        check=True,
    )  # fmt: skip
    assert done.stdout.encode() == log.read_bytes()
    assert metrics_of(done.stderr)["run_id"] == "seed_001_FIFO_inf_0_NONE"
