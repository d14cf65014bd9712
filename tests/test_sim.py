"""`qoslab sim` end to end: fio's JSON structure (checked against fio itself), determinism,
trace replay, time series, and one-line errors with exit status 2."""

from __future__ import annotations

import csv
import io
import json
import math
import os
import shutil
import subprocess

import numpy as np
import pytest

from conftest import ROOT

IDEAL_FIXED = ["--device", "ideal", "--set", "media.service=fixed"]

MIX_JOB = """[global]
ioengine=null
size=64m
bs=4k
[mix]
rw=randrw
rwmixread=70
iodepth=4
number_ios=2000
"""


def write(tmp_path, name, text):
    p = tmp_path / name
    p.write_text(text)
    return p


def sim_json(qoslab, *args, fmt="json"):
    done = qoslab("sim", *args, "--output-format", fmt)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def key_tree(value, path=(), out=None):
    """{path: type name} of every key, with fio's data-keyed maps collapsed to '*'."""
    out = {} if out is None else out
    if isinstance(value, dict):
        for k, v in value.items():
            p = (*path, "*" if path and path[-1] in ("percentile", "bins") else k)
            out[p] = type(v).__name__
            key_tree(v, p, out)
    elif isinstance(value, list) and value:
        key_tree(value[0], (*path, "[]"), out)
    return out


@pytest.mark.skipif(shutil.which("fio") is None, reason="fio is installed by `make tools`")
@pytest.mark.parametrize("fmt", ["json", "json+"])
def test_the_json_has_fios_key_tree_and_value_types(qoslab, tmp_path, fmt):
    """Tools that read fio's JSON read ours: the same keys at every level, with the same JSON
    types, as fio 3.33 writes for the same job file (null engine); qoslab adds one key."""
    job = write(tmp_path, "mix.fio", MIX_JOB)
    real = subprocess.run(
        ["fio", f"--output-format={fmt}", str(job)],
        capture_output=True,
        text=True,
        check=True,
        cwd=tmp_path,
    )
    fio_tree = key_tree(json.loads(real.stdout))
    done = qoslab("sim", job, "--output-format", fmt)
    assert done.returncode == 0, done.stderr
    ours = key_tree(json.loads(done.stdout))
    extra = {k for k in ours if k not in fio_tree and k[0] != "qoslab"}
    missing = {k for k in fio_tree if k not in ours}
    assert not missing, f"keys fio has and qoslab lacks: {sorted(missing)}"
    assert not extra, f"keys qoslab adds: {sorted(extra)}"
    wrong = {k: (fio_tree[k], ours[k]) for k in fio_tree if fio_tree[k] != ours[k]}
    assert not wrong, f"(fio type, qoslab type): {wrong}"


def test_json_plus_bins_are_fio_buckets_and_count_every_io(qoslab, tmp_path):
    job = write(tmp_path, "mix.fio", MIX_JOB)
    report = sim_json(qoslab, job, fmt="json+")
    read = report["jobs"][0]["read"]
    bins = {int(k): v for k, v in read["clat_ns"]["bins"].items()}
    assert sum(bins.values()) == read["total_ios"]
    # fio's buckets above 128 ns are 64 per power of two; a bucket value is its midpoint.
    for value in bins:
        if value >= 128:
            group = value.bit_length() - 1
            width = 1 << (group - 6)
            assert (value - (1 << group)) % width == width // 2, value


def test_same_job_and_seed_give_byte_identical_json(qoslab, tmp_path):
    job = write(tmp_path, "mix.fio", MIX_JOB)
    runs = [qoslab("sim", job, "--seed", "7", "--output-format", "json+") for _ in range(2)]
    assert runs[0].returncode == 0, runs[0].stderr
    assert runs[0].stdout == runs[1].stdout
    other = qoslab("sim", job, "--seed", "8", "--output-format", "json+")
    assert other.stdout != runs[0].stdout


def test_repeat_is_byte_identical_with_one_or_many_threads(qoslab, tmp_path):
    job = write(tmp_path, "mix.fio", MIX_JOB)
    outs = []
    for threads in ("1", "4"):
        env = {**os.environ, "RAYON_NUM_THREADS": threads}
        done = qoslab("sim", job, "--repeat", "5", "--output-format", "json", env=env)
        assert done.returncode == 0, done.stderr
        outs.append(done.stdout)
    assert outs[0] == outs[1]
    report = json.loads(outs[0])
    repeat = report["qoslab"]["repeat"]
    assert repeat["runs"] == 5
    iops = repeat["jobs"][0]["read"]["iops"]
    assert iops["ci95_low"] <= iops["mean"] <= iops["ci95_high"]
    assert iops["ci95_low"] < iops["ci95_high"]


def test_repeat_interval_is_the_t_interval_of_the_single_runs(qoslab, tmp_path):
    job = write(tmp_path, "mix.fio", MIX_JOB)
    singles = [
        sim_json(qoslab, job, "--seed", str(s))["jobs"][0]["read"]["clat_ns"]["mean"]
        for s in (3, 4, 5)
    ]
    rep = sim_json(qoslab, job, "--seed", "3", "--repeat", "3")
    fig = rep["qoslab"]["repeat"]["jobs"][0]["read"]["clat_ns.mean"]
    mean = sum(singles) / 3
    sd = (sum((x - mean) ** 2 for x in singles) / 2) ** 0.5
    half = 4.303 * sd / 3**0.5  # Student's t, 2 degrees of freedom
    assert fig["mean"] == pytest.approx(mean, rel=1e-12)
    assert fig["ci95_high"] - fig["mean"] == pytest.approx(half, rel=1e-9)


def test_normal_output_is_a_short_fio_like_summary(qoslab, tmp_path):
    job = write(tmp_path, "mix.fio", MIX_JOB)
    done = qoslab("sim", job)
    assert done.returncode == 0, done.stderr
    assert "mix: (groupid=0, jobs=1)" in done.stdout
    assert "  read: IOPS=" in done.stdout and "  write: IOPS=" in done.stdout
    assert "clat percentiles" in done.stdout


def test_output_and_timeseries_files(qoslab, tmp_path):
    job = write(
        tmp_path,
        "paced.fio",
        "[paced]\nioengine=libaio\ndirect=1\nrw=randread\nbs=4k\nsize=1g\nrate_iops=1000\nnumber_ios=1000\n",
    )
    out = tmp_path / "r.json"
    series = tmp_path / "s.csv"
    args = ["--output", out, "--timeseries", series, "--log-avg-msec", "100"]
    done = qoslab("sim", job, *IDEAL_FIXED, "--output-format", "json", *args)
    assert done.returncode == 0, done.stderr
    assert done.stdout == ""
    assert json.loads(out.read_text())["jobs"][0]["read"]["total_ios"] == 1000
    rows = list(csv.DictReader(io.StringIO(series.read_text())))
    # 1000 I/Os at 1000/s over 1 s: ten 100 ms intervals of 100 I/Os each.
    assert [int(r["ios"]) for r in rows] == [100] * 10
    assert {r["op"] for r in rows} == {"read"}
    assert float(rows[0]["iops"]) == 1000.0
    assert [int(r["time_ms"]) for r in rows] == list(range(0, 1000, 100))
    assert not list(tmp_path.glob(".*.tmp"))
    pq = tmp_path / "s.parquet"
    done = qoslab("sim", job, *IDEAL_FIXED, "--timeseries", pq, "--log-avg-msec", "100")
    assert done.returncode == 0, done.stderr
    import pyarrow.parquet as papq

    assert papq.read_table(pq).num_rows == 10
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "paced.fio",
        "r.json",
        "s.csv",
        "s.parquet",
    ]


def test_a_long_series_in_parquet_is_the_csv_batch_by_batch(qoslab, tmp_path):
    """The Parquet series is converted from the CSV in batches, one row group each; read back,
    it is the CSV (as pandas reads it) with fixed column types, seed column included."""
    import pandas as pd
    import pyarrow.parquet as papq

    text = (
        "[paced]\nioengine=libaio\ndirect=1\nrw=randrw\nbs=4k\nsize=1g\nrate_iops=500,500\n"
        "time_based=1\nruntime=1s\n"
    )
    job = write(tmp_path, "paced.fio", text)
    args = ["--set", "media.service=fixed", "--repeat", "2", "--log-avg-msec", "0.05"]
    for name in ("s.csv", "s.parquet"):
        done = qoslab("sim", job, "--device", "ideal", *args, "--timeseries", tmp_path / name)
        assert done.returncode == 0, done.stderr
    from_csv = pd.read_csv(tmp_path / "s.csv")
    parquet = papq.ParquetFile(tmp_path / "s.parquet")
    assert parquet.metadata.num_row_groups > 1
    assert str(parquet.schema_arrow.field("interval_ms").type) == "double"
    assert len(from_csv) > 40_000 and set(from_csv["seed"]) == {1, 2}
    pd.testing.assert_frame_equal(
        parquet.read().to_pandas(), from_csv, check_dtype=False, check_exact=True
    )


def test_the_plot_reads_the_written_series_or_a_scratch_one(qoslab, tmp_path):
    tour = ROOT / "configs" / "jobs" / "tour.fio"
    with_series = ["--timeseries", tmp_path / "s.parquet", "--plot", tmp_path / "a.png"]
    done = qoslab("sim", tour, *with_series)
    assert done.returncode == 0, done.stderr
    done = qoslab("sim", tour, "--plot", tmp_path / "b.png")
    assert done.returncode == 0, done.stderr
    assert (tmp_path / "a.png").read_bytes() == (tmp_path / "b.png").read_bytes()
    assert (tmp_path / "a.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.png", "b.png", "s.parquet"]


def _peak_rss_mb(cmd: list) -> float:
    proc = subprocess.Popen(
        [str(c) for c in cmd], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE
    )
    _, status, rusage = os.wait4(proc.pid, 0)
    assert status == 0, proc.stderr.read().decode()
    return rusage.ru_maxrss / 1024


def test_the_series_memory_does_not_grow_with_the_run(tmp_path):
    """Rows go to the file as intervals close: a series of a million rows (43 MB of CSV)
    takes no more memory than one of a thousand; holding it in memory, even once, would add
    its 43 MB."""
    from conftest import QOSLAB

    # 1000 I/Os at 1000 per second: one simulated second, cut into 1 ms or 1 us intervals.
    text = (
        "[paced]\nioengine=libaio\ndirect=1\nrw=randread\nbs=4k\nsize=1g\nrate_iops=1000\n"
        "number_ios=1000\n"
    )
    job = write(tmp_path, "paced.fio", text)
    peak_mb, size_mb = {}, {}
    for interval_ms in ("1", "0.001"):
        series = tmp_path / f"{interval_ms}.csv"
        cmd = [QOSLAB, "sim", job, "--device", "ideal", "--output-format", "json"]
        peak_mb[interval_ms] = _peak_rss_mb(
            [*cmd, "--timeseries", series, "--log-avg-msec", interval_ms]
        )
        size_mb[interval_ms] = series.stat().st_size / 1e6
    assert size_mb["0.001"] > 35 and size_mb["1"] < 0.1, size_mb
    assert peak_mb["0.001"] - peak_mb["1"] < 15, peak_mb


# ---- trace replay: one small file per format, written from the formats' public
# descriptions; every I/O is replayed at its timestamp on a device with a fixed 1 us service.

TRACES = {
    # MSR Cambridge: Timestamp (Windows filetime, 100 ns), Hostname, DiskNumber, Type,
    # Offset, Size, ResponseTime.
    "msr.csv": (
        "128166372000000000,wdev,0,Read,4096,8192,100\n"
        "128166372001000000,wdev,0,Write,0,4096,100\n"
        "128166372001000000,wdev,0,Write,65536,4096,100\n"
        "128166372025000000,wdev,0,Read,0,512,100\n",
        [(0, "read", 1, 8192), (100, "write", 2, 8192), (2500, "read", 1, 512)],
    ),
    # SYSTOR '17: Timestamp (s), Response, IOType, LUN, Offset, Size.
    "systor.csv": (
        "Timestamp,Response,IOType,LUN,Offset,Size\n"
        "1456095145.000000,0.0001,R,0,4096,4096\n"
        "1456095145.300000,0.0001,W,0,8192,16384\n"
        "1456095145.300000,0.0001,R,1,0,4096\n",
        [(0, "read", 1, 4096), (300, "read", 1, 4096), (300, "write", 1, 16384)],
    ),
    # blkparse default output: dev cpu seq time pid action rwbs sector + blocks [proc].
    "blk.txt": (
        "  8,0    0        1     0.000000000   100  Q   R 8 + 8 [fio]\n"
        "  8,0    0        2     0.000001000   100  G   R 8 + 8 [fio]\n"
        "  8,0    0        3     0.200000000   100  Q   W 64 + 16 [fio]\n"
        "  8,0    0        4     0.200100000   100  C   W 64 + 16 [0]\n"
        "  8,0    0        5     0.700000000   100  Q   R 0 + 8 [fio]\n",
        [(0, "read", 1, 4096), (200, "write", 1, 8192), (700, "read", 1, 4096)],
    ),
    # fio iolog v2: filename action [offset length]; wait in us.
    "v2.log": (
        "fio version 2 iolog\n/dev/x add\n/dev/x open\n/dev/x read 0 4096\n"
        "/dev/x wait 400000\n/dev/x write 4096 4096\n/dev/x write 8192 4096\n/dev/x close\n",
        [(0, "read", 1, 4096), (400, "write", 2, 8192)],
    ),
}


@pytest.mark.parametrize("name", sorted(TRACES))
def test_each_trace_format_replays_every_io_at_its_timestamp(qoslab, tmp_path, name):
    text, expected = TRACES[name]
    trace = write(tmp_path, name, text)
    series = tmp_path / "s.csv"
    args = ["--trace", trace, *IDEAL_FIXED, "--set", "media.service_mean_ns=1000"]
    args += ["--set", "media.servers=4"]
    args += ["--timeseries", series, "--log-avg-msec", "100", "--output-format", "json"]
    done = qoslab("sim", *args)
    assert done.returncode == 0, done.stderr
    job = json.loads(done.stdout)["jobs"][0]
    for op in ("read", "write"):
        want = [e for e in expected if e[1] == op]
        assert job[op]["total_ios"] == sum(e[2] for e in want), op
        assert job[op]["io_bytes"] == sum(e[3] for e in want), op
        if want:
            # Replayed at their own times: nobody queued behind anybody.
            assert job[op]["lat_ns"]["max"] == 1000
    got = [
        (int(r["time_ms"]), r["op"], int(r["ios"]), int(r["bytes"]))
        for r in csv.DictReader(io.StringIO(series.read_text()))
        if int(r["ios"]) > 0
    ]
    assert sorted(got) == sorted(expected)


def test_replay_speed_scales_the_timestamps(qoslab, tmp_path):
    text, _ = TRACES["msr.csv"]
    trace = write(tmp_path, "msr.csv", text)
    series = tmp_path / "s.csv"
    done = qoslab(
        "sim",
        "--trace",
        trace,
        "--speed",
        "2",
        *IDEAL_FIXED,
        "--timeseries",
        series,
        "--log-avg-msec",
        "50",
    )
    assert done.returncode == 0, done.stderr
    times = sorted(
        {
            int(r["time_ms"])
            for r in csv.DictReader(io.StringIO(series.read_text()))
            if int(r["ios"]) > 0
        }
    )
    assert times == [0, 50, 1250]


# ---- bad input: one line naming the place, exit status 2, nothing written ---------------


def assert_one_line_error(done, *fragments):
    assert done.returncode == 2, (done.returncode, done.stdout, done.stderr)
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    assert lines[0].startswith("qoslab: error: "), lines[0]
    assert "Traceback" not in done.stderr
    for f in fragments:
        assert f in lines[0], lines[0]


@pytest.mark.parametrize(
    ("job", "fragments"),
    [
        ("[j]\nrw=read\nfrobnicate=1\n", ["bad.fio:3:", "frobnicate"]),
        ("[j]\nrw=read\nbs=4q\n", ["bad.fio:3:", "'bs'"]),
        ("[j]\nrw=read\niodepth=-1\n", ["bad.fio:3:", "iodepth"]),
    ],
)
def test_bad_job_files(qoslab, tmp_path, job, fragments):
    path = write(tmp_path, "bad.fio", job)
    out = tmp_path / "out.json"
    done = qoslab("sim", path, "--output", out)
    assert_one_line_error(done, *fragments)
    assert not out.exists()


@pytest.mark.parametrize(
    ("trace", "fragments"),
    [
        (
            "128166372001000000,wdev,0,Read,0,4096,1\n128166372000000000,wdev,0,Read,0,4096,1\n",
            ["bad.csv:2:"],
        ),
        ("128166372000000000,wdev,0,Read,0,4096,1\nthis is not a trace line\n", ["bad.csv:2:"]),
    ],
)
def test_bad_traces(qoslab, tmp_path, trace, fragments):
    path = write(tmp_path, "bad.csv", trace)
    assert_one_line_error(qoslab("sim", "--trace", path), *fragments)
    # Found while the series is being written: neither it nor its temporary file remains.
    for series in ("s.csv", "s.parquet"):
        done = qoslab("sim", "--trace", path, "--timeseries", tmp_path / series)
        assert_one_line_error(done, *fragments)
        assert sorted(p.name for p in tmp_path.iterdir()) == ["bad.csv"]


@pytest.mark.parametrize(
    ("device", "fragments"),
    [
        (
            "[host]\nsubmit_ns = 1\nirq_ns = '4KiB'\n",
            ["dev.toml:3:", "field 'host.irq_ns'", "expected a time"],
        ),
        ("[media]\ncapacity_bytes = '1.5us'\n", ["dev.toml:2:", "media.capacity_bytes"]),
        (
            "[controller]\nfetch_nanos = 5\n",
            ["dev.toml:2:", "unknown key 'controller.fetch_nanos'"],
        ),
        ("[media]\nmodel = 'tape'\n", ["dev.toml:2:", "media.model"]),
        ("[media\n", ["dev.toml:1:", "invalid TOML"]),
    ],
)
def test_bad_device_files(qoslab, tmp_path, device, fragments):
    job = write(tmp_path, "j.fio", "[j]\nrw=read\nsize=1m\n")
    dev = write(tmp_path, "dev.toml", device)
    assert_one_line_error(qoslab("sim", job, "--device", dev), *fragments)


def test_series_and_output_paths_that_cannot_be_written(qoslab, tmp_path):
    job = write(tmp_path, "j.fio", "[j]\nrw=read\nsize=1m\n")
    out = tmp_path / "r.json"
    for series in ("s.csv", "s.parquet"):
        done = qoslab("sim", job, "--timeseries", tmp_path / "nowhere" / series, "--output", out)
        assert_one_line_error(done, "--timeseries:", "nowhere does not exist")
        done = qoslab("sim", job, "--timeseries", tmp_path, "--output", out)
        assert_one_line_error(done, str(tmp_path), "is a folder")
    done = qoslab("sim", job, "--timeseries", tmp_path / "s.csv", "--output", tmp_path / "no" / "r")
    assert_one_line_error(done, "--output:", "folder", "/no does not exist")
    assert_one_line_error(qoslab("sim", job, "--log-avg-msec", "0"), "--log-avg-msec")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["j.fio"]


def test_bad_overrides_and_options(qoslab, tmp_path):
    job = write(tmp_path, "j.fio", "[j]\nrw=read\nsize=1m\n")
    assert_one_line_error(
        qoslab("sim", job, "--set", "media.servers=lots"), "media.servers", "lots"
    )
    assert_one_line_error(qoslab("sim", job, "--set", "nosuch.key=1"), "unknown section")
    assert_one_line_error(qoslab("sim", job, "--device", "no-such-preset"), "no-such-preset")
    assert_one_line_error(qoslab("sim", job, "--output-format", "xml"), "xml")
    assert_one_line_error(qoslab("sim", job, "--repeat", "0"), "--repeat")
    assert_one_line_error(qoslab("sim", "--device", "ideal"), "job file")


def test_presets_and_tunables_are_listed(qoslab):
    done = qoslab("sim", "--list-devices", check=True)
    assert "ideal" in done.stdout and "nvme-analytic" in done.stdout
    done = qoslab("sim", "--list-tunables", check=True)
    assert "[controller]" in done.stdout and "coalesce_time_ns" in done.stdout
    done = qoslab("sim", "--show-device", "ideal", check=True)
    assert 'model = "analytic"' in done.stdout


def test_the_docs_tunables_reference_is_generated_from_the_tables():
    from qoslab.sim.api import tunables_markdown
    from qoslab.sim.docs import MODELS

    doc = (ROOT / "docs" / "sim.md").read_text()
    assert tunables_markdown(MODELS) in doc, "run `make sim-docs` to regenerate docs/sim.md"


def test_the_docs_list_every_preset_of_the_registry():
    from qoslab.sim.api import presets
    from qoslab.sim.docs import presets_table

    doc = (ROOT / "docs" / "sim.md").read_text()
    assert presets_table() in doc, "run `make sim-docs` to regenerate docs/sim.md"
    names = sorted(p.stem for p in (ROOT / "configs" / "devices").glob("*.toml"))
    assert sorted(n for n, _ in presets()) == names
    for name in names:
        assert f"| `{name}`" in doc


def test_the_docs_tour_excerpt_is_what_the_tour_job_gives():
    from qoslab.sim.docs import tour_excerpt

    doc = (ROOT / "docs" / "sim.md").read_text()
    assert tour_excerpt() in doc, "run `make sim-docs` to regenerate docs/sim.md"


PCTS = [1, 5, 10, 20, 30, 40, 50, 60, 70, 75, 80, 85, 90, 95, 97, 98, 99, 99.5, 99.9]


@pytest.mark.skipif(shutil.which("fio") is None, reason="fio is installed by `make tools`")
def test_an_empirical_device_fitted_from_a_real_fio_run_reproduces_its_latencies(qoslab, tmp_path):
    """fio measures QD1 random reads of a file; its clat percentiles become an empirical
    profile (the format docs/sim.md describes); the simulator, running the same job on that
    device behind a path that costs nothing, reports the same percentiles."""
    data = tmp_path / "data"
    data.write_bytes(os.urandom(16 << 20))
    plist = ":".join(str(p) for p in PCTS)
    real = subprocess.run(
        [
            "fio",
            "--name=cal",
            "--ioengine=psync",
            f"--filename={data}",
            "--size=16m",
            "--bs=4k",
            "--rw=randread",
            "--io_size=80m",
            f"--percentile_list={plist}",
            "--output-format=json",
        ],
        capture_output=True,
        text=True,
        check=True,
    )
    clat = json.loads(real.stdout)["jobs"][0]["read"]["clat_ns"]
    points = [(0.0, clat["min"])] + [
        (float(k), v) for k, v in sorted(clat["percentile"].items(), key=lambda kv: float(kv[0]))
    ]
    points.append((100.0, clat["max"]))
    profile = tmp_path / "profile.toml"
    profile.write_text(
        'format = "qoslab-empirical-1"\n'
        'source = "fio psync 4 KiB randread of a 16 MiB file, QD1"\n'
        f"capacity_bytes = {16 << 20}\n\n"
        '[[point]]\nop = "read"\niodepth = 1\nbs_bytes = 4096\n'
        f"percentiles = [{', '.join(str(p) for p, _ in points)}]\n"
        f"clat_ns = [{', '.join(str(v) for _, v in points)}]\n"
    )
    device = write(tmp_path, "dev.toml", '[media]\nmodel = "empirical"\nprofile = "profile.toml"\n')
    job = write(
        tmp_path,
        "qd1.fio",
        # io_size: 200 passes over the 16 MiB region, 204,800 draws from the profile.
        f"[qd1]\nioengine=libaio\ndirect=1\nrw=randread\nbs=4k\nsize=16m\nio_size=800m\nnorandommap=1\n"
        f"percentile_list={plist}\n",
    )
    read = sim_json(qoslab, job, "--device", device)["jobs"][0]["read"]
    n = read["total_ios"]
    assert n == 204_800
    sim = read["clat_ns"]
    # The profile is fio's numbers joined by straight lines; the simulator's percentiles may
    # differ from it by the sampling error of a quantile over n draws (4 sigma = 4 sqrt(q(1-q)/n),
    # many ns where the profile is steep, below fio's 1st percentile) and by its histogram's
    # resolution (3 significant digits).
    pct = [p for p, _ in points]
    lat = [v for _, v in points]
    for p in PCTS:
        if p > 99:
            continue  # the last points rest on a handful of fio's samples
        q = p / 100
        spread = 100 * 4 * math.sqrt(q * (1 - q) / n)
        lo = np.interp(p - spread, pct, lat) * (1 - 0.002)
        hi = np.interp(p + spread, pct, lat) * (1 + 0.002)
        key = f"{p:.6f}"
        assert lo <= sim["percentile"][key] <= hi, (key, lo, sim["percentile"][key], hi)


def test_power_fail_at_reports_what_each_job_lost(qoslab, tmp_path):
    """`--power-fail-at` on a drive with a volatile cache and no power-loss protection: a job
    that never flushes loses acknowledged writes; one that flushes after every write loses none
    of what it relied on. (One write at a time: libaio's fsync goes beside the writes in flight,
    as fio 3.33's, and covers only those reaped before it.)"""
    job = write(
        tmp_path,
        "w.fio",
        "[global]\nioengine=libaio\ndirect=1\nrw=randwrite\nbs=4k\nsize=1g\niodepth=8\ntime_based=1\nruntime=30ms\n"
        "[plain]\n[synced]\noffset=2g\nfsync=1\niodepth=1\n",
    )
    report = sim_json(qoslab, str(job), "--device", "consumer-tlc", "--power-fail-at", "20ms")
    d = report["qoslab"]["durability"]
    assert d["power_fail_at_ns"] == 20_000_000
    plain, synced = d["jobs"]
    assert plain["jobname"] == "plain" and synced["jobname"] == "synced"
    assert plain["acknowledged_lost"] > 0
    assert plain["durable"] == plain["writes_acknowledged"] - plain["acknowledged_lost"]
    assert synced["acknowledged_lost"] == 0
    assert synced["durable"] == synced["writes_acknowledged"] > 0
