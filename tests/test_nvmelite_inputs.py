"""Bad input gets one line naming the file and field, exit 2 and no output; what the spec
accepts (section 1.2: len 0, lba beyond the storage, empty workloads, odd seed_ids) runs."""

from __future__ import annotations

import json

import pytest

from conftest import ROOT

SEEDS = ROOT / "configs" / "nvmelite" / "seeds"
GOOD = SEEDS / "seed_002.json"
RUN = ("--policy", "FIFO", "--bound", "0", "--seed", "0")


def assert_rejected(done, *needles):
    assert done.returncode == 2, done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    assert lines[0].startswith("qoslab: error: ")
    for needle in needles:
        assert str(needle) in lines[0], lines[0]
    assert "Traceback" not in done.stderr
    assert done.stdout == ""


BAD_WORKLOADS = {
    "malformed": ('{"seed_id": "a", "commands": [', "invalid JSON"),
    "trailing comma in object": ('{"seed_id": "a", "commands": [],}', "invalid JSON"),
    "trailing comma in array": ('{"seed_id": "a", "commands": [{"type": "FENCE"},]}', "JSON"),
    "trailing garbage": ('{"seed_id": "a", "commands": []} {}', "invalid JSON"),
    "byte-order mark": ('\ufeff{"seed_id": "a", "commands": []}', "byte-order mark"),
    "missing seed_id": ('{"commands": []}', "seed_id"),
    "missing commands": ('{"seed_id": "a"}', "commands"),
    "seed_id not a string": ('{"seed_id": 7, "commands": []}', "seed_id"),
    "duplicated seed_id": ('{"seed_id": "a", "seed_id": "b", "commands": []}', "seed_id"),
    "unknown type": ('{"seed_id": "a", "commands": [{"type": "TRIM"}]}', "commands[0].type"),
    "lower-case type": (
        '{"seed_id": "a", "commands": [{"type": "write", "lba": 0, "len": 1, "pattern": 1}]}',
        "commands[0].type",
    ),
    "missing len": (
        '{"seed_id": "a", "commands": [{"type": "READ", "lba": 0}]}',
        "commands[0]: missing required member 'len'",
    ),
    "null lba": ('{"seed_id": "a", "commands": [{"type": "READ", "lba": null, "len": 1}]}', "lba"),
    "duplicated lba": (
        '{"seed_id": "a", "commands": [{"type": "READ", "lba": 0, "lba": 1, "len": 1}]}',
        "commands[0].lba: duplicated member",
    ),
    "float lba": ('{"seed_id": "a", "commands": [{"type": "READ", "lba": 1.0, "len": 1}]}', "lba"),
    "exponent lba": (
        '{"seed_id": "a", "commands": [{"type": "READ", "lba": 1e2, "len": 1}]}',
        "lba",
    ),
    "negative lba": (
        '{"seed_id": "a", "commands": [{"type": "READ", "lba": -1, "len": 1}]}',
        "lba",
    ),
    "string len": ('{"seed_id": "a", "commands": [{"type": "READ", "lba": 0, "len": "4"}]}', "len"),
    "lba beyond u64": (
        '{"seed_id": "a", "commands": [{"type": "READ", "lba": 18446744073709551616, "len": 1}]}',
        "commands[0].lba",
    ),
    "len beyond u32": (
        '{"seed_id": "a", "commands": [{"type": "READ", "lba": 0, "len": 4294967296}]}',
        "commands[0].len",
    ),
    "pattern beyond u32": (
        '{"seed_id": "a", "commands": [{"type": "WRITE", "lba": 0, "len": 1, "pattern": 4294967296}]}',  # noqa: E501
        "commands[0].pattern",
    ),
    "second command bad": (
        '{"seed_id": "a", "commands": [{"type": "FENCE"},\n{"type": "READ", "lba": 0, "len": -4}]}',
        ":2: commands[1].len",
    ),
}


@pytest.mark.parametrize("name", sorted(BAD_WORKLOADS))
def test_bad_workload_json_is_rejected(qoslab, tmp_path, name):
    text, needle = BAD_WORKLOADS[name]
    path = tmp_path / "w.json"
    path.write_text(text, encoding="utf-8")
    log = tmp_path / "run.log"
    sched = tmp_path / "run.sched"
    done = qoslab("nvmelite", "run", path, *RUN, "--log", log, "--schedule-out", sched)
    assert_rejected(done, path, needle)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["w.json"]


@pytest.mark.parametrize(
    "option,value",
    [
        ("--policy", "LIFO"),
        ("--bound", "-1"),
        ("--bound", "4294967296"),
        ("--bound", "1.5"),
        ("--fault", "CRASH"),
        ("--submit-window", "-2"),
        ("--seed", "18446744073709551616"),
        ("--seed", "x"),
    ],
)
def test_bad_run_parameters_are_rejected(qoslab, tmp_path, option, value):
    args = {"--policy": "FIFO", "--bound": "0", "--fault": "NONE", "--seed": "0"}
    args[option] = value
    flat = [x for kv in args.items() for x in kv]
    log = tmp_path / "run.log"
    done = qoslab("nvmelite", "run", GOOD, *flat, f"{option}={value}", "--log", log)
    assert_rejected(done, option, value)
    assert not log.exists()


def test_missing_workload_file(qoslab, tmp_path):
    done = qoslab("nvmelite", "run", tmp_path / "nope.json", *RUN)
    assert_rejected(done, "nope.json", "No such file")


def test_lenient_parameter_spellings_are_accepted(qoslab):
    done = qoslab(
        "nvmelite", "run", GOOD, "--policy", "batched", "--bound", "+03", "--fault", "timeout",
        "--seed", "7", "--submit-window", "INF", check=True,
    )  # fmt: skip
    assert done.stdout.startswith(
        "RUN_HEADER(run_id=seed_002_BATCHED_3_7_TIMEOUT, seed_id=seed_002, schedule_seed=7, "
        "policy=BATCHED, bound_k=3, fault_mode=TIMEOUT, n_cmds=8, submit_window=inf, "
    )


# ---- what the spec accepts ---------------------------------------------------------------------
# FIFO, k=0, seed 0: the decision bits of splitmix64(0) are 1, 0, 1, 0 (spec section 4), so a
# three-command workload runs S0 C0 S1 S2 C1 C2.


def run_workload(qoslab, tmp_path, workload, *args):
    path = tmp_path / "w.json"
    path.write_text(json.dumps(workload) if not isinstance(workload, str) else workload)
    return qoslab("nvmelite", "run", path, *(args or RUN), check=True)


def header(run_id, seed_id, n, policy="FIFO", k="0", fault="NONE", sw="inf"):
    return (
        f"RUN_HEADER(run_id={run_id}, seed_id={seed_id}, schedule_seed=0, policy={policy}, "
        f"bound_k={k}, fault_mode={fault}, n_cmds={n}, submit_window={sw}, "
        "scheduler_version=v1.0, git_commit=)\n"
    )


def test_empty_workload_gives_header_and_run_end(qoslab, tmp_path):
    done = run_workload(qoslab, tmp_path, {"seed_id": "e", "commands": []})
    assert done.stdout == header("e_FIFO_0_0_NONE", "e", 0) + (
        "RUN_END(pending_left=0, pending_peak=0)\n"
    )
    assert "completion_rate: 1.000000" in done.stderr
    assert "FE: 1.000000" in done.stderr


def test_submit_window_0_runs_nothing(qoslab, tmp_path):
    done = run_workload(qoslab, tmp_path, GOOD.read_text(), *RUN, "--submit-window", "0")
    assert done.stdout.splitlines()[1:] == ["RUN_END(pending_left=0, pending_peak=0)"]
    assert "completion_rate: 0.000000" in done.stderr


def test_storage_edges_len_0_beyond_the_end_and_wrapping_lba(qoslab, tmp_path):
    workload = {
        "seed_id": "edges",
        "commands": [
            {"type": "READ", "lba": 1020, "len": 4},
            {"type": "READ", "lba": 1020, "len": 5},
            {"type": "READ", "lba": 18446744073709551615, "len": 2},
        ],
    }
    done = run_workload(qoslab, tmp_path, workload)
    assert done.stdout == header("edges_FIFO_0_0_NONE", "edges", 3) + (
        "SUBMIT(cmd_id=0, cmd_type=READ)\n"
        "COMPLETE(cmd_id=0, status=OK, out=0)\n"
        "SUBMIT(cmd_id=1, cmd_type=READ)\n"
        "SUBMIT(cmd_id=2, cmd_type=READ)\n"
        "COMPLETE(cmd_id=1, status=ERR, out=0)\n"
        "COMPLETE(cmd_id=2, status=OK, out=0)\n"
        "RUN_END(pending_left=0, pending_peak=2)\n"
    )
    assert "n_err: 1" in done.stderr
    assert "completion_rate: 0.666667" in done.stderr


def test_len_0_at_the_end_is_ok_and_past_it_is_err_and_fence_lines(qoslab, tmp_path):
    workload = {
        "seed_id": "zero",
        "commands": [
            {"type": "READ", "lba": 1024, "len": 0},
            {"type": "READ", "lba": 1025, "len": 0},
            {"type": "FENCE", "lba": "ignored"},
        ],
    }
    done = run_workload(qoslab, tmp_path, workload)
    assert done.stdout.splitlines()[1:] == [
        "SUBMIT(cmd_id=0, cmd_type=READ)",
        "COMPLETE(cmd_id=0, status=OK, out=0)",
        "SUBMIT(cmd_id=1, cmd_type=READ)",
        "SUBMIT(cmd_id=2, cmd_type=FENCE)",
        "FENCE(fence_id=0)",
        "COMPLETE(cmd_id=1, status=ERR, out=0)",
        "COMPLETE(cmd_id=2, status=OK, out=0)",
        "RUN_END(pending_left=0, pending_peak=2)",
    ]
    # Latencies (non-FENCE): C0-S0 = 1, C1-S1 = 5-2 = 3 -> p95 index floor(0.95) = 0.
    m = dict(line.split(": ", 1) for line in done.stderr.splitlines())
    assert (m["p95_latency_step"], m["mean_latency_step"], m["max_latency_step"]) == (
        "1.000000",
        "2.000000",
        "3.000000",
    )
    assert m["n_ok"] == "2" and m["n_err"] == "1"


def test_largest_pattern_is_visible_after_write_visible(qoslab, tmp_path):
    workload = {
        "seed_id": "vis",
        "commands": [
            {"type": "WRITE", "lba": 5, "len": 1, "pattern": 4294967295},
            {"type": "WRITE_VISIBLE", "lba": 5, "len": 1},
            {"type": "READ", "lba": 5, "len": 1},
        ],
    }
    done = run_workload(qoslab, tmp_path, workload)
    assert done.stdout.splitlines()[-2] == "COMPLETE(cmd_id=2, status=OK, out=4294967295)"


def test_seed_id_with_spaces_commas_and_parentheses_is_printed_verbatim(qoslab, tmp_path):
    done = run_workload(qoslab, tmp_path, {"seed_id": "a, b (c)=d", "commands": []})
    assert done.stdout.startswith(
        "RUN_HEADER(run_id=a, b (c)=d_FIFO_0_0_NONE, seed_id=a, b (c)=d, schedule_seed=0"
    )


# ---- matrix configs ------------------------------------------------------------------------


def config_text(seeds=("seeds/seed_002.json",), **over):
    keys = {
        "policies": "[FIFO, RANDOM]",
        "bounds": '["0", "inf"]',
        "faults": "[NONE]",
        "schedule_seeds": '"0-3"',
        "scheduler_version": '"v1.0"',
    }
    keys.update(over)
    lines = ["seeds:"] + [f'  - "{s}"' for s in seeds]
    lines += [f"{k}: {v}" for k, v in keys.items() if v is not None]
    return "\n".join(lines) + "\n"


BAD_CONFIGS = {
    "reversed seed range": ({"schedule_seeds": '"5-2"'}, "schedule_seeds", "5-2"),
    "signed seed": ({"schedule_seeds": '"+1-3"'}, "schedule_seeds", "+1-3"),
    "unknown policy": ({"policies": "[FIFO, LIFO]"}, "policies[1]", "LIFO"),
    "negative bound": ({"bounds": '["0", "-1"]'}, "bounds[1]", "-1"),
    "bound beyond u32": ({"bounds": "[4294967296]"}, "bounds[0]", "4294967296"),
    "float bound": ({"bounds": "[1.0]"}, "bounds[0]", "1.0"),
    "unknown fault": ({"faults": "[NONE, CRASH]"}, "faults[1]", "CRASH"),
    "missing key": ({"scheduler_version": None}, "scheduler_version"),
    "not a list": ({"policies": "FIFO"}, "policies: expected a list"),
    "empty list": ({"faults": "[]"}, "faults: expected at least one entry"),
}


@pytest.mark.parametrize("name", sorted(BAD_CONFIGS))
def test_bad_config_runs_nothing(qoslab, tmp_path, name):
    over, *needles = BAD_CONFIGS[name]
    (tmp_path / "seeds").mkdir()
    (tmp_path / "seeds" / "seed_002.json").write_bytes(GOOD.read_bytes())
    config = tmp_path / "c.yaml"
    config.write_text(config_text(**over))
    done = qoslab("nvmelite", "matrix", config, "--out", tmp_path / "out")
    assert_rejected(done, config, *needles)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["c.yaml", "seeds"]


@pytest.mark.parametrize(
    "second,needle",
    [
        ("seeds/missing.json", "seeds: workload file 'seeds/missing.json' not found"),
        ("seeds/bad.json", "commands[0].len"),
    ],
)
def test_one_bad_workload_stops_the_whole_matrix(qoslab, tmp_path, second, needle):
    (tmp_path / "seeds").mkdir()
    (tmp_path / "seeds" / "seed_002.json").write_bytes(GOOD.read_bytes())
    (tmp_path / "seeds" / "bad.json").write_text(
        '{"seed_id": "bad", "commands": [{"type": "READ", "lba": 0, "len": 1.5}]}'
    )
    config = tmp_path / "c.yaml"
    config.write_text(config_text(seeds=("seeds/seed_002.json", second)))
    done = qoslab("nvmelite", "matrix", config, "--out", tmp_path / "out")
    assert_rejected(done, needle)
    assert not (tmp_path / "out").exists()
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")]


def test_unwritable_out_dir(qoslab, tmp_path):
    (tmp_path / "seeds").mkdir()
    (tmp_path / "seeds" / "seed_002.json").write_bytes(GOOD.read_bytes())
    config = tmp_path / "c.yaml"
    config.write_text(config_text())
    blocker = tmp_path / "file"
    blocker.write_text("not a directory")
    done = qoslab("nvmelite", "matrix", config, "--out", blocker / "sub" / "out")
    assert_rejected(done, "--out", "Not a directory")
    done = qoslab("nvmelite", "matrix", config, "--out", blocker)
    assert_rejected(done, "--out", "not a directory")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["c.yaml", "file", "seeds"]


def test_config_paths_are_relative_to_the_config_and_yaml_literals(qoslab, tmp_path):
    (tmp_path / "cfg" / "seeds").mkdir(parents=True)
    (tmp_path / "cfg" / "seeds" / "seed_002.json").write_bytes(GOOD.read_bytes())
    config = tmp_path / "cfg" / "c.yaml"
    # 03 stays the text "03" (bound 3), ~ is the literal text "~" (spec section 11).
    config.write_text(
        config_text(bounds='["03", +1, 0]', schedule_seeds="7", scheduler_version="~")
    )
    done = qoslab("nvmelite", "matrix", config, "--out", tmp_path / "out", cwd="/", check=True)
    assert done.returncode == 0
    runs = (tmp_path / "out" / "runs.csv").read_text().splitlines()
    assert len(runs) == 1 + 2 * 3
    assert runs[1].startswith("seed_002_FIFO_0_7_NONE,")
    log = (tmp_path / "out" / "logs" / "seed_002_RANDOM_3_7_NONE.log").read_text()
    assert "bound_k=3, " in log and "scheduler_version=~, git_commit=)" in log


# ---- schedule files -------------------------------------------------------------------------


@pytest.fixture
def recorded(qoslab, tmp_path):
    sched = tmp_path / "s.sched"
    qoslab(
        "nvmelite", "run", GOOD, "--policy", "RANDOM", "--bound", "2", "--fault", "TIMEOUT",
        "--seed", "11", "--schedule-out", sched, check=True,
    )  # fmt: skip
    return sched


def edit(path, old, new, count=1):
    text = path.read_text()
    assert old in text
    path.write_text(text.replace(old, new, count))
    return path


@pytest.mark.parametrize(
    "old,new,needle",
    [
        ("steps\nsubmit\n", "steps\ncomplete\n", ":11: nothing is pending: expected 'submit'"),
        ("qoslab-nvmelite-schedule v1", "qoslab-nvmelite-schedule v2", ":1: expected the first"),
        ("policy=RANDOM", "policy=LIFO", ":4: policy: expected a policy"),
        ("seed_id=seed_002", "seed_id=other", ":2: seed_id 'other' is not the workload's"),
        ("end\n", "", "expected 'end'"),
        ("end\n", "end\nsubmit\n", "nothing may follow 'end'"),
        ("timeout", "complete draw=1", "the TIMEOUT fault fires here"),
        ("complete draw=", "complete nodraw=", "expected a step"),
    ],
)
def test_infeasible_or_malformed_schedules_are_input_errors(
    qoslab, tmp_path, recorded, old, new, needle
):
    edit(recorded, old, new)
    done = qoslab("nvmelite", "replay", GOOD, recorded, "--log", tmp_path / "x.log")
    assert_rejected(done, recorded, needle)
    assert not (tmp_path / "x.log").exists()
