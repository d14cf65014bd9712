"""The fio JSON reader on hand-written outputs shaped like other fio versions, and on bad input.

Expected values are worked out by hand from each file (tests/data/fio/README.md); none comes
from the code under test.
"""

from __future__ import annotations

import math

import pytest

from conftest import ROOT
from qoslab.errors import InputError
from qoslab.fio import jobs_table, parse_fio_json, plat_index_to_value, read_fio_json

DATA = ROOT / "tests" / "data" / "fio"


def one_row(name: str):
    table = jobs_table([read_fio_json(DATA / name)])
    assert len(table) == 1
    return table.iloc[0]


def test_fio2_json_latencies_are_microseconds_and_io_bytes_kibibytes():
    row = one_row("fio-2.2-json.json")
    assert row.op == "read"
    assert row.io_bytes == 409600 * 1024
    # No total_ios before fio 2.10: IOPS x runtime.
    assert row.total_ios == 10240 * 10
    assert row.bs_bytes == 4096
    assert row.bw_bytes_s == 40960 * 1024
    assert row.lat_mean_us == pytest.approx(102.0)
    assert row.clat_mean_us == pytest.approx(100.0)
    assert row.slat_mean_us == pytest.approx(2.0)
    assert (row.p50_us, row.p95_us, row.p99_us, row.p99_9_us) == (98, 140, 200, 400)
    assert row.pct_of == "clat"
    assert row.littles_l == pytest.approx(10240 * 102e-6)
    assert row.iodepth == 8
    assert (row.usr_cpu, row.sys_cpu, row.ctx) == (3.5, 12.25, 102500)
    assert read_fio_json(DATA / "fio-2.2-json.json").latency_unit == "us"


def test_fio2_jsonplus_bins_keyed_by_bucket_index_are_decoded():
    out = read_fio_json(DATA / "fio-2.12-jsonplus-indexed-bins.json")
    clat = out.jobs[0].ops["write"].latency["clat"]
    # Index 100 is exact; 128 opens the group of width 2 starting at 128 (midpoint 129);
    # 200 is bucket 8 of the group of width 4 starting at 256: 256 + 8.5 * 4 = 290.
    assert clat.bins_ns == {100_000.0: 5, 129_000.0: 3, 290_000.0: 2}
    row = jobs_table([out]).iloc[0]
    assert row.io_bytes == 10 * 128 * 1024
    # No percentiles in the file: fio's rule over the bins (first bucket reaching p% of 10).
    assert (row.p50_us, row.p95_us, row.p99_us, row.p99_9_us) == (100, 290, 290, 290)


def test_plat_index_to_value_matches_fios_bucket_layout():
    assert [plat_index_to_value(i) for i in (0, 1, 127)] == [0, 1, 127]
    assert plat_index_to_value(128) == 129
    assert plat_index_to_value(191) == 128 + 63 * 2 + 1
    assert plat_index_to_value(192) == 256 + 2
    # Group g (g >= 2) starts at 2^(g+5) and its 64 buckets are 2^(g-1) wide.
    for g in range(2, 20):
        start = 1 << (g + 5)
        assert plat_index_to_value(g * 64) == start + (1 << (g - 1)) // 2


def test_fio3_mixed_direction_grouped_jobs_and_lat_percentiles():
    row = one_row("fio-3.x-minimal-mixed-grouped.json")
    assert row.op == "mixed"
    assert row.grouped_jobs == 4
    assert (row.iodepth, row.numjobs, row.rwmixread) == (4, 4, 70)  # iodepth from [global]
    assert row.io_bytes == 409600000
    assert row.mb_s == pytest.approx(40.96)
    assert row.pct_of == "lat"
    assert (row.p50_us, row.p95_us, row.p99_us, row.p99_9_us) == (1500, 2000, 3000, 4000)
    assert row.lat_mean_us == pytest.approx(1600.0)
    # 10 000 IOPS x 1.6 ms = 16 in flight = 4 jobs x iodepth 4.
    assert row.littles_l == pytest.approx(16.0)


def test_fio3_missing_percentiles_come_from_the_bins():
    row = one_row("fio-3.x-jsonplus-bins-only.json")
    assert row.p50_us == pytest.approx(10.24)  # listed by fio
    assert row.p99_us == pytest.approx(80.896)  # listed by fio
    # Not listed: cumulative counts 60, 95, 99, 100 reach 95 at the 20480 ns bucket and
    # 99.9 at the last one.
    assert row.p95_us == pytest.approx(20.48)
    assert row.p99_9_us == pytest.approx(80.896)
    assert row.bs_bytes == 8192


def test_client_stats_without_the_all_clients_summary():
    out = read_fio_json(DATA / "fio-3.x-client-stats.json")
    assert [j.name for j in out.jobs] == ["remote"]
    row = jobs_table([out]).iloc[0]
    assert row.lat_mean_us == pytest.approx(10000.0)
    assert math.isnan(row.p99_us)
    assert row.pct_of == ""


def test_text_before_the_document_is_skipped():
    plain = one_row("fio-3.x-jsonplus-bins-only.json")
    noted = one_row("fio-3.x-leading-note.json")
    assert noted.drop("source").equals(plain.drop("source"))


@pytest.mark.parametrize(
    ("name", "message"),
    [
        ("truncated.json", "truncated.json:21: truncated fio JSON output"),
        ("normal-output.txt", "normal-output.txt: not fio JSON output"),
        ("bad-field.json", "bad-field.json: field 'jobs[0].read.iops': expected a number"),
    ],
)
def test_broken_outputs_name_the_file(name, message):
    with pytest.raises(InputError) as err:
        read_fio_json(DATA / name)
    assert str(err.value).startswith(f"{DATA}/{message}")


def test_empty_and_non_object_documents():
    with pytest.raises(InputError, match="empty file"):
        parse_fio_json("  \n", "x.json")
    with pytest.raises(InputError, match="no 'jobs' array"):
        parse_fio_json('{"fio version": "fio-3.33"}', "x.json")
    with pytest.raises(InputError, match=r"x.json:2: invalid JSON"):
        parse_fio_json('{"jobs": [\n  oops ], "more": 1}', "x.json")


def test_cli_tidy_reports_a_truncated_file_in_one_line(qoslab, tmp_path):
    done = qoslab(
        "lab",
        "tidy",
        DATA / "fio-2.2-json.json",
        DATA / "truncated.json",
        "--out",
        tmp_path / "t.csv",
    )
    assert done.returncode == 2
    assert done.stderr.startswith("qoslab: error: ")
    assert "truncated.json:21: truncated fio JSON output" in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1
    assert not (tmp_path / "t.csv").exists()


def test_cli_tidy_writes_one_row_per_file_job_and_direction(qoslab, tmp_path):
    import pandas as pd

    files = [DATA / n for n in ("fio-2.2-json.json", "fio-3.x-minimal-mixed-grouped.json")]
    done = qoslab(
        "lab", "tidy", *files, "--out", tmp_path / "t.parquet", "--bins", tmp_path / "b.csv"
    )
    assert done.returncode == 0, done.stderr
    table = pd.read_parquet(tmp_path / "t.parquet")
    assert list(table.op) == ["read", "mixed"]
    assert list(table.source) == [f.name for f in files]
