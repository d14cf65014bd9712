"""The reader on what the installed fio writes, checked against fio's other outputs.

One fio run writes json+ and terse v3 (whose latencies are µs) into one file: the reader has
to skip the terse line, and its ns-based numbers must agree with the terse fields. The json+
bins must reproduce fio's own percentiles by fio's rule, and the latency log must agree with
the JSON summary.
"""

from __future__ import annotations

import subprocess

import pytest

from qoslab.fio import jobs_table, percentiles_from_bins, read_fio_json
from qoslab.fio.logs import read_fio_log

# terse v3: 5 read_kb, 6 bw KiB/s, 7 iops, 8 runtime ms, 9-12 slat, 13-16 clat (min max mean
# dev, µs), 17-36 clat percentiles "p%=v", 37-40 lat min max mean dev (µs).
TERSE = {"kb": 5, "iops": 7, "clat_mean": 15, "lat_mean": 39, "pct": slice(17, 37)}


@pytest.fixture(scope="module")
def fio_run(tmp_path_factory):
    d = tmp_path_factory.mktemp("fio")
    cmd = [
        "fio",
        "--name=probe",
        f"--filename={d / 'data'}",
        "--size=16M",
        "--rw=randread",
        "--bs=4k",
        "--direct=1",
        "--ioengine=libaio",
        "--iodepth=2",
        "--runtime=1",
        "--time_based",
        "--lat_percentiles=1",
        "--write_lat_log=probe",
        "--log_avg_msec=100",
        "--output-format=json+,terse",
        f"--output={d / 'out.txt'}",
    ]
    subprocess.run(cmd, cwd=d, check=True, capture_output=True)
    return d


def test_json_plus_agrees_with_terse_output(fio_run):
    text = (fio_run / "out.txt").read_text()
    terse = next(line for line in text.splitlines() if line.startswith("3;")).split(";")
    out = read_fio_json(fio_run / "out.txt")
    assert out.fio_version == terse[1]
    row = jobs_table([out]).iloc[0]
    assert row.job == terse[2] == "probe"
    assert row.io_bytes // 1024 == int(terse[TERSE["kb"]])
    assert row.total_ios == row.io_bytes // 4096
    assert row.iops == pytest.approx(float(terse[TERSE["iops"]]), abs=1)
    assert row.clat_mean_us == pytest.approx(float(terse[TERSE["clat_mean"]]), abs=0.01)
    assert row.lat_mean_us == pytest.approx(float(terse[TERSE["lat_mean"]]), abs=0.01)
    terse_pct = dict(f.split("%=") for f in terse[TERSE["pct"]])
    # With lat_percentiles=1 the terse percentiles are those of the total latency.
    lat = out.jobs[0].ops["read"].latency["lat"]
    for p in (50.0, 95.0, 99.0, 99.9):
        assert lat.percentiles_ns[p] / 1000 == pytest.approx(int(terse_pct[f"{p:f}"]), abs=1)
    assert row.pct_of == "lat"


def test_bins_reproduce_fios_own_percentiles(fio_run):
    out = read_fio_json(fio_run / "out.txt")
    for kind in ("clat", "lat"):
        lat = out.jobs[0].ops["read"].latency[kind]
        assert sum(lat.bins_ns.values()) == lat.samples
        assert percentiles_from_bins(lat.bins_ns, lat.percentiles_ns) == lat.percentiles_ns


def test_little_law_of_a_queue_depth_2_run(fio_run):
    row = jobs_table([read_fio_json(fio_run / "out.txt")]).iloc[0]
    assert row.iodepth == 2
    assert row.littles_l == pytest.approx(2.0, rel=0.1)


def test_latency_log_agrees_with_the_summary(fio_run):
    (log,) = fio_run.glob("probe_lat.*.log")
    series = read_fio_log(log)
    out = read_fio_json(fio_run / "out.txt").jobs[0].ops["read"].latency["lat"]
    assert len(series) >= 5
    assert set(series.op) == {"read"}
    assert series.time_ms.is_monotonic_increasing
    # A unit slip (µs for ns) would put every window 1000x below the run's fastest I/O.
    assert series.value.between(out.min_ns, out.max_ns).all()
    # Every I/O lands in one window (fio flushes the last, partial one at exit), so the run's
    # mean is a weighted mean of the window means and lies between the smallest and the largest
    # of them. Window means are whole nanoseconds, hence the 1 ns of slack. (Their median is no
    # test: on a busy machine a few slow windows of few I/Os pull it far from the run's mean.)
    assert series.value.min() - 1 <= out.mean_ns <= series.value.max() + 1


@pytest.mark.parametrize(
    ("bs", "read_bytes", "write_bytes"),
    [("4k", 4096, 4096), ("4KiB", 4000, 4000), ("4k,64k", 4096, 65536)],
)
def test_block_size_option_is_read_as_fio_reads_it(tmp_path, bs, read_bytes, write_bytes):
    # fio's default kb_base=1024 takes `k` as 1024 and, for compatibility, `KiB` as 1000.
    out = tmp_path / "out.json"
    subprocess.run(
        [
            "fio",
            "--name=bs",
            "--ioengine=null",
            "--size=4M",
            "--rw=rw",
            f"--bs={bs}",
            "--output-format=json",
            f"--output={out}",
        ],
        check=True,
        capture_output=True,
    )
    table = jobs_table([read_fio_json(out)]).set_index("op")
    assert table.bs_bytes["read"] == read_bytes
    assert table.bs_bytes["write"] == write_bytes
    for op in ("read", "write"):
        row = table.loc[op]
        assert row.io_bytes / row.total_ios == row.bs_bytes  # what fio actually issued
