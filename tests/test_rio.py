"""`qoslab rio crash-check` and `qoslab rio replay`: power cut after every event of seeded
ordered workloads, recovery, and the prefix and durability checks."""

import json

import pytest


def _check(qoslab, tmp_path, *args):
    out = tmp_path / "out"
    done = qoslab("rio", "crash-check", "--workloads", "30", "--out", str(out), *args)
    summary = json.loads((out / "summary.json").read_text())
    return done, summary, out


@pytest.mark.parametrize("stack", ["rio", "linux", "horae"])
@pytest.mark.parametrize("plp", ["true", "false"])
def test_ordered_stacks_keep_a_prefix_at_every_crash_point(qoslab, tmp_path, stack, plp):
    done, s, _ = _check(qoslab, tmp_path, "--stack", stack, "--set", f"plp={plp}")
    assert done.returncode == 0, done.stderr
    assert (s["stack"], s["workloads"], s["exhaustive_workloads"]) == (stack, 30, 30)
    # Every event boundary of every workload: more points than workloads, by far.
    assert s["crash_points"] > 30 * 20
    assert (s["prefix_violations"], s["acked_lost"], s["reproducers"]) == (0, 0, [])
    assert ("plp", plp) in [tuple(p) for p in s["config"]]


def test_orderless_breaks_the_order_and_its_reproducer_replays(qoslab, tmp_path):
    done, s, out = _check(qoslab, tmp_path, "--stack", "orderless")
    assert done.returncode == 1
    assert s["prefix_violations"] > 0
    first = s["reproducers"][0]
    replayed = qoslab("rio", "replay", str(out / "reproducer-0.json"))
    assert replayed.returncode == 1
    v = first["violations"][0]
    assert f"{v['kind']} in stream {v['stream']}: {v['detail']}" in replayed.stdout
    assert "reproducer-0.json" in done.stdout


def test_rio_without_in_order_completion_loses_acknowledged_writes(qoslab, tmp_path):
    args = ("--set", "in_order_completion=false", "--set", "plp=true")
    done, s, _ = _check(qoslab, tmp_path, *args)
    assert done.returncode == 1
    assert s["acked_lost"] > 0
    assert all(r["violations"][0]["kind"] == "acked_lost" for r in s["reproducers"])


def test_rio_without_in_order_completion_is_caught_at_the_defaults(qoslab, tmp_path):
    # Issue 32: at its defaults (50 workloads, seed 1) the checker once missed this mutant.
    done = qoslab("rio", "crash-check", "--set", "in_order_completion=false")
    assert done.returncode == 1, done.stdout
    assert "rio: 50 workloads" in done.stdout


def test_long_workloads_are_sampled_and_the_count_is_stated(qoslab, tmp_path):
    done, s, _ = _check(qoslab, tmp_path, "--exhaustive-limit", "10", "--samples", "7")
    assert done.returncode == 0
    assert (s["exhaustive_workloads"], s["sampled_workloads"]) == (0, 30)
    assert s["crash_points"] == 30 * 7


def test_the_summary_is_byte_identical_across_runs(qoslab, tmp_path):
    a = qoslab("rio", "crash-check", "--stack", "orderless", "--out", str(tmp_path / "a"))
    b = qoslab("rio", "crash-check", "--stack", "orderless", "--out", str(tmp_path / "b"))
    assert a.returncode == b.returncode == 1
    for name in ("summary.json", "reproducer-0.json"):
        assert (tmp_path / "a" / name).read_bytes() == (tmp_path / "b" / name).read_bytes()


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--stack", "rioo"], "--stack: expected one of orderless, linux, horae, rio, got 'rioo'"),
        (["--set", "plp=maybe"], "field 'fabric.plp': expected true or false, got 'maybe'"),
        (["--set", "plp"], "--set: expected KEY=VALUE, got 'plp'"),
        (["--workloads", "0"], "--workloads: expected at least 1, got 0"),
        # Memory grows with a workload's commands: 100,000,000 blocks took 5.7 GB.
        (["--max-blocks", "100000000"], "--max-blocks: at most 65536 (a 256 MiB write), got"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(qoslab, tmp_path, args, message):
    done = qoslab("rio", "crash-check", "--out", str(tmp_path / "o"), *args)
    assert done.returncode == 2
    assert message in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1
    assert not (tmp_path / "o").exists()


def test_a_broken_reproducer_is_named_with_its_line(qoslab, tmp_path):
    bad = tmp_path / "r.json"
    bad.write_text('{"stack": "rio",\n "config": 3}')
    done = qoslab("rio", "replay", str(bad))
    assert done.returncode == 2
    assert done.stderr.startswith(f"qoslab: error: {bad}: line 2")


# The crash of one target server (document 4.4.1, "Target recovery"): the initiator and the
# other targets stay up; at every event boundary each target crashes in turn.


@pytest.mark.parametrize("stack", ["rio", "linux"])
def test_ordered_stacks_keep_a_prefix_when_one_target_crashes(qoslab, tmp_path, stack):
    done, s, _ = _check(qoslab, tmp_path, "--stack", stack, "--crash", "target")
    assert done.returncode == 0, done.stderr
    assert (s["crash"], s["crashed_targets"], s["exhaustive_workloads"]) == ("target", [0, 1], 30)
    # Both targets at every boundary of every workload (before the first event included).
    assert s["crash_points"] == 2 * (s["events"] + 30)
    # The crashes did destroy completed writes in a target's cache (flash, no PLP) ...
    assert s["cache_losses"] > 100
    # ... and recovery still left every stream at a prefix, every acknowledged FLUSH whole.
    assert (s["prefix_violations"], s["acked_lost"], s["reproducers"]) == (0, 0, [])


def test_orderless_breaks_the_order_when_one_target_crashes(qoslab, tmp_path):
    done, s, out = _check(qoslab, tmp_path, "--stack", "orderless", "--crash", "target")
    assert done.returncode == 1
    assert s["prefix_violations"] > 0
    first = json.loads((out / "reproducer-0.json").read_text())
    assert first["crash"] == "target" and first["crashed_target"] in (0, 1)
    replayed = qoslab("rio", "replay", str(out / "reproducer-0.json"))
    assert replayed.returncode == 1
    v = first["violations"][0]
    assert f"{v['kind']} in stream {v['stream']}: {v['detail']}" in replayed.stdout
    assert f"crash of target {first['crashed_target']} after" in done.stdout


def test_one_named_target_crashes_at_every_boundary(qoslab, tmp_path):
    done, s, _ = _check(qoslab, tmp_path, "--crash", "target", "--target", "1")
    assert done.returncode == 0, done.stderr
    assert s["crashed_targets"] == [1]
    assert s["crash_points"] == s["events"] + 30
    done = qoslab("rio", "crash-check", "--workloads", "30", "--out", str(tmp_path / "p"))
    assert done.returncode == 0, done.stderr
    power = json.loads((tmp_path / "p" / "summary.json").read_text())
    # Same workloads and schedules: the same events, judged against another failure.
    assert (power["crash"], power["events"]) == ("power", s["events"])
    assert "crashed_targets" not in power and "cache_losses" not in power


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--crash", "tar"], "--crash: expected power or target, got 'tar' (did you mean target?)"),
        (["--target", "1"], "--target: only with --crash target"),
        (["--crash", "target", "--target", "2"], "--target: expected 0 to 1, got 2"),
    ],
)
def test_bad_crash_choice_is_one_line_and_exit_2(qoslab, tmp_path, args, message):
    done = qoslab("rio", "crash-check", "--out", str(tmp_path / "o"), *args)
    assert done.returncode == 2
    assert message in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1
    assert not (tmp_path / "o").exists()


def test_rio_without_in_order_completion_recycles_what_a_target_crash_then_loses(qoslab, tmp_path):
    # An out-of-order acknowledgement of a FLUSH moves the PMR head past attributes of earlier
    # writes still in the cache: the crashed target's log no longer names them for replay.
    args = ("--crash", "target", "--set", "in_order_completion=false", "--workloads", "2000")
    out = tmp_path / "o"
    done = qoslab("rio", "crash-check", "--out", str(out), *args)
    s = json.loads((out / "summary.json").read_text())
    assert done.returncode == 1
    assert s["prefix_violations"] > 0 and s["acked_lost"] > 0
