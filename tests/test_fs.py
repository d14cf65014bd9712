"""`qoslab fs crash-check`: the file systems survive every crash point; without barriers ext4
does not (docs/fs.md)."""

from __future__ import annotations

import json


def test_each_file_system_recovers_consistent_with_every_fsync_kept(qoslab, tmp_path):
    for fs in ("ext4", "horaefs", "riofs"):
        done = qoslab(
            "fs", "crash-check", "--fs", fs, "--workloads", "6", "--out", str(tmp_path / fs)
        )
        assert done.returncode == 0, done.stderr
        summary = json.loads((tmp_path / fs / "summary.json").read_text())
        assert summary["crash_points"] > 100
        assert summary["states"] > summary["crash_points"]
        assert summary["violating_states"] == 0
        assert f"{fs}: 6 workloads" in done.stdout


def test_ext4_without_barriers_loses_fsynced_data_and_says_where(qoslab, tmp_path):
    done = qoslab(
        "fs", "crash-check", "--set", "barrier=false", "--workloads", "10",
        "--out", str(tmp_path / "nobarrier"),
    )  # fmt: skip
    assert done.returncode == 1, done.stderr
    summary = json.loads((tmp_path / "nobarrier" / "summary.json").read_text())
    assert summary["violating_states"] > 0
    repro = json.loads((tmp_path / "nobarrier" / "reproducer-0.json").read_text())
    assert any("fsynced" in p for p in repro["problems"])
    assert repro["calls"], "the reproducer lists the workload's calls"


def test_bad_input_is_one_line_and_exit_status_2(qoslab):
    for args, says in (
        (["--fs", "xfs"], "--fs: expected one of ext4, horaefs, riofs, got 'xfs'"),
        (["--set", "nope=1"], "--set: unknown key 'fs.ext4.nope'"),
        (["--set", "fs.dirty_ratio=7"], "--set: field 'fs.dirty_ratio'"),
        (["--threads", "0"], "0 is not in the range 1<=x<=1000000"),
    ):
        done = qoslab("fs", "crash-check", *args)
        assert done.returncode == 2, (args, done.stderr)
        assert says in done.stderr, (args, done.stderr)
        assert "Traceback" not in done.stderr
