"""`qoslab vm` without a guest: device SPECs, their simulator twins, and the one-line errors.

The guest itself boots in `qoslab vm check` (`make test-vm`, docs/vm.md).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import tomllib
from pathlib import Path

import pytest

from qoslab import guest_devices
from qoslab.errors import InputError
from qoslab.vm.run import (
    check_fs,
    check_job,
    fio_steps,
    job_seconds,
    parse_settings,
    parse_trace_events,
)
from qoslab.vm.trace import read_events, summary

NULL_BLK = "null_blk:completion_nsec=4000000,hw_queue_depth=2,irqmode=2"
SCSI_DEBUG = "scsi_debug:ndelay=1000000,max_queue=16"


def test_a_spec_is_the_module_and_its_parameters():
    spec = guest_devices.parse_spec(NULL_BLK)
    assert spec.module == "null_blk"
    assert spec.modprobe_args == ["completion_nsec=4000000", "hw_queue_depth=2", "irqmode=2"]
    assert spec.value("submit_queues") == 1  # the kernel's default where the SPEC is silent
    spec = guest_devices.parse_spec("scsi_debug:delay=1,max_queue=16,rotational=1")
    assert spec.modprobe_args == ["delay=1", "max_queue=16"]
    assert spec.rotational == 1


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("nul_blk:irqmode=2", "did you mean null_blk"),
        ("null_blk:irqmode=5", "irqmode=5: expected 0 to 2"),
        ("null_blk:completion_nsec=abc", "expected an integer"),
        ("null_blk:hw_queue_depht=2", "did you mean hw_queue_depth"),
        ("null_blk:irqmode", "needs a value"),
        ("null_blk:irqmode=2,irqmode=1", "given twice"),
        ("null_blk:cache_size=64", "needs memory_backed=1"),
        ("null_blk:mbps=100", "no simulator twin"),
        ("scsi_debug:max_queue=0", "expected 1 to 4096"),
    ],
)
def test_a_bad_spec_names_what_is_wrong(text, message):
    with pytest.raises(InputError, match=message):
        guest_devices.parse_spec(text)


def test_the_null_blk_twin_has_its_tags_limit_and_completion_time():
    twin = tomllib.loads(guest_devices.twin_toml(guest_devices.parse_spec(NULL_BLK)))
    assert twin["path"] == {"driver": "simple", "hw_queue_depth": 2, "max_hw_sectors_kb": 127}
    assert twin["block"] == {
        "max_sectors_kb": 127,
        "max_segments": 128,
        "max_segment_size": 65536,
        "rotational": 0,
    }
    media = twin["media"]
    assert (media["servers"], media["service"], media["service_mean_ns"]) == (2, "fixed", 4_000_000)
    assert media["capacity_bytes"] == 250 << 30
    # irqmode 1 (softirq) completes at once: the twin's device takes no time.
    soft = tomllib.loads(guest_devices.twin_toml(guest_devices.parse_spec("null_blk:irqmode=1")))
    assert soft["media"]["service_mean_ns"] == 0


def test_a_null_blk_twin_carries_its_cpu_costs_whichever_cpu_model_a_run_chooses(qoslab, tmp_path):
    # docs/vm.md finding 13: in the guest a fio job's turn costs 15.3 us + 109 ns per KiB of
    # CPU on null_blk (fio's usr + sys per I/O), not the CPU model's defaults (whose per-KiB
    # time holds a driver's copy). The twin carries them in [cpu.one]; the file loads with
    # no CPU model (no CPU stage: two tags of 4 ms at depth 1, 250 IOPS), and a run with
    # `--set cpu.model=one` books each 4 KiB I/O's submission at those costs and its
    # completion at the model's default 5 us.
    twin = tomllib.loads(guest_devices.twin_toml(guest_devices.parse_spec(NULL_BLK)))
    assert twin["cpu"] == {"one": {"submit_ns": 15_300, "per_kib_ns": 109}}
    copying = guest_devices.parse_spec("null_blk:memory_backed=1")
    assert "cpu" not in tomllib.loads(guest_devices.twin_toml(copying))
    job = tmp_path / "qd1.fio"
    job.write_text(
        "[r]\nioengine=libaio\ndirect=1\nrw=randread\nbs=4k\niodepth=1\ntime_based=1\n"
        "runtime=200ms\n"
    )
    reports = {}
    for model in ("none", "one"):
        sets = ("--set", f"cpu.model={model}", "--output-format", "json")
        done = qoslab("sim", job, "--device", NULL_BLK, *sets)
        assert done.returncode == 0, done.stderr
        reports[model] = json.loads(done.stdout)
    stages = {s["stage"]: s["counters"] for s in reports["none"]["qoslab"]["stages"]}
    assert "cpu" not in stages
    assert reports["none"]["jobs"][0]["read"]["iops"] == pytest.approx(250)
    cpu = next(s for s in reports["one"]["qoslab"]["stages"] if s["stage"] == "cpu")["counters"]
    assert cpu["submissions"] == cpu["completions"] > 0
    assert cpu["busy_ns"] == cpu["submissions"] * (15_300 + 4 * 109) + cpu["completions"] * 5_000
    # A misspelt cost in a twin's file is still the one-line error naming file, line and key.
    bad = tmp_path / "twin.toml"
    bad.write_text(guest_devices.twin_toml(guest_devices.parse_spec(NULL_BLK)) + "per_kb_ns = 1\n")
    done = qoslab("sim", job, "--device", bad)
    line = len(bad.read_text().splitlines())
    assert done.returncode == 2
    assert done.stderr.count("\n") == 1, done.stderr
    assert f"twin.toml:{line}: unknown key 'cpu.one.per_kb_ns'" in done.stderr, done.stderr


def test_a_scsi_debug_twin_charges_fio_its_turn_and_kblockd_the_drivers_copy(qoslab, tmp_path):
    # docs/vm.md findings 12 and 15: in the guest CFS charges a fio task on scsi_debug what it
    # charges on null_blk (15.3 us + 109 ns per KiB), and scsi_debug's queuecommand, which
    # copies the data, runs in kblockd's worker under a scheduler: 4.26 us + 185 ns per KiB on
    # top of the worker's 5 us turn. At depth 1 under mq-deadline each read's insert wakes the
    # worker, which finds the device idle and issues it; a completion leaves nothing waiting,
    # so it wakes no worker.
    spec = "scsi_debug:delay=1,max_queue=16"
    twin = tomllib.loads(guest_devices.twin_toml(guest_devices.parse_spec(spec)))
    assert twin["cpu"] == {
        "one": {
            "submit_ns": 15_300,
            "per_kib_ns": 109,
            "queue_run_per_rq_ns": 4_260,
            "queue_run_per_kib_ns": 185,
        }
    }
    job = tmp_path / "qd1.fio"
    job.write_text(
        "[r]\nioengine=libaio\ndirect=1\nrw=randread\nbs=4k\niodepth=1\ntime_based=1\n"
        "runtime=200ms\n"
    )
    sets = ("--set", "cpu.model=one", "--set", "block.scheduler=mq-deadline")
    done = qoslab("sim", job, "--device", spec, *sets, "--output-format", "json")
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    cpu = next(s for s in report["qoslab"]["stages"] if s["stage"] == "cpu")["counters"]
    n = cpu["submissions"]
    assert n == cpu["completions"] == cpu["queue_runs"] > 0
    fio_turn, interrupt, worker = 15_300 + 4 * 109, 5_000, 5_000 + 4_260 + 4 * 185
    assert cpu["busy_ns"] == n * (fio_turn + interrupt + worker)


def test_scsi_debug_delay_is_in_jiffies_of_the_guest_kernel():
    # HZ=250 in Debian's 6.1 kernel: delay=1 is 4 ms; ndelay wins when given.
    assert guest_devices.completion_ns(guest_devices.parse_spec("scsi_debug:delay=1")) == 4_000_000
    assert guest_devices.completion_ns(guest_devices.parse_spec(SCSI_DEBUG)) == 1_000_000
    assert guest_devices.tags(guest_devices.parse_spec(SCSI_DEBUG)) == 16


def test_sim_runs_the_twin_of_a_spec(qoslab, tmp_path):
    job = tmp_path / "qd2.fio"
    job.write_text(
        "[r]\nioengine=libaio\ndirect=1\nrw=randread\nbs=4k\niodepth=2\ntime_based=1\nruntime=1s\n"
    )
    done = qoslab("sim", job, "--device", NULL_BLK, "--output-format", "json")
    assert done.returncode == 0, done.stderr
    read = json.loads(done.stdout)["jobs"][0]["read"]
    # Two tags, every request 4 ms: 500 IOPS, each request exactly 4 ms.
    assert read["iops"] == pytest.approx(500, rel=0.01)
    assert read["clat_ns"]["mean"] == pytest.approx(4_000_000)
    bad = qoslab("sim", job, "--device", "null_blk:irqmode=7")
    assert bad.returncode == 2
    assert bad.stderr.count("\n") == 1 and "irqmode=7" in bad.stderr


def study_job(tmp_path, runtime: str, ramp: str):
    """The study's two jobs (database_sim beside backup_sim) for `runtime` after `ramp`."""
    job = tmp_path / "study.fio"
    job.write_text(
        f"[global]\nioengine=libaio\ndirect=1\nlat_percentiles=1\ntime_based=1\nruntime={runtime}\n"
        f"ramp_time={ramp}\n[database_sim]\nrw=randread\nbs=4k\niodepth=4\nprioclass=2\nprio=1\n"
        "[backup_sim]\nrw=read\nbs=128k\niodepth=16\nprioclass=2\nprio=7\n"
    )
    return job


def sim_on_scsi_debug(qoslab, job, *sets: str) -> dict:
    """`qoslab sim JOB` on scsi_debug 4 ms x 16's twin with `--set` each of `sets`: fio's JSON."""
    args = [a for s in sets for a in ("--set", s)]
    done = qoslab(
        "sim", job, "--device", "scsi_debug:delay=1,max_queue=16", *args, "--output-format", "json"
    )
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def test_the_guests_one_cpu_takes_each_submission_and_completion_in_turn(qoslab, tmp_path):
    # `[cpu] model = "one"` (docs/vm.md finding 7): a stage above the block layer books every
    # submission and completion of both jobs on one CPU. Without it, scsi_debug's 4 ms x 16
    # commands under mq-deadline complete in cohorts and the database read that comes last
    # waits a whole command (p99 8 ms); with it, the rows move (docs/vm.md has the table).
    job = study_job(tmp_path, "400ms", "100ms")
    p99 = {}
    for cpu in ("none", "one"):
        report = sim_on_scsi_debug(qoslab, job, "block.scheduler=mq-deadline", f"cpu.model={cpu}")
        db = next(j for j in report["jobs"] if j["jobname"] == "database_sim")
        p99[cpu] = db["read"]["lat_ns"]["percentile"]["99.000000"] / 1e6
        stages = {s["stage"]: s["counters"] for s in report["qoslab"]["stages"]}
        assert ("cpu" in stages) == (cpu == "one"), stages
    cpu = stages["cpu"]
    # Every request went through the CPU both ways, and it worked for each at least its cost.
    assert cpu["submissions"] == cpu["completions"] > 0
    assert cpu["busy_ns"] >= cpu["submissions"] * (11_000 + 5_000)
    assert p99["none"] == pytest.approx(8.0, abs=0.1)
    assert p99["one"] != p99["none"]
    nvme = qoslab("sim", job, "--device", "nvme-analytic", "--set", "cpu.model=one")
    assert nvme.returncode == 2
    assert nvme.stderr.count("\n") == 1 and "field 'cpu.model'" in nvme.stderr, nvme.stderr


def test_cfs_order_lets_the_woken_database_take_the_freed_command(qoslab, tmp_path):
    # docs/vm.md finding 8: with `woken_retry` a task woken from its sleep for a tag retries
    # when it has the CPU. First come first served, the backup's submissions run ahead of
    # the woken database job and take the freed commands: database_sim waits for tags (p99
    # 6.7 ms). In CFS's order (`fair`) the database, which used far less CPU, runs first, as
    # in the guest kernel: 994.0 IOPS and a p99 of one 4 ms command (4.05 ms) on scsi_debug
    # `none` (5 repetitions of the study's run).
    job = study_job(tmp_path, "2s", "1s")
    db = {}
    for fair in ("false", "true"):
        sets = ("block.scheduler=none", "cpu.model=one", "cpu.one.woken_retry=true")
        report = sim_on_scsi_debug(qoslab, job, *sets, f"cpu.one.fair={fair}")
        read = next(j for j in report["jobs"] if j["jobname"] == "database_sim")["read"]
        db[fair] = (read["iops"], read["lat_ns"]["percentile"]["99.000000"] / 1e6)
    assert db["false"][1] > 6.0
    assert db["true"][0] == pytest.approx(994.0, rel=0.01)
    assert db["true"][1] == pytest.approx(4.05, abs=0.1)


def test_a_job_naming_its_own_file_is_refused(tmp_path):
    job = tmp_path / "j.fio"
    job.write_text("[a]\nrw=read\nfilename=/dev/sda\n")
    with pytest.raises(InputError, match=r"j.fio:3: filename= names a file"):
        check_job(job)


def test_a_repetition_lasts_the_longest_runtime_and_ramp():
    assert job_seconds("[g]\nruntime=3s\nramp_time=500ms\n[a]\nruntime=10\n") == 10.5
    assert job_seconds("[a]\nsize=1g\n") == 300.0


def test_settings_are_iosched_or_queue_files():
    (s,) = parse_settings(["iosched.aging_expire=100"])
    assert s.path == "queue/iosched/aging_expire"
    with pytest.raises(InputError, match=r"expected iosched\.NAME=VALUE"):
        parse_settings(["aging_expire=100"])


def test_a_traced_run_records_each_repetition_on_its_own():
    steps = fio_steps("mq-deadline", [], 2, "job.fio", trace=True)
    enable = steps.index("echo 1 > /sys/kernel/tracing/events/block/block_rq_issue/enable")
    runs = [i for i, s in enumerate(steps) if s.startswith("fio_rep ")]
    assert enable < runs[0]
    for rep, i in zip((1, 2), runs, strict=True):
        assert steps[i - 2 : i] == [
            "echo > /sys/kernel/tracing/trace",
            "echo 1 > /sys/kernel/tracing/tracing_on",
        ]
        assert steps[i + 1] == "echo 0 > /sys/kernel/tracing/tracing_on"
        assert steps[i + 2] == f"cat /sys/kernel/tracing/trace > $OUT/rep-{rep}.trace"
    assert not any("tracing" in s for s in fio_steps("mq-deadline", [], 2, "job.fio"))


@pytest.mark.parametrize("line", ["ramp_time=0.5s", "runtime=2.5s", "bs=1.5k", "thinktime=5sec"])
def test_a_job_value_fio_would_misread_is_refused_before_the_guest_runs_it(tmp_path, line):
    # fio 3.33 truncates ramp_time=0.5s to no ramp at all (measured: at rate_iops=100 and
    # runtime=1s it issued 101 reads with it, 151 with 500ms); the simulator refuses such a
    # value, so the guest must not run it either.
    job = tmp_path / "j.fio"
    job.write_text(f"[a]\nrw=read\ntime_based=1\nruntime=2s\n{line}\n")
    with pytest.raises(InputError, match=r"j\.fio:5: option .*fio 3\.33"):
        check_job(job)
    job.write_text("[a]\nrw=read\ntime_based=1\nruntime=2500ms\nramp_time=500ms\n")
    assert check_job(job).startswith("[a]")


def test_a_file_system_is_made_anew_before_each_repetition():
    steps = fio_steps("none", [], 3, "job.fio", fs="ext4")
    runs = [i for i, s in enumerate(steps) if s.startswith("fio_rep ")]
    assert len(runs) == 3
    for i in runs:
        assert steps[i - 1] == "make_fs ext4"
    assert not any(s.startswith("make_fs") for s in fio_steps("none", [], 3, "job.fio"))


@pytest.mark.parametrize(
    ("fs", "device", "message"),
    [
        ("xfs", NULL_BLK + ",memory_backed=1", r"--fs: expected one of ext4, got 'xfs'"),
        ("ext4", NULL_BLK, r"keeps no data .* add memory_backed=1"),
    ],
)
def test_a_file_system_needs_one_the_guest_makes_on_a_device_that_keeps_data(fs, device, message):
    with pytest.raises(InputError, match=message):
        check_fs(fs, guest_devices.parse_spec(device))
    assert check_fs(None, guest_devices.parse_spec(NULL_BLK)) is None
    assert check_fs("ext4", guest_devices.parse_spec(NULL_BLK + ",memory_backed=1")) == "ext4"


def test_without_the_hosts_mke2fs_only_fs_runs_are_refused(monkeypatch, tmp_path):
    from qoslab.vm import image

    monkeypatch.setattr(image, "MKE2FS_CONF", tmp_path / "no-mke2fs.conf")
    assert image.mke2fs() is None  # the image is built without it
    with pytest.raises(InputError, match=r"--fs: mke2fs or /etc/mke2fs.conf not found"):
        check_fs("ext4", guest_devices.parse_spec(NULL_BLK + ",memory_backed=1"))
    assert check_fs(None, guest_devices.parse_spec(NULL_BLK)) is None


TRACE = """\
# tracer: nop
             fio-269     [000] .....   10.000000: block_bio_queue: 8,0 R 984 + 8 [fio]
             fio-269     [000] ...1.   10.000002: block_rq_insert: 8,0 R 4096 () 984 + 8 [fio]
         kworker-37      [000] .....   10.000010: block_rq_issue: 8,0 R 4096 () 984 + 8 [kworker]
             fio-269     [000] .....   10.000022: block_bio_queue: 8,0 R 12128 + 8 [fio]
             fio-269     [000] ...1.   10.000024: block_rq_insert: 8,0 R 4096 () 12128 + 8 [fio]
             fio-270     [000] .....   10.000100: block_bio_queue: 8,0 R 0 + 256 [fio]
             fio-270     [000] ...1.   10.000102: block_rq_insert: 8,0 R 131072 () 0 + 256 [fio]
             fio-270     [000] .....   10.000150: block_bio_queue: 8,0 R 256 + 256 [fio]
             fio-270     [000] ...1.   10.000152: block_bio_backmerge: 8,0 R 256 + 256 [fio]
          <idle>-0       [000] d.h1.   10.004010: block_rq_complete: 8,0 R () 984 + 8 [0]
         kworker-37      [000] .....   10.004024: block_rq_issue: 8,0 R 4096 () 12128 + 8 [kworker]
         kworker-37      [000] .....   10.004030: block_rq_issue: 8,0 R 262144 () 0 + 512 [kworker]
             fio-269     [000] .....   10.009000: block_bio_queue: 8,0 R 7696 + 8 [fio]
"""


def test_a_trace_gives_the_waits_per_request_size_and_the_gaps_between_bios(tmp_path):
    path = tmp_path / "rep-1.trace"
    path.write_text(TRACE)
    s = summary(read_events(path))
    # 8 sectors (4 KiB): one waited 8 us (insert to issue), one 4 ms (until the first
    # completion).
    assert s["wait"][8]["n"] == 2
    assert s["wait"][8]["mean_ms"] == pytest.approx((0.008 + 4.000) / 2)
    assert s["wait"][8]["max_ms"] == pytest.approx(4.000)
    # The 256-sector request took a second bio (512 sectors when issued), counted at insertion.
    assert s["wait"][256]["mean_ms"] == pytest.approx(3.928)
    assert s["device"] == {8: pytest.approx({"n": 1, "mean_ms": 4.0, "p99_ms": 4.0,
                                             "max_ms": 4.0})}  # fmt: skip
    # Gaps within a burst only: 22 us and 50 us; the 4.98 ms pause is waiting, not CPU.
    assert s["bio_gap_us"] == {"fio-269": pytest.approx(22.0), "fio-270": pytest.approx(50.0)}


SUBMIT_TRACE = """\
# tracer: nop
             fio-269     [000] .....   10.000000: sys_io_submit(ctx_id: 7f00, nr: 1, iocbpp: 7ffe)
             fio-269     [000] .....   10.000004: block_bio_queue: 8,0 R 984 + 8 [fio]
             fio-269     [000] .....   10.000006: block_getrq: 8,0 R 984 + 8 [fio]
             fio-269     [000] .....   10.000009: sys_io_submit -> 0x1
             fio-269     [000] .....   10.000019: sys_io_submit(ctx_id: 7f00, nr: 1, iocbpp: 7ffe)
             fio-269     [000] .....   10.000023: block_bio_queue: 8,0 R 992 + 8 [fio]
             fio-269     [000] d..2.   10.000025: {switch 269 D 270}
             fio-270     [000] .....   10.000030: sys_io_submit(ctx_id: 7f01, nr: 1, iocbpp: 7ffd)
             fio-270     [000] .....   10.000034: block_bio_queue: 8,0 R 0 + 256 [fio]
             fio-270     [000] .....   10.000040: block_getrq: 8,0 R 0 + 254 [fio]
             fio-270     [000] d..2.   10.000042: {switch 270 R+ 37}
         kworker-37      [000] d..2.   10.000050: {switch 37 I 270}
             fio-270     [000] .....   10.000060: block_getrq: 8,0 R 254 + 2 [fio]
             fio-270     [000] .....   10.000080: sys_io_submit -> 0x1
             fio-270     [000] d..2.   10.000090: {switch 270 S 0}
          <idle>-0       [000] d.h1.   10.003990: block_rq_complete: 8,0 R () 984 + 8 [0]
          <idle>-0       [000] d..2.   10.003998: {switch 0 R 269}
             fio-269     [000] .....   10.004000: block_getrq: 8,0 R 992 + 8 [fio]
             fio-269     [000] .....   10.004003: sys_io_submit -> 0x1
"""


def switch(prev: int, state: str, nxt: int) -> str:
    """ftrace's sched_switch line."""
    name = {0: "swapper/0", 37: "kworker"}
    return (
        f"sched_switch: prev_comm={name.get(prev, 'fio')} prev_pid={prev} prev_prio=120 "
        f"prev_state={state} ==> next_comm={name.get(nxt, 'fio')} next_pid={nxt} next_prio=120"
    )


def test_a_trace_of_io_submit_says_where_in_the_call_the_tag_is_taken(tmp_path):
    path = tmp_path / "rep-1.trace"
    lines = re.sub(r"\{switch (\d+) (\S+) (\d+)\}", lambda m: switch(int(m[1]), m[2], int(m[3])),
                   SUBMIT_TRACE)  # fmt: skip
    path.write_text(lines)
    s = summary(read_events(path))["submit"]
    # Two calls of a 4 KiB read. The first: its tag 6 us after entry, 3 us to its return.
    # The second sleeps for its tag 6 us after entry (prev_state D) and runs again 2 us
    # before it takes it: 8 us on the CPU to the tag, 3 after, 11 in all.
    db = s["fio-269"][8]
    assert (db["calls"], db["slept"], db["ahead"]) == (2, 1, 0)
    assert db["to_tag"]["median_us"] == pytest.approx(7.0)
    assert db["after_tag"]["median_us"] == pytest.approx(3.0)
    assert db["whole"]["median_us"] == pytest.approx(10.0)
    # From the first call's return to the second's entry: 10 us of fio's loop.
    assert db["loop"] == pytest.approx({"n": 1, "median_us": 10.0, "p10_us": 10.0, "p90_us": 10.0})
    # A 128 KiB read split in two requests, taken while 269 slept for a tag (ahead of it);
    # preempted while runnable (R+) is not a sleep, and the 8 us off the CPU do not count:
    # entry to its first tag 10 us, its last tag to the return 20 us, 42 us in all.
    backup = s["fio-270"][256]
    assert (backup["calls"], backup["slept"], backup["ahead"]) == (1, 0, 1)
    assert backup["to_tag"]["median_us"] == pytest.approx(10.0)
    assert backup["after_tag"]["median_us"] == pytest.approx(20.0)
    assert backup["whole"]["median_us"] == pytest.approx(42.0)
    # Without the syscall tracepoints there is nothing to say.
    no_calls = tmp_path / "rep-2.trace"
    no_calls.write_text(TRACE)
    assert summary(read_events(no_calls))["submit"] == {}


WORKER_TRACE = """\
# tracer: nop
             fio-269     [000] ...1.   10.000002: block_rq_insert: 8,0 R 4096 () 984 + 8 [fio]
             fio-269     [000] d..2.   10.000003: {switch 269 S 37}
    kworker/0:1H-37      [000] .....   10.000007: block_rq_issue: 8,0 R 4096 () 984 + 8 [kw]
    kworker/0:1H-37      [000] d..2.   10.000013: {switch 37 I 0}
          <idle>-0       [000] d.h1.   10.004000: block_rq_complete: 8,0 R () 500 + 8 [0]
          <idle>-0       [000] d..2.   10.004001: {switch 0 R 37}
    kworker/0:1H-37      [000] d..2.   10.004006: {switch 37 I 270}
             fio-270     [000] ...1.   10.004010: block_rq_insert: 8,0 R 131072 () 0 + 256 [fio]
             fio-270     [000] d..2.   10.004012: {switch 270 S 37}
    kworker/0:1H-37      [000] .....   10.004018: block_rq_issue: 8,0 R 131072 () 0 + 256 [kw]
    kworker/0:1H-37      [000] .....   10.004022: block_rq_issue: 8,0 R 4096 () 992 + 8 [kw]
          <idle>-0       [000] d.h1.   10.004030: block_rq_complete: 8,0 R () 984 + 8 [0]
    kworker/0:1H-37      [000] d..2.   10.004050: {switch 37 I 0}
          <idle>-0       [000] d..2.   10.005000: {switch 0 R 37}
    kworker/0:1H-37      [000] d..2.   10.005004: {switch 37 I 0}
"""


def test_a_trace_gives_kblockd_workers_turns_on_the_cpu_by_what_they_issued(tmp_path):
    path = tmp_path / "rep-1.trace"
    lines = re.sub(r"\{switch (\d+) (\S+) (\d+)\}", lambda m: switch(int(m[1]), m[2], int(m[3])),
                   WORKER_TRACE)  # fmt: skip
    path.write_text(lines)
    w = summary(read_events(path))["worker"]["kworker/0:1H"]
    # Turns that issued nothing: 5 and 4 us on the CPU.
    assert w["-"]["turns"] == 2
    assert w["-"]["whole"]["median_us"] == pytest.approx(4.5)
    # One 8-sector request: 10 us on the CPU, its issue 4 us after the switch-in.
    assert w["8"]["turns"] == 1
    assert w["8"]["whole"]["median_us"] == pytest.approx(10.0)
    assert w["8"]["to_issue"]["median_us"] == pytest.approx(4.0)
    # A turn with a completion inside is counted, but its time is not the worker's alone.
    assert w["256+8"]["turns"] == 1
    assert w["256+8"]["whole"] == {"n": 0}
    # After each completion, the task switched to next: the worker after the one at 10.004 s;
    # the one at 10.004030 s completed inside the worker's turn, and the CPU then went idle.
    assert summary(read_events(path))["first"] == {8: {"kworker/0:1H": 1, "<idle>-0": 1}}
    # Before `start`, nothing.
    assert summary(read_events(path), skip_s=0.0045)["worker"]["kworker/0:1H"] == {
        "-": {"turns": 1, "whole": pytest.approx({"n": 1, "median_us": 4.0, "p10_us": 4.0,
                                                   "p90_us": 4.0}), "to_issue": {"n": 0}}
    }  # fmt: skip


# A recorded trace's excerpt written by hand (README.md beside it: from Linux 6.1's tracepoint
# formats, not by qoslab): null_blk splits the backup's 256-sector read (128 KiB) into requests
# of 255 sectors (130,560 bytes) and 1 sector (512 bytes).
NULL_BLK_SPLIT_TRACE = Path(__file__).parent / "data" / "vm" / "null_blk-split.trace"


def test_a_trace_reports_request_sizes_in_sectors_as_the_tracepoints_give_them(qoslab, tmp_path):
    (tmp_path / "rep-1.trace").write_text(NULL_BLK_SPLIT_TRACE.read_text())
    s = summary(read_events(tmp_path / "rep-1.trace"))
    # Each request by its own size: the 1-sector piece is not a "0 KiB" request, nor the
    # 255-sector one a 127 KiB one. Waits: 8 sectors 63 and 6 us, 255 sectors 11 us, 1
    # sector 6 us; device times 4.000, 4.024 and 4.000 ms (the second 8-sector read is still
    # at the device when the excerpt ends).
    assert {n: w["n"] for n, w in s["wait"].items()} == {1: 1, 8: 2, 255: 1}
    assert s["wait"][8]["mean_ms"] == pytest.approx(0.0345)
    assert s["wait"][255]["mean_ms"] == pytest.approx(0.011)
    assert s["wait"][1]["mean_ms"] == pytest.approx(0.006)
    assert {n: d["mean_ms"] for n, d in s["device"].items()} == pytest.approx(
        {1: 4.000, 8: 4.000, 255: 4.024}
    )
    # Who ran after each completion: the database's task after its read, kblockd's worker
    # after the 255-sector piece, the backup's task after the 1-sector piece.
    assert s["first"] == {1: {"fio-421": 1}, 8: {"fio-420": 1}, 255: {"kworker/0:1H": 1}}
    assert set(s["worker"]["kworker/0:1H"]) == {"8+255", "8", "-", "1"}
    assert s["bio_gap_us"] == {}  # no two bios of a job within 200 us
    out = qoslab("vm", "trace", str(tmp_path))
    assert out.returncode == 0, out.stderr
    assert "  255 sectors (127.5 KiB) requests      1: scheduler wait mean 0.011 ms" in out.stdout
    assert "  1 sector (0.5 KiB) requests      1: scheduler wait mean 0.006 ms" in out.stdout
    assert (
        "  after a request of 1 sector (0.5 KiB) completed, the task run next: fio-421 1"
        in out.stdout
    )
    assert "  kworker/0:1H turns issuing 8+255 sectors: 1;" in out.stdout


def test_a_trace_with_cfs_tracepoints_gives_each_jobs_cpu_and_who_of_two_woken_ran_first(
    qoslab, tmp_path
):
    (tmp_path / "rep-1.trace").write_text((NULL_BLK_SPLIT_TRACE.parent / "cfs.trace").read_text())
    cfs = summary(read_events(tmp_path / "rep-1.trace"))["cfs"]
    # Each job from 10.0 s to its last bio: the database 10 us charged for 2 bios by 10.004010,
    # the backup 30 us for 2 bios by 10.004030.
    assert cfs["per_process"] == {
        "fio-420": pytest.approx({"bios": 2, "us_per_bio": 5.0, "ms_per_s": 0.010 / 0.004010}),
        "fio-421": pytest.approx({"bios": 2, "us_per_bio": 15.0, "ms_per_s": 0.030 / 0.004030}),
    }
    # The database's vruntime minus the backup's at each update once both are known: -20 us
    # (10.000040), -10 us (10.004012), -38 us (10.004040).
    assert cfs["vruntime_gap"] == pytest.approx(
        {"first": "fio-420", "second": "fio-421", "median_ms": -0.020,
         "p10_ms": -0.0344, "p90_ms": -0.012}
    )  # fmt: skip
    # Both woken by the completion, the backup first; the database ran first, its vruntime at
    # its turn (5,000,010,000 ns) below the backup's at its next turn (5,000,030,000).
    assert cfs["together"] == {"n": 1, "lower_first": 1, "woken_first": 0}
    out = qoslab("vm", "trace", str(tmp_path))
    assert out.returncode == 0, out.stderr
    assert "  fio-421: CFS charged 15.0 us per bio (2 bios), 7.44 ms of CPU a second" in out.stdout
    assert (
        "  vruntime of fio-420 minus fio-421: median -0.020 ms (-0.034 to -0.012); both woken "
        "before either ran 1 time: the lower vruntime ran first 1, the first woken 0"
    ) in out.stdout
    # Without sched_stat_runtime there is nothing to say.
    assert summary(read_events(NULL_BLK_SPLIT_TRACE))["cfs"] == {}


def test_a_trace_says_what_waited_in_the_scheduler_at_each_completion_and_each_tasks_cpu(
    qoslab, tmp_path
):
    # docs/vm.md finding 15, on an excerpt written by hand from the 6.1 tracepoint formats:
    # two 128 KiB requests inserted and not issued when a 4 KiB read completes (20.004000);
    # both still there at a 128 KiB completion (20.005000); one left at the 4 KiB read's
    # completion (20.008024) and none at the last (20.009000). The sizes of requests issued
    # before the excerpt come from their completions.
    (tmp_path / "rep-1.trace").write_text(
        (NULL_BLK_SPLIT_TRACE.parent / "waiting.trace").read_text()
    )
    s = summary(read_events(tmp_path / "rep-1.trace"))
    assert s["waiting"] == {
        8: {"n": 3, "waiting": {256: pytest.approx({"share": 2 / 3, "mean": 1.0})}},
        256: {"n": 1, "waiting": {256: {"share": 1.0, "mean": 2.0}}},
    }
    # From sched_switch: fio-431 on the CPU 19.999990 to 20.000041 (51 us, 2 bios), fio-430
    # 20.004005 to 20.004020 (15 us, 1 bio); the worker queued no bio.
    assert s["on_cpu"] == {
        "fio-430": pytest.approx({"bios": 1, "us_per_bio": 15.0}),
        "fio-431": pytest.approx({"bios": 2, "us_per_bio": 25.5}),
    }
    out = qoslab("vm", "trace", str(tmp_path))
    assert out.returncode == 0, out.stderr
    assert (
        "  at the 3 completions of 8 sectors (4 KiB), waiting in the scheduler: "
        "256 sectors (128 KiB) at 66.7 % (1.00 on average)"
    ) in out.stdout
    assert "  fio-431: on the CPU 25.5 us per bio (2 bios, sched_switch)" in out.stdout
    # Without sched_switch there is no time on the CPU to give.
    no_switch = "\n".join(
        line
        for line in (NULL_BLK_SPLIT_TRACE.parent / "waiting.trace").read_text().splitlines()
        if "sched_switch" not in line
    )
    (tmp_path / "rep-1.trace").write_text(no_switch + "\n")
    assert summary(read_events(tmp_path / "rep-1.trace"))["on_cpu"] == {}


def test_a_trace_event_is_group_and_name_and_the_guest_must_have_it():
    assert parse_trace_events(["block/block_getrq", "block/block_getrq"]) == ["block/block_getrq"]
    with pytest.raises(InputError, match=r"--trace-event: expected GROUP/NAME .*'block_getrq'"):
        parse_trace_events(["block_getrq"])
    steps = fio_steps("none", [], 1, "job.fio", trace=True, trace_events=["block/block_getrq"])
    check = steps.index(
        "[ -d /sys/kernel/tracing/events/block/block_getrq ] || fail '--trace-event "
        "block/block_getrq: the guest kernel has no such tracepoint'"
    )
    assert check < steps.index("echo 1 > /sys/kernel/tracing/events/block/block_getrq/enable")


def test_vm_fio_without_qemu_is_one_line(qoslab, tmp_path):
    # Every tool but QEMU on the PATH.
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for tool in ("fio", "ldd", "sh", "find", "sort", "apt-get", "apt-cache", "dpkg-deb", "tar"):
        found = shutil.which(tool)
        if found:
            (bin_dir / tool).symlink_to(found)
    job = tmp_path / "j.fio"
    job.write_text("[a]\nrw=read\nruntime=1s\ntime_based=1\n")
    env = {**os.environ, "PATH": str(bin_dir)}
    done = qoslab(
        "vm", "fio", job, "--device", NULL_BLK, "--out", tmp_path / "o", "--quiet", env=env
    )
    assert done.returncode == 2
    assert done.stderr.startswith("qoslab: error: ") and done.stderr.count("\n") == 1
    assert "qemu-system-x86_64 not found" in done.stderr
    assert not (tmp_path / "o").exists()


def test_vm_fio_with_a_bad_device_stops_before_any_work(qoslab, tmp_path):
    job = tmp_path / "j.fio"
    job.write_text("[a]\nrw=read\n")
    done = qoslab("vm", "fio", job, "--device", "loop:x=1", "--out", tmp_path / "o")
    assert done.returncode == 2
    assert "expected null_blk:... or scsi_debug:..." in done.stderr


def _guest_out(tmp_path, *, dmesg_after_mark: str = "", switches: int = 12):
    """A guest's out/ folder as `qoslab vm check` leaves it, with the numbers given."""
    from qoslab.vm import check

    out = tmp_path / "out"
    out.mkdir(parents=True)
    (out / "dmesg.txt").write_text(
        "[0.01] ..MP-BIOS bug: 8254 timer not connected to IO-APIC\n"
        f"[9.6] {check.MARK}\n[9.7] io scheduler prio registered\n"
        f"[9.8] io scheduler prio-advanced registered\n{dmesg_after_mark}"
    )
    (out / "offered.txt").write_text("[none] mq-deadline prio prio-advanced\n")
    names = [s for _ in range(2) for s in check.SCHEDULERS][:switches]
    (out / "switched.txt").write_text(
        "".join(f"1 {s} x [{s}] y\n" for s in names) + "1 kyber [none] kyber\n" * (12 - switches)
    )
    (out / "switch.status").write_text("0\n")
    (out / "switch.stdout").write_text("")
    (out / "prio-aging.txt").write_text(f"{check.AGING_MS}\n")
    (out / "prio-bad.txt").write_text("refused\n")
    (out / "padv-set.txt").write_text("4\n1\n")
    (out / "padv-bad.txt").write_text("refused\n")
    for s, (high, low) in {
        "none": (400, 410),
        "prio": (500, 60),
        "prio-advanced": (340, 64),
    }.items():
        jobs = [
            {"jobname": n, "read": {"iops": v, "total_ios": v * 4, "lat_ns": {"max": 2e8}}}
            for n, v in (("high", high), ("low", low))
        ]
        (out / f"sep-{s}.json").write_text(json.dumps({"jobs": jobs}))
    (out / "queue.txt").write_text(
        "max_hw_sectors_kb=127\nmax_sectors_kb=127\nmax_segments=128\nmax_segment_size=65536\n"
        "rotational=0\nnr_requests=2\n"
    )
    (out / "lsmod.txt").write_text("Module Size Used by\nnull_blk 1 0\n")
    return out


def test_the_guest_check_passes_a_good_run_and_names_what_fails(tmp_path):
    from qoslab.vm import check

    good = check.evaluate(_guest_out(tmp_path / "a"))
    assert [c.name for c in good if not c.ok] == []
    # The boot's own note before the mark is no failure; a warning after it is.
    bad = check.evaluate(
        _guest_out(tmp_path / "b", dmesg_after_mark="[12.0] WARNING: CPU: 0 PID: 1 at x\n")
    )
    assert [c.name for c in bad if not c.ok] == ["dmesg is clean"]
    short = check.evaluate(_guest_out(tmp_path / "c", switches=11))
    assert [c.name for c in short if not c.ok] == ["every scheduler switches under load"]


def _table(values: dict[str, list[float]], scheduler: str = "prio"):
    import pandas as pd

    rows = [
        {"device": "d", "run": scheduler, "scheduler": scheduler, "job": job, "rep": i + 1,
         "iops": v, "p99_us": 2 * v, "lat_mean_us": v / 2, "cpu_pct": 1.0}
        for job, vs in values.items()
        for i, v in enumerate(vs)
    ]  # fmt: skip
    return pd.DataFrame(rows)


def test_the_study_puts_the_simulated_mean_inside_or_outside_the_kernels_error_bar():
    from qoslab.vm import study

    # Kernel: 5 repetitions of 100, 102, 98, 104, 96 (mean 100, sd sqrt(10) = 3.162).
    kernel = _table({"database_sim": [100, 102, 98, 104, 96], "backup_sim": [10, 10, 10, 10, 10]})
    sim = _table({"database_sim": [103, 103, 103], "backup_sim": [12, 12, 12]})
    sim.loc[sim.job == "database_sim", "p99_us"] = 210.0
    c = study.compare(kernel, sim).set_index("job")
    db, backup = c.loc["database_sim"], c.loc["backup_sim"]
    assert db["reps"] == 5
    assert db["iops_kernel"] == pytest.approx(100)
    assert db["iops_kernel_sd"] == pytest.approx(10**0.5)
    # t(0.975, 4) = 2.7764: the 95 % interval's half-width is 2.7764 x 3.162 / sqrt(5).
    assert db["iops_kernel_t95"] == pytest.approx(2.7764 * 10**0.5 / 5**0.5, rel=1e-4)
    assert db["iops_sim"] == pytest.approx(103) and bool(db["iops_inside"])  # 3 <= 3.162
    assert not bool(db["p99_us_inside"])  # 210 against 200 +- 6.32
    # A kernel without spread: the simulator is inside only if equal.
    assert not bool(backup["iops_inside"])
    assert backup["iops_ratio"] == pytest.approx(1.2)


def test_the_study_job_is_the_documents_two_jobs_with_the_runs_length():
    from qoslab.vm import study

    text = study.study_job(5, 1)
    assert "size=" not in text and "runtime=3s" not in text
    assert "time_based=1\nruntime=5000ms\nramp_time=1000ms\n" in text
    # In milliseconds: fio 3.33 reads ramp_time=0.5s as no ramp at all.
    assert "runtime=2500ms\nramp_time=500ms\n" in study.study_job(2.5, 0.5)
    with pytest.raises(
        InputError, match=r"--ramp: expected seconds in whole milliseconds, got 0.0005"
    ):
        study.fio_time(0.0005, "--ramp")
    assert "[database_sim]" in text and "[backup_sim]" in text
    assert study.sim_settings("mq-deadline-aging-0") == ["block.mq-deadline.prio_aging_expire=0"]
    assert study.sim_settings("prio") == []


def test_vm_study_wants_three_repetitions_before_any_guest_work(qoslab, tmp_path):
    done = qoslab("vm", "study", "--reps", "2", "--out", tmp_path / "s")
    assert done.returncode == 2
    assert done.stderr.strip().count("\n") == 0
    assert "--reps" in done.stderr and "3" in done.stderr
    assert not (tmp_path / "s").exists()
