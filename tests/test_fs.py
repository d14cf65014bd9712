"""`qoslab fs crash-check`: the file systems survive every crash point; without barriers ext4
does not. `qoslab fs study`: fsync-append through `qoslab sim` on the three (docs/fs.md)."""

from __future__ import annotations

import csv
import json

import pytest


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


def test_fs_study_runs_every_point_with_three_seeds_and_writes_csv_and_plot(qoslab, tmp_path):
    out = tmp_path / "study"
    done = qoslab("fs", "study", "--quick", "--out", str(out))
    assert done.returncode == 0, done.stderr
    runs = list(csv.DictReader((out / "runs.csv").open()))
    points = {(r["device"], r["fs"], r["threads"]) for r in runs}
    assert len(points) == 2 * 3 * 2  # devices x file systems x thread counts
    assert len(runs) == 3 * len(points)
    summary = list(csv.DictReader((out / "summary.csv").open()))
    assert {r["seeds"] for r in summary} == {"3"}
    assert all(float(r["kops_mean"]) > 0 for r in summary)
    # ext4 on Rio's flash target: 20 appends per thread, each fsync a commit of its own at one
    # thread (nothing to group with).
    one = [r for r in runs if (r["device"], r["fs"], r["threads"]) == ("rio-flash", "ext4", "1")]
    assert {float(r["commits"]) for r in one} == {20.0}
    assert (out / "throughput.png").stat().st_size > 10_000
    assert "riofs/ext4" in done.stdout


@pytest.mark.parametrize(
    ("workload", "operations"),
    [("varmail", {"deletefile1", "createfile2", "fsyncfile3", "readfile4"}), ("fillsync", {"put"})],
)
def test_fs_study_runs_the_applications_of_figure_15(qoslab, tmp_path, workload, operations):
    """Varmail and fillsync, each thread a job clone running the application: the study's
    throughput is the application's operations per second, beside the document's ratios."""
    out = tmp_path / "study"
    done = qoslab(
        "fs",
        "study",
        "--workload",
        workload,
        "--quick",
        "--devices",
        "rio-optane",
        "--out",
        str(out),
    )
    assert done.returncode == 0, done.stderr
    runs = list(csv.DictReader((out / "runs.csv").open()))
    assert len(runs) == 3 * 2 * 3  # file systems x thread counts x seeds
    assert all(float(r["kops"]) > 0 for r in runs)
    ratios = list(csv.DictReader((out / "ratios.csv").open()))
    doc = {"varmail": {"2.3", "1.3"}, "fillsync": {"1.9", "1.5"}}[workload]
    assert {r["document"] for r in ratios} == doc
    job = (out / f"{workload}.fio").read_text()
    assert f"app={workload}" in job
    report = json.loads(
        qoslab(
            "sim",
            str(out / f"{workload}.fio"),
            "--device",
            "rio-optane",
            "--set",
            "fs.mount=true",
            "--output-format",
            "json",
        ).stdout
    )
    assert operations <= set(report["jobs"][0]["qoslab_app"]["operations"])


def test_fs_study_refuses_bad_thread_counts(qoslab, tmp_path):
    done = qoslab("fs", "study", "--threads", "1,x", "--out", str(tmp_path / "s"))
    assert done.returncode == 2
    assert "--threads: expected comma-separated integers" in done.stderr


def test_sim_runs_buffered_jobs_only_on_a_mounted_file_system(qoslab, tmp_path):
    """`--set fs.mount=true` puts the file system and its page cache on the path: fio's
    default direct=0 runs there, each fsync a commit; without it direct=0 is refused."""
    job = tmp_path / "append.fio"
    job.write_text("[append]\nrw=write\nbs=4k\nsize=1g\nnumber_ios=10\nfsync=1\n")
    args = ("sim", str(job), "--device", "rio-flash", "--output-format", "json")
    done = qoslab(*args, "--set", "fs.mount=true")
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    stages = {s["stage"]: s["counters"] for s in report["qoslab"]["stages"]}
    assert stages["fs"]["fsyncs"] == 10 and stages["fs"]["commits"] == 10, stages["fs"]
    refused = qoslab(*args)
    assert refused.returncode == 2
    assert "direct=0" in refused.stderr and "fs.mount=true" in refused.stderr
    assert "Traceback" not in refused.stderr
