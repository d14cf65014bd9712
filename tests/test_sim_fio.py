"""`qoslab sim` as a fio user drives it: fio's command line, stdin, sections, output formats,
the units and footer of fio's normal output, fio's logs, and one-line errors."""

from __future__ import annotations

import json
import re
import shlex
import shutil
import subprocess

import pytest

from conftest import ROOT
from qoslab.fio.logs import read_fio_log

TWO_JOBS = (
    "[global]\nbs=8k\ndirect=1\n[a]\nrw=randread\nnumber_ios=300\n[b]\nrw=write\nnumber_ios=200\n"
)
TWO_JOBS_AS_OPTIONS = [
    "--bs=8k",
    "--direct=1",
    "--name=a",
    "--rw",
    "randread",
    "--number_ios=300",
    "--name=b",
    "--rw=write",
    "--number_ios=200",
]


def ok(done) -> str:
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_fio_command_line_options_are_the_job_file_they_stand_for(qoslab, tmp_path):
    job = tmp_path / "two.fio"
    job.write_text(TWO_JOBS)
    from_file = ok(qoslab("sim", job, "--output-format", "json"))
    from_line = ok(qoslab("sim", *TWO_JOBS_AS_OPTIONS, "--output-format", "json"))
    assert from_line == from_file
    report = json.loads(from_line)
    assert report["global options"] == {"bs": "8k", "direct": "1"}
    assert [j["jobname"] for j in report["jobs"]] == ["a", "b"]


def test_fio_options_beside_a_job_file_are_globals_the_file_overrides(qoslab, tmp_path):
    # As fio 3.33 runs `fio --number_ios=7 --bs=4k job.fio` (measured): the file's [global]
    # bs=8k wins, job b (no number_ios of its own) does 7 I/Os, and a job named on the command
    # line runs first, without the file's globals (b's size keeps that run short).
    job = tmp_path / "two.fio"
    job.write_text(
        "[global]\nbs=8k\ndirect=1\n[a]\nrw=randread\nnumber_ios=30\n[b]\nrw=write\nsize=1m\n"
    )
    report = json.loads(
        ok(qoslab("sim", "--number_ios=7", "--bs=4k", job, "--output-format", "json"))
    )
    assert report["global options"] == {"number_ios": "7", "bs": "8k", "direct": "1"}
    ios = {j["jobname"]: (j["read"]["total_ios"] + j["write"]["total_ios"]) for j in report["jobs"]}
    assert ios == {"a": 30, "b": 7}
    line = ["--name=x", "--direct=1", "--rw=read", "--number_ios=5", job]
    report = json.loads(ok(qoslab("sim", *line, "--output-format", "json")))
    assert [j["jobname"] for j in report["jobs"]] == ["x", "a", "b"]
    assert report["jobs"][0]["read"]["io_bytes"] == 5 * 4096
    # An option's error names the argument, a line of the file names the file.
    done = qoslab("sim", "--bs=huge", job)
    assert done.returncode == 2 and done.stderr.startswith("qoslab: error: --bs=huge: ")
    with job.open() as stdin:
        done = qoslab("sim", "--bs=4k", "-", stdin=stdin)
    assert done.returncode == 2 and "job file on stdin" in done.stderr


def test_a_job_file_on_stdin_runs_as_the_file_does(qoslab, tmp_path):
    job = tmp_path / "two.fio"
    job.write_text(TWO_JOBS)
    with job.open() as stdin:
        from_stdin = ok(qoslab("sim", "-", "--output-format", "json", stdin=stdin))
    assert from_stdin == ok(qoslab("sim", job, "--output-format", "json"))


def test_section_runs_only_the_sections_named(qoslab, tmp_path):
    job = tmp_path / "two.fio"
    job.write_text(TWO_JOBS)
    report = json.loads(ok(qoslab("sim", job, "--section", "b", "--output-format", "json")))
    assert [j["jobname"] for j in report["jobs"]] == ["b"]
    assert report["jobs"][0]["write"]["total_ios"] == 200
    done = qoslab("sim", job, "--section", "c")
    assert done.returncode == 2
    assert done.stderr == (
        f"qoslab: error: {job}: --section: no job section 'c' (sections: a, b)\n"
    )


def test_showcmd_quotes_what_the_shell_would_split_so_its_line_runs_again(qoslab, tmp_path):
    job = tmp_path / "spaces.fio"
    job.write_text('[my job]\ndescription=a "quoted" word\ndirect=1\nrw=randread\nnumber_ios=10\n')
    line = ok(qoslab("sim", "--showcmd", job))
    # fio's own form for description (init.c puts it in double quotes), escaped for the shell.
    assert line == (
        'fio --name=\'my job\' --description="a \\"quoted\\" word" --direct=1 '
        "--rw=randread --number_ios=10 \n"
    )
    words = shlex.split(line)
    again = json.loads(ok(qoslab("sim", *words[1:], "--parse-only", "--output-format", "json")))
    first = json.loads(ok(qoslab("sim", job, "--parse-only", "--output-format", "json")))
    as_written = ("location", "options", "globals_before", "ignored")
    assert [{k: v for k, v in j.items() if k not in as_written} for j in again["jobs"]] == [
        {k: v for k, v in j.items() if k not in as_written} for j in first["jobs"]
    ]


def test_parse_only_reads_and_stops(qoslab, tmp_path):
    assert ok(qoslab("sim", "--parse-only", *TWO_JOBS_AS_OPTIONS)) == ""
    parsed = json.loads(ok(qoslab("sim", "--parse-only", "--output-format=json", "--name=x")))
    assert parsed["jobs"][0]["bs_bytes"] == [4096, 4096, 4096]
    done = qoslab("sim", "--parse-only", "--name=x", "--iodepth=0")
    assert done.returncode == 2
    assert done.stderr == (
        "qoslab: error: --iodepth=0: option 'iodepth': expected an integer between 1 and "
        "65535, got '0'\n"
    )


def test_fios_run_options_eta_minimal_and_readonly(qoslab, tmp_path):
    # The scripted form `fio --eta=never job.fio`; fio's --minimal is its terse output; its
    # --readonly refuses a job that writes, naming it, and runs one that only reads.
    job = tmp_path / "two.fio"
    job.write_text(TWO_JOBS)
    terse = ok(qoslab("sim", job, "--output-format", "terse"))
    assert ok(qoslab("sim", "--eta=never", job, "--output-format", "terse")) == terse
    assert ok(qoslab("sim", "--eta", "always", job, "--minimal")) == terse
    done = qoslab("sim", "--eta=sometimes", job)
    assert done.returncode == 2
    assert done.stderr == "qoslab: error: --eta: expected always, never, auto, got 'sometimes'\n"
    done = qoslab("sim", "--readonly", job)
    assert done.returncode == 2 and done.stdout == ""
    assert done.stderr == (
        f"qoslab: error: {job}:7: job 'b': rw=write writes or trims, and --readonly allows "
        "reads only (as fio's read-only mode)\n"
    )
    reads = json.loads(
        ok(qoslab("sim", "--readonly", job, "--section", "a", "--output-format=json"))
    )
    assert reads["jobs"][0]["read"]["total_ios"] == 300


FORMAT_ORDERS = [
    # fio 3.33 (init.c) applies them in order: --minimal makes the output terse alone,
    # --output-format replaces the formats, --append-terse adds terse to what stands before.
    (["--minimal", "--output-format", "json"], "json"),
    (["--output-format=json", "--minimal"], "terse"),
    (["--append-terse", "--output-format=json"], "json"),
    (["--output-format=json", "--append-terse"], "json,terse"),
    (["--minimal", "--append-terse"], "terse"),
    (["--output-format=csv"], "terse"),
    (["--output-format=minimal,normal"], "terse,normal"),
]


@pytest.mark.parametrize(("options", "formats"), FORMAT_ORDERS)
def test_format_options_apply_in_fios_order(qoslab, tmp_path, options, formats):
    job = tmp_path / "two.fio"
    job.write_text(TWO_JOBS)
    asked = ok(qoslab("sim", job, *options))
    assert asked == ok(qoslab("sim", job, f"--output-format={formats}"))


@pytest.mark.skipif(shutil.which("fio") is None, reason="fio is installed by make tools")
@pytest.mark.parametrize(("options", "formats"), FORMAT_ORDERS)
def test_fio_itself_applies_the_format_options_so(tmp_path, options, formats):
    # What real fio writes for each order: terse lines ("3;..."), a JSON document, or both.
    done = subprocess.run(
        ["fio", *options, "--name=x", "--ioengine=null", "--size=64k", "--bs=4k"],
        capture_output=True,
        text=True,
        cwd=tmp_path,
    )
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert any(line.startswith("3;") for line in lines) == ("terse" in formats)
    assert ("{" in lines) == ("json" in formats)
    assert any("Run status group" in line for line in lines) == ("normal" in formats)


def test_fios_output_and_warning_options(qoslab, tmp_path):
    job = tmp_path / "two.fio"
    job.write_text(TWO_JOBS)
    # --append-terse is fio's older --output-format X,terse; terse version 3 by default.
    both = ok(qoslab("sim", job, "--output-format", "json,terse"))
    assert ok(qoslab("sim", job, "--output-format", "json", "--append-terse")) == both
    terse = ok(qoslab("sim", job, "--minimal"))
    assert ok(qoslab("sim", job, "--minimal", "--terse-version=3")) == terse
    assert terse.startswith("3;")
    done = qoslab("sim", job, "--minimal", "--terse-version=6")
    assert done.returncode == 2 and done.stdout == ""
    assert done.stderr == (
        "qoslab: error: --terse-version: expected 2, 3, 4 or 5 (fio's), got '6'\n"
    )
    # --warnings-fatal: a warning about the jobs stops the run, as one line (exit 2).
    done = qoslab("sim", "--name=t", "--thread", "--direct=1", "--number_ios=5", "--warnings-fatal")
    assert done.returncode == 2 and done.stdout == ""
    assert done.stderr == (
        "qoslab: error: --warnings-fatal: job 't': options accepted but ignored by the "
        "simulator: thread (--thread)\n"
    )
    # A warning names the option's argument, as an error does; --version is qoslab's.
    done = qoslab("sim", "--name=t", "--thread", "--direct=1", "--number_ios=5")
    assert done.returncode == 0 and "thread (--thread)" in done.stderr
    assert ok(qoslab("sim", "--version")) == ok(qoslab("--version"))
    # --cmdhelp: a job option's help, as fio prints it, and whether the simulator ignores it.
    from qoslab import _core

    helps = {name: text for name, _, _, _, text in _core.fio_options()}
    assert ok(qoslab("sim", "--cmdhelp=blocksize")) == (
        f"                  bs: {helps['bs']}\n               alias: blocksize\n"
    )
    assert f"bs                      : {helps['bs']}\n" in ok(qoslab("sim", "--cmdhelp=all"))
    assert "qoslab: accepted and ignored by the simulator" in ok(qoslab("sim", "--cmdhelp=thread"))
    done = qoslab("sim", "--cmdhelp=blocksiz")
    assert done.returncode == 2
    assert done.stderr == (
        "qoslab: error: --cmdhelp: no job option 'blocksiz' (did you mean blocksize?)\n"
    )


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--eta-newline=0"], "--eta-newline: expected a time above 0, got '0'"),
        (["--eta-newline=soon"], "--eta-newline: expected a duration"),
        (["--eta-interval=100ms"], "--eta-interval: expected a time at least 250ms (fio's"),
        (["--quiet", "--eta=always"], "--quiet is --eta never: give one of them"),
        (["--alloc-size=1024"], "--alloc-size: fio's --alloc-size sizes fio's shared memory"),
        (["--debug=io"], "--debug: fio's --debug measures or traces fio's own process"),
        (["--client=host"], "--client: fio's --client runs fio on other machines"),
    ],
)
def test_fios_run_options_that_are_wrong_or_mean_nothing_here_are_one_line(qoslab, args, message):
    done = qoslab("sim", "--name=j", "--direct=1", "--number_ios=5", *args)
    assert done.returncode == 2 and done.stdout == ""
    assert done.stderr.startswith("qoslab: error: " + message), done.stderr
    assert len(done.stderr.splitlines()) == 1


def test_status_interval_prints_the_report_so_far_every_interval_of_simulated_time(qoslab):
    job = [
        "--name=s",
        "--direct=1",
        "--ioengine=libaio",
        "--iodepth=4",
        "--rw=randread",
        "--runtime=25ms",
        "--time_based",
        "--output-format=json",
    ]
    final = ok(qoslab("sim", *job))
    out = ok(qoslab("sim", *job, "--status-interval=10ms"))
    reports, at = [], 0
    while at < len(out):
        report, at = json.JSONDecoder().raw_decode(out, at)
        reports.append(report)
        at += len(out[at:]) - len(out[at:].lstrip())
    # At 10 and 20 ms of simulated time, then the final report, unchanged by the dumps.
    assert len(reports) == 3
    assert json.dumps(reports[-1], indent=2) == json.dumps(json.loads(final), indent=2)
    ios = [r["jobs"][0]["read"]["total_ios"] for r in reports]
    runtimes = [r["jobs"][0]["read"]["runtime"] for r in reports]
    assert 0 < ios[0] < ios[1] < ios[2], ios
    assert runtimes[0] <= 10 < runtimes[1] <= 20 < runtimes[2], runtimes
    for bad in ("soon", "0", "-1s"):
        done = qoslab("sim", *job, f"--status-interval={bad}")
        assert done.returncode == 2 and done.stdout == ""
        assert done.stderr.startswith("qoslab: error: --status-interval: expected"), done.stderr
    done = qoslab("sim", *job, "--status-interval=1ms", "--repeat=3")
    assert done.returncode == 2 and "leave out --repeat" in done.stderr


def test_output_formats_combine_in_fios_order(qoslab):
    args = ["sim", *TWO_JOBS_AS_OPTIONS, "--output-format"]
    alone = {f: ok(qoslab(*args, f)) for f in ("terse", "json", "normal")}
    assert ok(qoslab(*args, "normal,json")) == alone["json"] + alone["normal"]
    assert ok(qoslab(*args, "json,terse,normal")) == "".join(alone.values())
    assert len(alone["terse"].splitlines()) == 2
    done = qoslab(*args, "json,xml")
    assert done.returncode == 2
    assert done.stderr == (
        "qoslab: error: --output-format: expected normal, terse, json, json+ (or fio's minimal "
        "or csv for terse) or a comma list of them, got 'xml'\n"
    )


def test_normal_output_prints_bandwidth_in_fios_units_and_the_group_footer(qoslab):
    # 200 reads of 4 KiB capped at 100 KiB/s, one every 40 ms: the last is issued at
    # 199 x 40 ms, so 800 KiB move in 7.96 s plus one latency: 102,914 B/s, which fio prints
    # as 101KiB/s (103kB/s).
    args = ["sim", "--name=slow", "--direct=1", "--rw=read", "--rate=100k", "--number_ios=200"]
    normal = ok(qoslab(*args))
    assert "  read: IOPS=25, BW=101KiB/s (103kB/s)(800KiB/7960msec)" in normal
    footer = normal[normal.index("Run status group 0 (all jobs):") :].splitlines()
    assert footer[1] == (
        "   READ: bw=101KiB/s (103kB/s), 101KiB/s-101KiB/s (103kB/s-103kB/s), "
        "io=800KiB (819kB), run=7960-7960msec"
    )
    read = json.loads(ok(qoslab(*args, "--output-format", "json")))["jobs"][0]["read"]
    assert (read["io_bytes"], read["runtime"]) == (200 * 4096, 7960)


def test_ignored_options_are_named_in_one_line_per_job(qoslab, tmp_path):
    job = tmp_path / "host.fio"
    job.write_text(
        "[global]\nthread\nnumber_ios=10\ndirect=1\n[a]\ngtod_reduce=1\n[b]\nwrite_lat_log=b\n[c]\n"
    )
    # In tmp_path: job b's latency logs are written in the current folder.
    done = qoslab("sim", job, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert (tmp_path / "b_lat.2.log").exists()
    assert done.stderr == (
        "qoslab: warning: job 'a': options accepted but ignored by the simulator: "
        f"thread ({job}:2), gtod_reduce ({job}:6)\n"
        "qoslab: warning: job 'b': options accepted but ignored by the simulator: "
        f"thread ({job}:2)\n"
        "qoslab: warning: job 'c': options accepted but ignored by the simulator: "
        f"thread ({job}:2)\n"
    )
    report = json.loads(ok(qoslab("sim", job, "--output-format", "json", cwd=tmp_path)))
    listed = [(i["job"], i["option"]) for i in report["qoslab"]["ignored_options"]]
    # The JSON names what the warning lines name; fio's per-I/O latency log is written.
    assert listed == [("a", "thread"), ("a", "gtod_reduce"), ("b", "thread"), ("c", "thread")]


def test_a_synchronous_engine_at_depth_is_capped_with_fios_note(qoslab):
    done = qoslab(
        "sim",
        "--name=p",
        "--direct=1",
        "--rw=randread",
        "--iodepth=32",
        "--number_ios=500",
        "--output-format=json",
    )
    assert done.returncode == 0, done.stderr
    assert done.stderr == (
        "qoslab: warning: job 'p': ioengine=psync is synchronous: iodepth=32 is capped at 1, "
        'as fio does (fio: "queue depth will be capped at 1"); ioengine=libaio or io_uring '
        "keeps that many in flight\n"
    )
    job = json.loads(done.stdout)["jobs"][0]
    assert job["iodepth_level"]["1"] == 100.0
    assert job["read"]["slat_ns"]["N"] == 0


def test_vsync_runs_as_fios_vector_engine_or_is_refused_where_fio_never_ends(qoslab):
    job = ["--name=v", "--ioengine=vsync", "--direct=1", "--iodepth=4", "--rw=write"]
    done = qoslab("sim", *job, "--number_ios=50", "--output-format=json")
    assert done.returncode == 0, done.stderr
    assert "ioengine=vsync at iodepth=4: adjacent I/Os go out together" in done.stderr
    # fio 3.33 (measured): with a think time or a rate this job never ends.
    for extra in ("--thinktime=100", "--rate_iops=1000"):
        done = qoslab("sim", *job, "--number_ios=50", extra)
        assert done.returncode == 2 and done.stdout == ""
        error = done.stderr.splitlines()[-1]
        assert error.startswith("qoslab: error: --ioengine=vsync: job 'v': ioengine=vsync")
        assert "never ends this job" in error and done.stderr.count("error") == 1
    done = qoslab("sim", "--name=t", "--ioengine=vsync", "--direct=1", "--rw=trim")
    assert done.returncode == 2 and "issues a trim as a write" in done.stderr


def test_io_uring_with_offloaded_submission_is_refused_as_fio_refuses_it(qoslab, tmp_path):
    job = ["--name=u", "--ioengine=io_uring", "--io_submit_mode=offload", "--direct=1"]
    job += ["--rw=write", "--number_ios=16"]
    done = qoslab("sim", *job)
    assert done.returncode == 2 and done.stdout == ""
    assert done.stderr == (
        "qoslab: error: --ioengine=io_uring: job 'u': ioengine=io_uring with "
        "io_submit_mode=offload: fio 3.33 refuses it (\"io_uring: can't be used with "
        'offloaded submit"); use io_submit_mode=inline or another engine\n'
    )
    fio = shutil.which("fio")
    if fio is None:
        pytest.skip("fio is installed by make tools")
    real = subprocess.run(
        [fio, f"--filename={tmp_path / 'data'}", "--size=1m", *job],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert real.returncode != 0
    assert "io_uring: can't be used with offloaded submit" in real.stderr


def test_buffered_io_and_non_block_engines_are_refused_in_one_line(qoslab):
    done = qoslab("sim", "--name=b", "--rw=randread", "--number_ios=10")
    assert done.returncode == 2
    assert done.stderr == (
        "qoslab: error: --name=b: job 'b': direct=0 (fio's default: buffered I/O through "
        "the page cache) is simulated only on a mounted file system ([fs] mount = true in the "
        "device file, or --set fs.mount=true, docs/fs.md); set direct=1 for I/O straight to "
        "the device\n"
    )
    done = qoslab("sim", "--name=h", "--ioengine=libhdfs", "--rw=read")
    assert done.returncode == 2
    assert "ioengine=libhdfs: an object-store or distributed file-system client" in done.stderr


def test_logs_are_fios_averaged_logs(qoslab, tmp_path):
    # 1000 reads/s, evenly spaced, for one second, logged every 100 ms.
    args = ["--name=paced", "--direct=1", "--rw=randread", "--rate_iops=1000", "--runtime=1s"]
    args += ["--time_based"]
    args += [
        "--log_avg_msec=100",
        "--write_iops_log=p",
        "--write_bw_log=paced",
        "--write_lat_log=p",
    ]
    report = json.loads(ok(qoslab("sim", *args, "--output-format=json", cwd=tmp_path)))
    names = sorted(p.name for p in tmp_path.iterdir())
    assert names == [
        "p_clat.1.log",
        "p_iops.1.log",
        "p_lat.1.log",
        "p_slat.1.log",
        "paced_bw.1.log",
    ]
    iops = read_fio_log(tmp_path / "p_iops.1.log")
    bw = read_fio_log(tmp_path / "paced_bw.1.log")
    lat = read_fio_log(tmp_path / "p_clat.1.log")
    assert iops.time_ms.tolist()[:9] == list(range(100, 1000, 100))
    assert (iops.value[:9] == 1000).all() and (iops.op == "read").all()
    assert (bw.value[:9] == 1000 * 4096 / 1024).all()
    # fio's latency windows close at the first I/O 100 ms or more after their start: with an
    # I/O every ms, at each multiple of 100 ms, holding its 101 I/Os (100 for the first).
    clat = report["jobs"][0]["read"]["clat_ns"]
    assert lat.time_ms.tolist()[:9] == list(range(100, 1000, 100))
    assert lat.value.between(clat["min"], clat["max"]).all()

    if shutil.which("fio") is None:
        return
    # The same lines as a real fio run writes: time, value, direction, 0, 0.
    real = tmp_path / "real"
    real.mkdir()
    subprocess.run(
        ["fio", "--filename=data", "--size=1m", "--output=/dev/null", *args],
        cwd=real,
        check=True,
    )
    logs = ["p_iops.1.log", "paced_bw.1.log", "p_clat.1.log", "p_lat.1.log", "p_slat.1.log"]
    assert sorted(p.name for p in real.glob("*.log")) == sorted(logs)
    shape = re.compile(r"^\d+, \d+, [012], 0, 0$")
    for path in [folder / name for name in logs for folder in (tmp_path, real)]:
        lines = path.read_text().splitlines()
        if path.name == "p_slat.1.log":
            # fio's default engine, psync, is synchronous: no submission latency.
            assert lines == [], path
        else:
            assert lines and all(shape.match(line) for line in lines), path


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (
            ["--output", "{tmp}/ok.fio/x.json"],
            "--output: cannot write {tmp}/ok.fio/x.json: {tmp}/ok.fio is a file, not a folder",
        ),
        (["--output", "{tmp}/no/x.json"], "--output: cannot write {tmp}/no/x.json: the folder"),
        (["--timeseries", "{tmp}/x.xlsx"], "--timeseries: expected a .csv or .parquet file"),
        (["--devcie", "ideal"], "no such option: --devcie (did you mean --device?)"),
        (["--iodpeth=4"], "no such option: --iodpeth (did you mean --iodepth?)"),
    ],
)
def test_bad_arguments_are_one_line_naming_the_option(qoslab, tmp_path, args, message):
    (tmp_path / "ok.fio").write_text("[j]\nnumber_ios=10\n")
    args = [a.format(tmp=tmp_path) for a in args]
    done = qoslab("sim", tmp_path / "ok.fio", *args)
    assert done.returncode == 2
    assert done.stderr.startswith("qoslab: error: " + message.format(tmp=tmp_path))
    assert len(done.stderr.splitlines()) == 1
    assert not (tmp_path / "x.xlsx").exists()


def test_a_negative_replay_speed_names_the_option(qoslab, tmp_path):
    trace = ROOT / "tests" / "data"
    done = qoslab("sim", "--trace", trace, "--speed", "-1")
    assert done.returncode == 2
    assert done.stderr == "qoslab: error: --speed: expected a number above 0, got -1\n"


# Terse fields per direction (fio's HOWTO): kb, bw, iops, runtime, slat (4), clat (4), 20
# percentiles, lat (4), bw (5); version 5 adds the bw samples and the IOPS samples (5).
DIRECTION = 41
TERSE_VERSIONS = {
    # version: (fields before the directions, directions, fields added per direction)
    "2": (4, 3, 0),
    "3": (5, 2, 0),
    "4": (5, 3, 0),
    "5": (5, 3, 6),
}


def terse_shape(line: str, version: str) -> list[str]:
    """A terse line cut where fio's HOWTO cuts it: the header, each direction, the rest."""
    head, directions, extra = TERSE_VERSIONS[version]
    fields = line.split(";")
    width = DIRECTION + extra
    cut = [fields[:head]]
    for d in range(directions):
        cut.append(fields[head + d * width : head + (d + 1) * width])
    cut.append(fields[head + directions * width :])
    return cut


@pytest.mark.parametrize("version", sorted(TERSE_VERSIONS))
def test_terse_versions_have_fios_fields(qoslab, tmp_path, version):
    # One job, a description that terse output carries; the same job to real fio (null engine)
    # when it is here: the same number of fields, line by line, in every version.
    job = ["--name=x", "--rw=randrw", "--bs=4k", "--number_ios=400", "--description=a b"]
    ours = ok(qoslab("sim", "--direct=1", *job, "--minimal", f"--terse-version={version}"))
    v3 = ok(qoslab("sim", "--direct=1", *job, "--minimal"))
    lines = ours.splitlines()
    # Version 2 puts the description on a line of its own.
    assert lines[-1] == ";a b" if version == "2" else lines[-1].endswith(";a b")
    assert len(lines) == (2 if version == "2" else 1)
    head, *directions, rest = terse_shape(lines[0], version)
    three = terse_shape(v3.splitlines()[0], "3")
    assert head == (["2", "x", "0", "0"] if version == "2" else [version, *three[0][1:]])
    # Read and write are version 3's; then trim (idle here) in 2, 4 and 5.
    assert [d[:DIRECTION] for d in directions[:2]] == three[1:3]
    if version != "3":
        assert directions[2][:4] == ["0", "0", "0", "0"]
    # The CPU, depth and latency-bucket fields, and the description, are version 3's.
    assert rest == (three[-1][:-1] if version == "2" else three[-1])
    if version == "5":
        report = json.loads(ok(qoslab("sim", "--direct=1", *job, "--output-format=json")))
        read = report["jobs"][0]["read"]
        assert directions[0][DIRECTION:] == [
            str(read["bw_samples"]),
            str(read["iops_min"]),
            str(read["iops_max"]),
            f"{read['iops_mean']:.6f}",
            f"{read['iops_stddev']:.6f}",
            str(read["iops_samples"]),
        ]
    if shutil.which("fio") is None:
        return
    real = subprocess.run(
        ["fio", "--ioengine=null", "--size=1m", *job, "--minimal", f"--terse-version={version}"],
        capture_output=True,
        text=True,
        cwd=tmp_path,
    )
    assert real.returncode == 0, real.stderr
    theirs = real.stdout.splitlines()
    assert [len(t.split(";")) for t in theirs] == [len(line.split(";")) for line in lines]
    assert theirs[0].split(";")[0] == version and theirs[-1].endswith(";a b")


def test_an_unset_variable_reads_as_nothing_as_in_fio(qoslab, tmp_path):
    # fio 3.33 replaces an unset ${NAME} by nothing, without a word (options.c); qoslab does
    # the same and says so in one warning line naming the file and line.
    job = tmp_path / "env.fio"
    job.write_text("[x]\ndirect=1\nrw=randread\nnumber_ios=50\ndescription=at ${QOSLAB_UNSET}x\n")
    done = qoslab("sim", job, "--minimal")
    assert done.returncode == 0 and done.stdout.rstrip("\n").endswith(";at x")
    assert done.stderr == (
        f"qoslab: warning: {job}:5: environment variable 'QOSLAB_UNSET' is not set: read as "
        "nothing, as fio does\n"
    )
    done = qoslab("sim", job, "--minimal", "--warnings-fatal")
    assert done.returncode == 2 and done.stdout == ""
    assert done.stderr.startswith(f"qoslab: error: --warnings-fatal: {job}:5: environment")
    # An option the empty value leaves bad is an error that names the variable.
    bad = tmp_path / "bad.fio"
    bad.write_text("[x]\ndirect=1\nrw=randread\nsize=${QOSLAB_UNSET}\n")
    done = qoslab("sim", bad)
    assert done.returncode == 2 and done.stdout == ""
    assert done.stderr.startswith(f"qoslab: error: {bad}:4: option 'size': ")
    assert done.stderr.endswith(
        "(environment variable 'QOSLAB_UNSET' is not set: fio reads it as nothing)\n"
    )
    if shutil.which("fio") is None:
        return
    # Real fio: the description reads "at x"; an empty size is an error there too.
    null = ["--ioengine=null", "--size=64k", "--minimal"]
    real = subprocess.run(["fio", *null, str(job)], capture_output=True, text=True, cwd=tmp_path)
    assert real.returncode == 0 and real.stdout.rstrip("\n").endswith(";at x"), real.stderr
    real = subprocess.run(["fio", "--ioengine=null", str(bad)], capture_output=True, text=True)
    assert real.returncode != 0 and "failed parsing size=${QOSLAB_UNSET}" in real.stderr
