"""Reliability: no silent wrong result, no traceback, bounded resources.

Each test is a reproducer of the reliability review of 2026-11-28 (issue 32), written as the
behaviour the review asked for: bad input is one line naming the field and exit status 2; a
bug is one line of "internal error, please report" with exit status 1 and its traceback in a
file; a value the tools accept gives the right answer, quickly.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest

from conftest import QOSLAB, ROOT, run_qoslab

SSDCONFIG = ROOT / "configs/devices/mqsim/ssdconfig.xml"
SIM_X = ("sim", "--name=x", "--ioengine=libaio", "--direct=1", "--rw=randread", "--bs=4k")


def one_line_error(done: subprocess.CompletedProcess, *needles: str) -> str:
    """The single `qoslab: error:` line of a refused command (exit 2, no traceback), which
    must contain each of `needles`."""
    assert done.returncode == 2, (done.returncode, done.stderr[-2000:])
    assert "Traceback" not in done.stderr and "panicked" not in done.stderr, done.stderr
    errors = [line for line in done.stderr.splitlines() if not line.startswith("qoslab: warn")]
    assert len(errors) == 1 and errors[0].startswith("qoslab: error: "), done.stderr
    for needle in needles:
        assert needle in errors[0], (needle, errors[0])
    return errors[0]


def mqsim_config(tmp_path: Path, tag: str, value: str) -> Path:
    text = SSDCONFIG.read_text()
    changed, n = re.subn(rf"<{tag}>[^<]*</{tag}>", f"<{tag}>{value}</{tag}>", text)
    assert n == 1, tag
    out = tmp_path / f"{tag}-{value}.xml"
    out.write_text(changed)
    return out


# ---- 1. a time past the clock's range is refused, never saturated ---------------------------


@pytest.mark.parametrize("value", ["inf", "1e30", "1e400", "4611686018427390000.0", '"1e30s"'])
def test_a_time_past_the_clocks_range_is_refused_not_wrapped(qoslab, value):
    # It once became u64::MAX ns: slat 1.8e19 ns and a total latency below the completion
    # latency, with exit 0.
    done = qoslab(*SIM_X, "--number_ios=20", "--set", f"host.submit_ns={value}")
    one_line_error(done, "host.submit_ns", "at most 4611686018427387904 ns")


@pytest.mark.parametrize("line", ["submit_ns = inf", "submit_ns = 1e30"])
def test_a_device_file_time_past_the_clocks_range_is_refused(qoslab, tmp_path, line):
    device = tmp_path / "d.toml"
    device.write_text(f'description = "t"\n[host]\n{line}\n')
    one_line_error(qoslab(*SIM_X, "--number_ios=5", "--device", device), "d.toml:3:", "submit_ns")


@pytest.mark.parametrize("value", ["inf", "1e308"])
def test_an_infinite_service_time_is_refused(qoslab, value):
    # It was accepted, and every I/O then ran into the 30 s host timeout.
    done = qoslab(*SIM_X, "--number_ios=5", "--set", f"media.service_mean_ns={value}")
    one_line_error(done, "media.service_mean_ns")


def test_times_that_add_up_past_the_clock_stop_the_run_with_an_error(qoslab):
    # Each time is within range, their sum is not: the run stops instead of wrapping.
    done = qoslab(*SIM_X, "--number_ios=20", "--set", "host.submit_ns=4611686018427387904")
    one_line_error(done, "past the clock's 4611686018427387904 ns")


def test_a_time_at_the_top_of_the_range_gives_the_right_latencies(qoslab):
    done = qoslab(
        *SIM_X, "--number_ios=1", "--set", "host.submit_ns=3e18", "--output-format", "json"
    )
    assert done.returncode == 0, done.stderr
    read = json.loads(done.stdout)["jobs"][0]["read"]
    assert read["slat_ns"]["mean"] == pytest.approx(3e18)
    assert read["lat_ns"]["mean"] == pytest.approx(
        read["slat_ns"]["mean"] + read["clat_ns"]["mean"]
    )


# ---- 2. inputs that ended in a traceback ----------------------------------------------------


@pytest.mark.parametrize("rate", ["1001", "1200", "1600", "2400"])
def test_mqsim_channel_rates_of_real_nand_interfaces_run_at_their_rate(qoslab, tmp_path, rate):
    # Past 1,000 MT/s MQSim's whole ns per transfer is 0 (it was a ZeroDivisionError here):
    # such a channel moves Flash_Channel_Width bytes per transfer at its exact rate.
    xml = mqsim_config(tmp_path, "Channel_Transfer_Rate", rate)
    done = qoslab("mqsim", "convert", xml, "--out", tmp_path, check=True)
    assert "Traceback" not in done.stderr
    toml = (tmp_path / "device.toml").read_text()
    width = int(re.search(r"<Flash_Channel_Width>(\d+)<", SSDCONFIG.read_text()).group(1))
    assert f'channel_rate = "{int(rate) * width}.000000MB/s"' in toml
    sim = qoslab(*SIM_X, "--number_ios=50", "--device", xml, "--output-format", "terse")
    assert sim.returncode == 0, sim.stderr


def test_a_faster_mqsim_channel_never_reads_slower(qoslab, tmp_path):
    bandwidth = []
    for rate in ("500", "1000", "1001", "2400"):
        xml = mqsim_config(tmp_path, "Channel_Transfer_Rate", rate)
        done = qoslab(
            "sim", "--name=x", "--direct=1", "--rw=read", "--bs=128k", "--number_ios=200",
            "--device", xml, "--output-format", "json", check=True,
        )  # fmt: skip
        bandwidth.append(json.loads(done.stdout)["jobs"][0]["read"]["bw_bytes"])
    assert bandwidth == sorted(bandwidth), bandwidth


@pytest.mark.parametrize("rate", ["0", "-5", "inf", "nan"])
def test_a_channel_rate_that_is_no_rate_is_refused(qoslab, tmp_path, rate):
    xml = mqsim_config(tmp_path, "Channel_Transfer_Rate", rate)
    one_line_error(qoslab("mqsim", "convert", xml, "--out", tmp_path), "<Channel_Transfer_Rate>")


@pytest.mark.parametrize(
    "tag",
    [
        "Flash_Channel_Count",
        "Chip_No_Per_Channel",
        "Die_No_Per_Chip",
        "Plane_No_Per_Die",
        "Block_No_Per_Plane",
        "Page_No_Per_Block",
    ],
)
def test_an_mqsim_geometry_count_of_zero_is_refused(qoslab, tmp_path, tag):
    xml = mqsim_config(tmp_path, tag, "0")
    one_line_error(qoslab("mqsim", "convert", xml, "--out", tmp_path), f"<{tag}>", "'0'")
    one_line_error(qoslab(*SIM_X, "--number_ios=5", "--device", xml), f"<{tag}>")


def test_a_slow_replay_past_the_clock_names_the_speed_and_the_record(qoslab, tmp_path):
    # It was a Rust panic, "event scheduled in the past".
    trace = tmp_path / "t.csv"
    trace.write_text(
        "128166372000000000,w,0,Read,4096,8192,1\n128166372030000000,w,0,Read,0,4096,1\n"
    )
    one_line_error(qoslab("sim", "--trace", trace, "--speed", "1e-12"), "t.csv:2:", "--speed")


def test_a_slow_replay_within_the_clock_runs_without_walking_the_idle_time(qoslab, tmp_path):
    trace = tmp_path / "t.csv"
    trace.write_text(
        "128166372000000000,w,0,Read,4096,8192,1\n128166372030000000,w,0,Read,0,4096,1\n"
    )
    start = time.monotonic()
    done = qoslab("sim", "--trace", trace, "--speed", "1e-9", "--output-format", "json")
    assert done.returncode == 0, done.stderr
    assert time.monotonic() - start < 20  # it took more than 60 s before
    assert json.loads(done.stdout)["jobs"][0]["read"]["total_ios"] == 2


# The integer options that ended in an OverflowError traceback at 2^64 (the review's 25).
INTEGER_OPTIONS = [
    (("sim", "--name=x", "--number_ios=10"), ["--seed", "--repeat", "--qd-cap"]),
    (
        ("nvmelite", "matrix", "configs/nvmelite/main.yaml", "--out", "{tmp}/m"),
        ["--jobs", "--top-k", "--exact-nodes"],
    ),
    (
        ("rio", "crash-check"),
        [
            "--workloads",
            "--seed",
            "--streams",
            "--writes",
            "--max-blocks",
            "--exhaustive-limit",
            "--samples",
            "--reproducers",
            "--target",
        ],
    ),
    (
        ("rio", "run"),
        [
            "--threads",
            "--writes",
            "--size-kib",
            "--batch",
            "--flush-every",
            "--seed",
            "--crash-target",
        ],
    ),
    (("plm", "coordinate", "configs/plm/demands-example.csv"), ["--capacity"]),
    (("plm", "study", "--out", "{tmp}/p"), ["--seed"]),
    (("sweep", "configs/sweeps/sim-qd.yaml", "--store", "{tmp}/s"), ["--jobs"]),
]


@pytest.mark.parametrize(
    "command,option",
    [(command, option) for command, options in INTEGER_OPTIONS for option in options],
    ids=lambda v: v if isinstance(v, str) else " ".join(v[:2]),
)
@pytest.mark.parametrize("value", [str(2**64), str(-(2**64))])
def test_an_integer_option_beyond_any_integer_is_a_usage_error(
    qoslab, tmp_path, command, option, value
):
    args = [a.format(tmp=tmp_path) for a in command]
    one_line_error(qoslab(*args, option, value, cwd=ROOT), option)
    assert not list(tmp_path.iterdir())


@pytest.mark.parametrize(
    "args,needle",
    [
        (("nvmelite", "diff", "configs/nvmelite/main.yaml", "--dut", "builtin:c",
          "--timeout-s", "1e10", "--out", "{tmp}/d"), "--timeout-s"),
        (("lab", "study", "qd-sweep", "--target", "{tmp}/x.img", "--runtime", "99999999999999h",
          "--out", "{tmp}/o"), "--runtime: at most 4611686018 s"),
        (("sched", "study", "--runtime", "1e30", "--out", "{tmp}/s"), "--runtime"),
        (("sim", "--name=x", "--number_ios=5", "--speed", "inf"), "--speed"),
    ],
    ids=["dut-timeout", "lab-runtime", "sched-runtime", "speed-inf"],
)  # fmt: skip
def test_a_time_option_past_its_range_is_a_one_line_error(qoslab, tmp_path, args, needle):
    # A DUT timeout of 1e10 s reached the kernel's poll (OverflowError: timeout is too large).
    done = qoslab(*[a.format(tmp=tmp_path) for a in args], cwd=ROOT,
                  env={**os.environ, "QOSLAB_STATE_DIR": str(tmp_path / "state")})  # fmt: skip
    one_line_error(done, needle)
    assert not (tmp_path / "x.img").exists()


def test_a_matrix_of_more_runs_than_an_integer_holds_is_refused(qoslab, tmp_path):
    config = tmp_path / "m.yaml"
    config.write_text(
        f'seeds:\n  - "{ROOT}/configs/nvmelite/seeds/seed_001.json"\npolicies: [FIFO]\n'
        'bounds: ["0"]\nfaults: [NONE]\nschedule_seeds: "0-9223372036854775808"\n'
        'scheduler_version: "v1.0"\n'
    )
    done = qoslab("nvmelite", "matrix", config, "--out", tmp_path / "o")
    one_line_error(done, "m.yaml:6:", "schedule_seeds", "9223372036854775809 runs")
    assert not (tmp_path / "o").exists()


def test_a_seed_path_too_long_for_the_file_system_is_refused(qoslab, tmp_path):
    config = tmp_path / "m.yaml"
    config.write_text(
        f'seeds:\n  - "{"a" * 300}.json"\npolicies: [FIFO]\nbounds: ["0"]\nfaults: [NONE]\n'
        'schedule_seeds: "0-3"\nscheduler_version: "v1.0"\n'
    )
    done = qoslab("nvmelite", "matrix", config, "--out", tmp_path / "o")
    one_line_error(done, "m.yaml:2:", "seeds", "File name too long")


# Found by the fuzzing suite (tests/fuzzing.py) at its first run at length.
@pytest.mark.parametrize(
    "name,text,command",
    [
        ("w.xml", '<?xml version="1.0" encoding="ts-ascii"?>\n<MQSim_IO_Scenarios/>\n',
         ("mqsim", "convert", SSDCONFIG, "{input}", "--out", "{tmp}")),
        ("m.yaml", "seeds: " + "[" * 3000 + "]" * 3000 + "\n",
         ("nvmelite", "matrix", "{input}", "--out", "{tmp}/m")),
        ("s.yaml", "- " * 3000 + "x\n", ("sweep", "{input}", "--dry-run")),
        ("f.json", '{"jobs": ' + "[" * 100_000, ("lab", "tidy", "{input}", "--out", "{tmp}/t.csv")),
    ],
    ids=["xml-encoding", "matrix-deep", "sweep-deep", "fio-json-deep"],
)  # fmt: skip
def test_inputs_found_by_fuzzing_are_clean_errors(qoslab, tmp_path, name, text, command):
    path = tmp_path / name
    path.write_text(text)
    args = [str(a).format(input=path, tmp=tmp_path) for a in command]
    one_line_error(qoslab(*args, env={**os.environ, "QOSLAB_STATE_DIR": str(tmp_path)}), name)


@pytest.mark.parametrize(
    "field,value",
    [("groupid", "1e309"), ("timestamp", "-1e400"), ("groupid", "NaN"), ("groupid", "Infinity")],
)
def test_a_fio_json_number_past_a_double_is_a_clean_error(qoslab, tmp_path, field, value):
    # Found by `make fuzz` (seed 20261130, target fio-json): Python's json reads 1e309 as inf,
    # and `lab tidy` died converting it to an integer.
    job = {"jobname": "j", "groupid": 0, "read": {"io_bytes": 4096, "runtime": 1}}
    text = json.dumps({"fio version": "fio-3.33", "timestamp": 1, "jobs": [job]}, indent=1)
    text = text.replace(f'"{field}": {0 if field == "groupid" else 1}', f'"{field}": {value}')
    assert value in text
    path = tmp_path / "out.json"
    path.write_text(text)
    line = text[: text.index(value)].count("\n") + 1
    out = tmp_path / "t.csv"
    done = qoslab(
        "lab", "tidy", path, "--out", out, env={**os.environ, "QOSLAB_STATE_DIR": str(tmp_path)}
    )
    one_line_error(done, f"out.json:{line}:", value, "not a finite number")
    assert not out.exists()


def test_an_error_quoting_a_huge_line_stays_one_readable_line(qoslab, tmp_path):
    trace = tmp_path / "t.csv"
    trace.write_text("128166372000000000,w,0,Read,4096," + "A" * 100_000 + ",1\n")
    line = one_line_error(qoslab("sim", "--trace", trace), "t.csv:1:", "characters ...]")
    assert len(line) < 2200


# ---- 3. every bug is one line and a file, never a traceback on the terminal ----------------


def _main_with(tmp_path: Path, patch: str, *args: str) -> subprocess.CompletedProcess:
    """`qoslab ARGS` in a fresh interpreter after `patch` (Python code) breaks something."""
    code = f"import sys\n{patch}\nfrom qoslab.cli import main\nmain(sys.argv[1:])\n"
    return subprocess.run(
        [sys.executable, "-c", code, *args],
        capture_output=True,
        text=True,
        env={**os.environ, "TMPDIR": str(tmp_path)},
        cwd=ROOT,
    )


@pytest.mark.parametrize(
    "exception", ["ZeroDivisionError('division by zero')", "type('Panic', (BaseException,), {})()"]
)
def test_an_unexpected_exception_is_one_line_with_the_command_and_a_traceback_file(
    tmp_path, exception
):
    # A Rust panic reaches Python as pyo3's PanicException, a BaseException: both kinds.
    patch = (
        "import qoslab.sim.api as api\n"
        f"def broken(*a, **k):\n    raise {exception}\n"
        "api.run = broken\n"
    )
    done = _main_with(tmp_path, patch, "sim", "--name=x", "--number_ios=3")
    assert done.returncode == 1, done.stderr
    lines = done.stderr.splitlines()
    assert len(lines) == 1, done.stderr
    line = lines[0]
    assert line.startswith("qoslab: internal error, please report: ")
    assert "reproduce with: qoslab sim --name=x --number_ios=3" in line
    report = Path(re.search(r"traceback in (\S+);", line).group(1))
    assert report.parent == tmp_path
    text = report.read_text()
    assert "Traceback (most recent call last)" in text and "broken" in text
    assert "command: qoslab sim --name=x --number_ios=3" in text


def test_a_study_whose_commands_fail_to_import_is_one_internal_error_line(tmp_path):
    # Registering the study's commands runs before the command line is parsed: its failure is
    # a bug like any other (one line, exit status 1), not a second traceback from main().
    (tmp_path / "broken_study.py").write_text("raise RuntimeError('the study cannot load')\n")
    patch = (
        f"sys.path.insert(0, {str(tmp_path)!r})\n"
        "import qoslab.cli as cli\n"
        "cli.STUDIES = ((('broken',), cli._group('broken_study')),) + cli.STUDIES\n"
    )
    done = _main_with(tmp_path, patch, "broken", "--help")
    assert done.returncode == 1, done.stderr
    assert len(done.stderr.splitlines()) == 1, done.stderr
    assert done.stderr.startswith(
        "qoslab: internal error, please report: RuntimeError: the study cannot load"
    )
    assert "reproduce with: qoslab broken --help" in done.stderr


def test_bad_input_stays_exit_2_and_writes_no_traceback_file(qoslab, tmp_path):
    done = subprocess.run(
        [str(QOSLAB), *SIM_X, "--number_ios=3", "--set", "host.submit_ns=inf"],
        capture_output=True,
        text=True,
        env={**os.environ, "TMPDIR": str(tmp_path)},
    )
    one_line_error(done)
    assert not list(tmp_path.iterdir())


def test_the_rust_core_keeps_a_panics_place_for_the_report():
    from qoslab import _core

    assert _core.take_panic_report() is None


# ---- 4. resources proportional to the work ---------------------------------------------------


def test_a_job_file_asking_for_more_clones_than_fio_allows_is_refused(qoslab):
    job = (
        "[global]\ndirect=1\n"
        "[j]\nrw=randread\nbs=4k\nnumber_ios=10\nnumjobs=4000\n[k]\nrw=read\nnumjobs=97\n"
    )
    done = run_qoslab("sim", "-", input=job)
    one_line_error(done, "<stdin>:8:", "job 'k'", "4097", "4096")


@pytest.mark.parametrize(
    "args,needle",
    [
        (("--repeat", "4294967296"), "--repeat"),
        (("--qd-cap", "4294967296"), "--qd-cap"),
        (("--repeat", "16385"), "more than 16384"),
    ],
)
def test_a_repeat_or_cap_beyond_what_a_run_can_hold_is_refused(qoslab, args, needle):
    one_line_error(qoslab(*SIM_X, "--number_ios=10", *args), needle)


def test_repeats_times_clones_are_bounded_by_the_results_a_report_holds(qoslab):
    job = "[j]\ndirect=1\nrw=randread\nbs=4k\nnumber_ios=10\nnumjobs=8\n"
    done = run_qoslab("sim", "-", "--repeat", "2049", input=job)
    one_line_error(done, "--repeat 2049 with 8 job clones", "16392")


@pytest.mark.parametrize(
    "command",
    [
        ("sweep", "configs/sweeps/sim-qd.yaml", "--dry-run", "--jobs"),
        ("nvmelite", "matrix", "configs/nvmelite/main.yaml", "--out", "{tmp}/m", "--jobs"),
        ("sched", "study", "--out", "{tmp}/s", "--jobs"),
        ("plm", "study", "--out", "{tmp}/p", "--workers"),
    ],
    ids=lambda c: " ".join(c[:2]),
)
def test_more_workers_than_a_machine_runs_is_a_usage_error(qoslab, tmp_path, command):
    # nvmelite matrix --jobs 2147483648 asked for that many threads (and hung).
    args = [a.format(tmp=tmp_path) for a in command]
    one_line_error(qoslab(*args, "1025", cwd=ROOT), args[-1], "1024")


@pytest.mark.parametrize(
    "parameters,needle",
    [
        ("  env.QD: {geomspace: [1, 256, 100000000]}\n", "env.QD.geomspace: 100,000,000 points"),
        ("  env.QD: {range: [1, 5000]}\n  set.media.servers: {range: [1, 5000]}\n",
         "parameters: 99,960,004 points"),
    ],
)  # fmt: skip
def test_a_sweep_of_more_points_than_memory_holds_is_refused_before_planning(
    qoslab, tmp_path, parameters, needle
):
    # A geomspace of 1e8 values grew by 90 MB a second until killed.
    spec = tmp_path / "s.yaml"
    spec.write_text(
        "study: sim\nparameters:\n"
        f"  job: {ROOT}/configs/sweeps/randread.fio\n{parameters}seeds: {{range: [1, 5]}}\n"
    )
    start = time.monotonic()
    one_line_error(qoslab("sweep", spec, "--store", tmp_path / "st", "--dry-run"), needle)
    assert time.monotonic() - start < 10


def test_idle_simulated_time_is_skipped_not_walked(qoslab):
    # One I/O submitted 5e17 ns (16 years) in: 16.7 s of sampling empty windows before.
    start = time.monotonic()
    done = qoslab(
        *SIM_X, "--number_ios=1", "--set", "host.submit_ns=5e17", "--output-format", "json"
    )
    elapsed = time.monotonic() - start
    assert done.returncode == 0, done.stderr
    read = json.loads(done.stdout)["jobs"][0]["read"]
    assert read["total_ios"] == 1
    # fio samples bandwidth every 500 ms, but not in a window with no I/O (its helper
    # thread's "no entries for interval"): the 1e9 idle windows leave nothing, and the job
    # ends with its one I/O, before that I/O's window closes.
    assert read["bw_samples"] == read["iops_samples"] == 0
    assert elapsed < 10, elapsed


# ---- 6. deterministic plots -------------------------------------------------------------------


@pytest.mark.parametrize("suffix", ["svg", "pdf"])
def test_a_plot_is_the_same_file_from_run_to_run(qoslab, tmp_path, suffix):
    job = ROOT / "configs/jobs/tour.fio"
    first, second = tmp_path / f"a.{suffix}", tmp_path / f"b.{suffix}"
    for out in (first, second):
        qoslab("sim", job, "--plot", out, "--output-format", "terse", check=True)
    assert first.read_bytes() == second.read_bytes()


# ---- 5. store reads against a merge, the new-store race, the failures view ------------------

SELFTEST_SPEC = """\
study: selftest
parameters:
  x: [0.25, 0.5, 1.0]
  n: [1, 2]
seeds: {range: [0, 12]}
"""


def _small_parts_store(tmp_path: Path, monkeypatch) -> Path:
    """A store of 72 one-point parts of the selftest study, not merged yet."""
    from qoslab.store import writer
    from qoslab.sweep.runner import run_sweep
    from qoslab.sweep.spec import load_spec

    spec = tmp_path / "spec.yaml"
    spec.write_text(SELFTEST_SPEC)
    store = tmp_path / "store"
    with monkeypatch.context() as m:
        m.setattr(writer, "MERGE_AT_SMALL_PARTS", 10**6)
        run_sweep(load_spec(spec), store, jobs=1, batch_points=1)
    assert len(list((store / "parts" / "selftest").iterdir())) == 72
    return store


def test_a_reader_keeps_its_view_while_a_merge_removes_the_parts_it_read(tmp_path, monkeypatch):
    # A reader listed the parts, a sweep merged them and removed the originals, and the
    # reader's query then failed to open a points.parquet ("IO Error: Cannot open file").
    import qoslab.store
    from qoslab.store.writer import StoreWriter

    store = _small_parts_store(tmp_path, monkeypatch)
    with qoslab.store.open(store) as reader:
        with StoreWriter(store) as w:
            merged = w.merge_small_parts("selftest")
        assert [p.name for p in (store / "parts" / "selftest").iterdir()] == [merged.name]
        got = reader.query("SELECT count(*) AS n, count(DISTINCT key) AS k FROM selftest")
        assert got.to_dict("records") == [{"n": 72, "k": 72}]
    assert not (store / "readers").exists()  # the snapshot goes with the reader
    with qoslab.store.open(store) as after:
        assert after.query("SELECT count(*) AS n FROM selftest")["n"][0] == 72


def test_a_killed_readers_snapshot_is_removed_by_the_next_reader(tmp_path, monkeypatch):
    import qoslab.store

    store = _small_parts_store(tmp_path, monkeypatch)
    gone = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                          capture_output=True, text=True, check=True)  # fmt: skip
    stale = store / "readers" / f"{gone.stdout.strip()}-abcd" / "selftest"
    stale.mkdir(parents=True)
    with qoslab.store.open(store) as reader:
        assert not stale.exists()
        assert reader.query("SELECT count(*) AS n FROM points")["n"][0] == 72


def test_the_failures_view_exists_on_a_store_without_failures(tmp_path, monkeypatch):
    store = _small_parts_store(tmp_path, monkeypatch)
    done = run_qoslab("store", "query", store, "SELECT count(*) AS n FROM failures")
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["n", "0"]
    columns = run_qoslab("store", "query", store, "DESCRIBE failures", check=True).stdout
    for column in ("key", "error", "seed", "params"):
        assert column in columns


def test_a_sweep_creating_a_new_store_another_one_holds_says_in_use(tmp_path):
    # The second of two sweeps started at once on a new path: the first holds the lock of a
    # directory that has no marker yet (it said "not a qoslab store" 1 time in 8).
    import fcntl

    from qoslab.errors import InputError
    from qoslab.store.writer import StoreWriter

    store = tmp_path / "new"
    store.mkdir()
    with open(store / "lock", "a") as held:
        fcntl.flock(held, fcntl.LOCK_EX)
        with pytest.raises(InputError, match="in use by another sweep"):
            StoreWriter(store)
    # The first one killed right there: the next sweep makes the store.
    StoreWriter(store).close()
    assert (store / "qoslab-store.json").is_file()


# ---- 4. what a kill -9 left is reclaimed by the next run into the same folder ---------------


def _kill_when(proc: subprocess.Popen, folder: Path, prefix: str) -> list[str]:
    """Kills `proc` (-9) once a hidden temporary starting with `prefix` is in `folder`;
    returns the hidden names left."""
    deadline = time.monotonic() + 60
    try:
        while not any(p.name.startswith(prefix) for p in folder.iterdir()):
            assert proc.poll() is None, proc.communicate()
            assert time.monotonic() < deadline
            time.sleep(0.02)
        time.sleep(0.5)
    finally:
        proc.kill()
        proc.wait()
    return sorted(p.name for p in folder.iterdir() if p.name.startswith("."))


def test_a_killed_matrix_leaves_a_partial_folder_that_the_next_run_reclaims(qoslab, tmp_path):
    config = tmp_path / "c.yaml"
    config.write_text(
        f'seeds:\n  - "{ROOT}/configs/nvmelite/seeds/seed_001_long32.json"\n'
        'policies: [FIFO, RANDOM]\nbounds: ["0", "3"]\nfaults: [NONE]\n'
        'schedule_seeds: "0-2000000"\nscheduler_version: "v1.0"\n'
    )
    out = tmp_path / "out"
    proc = subprocess.Popen([QOSLAB, "nvmelite", "matrix", config, "--out", out],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)  # fmt: skip
    left = _kill_when(proc, tmp_path, ".out.partial-")
    assert left and all(name.startswith(f".out.partial-{proc.pid}-") for name in left)
    config.write_text(config.read_text().replace("0-2000000", "0-3"))
    qoslab("nvmelite", "matrix", config, "--out", out, check=True)
    assert (out / "runs.csv").is_file()
    assert not [p.name for p in tmp_path.iterdir() if p.name.startswith(".")]


def test_a_killed_series_leaves_temporaries_that_the_next_run_reclaims(qoslab, tmp_path):
    series = tmp_path / "ts.parquet"
    proc = subprocess.Popen(
        [QOSLAB, *SIM_X, "--number_ios=200000000", "--repeat", "2", "--timeseries", series,
         "--output-format", "terse"],
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
    )  # fmt: skip
    left = _kill_when(proc, tmp_path, ".ts.parquet.tmp-")
    assert len(left) >= 2, left  # the staged file and the core's scratch files beside it
    qoslab(*SIM_X, "--number_ios=100", "--timeseries", series, check=True)
    assert series.is_file()
    assert not [p.name for p in tmp_path.iterdir() if p.name.startswith(".")]


def test_a_live_writers_temporaries_are_left_alone(qoslab, tmp_path):
    mine = tmp_path / f".ts.csv.tmp-{os.getpid()}-abc.tmp"
    mine.write_text("being written")
    qoslab(*SIM_X, "--number_ios=100", "--timeseries", tmp_path / "ts.csv", check=True)
    assert mine.read_text() == "being written"
