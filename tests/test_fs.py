"""`qoslab fs crash-check`: the file systems survive every crash point; without barriers ext4
does not. `qoslab fs study`: fsync-append through `qoslab sim` on the three (docs/fs.md).
`qoslab fs kernel`: its parts without the guest (the guest run is docs/fs.md's command)."""

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
    # ext4 on Rio's flash target: 20 appends per thread, 19 fsyncs (fio syncs when it fetches
    # the next write: none after the last), each a commit of its own at one thread (nothing to
    # group with).
    one = [r for r in runs if (r["device"], r["fs"], r["threads"]) == ("rio-flash", "ext4", "1")]
    assert {float(r["commits"]) for r in one} == {19.0}
    assert (out / "throughput.png").stat().st_size > 10_000
    assert "riofs/ext4" in done.stdout
    # Figure 13's fsync latency, mean and p99 (fio's, of every thread's fsyncs together), beside
    # the throughput: RioFS's against the others'.
    ratios = list(csv.DictReader((out / "ratios.csv").open()))
    document = {(r["figure"], r["vs"]): r["document"] for r in ratios}
    assert document == {
        ("throughput", "ext4"): "3",
        ("throughput", "horaefs"): "1.2",
        ("fsync_lat_mean_us", "ext4"): "0.33",
        ("fsync_lat_mean_us", "horaefs"): "0.82",
        ("fsync_lat_p99_us", "ext4"): "0.5",
        ("fsync_lat_p99_us", "horaefs"): "0.8",
    }
    # Every run has its p99 (fio's bins: a bin's middle, so within a bin's width of the mean
    # when every fsync takes the same time).
    assert all(float(r["fsync_lat_p99_us"]) >= 0.95 * float(r["fsync_lat_mean_us"]) for r in runs)
    for r in ratios:
        point = (r["device"], r["threads"])
        by = {s["fs"]: s for s in summary if (s["device"], s["threads"]) == point}
        column = "kops_mean" if r["figure"] == "throughput" else r["figure"]
        ratio = float(by["riofs"][column]) / float(by[r["vs"]][column])
        assert float(r["qoslab"]) == pytest.approx(ratio, rel=1e-3)
    # Figure 14's latency breakdown, per point: each kind of block (D, JM, JC) leaves the file
    # system, then the host, then completes, all before the fsync returns, whose mean is fio's.
    breakdown = list(csv.DictReader((out / "breakdown.csv").open()))
    assert {(r["device"], r["fs"], r["threads"]) for r in breakdown} == points
    lat = {(s["device"], s["fs"], s["threads"]): float(s["fsync_lat_mean_us"]) for s in summary}
    for r in breakdown:
        point = (r["device"], r["fs"], r["threads"])
        assert float(r["breakdown_fsyncs"]) >= 19 * int(r["threads"]) * 0.5, r
        for part in ("d", "jm", "jc"):
            sent, out_, done = (float(r[f"{part}_{m}_us"]) for m in ("sent", "dispatched", "done"))
            assert sent <= out_ < done <= float(r["end_us"]), (part, r)
        assert float(r["end_us"]) == pytest.approx(lat[point], rel=0.05), r
    # The points are the `fs` sweep study's, kept in the store beside --out: a rerun into
    # another folder, on one worker, runs none of them and writes the same bytes.
    again = tmp_path / "again"
    store = str(tmp_path / "study.store")
    rerun = qoslab("fs", "study", "--quick", "--jobs", "1", "--store", store, "--out", str(again))
    assert rerun.returncode == 0, rerun.stderr
    meta = json.loads((again / "meta.json").read_text())
    assert meta["points"] == {"total": 36, "run": 0, "already_stored": 36}
    for name in ("runs.csv", "summary.csv", "ratios.csv", "breakdown.csv", "throughput.png"):
        assert (again / name).read_bytes() == (out / name).read_bytes(), name


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


def test_fs_study_refuses_bad_input_in_one_line_and_writes_nothing(qoslab, tmp_path):
    out = tmp_path / "s"
    for args, says in (
        (["--threads", "1,x"], "--threads: expected comma-separated integers"),
        (["--quick", "--set", "nope=1"], "--set: no tunable 'nope'"),
        (["--quick", "--set", "fs.syscall_ns"], "--set: expected KEY=VALUE, got 'fs.syscall_ns'"),
        # A value only the simulator checks fails every point: the first one's error.
        (["--quick", "--set", "fs.syscall_ns=abc"], "point 1 of 36: --set fs.syscall_ns=abc"),
    ):
        done = qoslab("fs", "study", *args, "--out", str(out))
        assert done.returncode == 2, (args, done.stderr)
        assert says in done.stderr, (args, done.stderr)
        assert len(done.stderr.strip().splitlines()) == 1, done.stderr
        assert list(tmp_path.iterdir()) == [], args  # no output, no store


def test_sim_runs_buffered_jobs_only_on_a_mounted_file_system(qoslab, tmp_path):
    """`--set fs.mount=true` puts the file system and its page cache on the path: fio's
    default direct=0 runs there, each fsync a commit (10 writes at fsync=1: fio 3.33's 9
    fsyncs, none after the last write); without it direct=0 is refused."""
    job = tmp_path / "append.fio"
    job.write_text("[append]\nrw=write\nbs=4k\nsize=1g\nnumber_ios=10\nfsync=1\n")
    args = ("sim", str(job), "--device", "rio-flash", "--output-format", "json")
    done = qoslab(*args, "--set", "fs.mount=true")
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    stages = {s["stage"]: s["counters"] for s in report["qoslab"]["stages"]}
    assert stages["fs"]["fsyncs"] == 9 and stages["fs"]["commits"] == 9, stages["fs"]
    refused = qoslab(*args)
    assert refused.returncode == 2
    assert "direct=0" in refused.stderr and "fs.mount=true" in refused.stderr
    assert "Traceback" not in refused.stderr


def test_a_job_that_reads_a_file_reads_the_file_fio_laid_out_before_it_started(qoslab, tmp_path):
    """fio lays out the file of a job that reads it (written whole, fsynced, closed) before the
    job starts, and invalidate=1 drops its pages: so every page the job reads comes from the
    device, the job writes nothing, and readahead stops at the file's end (size=256k: 64
    pages, 512 sectors, whatever the readahead window)."""
    job = tmp_path / "read.fio"
    job.write_text("[read]\nrw=read\nbs=4k\nsize=256k\nioengine=psync\n")
    done = qoslab("sim", str(job), "--output-format", "json", "--set", "fs.mount=true")
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert (report["jobs"][0]["read"]["total_ios"], report["jobs"][0]["read"]["io_bytes"]) == (
        64,
        262144,
    )
    stages = {s["stage"]: s["counters"] for s in report["qoslab"]["stages"]}
    assert stages["fs"]["pages_read"] == 64 and stages["fs"]["pages_written"] == 0, stages["fs"]
    assert stages["block"]["read_sectors"] == 512 and stages["block"]["write_ios"] == 0


def test_jobs_that_name_one_file_share_it_as_fios_jobs_do(qoslab, tmp_path):
    """fio's jobs (and numjobs clones) that name one file open that one file: one inode, one
    page cache, laid out once. Two sequential readers of one 256 KiB file side by side read its
    64 pages from the device once (512 sectors), where two readers of a file each (no
    filename: fio names each clone's file) read 128; fio 3.33 keeps $jobnum in a filename
    as written, so that is one file too."""
    base = "[global]\nrw=read\nbs=4k\nsize=256k\nioengine=psync\n"

    def run(text: str):
        job = tmp_path / "shared.fio"
        job.write_text(text)
        return qoslab("sim", str(job), "--output-format", "json", "--set", "fs.mount=true")

    sectors = {}
    for name in ("filename=data\n", "filename=data.$jobnum\n", ""):
        done = run(base + f"{name}[readers]\nnumjobs=2\n")
        assert done.returncode == 0, done.stderr
        report = json.loads(done.stdout)
        assert [j["read"]["total_ios"] for j in report["jobs"]] == [64, 64]
        stages = {s["stage"]: s["counters"] for s in report["qoslab"]["stages"]}
        sectors[name] = stages["block"]["read_sectors"]
    assert list(sectors.values()) == [512, 512, 1024]


def test_invalidate_drops_a_files_clean_pages_at_each_open_as_fio_does(qoslab, tmp_path):
    """fio's invalidate=1 (its default) calls posix_fadvise(POSIX_FADV_DONTNEED) on the whole
    file each time a job opens it: at the job's start and at each pass of `loops` (strace of
    fio 3.33). Linux starts writeback of the file's dirty pages (WB_SYNC_NONE, not waited for)
    and drops the pages that are clean. Measured with fio 3.33 on ext4 on a loop device, 64 MiB
    files, bytes read from the disk (/sys/block/loopN/stat): one reader with loops=2, 128 MiB
    (64 with invalidate=0); a writer with end_fsync=1, then after a stonewall a reader of its
    file, 64 MiB (0 with invalidate=0). Here a 256 KiB file: 64 pages, 512 sectors a pass."""
    base = "[global]\nbs=4k\nsize=256k\nioengine=psync\nfilename=data\n"

    def run(text: str):
        job = tmp_path / "inval.fio"
        job.write_text(base + text)
        done = qoslab("sim", str(job), "--output-format", "json", "--set", "fs.mount=true")
        assert done.returncode == 0, done.stderr
        stages = {s["stage"]: s["counters"] for s in json.loads(done.stdout)["qoslab"]["stages"]}
        return stages["fs"], stages["block"]

    for invalidate, sectors in ((1, 1024), (0, 512)):
        # Two passes over the file, and two readers one after the other: with invalidate=1
        # each pass and each reader reads the whole file from the device.
        fs, block = run(f"invalidate={invalidate}\n[r]\nrw=read\nloops=2\n")
        assert block["read_sectors"] == sectors and fs["fadvise_dontneed_calls"] == 2 * invalidate
        fs, block = run(f"invalidate={invalidate}\n[a]\nrw=read\n[b]\nstonewall\nrw=read\n")
        assert block["read_sectors"] == sectors and fs["fadvise_dontneed_calls"] == 2 * invalidate

    # A writer that synced its file, then its reader: the file's pages are clean when the
    # reader opens it, so with invalidate=1 it reads them from the device (the layout of the
    # file, done before the run, left none cached).
    then_read = "[w]\nrw=write\n{sync}\n[r]\nstonewall\nrw=read\n"
    fs, block = run("invalidate=1\n" + then_read.format(sync="end_fsync=1"))
    assert (block["read_sectors"], fs["invalidated_pages"]) == (512, 64)
    fs, block = run("invalidate=0\n" + then_read.format(sync="end_fsync=1"))
    assert (block["read_sectors"], fs["cache_hit_pages"]) == (0, 64)
    # Unsynced, the pages are dirty at the reader's open: their writeback starts there (the
    # 64 pages written back) and they stay cached under writeback, so the reader finds them.
    fs, block = run("invalidate=1\n" + then_read.format(sync=""))
    assert (fs["pages_written"], block["read_sectors"], fs["invalidated_pages"]) == (64, 0, 0)
    assert fs["dirty_pages_at_end"] == 0 and fs["cache_hit_pages"] == 64
    fs, block = run("invalidate=0\n" + then_read.format(sync=""))
    assert (fs["pages_written"], fs["dirty_pages_at_end"], block["read_sectors"]) == (0, 64, 0)


def test_a_commit_timer_fires_once_per_transaction_however_busy_the_journal(qoslab, tmp_path):
    """jbd2 arms a transaction's commit timer once, when the transaction starts; when it fires
    the commit stays requested until the commit thread takes the transaction. A timer that
    fired while the thread was being woken was armed again in the past (an internal error at
    5 s in fio's fio-rand-RW.fio at its own size, where the flusher's periodic writeback meets
    the 5 s commit). With commit=1ms the same race comes within 20 ms: every millisecond's
    transaction commits once."""
    job = tmp_path / "randrw.fio"
    job.write_text(
        "[global]\nrw=randrw\nbs=4k\nioengine=libaio\niodepth=16\nnumjobs=4\n"
        "time_based\nruntime=20ms\nsize=16m\n[file1]\n"
    )
    sets = ["fs.mount=true", "fs.ext4.commit_ns=1ms", "fs.dirty_writeback_ns=1ms"]
    done = qoslab(
        "sim", str(job), "--output-format", "json", *[a for s in sets for a in ("--set", s)]
    )
    assert done.returncode == 0, done.stderr
    stages = {s["stage"]: s["counters"] for s in json.loads(done.stdout)["qoslab"]["stages"]}
    # A transaction starts at the first write (the inode's times), then one a millisecond.
    assert stages["fs"]["commits"] == 19


def _fio_json(iops: float, mean_ns: float, p99_ns: float, fsyncs: int, writes: int) -> dict:
    """The parts of fio's JSON (one group-reported job) `qoslab fs kernel` reads."""
    lat = {"mean": mean_ns, "max": p99_ns, "percentile": {"99.000000": p99_ns}}
    return {
        "jobs": [{"write": {"iops": iops}, "sync": {"total_ios": fsyncs, "lat_ns": lat}}],
        "disk_util": [{"name": "nullb0", "write_ios": writes}],
    }


def test_fs_kernel_reads_throughput_fsync_latency_and_writes_per_fsync_from_fio():
    from qoslab.fs.kernel import fio_metrics

    m = fio_metrics(_fio_json(61.6, 16_265_184.5, 16_318_464, 299, 897))
    assert m["appends_per_s"] == 61.6
    assert m["fsync_mean_ms"] == pytest.approx(16.2651845)
    assert m["fsync_p99_ms"] == pytest.approx(16.318464)
    assert m["writes_per_fsync"] == pytest.approx(3.0)


def test_fs_kernel_counts_the_devices_writes_and_flushes_from_diskstats():
    from qoslab.fs.kernel import device_flushes, device_writes

    # A guest's nullb0 before and after 299 fsyncs on ext4 (Linux 6.1's 17 statistics).
    before = " 254       0 nullb0 18 0 162 72 39 510 4480 195 0 124 284 0 0 0 0 4 17"
    after = " 254       0 nullb0 24 0 210 96 937 1410 18864 5007 0 4952 6325 0 0 0 0 303 1222"
    assert device_flushes(before, after) == 299
    # 898 for 299 fsyncs: each fsync's data block, journal copies and commit block.
    assert device_writes(before, after) == 898


def test_fs_kernel_compares_the_simulators_mean_with_the_kernels_spread():
    import pandas as pd

    from qoslab.fs.kernel import METRICS, compare

    def frame(values):
        return pd.DataFrame(
            [{"threads": 4, "rep": i + 1, **{m: v for m in METRICS}} for i, v in enumerate(values)]
        )

    kernel = frame([9.0, 10.0, 11.0])  # mean 10, sd 1
    for sim_values, inside in (([10.5, 11.5, 12.5], False), ([10.0, 11.0, 9.5], True)):
        c = compare(kernel, frame(sim_values))
        assert list(c.metric) == list(METRICS)
        assert set(c.kernel_mean) == {10.0} and set(c.kernel_sd) == {1.0}
        assert list(c.kernel_t95) == [pytest.approx(2.484, abs=1e-3)] * len(METRICS)  # t / sqrt 3
        assert set(c.inside) == {inside}
        assert list(c.sim_over_kernel) == [pytest.approx(sum(sim_values) / 30.0)] * len(METRICS)
    nan = frame([float("nan")] * 3)
    assert set(compare(kernel, nan).inside) == {None}  # not reported: neither in nor out


def test_fs_kernel_makes_a_new_ext4_before_every_run_repetition_after_repetition():
    from qoslab.fs.kernel import Plan, guest_steps

    steps = guest_steps(Plan(threads=(1, 4), reps=3))
    runs = [s.split()[1] for s in steps if s.startswith("fio_rep ")]
    assert runs == [f"$OUT/t{t}-rep-{r}" for r in (1, 2, 3) for t in (1, 4)]
    for i, s in enumerate(steps):
        if s.startswith("fio_rep "):
            assert steps[i - 1] == "make_fs ext4"
    # --mount-options: the guest mounts with them, the twin runs with the matching setting.
    plan = Plan(threads=(4,), reps=3, mount_options="nodioread_nolock,nobarrier")
    assert "make_fs ext4 nodioread_nolock,nobarrier" in guest_steps(plan)
    assert plan.sim_sets()[2:] == ["fs.ext4.dioread_nolock=false", "fs.ext4.barrier=false"]


# ftrace's text as the guest's Linux 6.1 writes it (`TASK-PID [CPU] FLAGS SECONDS: EVENT: ...`):
# two commits and two conversions.
JBD2, FIO, CONV, KBLOCKD = "jbd2/nullb0-8-304", "fio-316", "kworker/u2:1-24", "kworker/0:1H-38"
RSV = "work struct (____ptrval____): function ext4_end_io_rsv_work [ext4]"
REQUEUE = "work struct (____ptrval____): function blk_mq_requeue_work"
TRACE = "# tracer: nop\n" + "".join(
    f"{task:>22} [000] .....    {ts}: {event}: {rest}\n"
    for task, ts, event, rest in [
        (JBD2, "10.000000", "jbd2_start_commit", "dev 254,0 transaction 2 sync 0"),
        (JBD2, "10.000010", "jbd2_commit_logging", "dev 254,0 transaction 2 sync 0"),
        (JBD2, "10.000100", "block_rq_issue", "254,0 WSM 16384 () 3932168 + 32 [jbd2/nullb0-8]"),
        (JBD2, "10.012000", "jbd2_end_commit", "dev 254,0 transaction 2 sync 0 head 2"),
        (JBD2, "10.012005", "jbd2_start_commit", "dev 254,0 transaction 3 sync 0"),
        (JBD2, "10.012015", "jbd2_commit_logging", "dev 254,0 transaction 3 sync 0"),
        (FIO, "10.012100", "block_rq_issue", "254,0 WS 4096 () 270480 + 8 [fio]"),
        (JBD2, "10.012915", "block_rq_issue", "254,0 WSM 49152 () 3932200 + 96 [jbd2/nullb0-8]"),
        (CONV, "10.016000", "workqueue_execute_start", RSV),
        (CONV, "10.016026", "workqueue_execute_end", RSV),
        (KBLOCKD, "10.016030", "workqueue_execute_start", REQUEUE),
        (KBLOCKD, "10.016034", "workqueue_execute_end", REQUEUE),
        (KBLOCKD, "10.020040", "block_rq_issue", "254,0 WFSM 4096 () 3932296 + 8 [kworker/0:1H]"),
        (CONV, "10.020050", "workqueue_execute_start", RSV),
        (CONV, "10.020070", "workqueue_execute_end", RSV),
        (JBD2, "10.025005", "jbd2_end_commit", "dev 254,0 transaction 3 sync 0 head 3"),
    ]
)


def test_fs_kernel_trace_gives_the_commits_length_its_send_delay_and_a_conversions_time():
    from qoslab.fs.kernel import trace_summary

    s = trace_summary(TRACE)
    # The run's first commit (its files' creation) is left out: transaction 3 alone, 13 ms.
    assert s["commit_ms"] == pytest.approx(13.0)
    # From its logging phase to the journal's write (M), not the data write (WS) before it.
    assert s["commit_send_us"] == pytest.approx(900.0)
    # ext4_end_io_rsv_work's executions, 26 and 20 us: the median; kblockd's work is not one.
    assert s["conversion_us"] == pytest.approx(23.0)


def test_fs_kernel_trace_records_every_run_alone():
    from qoslab.fs.kernel import TRACE_EVENTS, Plan, guest_steps

    steps = guest_steps(Plan(threads=(4,), reps=3, trace=True))
    for event in TRACE_EVENTS:
        assert f"echo 1 > /sys/kernel/tracing/events/{event}/enable" in steps
    first_run = steps.index("fio_rep $OUT/t4-rep-1 $IN/append-4.fio 1")
    assert all("events/" not in s for s in steps[first_run:])  # enabled once, before any run
    for rep in (1, 2, 3):
        i = steps.index(f"fio_rep $OUT/t4-rep-{rep} $IN/append-4.fio {rep}")
        assert steps[i - 2 : i] == [
            "echo > /sys/kernel/tracing/trace",
            "echo 1 > /sys/kernel/tracing/tracing_on",
        ]
        assert steps[i + 1 : i + 3] == [
            "echo 0 > /sys/kernel/tracing/tracing_on",
            f"cat /sys/kernel/tracing/trace > $OUT/t4-rep-{rep}.trace",
        ]
    assert not any("tracing" in s for s in guest_steps(Plan(threads=(4,), reps=3)))


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (
            ["--device", "null_blk:completion_nsec=4000000,irqmode=2"],
            "--device: expected a null_blk disk that keeps data (memory_backed=1",
        ),
        (["--device", "nul_blk:irqmode=2"], "did you mean null_blk"),
        (["--reps", "2"], "2 is not in the range 3<=x<=100"),
        (["--threads", "1,x"], "--threads: expected comma-separated integers"),
        (["--mount-options", "data=journal"], "--mount-options: expected some of dioread_nolock"),
    ],
)
def test_fs_kernel_refuses_bad_input_before_booting(qoslab, tmp_path, args, says):
    done = qoslab("fs", "kernel", "--out", str(tmp_path / "k"), *args)
    assert done.returncode == 2, done.stderr
    assert says in done.stderr
    assert "Traceback" not in done.stderr
    assert not (tmp_path / "k").exists()
