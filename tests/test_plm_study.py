"""`qoslab plm study`: the document's evaluation on a reduced setting, end to end, and its
demand (the generator calibrated to Table I; the SYSTOR '17 reader for a user's trace).

Cost: about 15 s (16 short simulations on two workers)."""

from __future__ import annotations

import json
import re
import shutil
import subprocess

import numpy as np
import pandas as pd
import pytest

from qoslab.errors import InputError
from qoslab.plm import study


@pytest.fixture(scope="module")
def reduced(tmp_path_factory):
    from typer.testing import CliRunner

    from qoslab.cli import app

    out = tmp_path_factory.mktemp("plm") / "study"
    done = CliRunner().invoke(
        app,
        ["plm", "study", "--out", str(out), "--datasets", "DS1,DS4", "--configs", "2",
         "--duration", "2s", "--slow-reads", "20"],
    )  # fmt: skip
    assert done.exit_code == 0, done.output
    return out


def test_the_study_writes_the_report_and_its_tables(reduced):
    for name in ("report.html", "results.parquet", "series.parquet", "fig6.csv", "targets.csv"):
        assert (reduced / name).is_file(), name
    results = pd.read_parquet(reduced / "results.parquet")
    # Per dataset: shared, three isolated, HoD and CoD x sp and fr on Config 2.
    runs = sorted(results["run"].unique())
    assert len(runs) == 2 * (1 + 3 + 4)
    assert "DS4-CoD-config2-sp" in runs and "DS1-isolated-high" in runs
    # Every run read what its hosts asked: the shared run's reads are the isolated runs'.
    shared = results[results["run"] == "DS1-shared"].set_index("cls")["reads"]
    for cls in study.CLASSES:
        alone = results[results["run"] == f"DS1-isolated-{cls}"]["reads"].iloc[0]
        assert shared[cls] == alone > 0
    # The typical window's p99 lies between the run's mean and its p99.99.
    typical = results["window_p99_median_us"]
    assert (results["lat_mean_us"] < typical).all() and (typical <= results["p9999_us"]).all()
    # The latency split adds up to the mean read latency.
    parts = results[["host_us", "transport_us", "queueing_us", "device_us"]].sum(axis=1)
    assert np.allclose(parts, results["lat_mean_us"], rtol=1e-6)
    fig6 = pd.read_csv(reduced / "fig6.csv")
    assert list(fig6[["config", "policy"]].drop_duplicates().itertuples(index=False)) == [
        (2, "sp"),
        (2, "fr"),
    ]
    html = (reduced / "report.html").read_text()
    assert "Document vs qoslab" in html and "<svg" in html
    assert json.loads((reduced / "meta.json").read_text())["configs"] == [2]


def test_the_slow_read_split_accounts_for_the_whole_time_of_the_slowest_reads(reduced):
    slow = pd.read_csv(reduced / "slow_reads.csv")
    assert len(slow) == 2 * (1 + 3 + 4)
    for group, n in (("slowest", 20), ("slowest_tenth", 2)):
        assert (slow[f"{group}_reads"] == n).all()
        die = [c for c in slow.columns if c.startswith(f"{group}_die_")]
        parts = slow[[f"{group}_{k}" for k in ("before_media_us", "mapping_us", "dram_wait_us",
                                                "dram_us")] + die].sum(axis=1)  # fmt: skip
        # Each read's parts add up to its time to the media's end (means of 3-decimal values).
        assert np.allclose(parts, slow[f"{group}_latency_mean_us"], atol=0.05)
    # Without PLM no read has a window; with it every read is in one.
    bare = slow["run"].str.contains("shared|isolated")
    assert (slow.loc[bare, "slowest_arrival_own_no_window"] == 20).all()
    assert (slow.loc[~bare, "slowest_arrival_own_no_window"] == 0).all()


def test_host_directed_utilization_is_one_in_every_window(reduced):
    results = pd.read_parquet(reduced / "results.parquet")
    hod = results[results["variant"] == "HoD"]
    assert len(hod) == 2 * 2 * 3
    # 2 s of 100 ms windows: every window but the one the run ends in is recorded.
    assert (hod["windows"] >= 19).all()
    assert (hod["utilization_min"] == 1.0).all()


def test_coordinator_directed_median_deficiency_is_small_as_in_fig6(reduced):
    # Fig. 6: 50th-percentile deficiency 0 to 0.11 under CoD, Config 2; C is 1.4 x the mean.
    fig6 = pd.read_csv(reduced / "fig6.csv")
    assert (fig6["deficiency_p50"] <= 0.11).all()
    assert (fig6["utilization_p10"] < 1.0).all()


def test_the_generator_has_table_one_means_and_ds4_is_ds1_later():
    # 20,000 slots of 100 ms: the mean per slot within 3 % of Table I (the shared factor's
    # coefficient of variation, 1.31, gives a standard error under 1 %).
    hosts = study.generate("DS1", 2_000_000, seed=7)
    per_slot = [len(h) / 20_000 for h in hosts]
    for got, want in zip(per_slot, (420, 0.78 * 420, 0.71 * 420), strict=True):
        assert abs(got / want - 1) < 0.03
    # Writes are WRITE_FRACTION of the requests.
    writes = sum(int(h[:, 1].sum()) for h in hosts) / sum(len(h) for h in hosts)
    assert abs(writes - study.WRITE_FRACTION) < 0.005

    # Synchronised: the hosts' slot counts rise and fall together; DS4's medium host
    # follows DS1's medium host two slots (200 ms) later.
    def counts(h):
        return np.bincount(h[:, 0] // 100_000_000, minlength=20_000)[:20_000]

    ds1 = [counts(h) for h in hosts]
    assert np.corrcoef(ds1[0], ds1[1])[0, 1] > 0.8
    ds4 = [counts(h) for h in study.generate("DS4", 2_000_000, seed=7)]
    assert np.corrcoef(ds4[0], ds4[1])[0, 1] < 0.1
    assert np.corrcoef(ds4[1][2:], ds4[0][:-2])[0, 1] > 0.8


def test_systor_reader_counts_reads_per_window(tmp_path):
    path = tmp_path / "vdi.csv"
    path.write_text(
        "Timestamp,Response,IOType,LUN,Offset,Size\n"
        "1485000000.050000,0.0001,R,0,4096,4096\n"
        "1485000000.120000,0.0002,W,0,8192,4096\n"
        "1485000000.130000,0.0001,,0,0,4096\n"
        "1485000000.249999,0.0003,R,1,0,65536\n"
        "1485000000.250001,0.0003,R,1,0,4096\n"
    )
    req = study.read_systor(path)
    # Times from the first record; the blank IOType skipped.
    assert req.tolist() == [[0, 0], [70_000_000, 1], [199_999_000, 0], [200_001_000, 0]]
    # Reads by 100 ms window: the write does not count, 199.999 ms is still window 1.
    assert study.window_demand([req], 100, 3).tolist() == [[1], [1], [1]]


def test_systor_reader_names_the_line_of_a_bad_record(tmp_path):
    path = tmp_path / "bad.csv"
    path.write_text(
        "Timestamp,Response,IOType,LUN,Offset,Size\n1.0,0,R,0,0,4096\n2.0,0,X,0,0,4096\n"
    )
    with pytest.raises(InputError) as err:
        study.read_systor(path)
    assert str(err.value) == f"{path}:3: field 'IOType': expected R, W or blank, got 'X'"


def test_bad_options_are_one_line_and_write_nothing(qoslab, tmp_path):
    done = qoslab("plm", "study", "--out", tmp_path / "o", "--configs", "5")
    assert done.returncode == 2
    assert (
        done.stderr.strip()
        == "qoslab: error: --configs: expected a comma list of 1, 2, 3, 4, got '5'"
    )
    assert not (tmp_path / "o").exists()
    for args, message in (
        (["--set", "media.cache.dram_rate_mts"], "--set: expected KEY=VALUE, got "
         "'media.cache.dram_rate_mts'"),
        (["--slow-reads", "-1"], "--slow-reads: expected a non-negative integer, got -1"),
    ):  # fmt: skip
        done = qoslab("plm", "study", "--out", tmp_path / "o", *args)
        assert done.returncode == 2
        assert done.stderr.strip() == f"qoslab: error: {message}"
        assert not (tmp_path / "o").exists()


@pytest.mark.skipif(shutil.which("chromium") is None, reason="chromium is installed by make tools")
def test_chromium_loads_the_report_with_no_error_and_every_figure_drawn(reduced, tmp_path):
    from test_nvmelite_report import PROBE

    probe = reduced / "probe.html"
    probe.write_text((reduced / "report.html").read_text().replace("<head>", "<head>" + PROBE, 1))
    try:
        done = subprocess.run(
            [shutil.which("chromium"), "--headless", "--no-sandbox", "--disable-gpu",
             "--virtual-time-budget=5000", f"--user-data-dir={tmp_path / 'profile'}",
             "--dump-dom", probe.as_uri()],
            capture_output=True, text=True, timeout=120,
        )  # fmt: skip
    finally:
        probe.unlink()
    assert done.returncode == 0, done.stderr[-2000:]
    found = json.loads(
        re.search(r'<pre id="qoslab-probe">(.*?)</pre>', done.stdout, re.S).group(1)
        .replace("&lt;", "<").replace("&gt;", ">").replace("&amp;", "&")
    )  # fmt: skip
    assert found["errors"] == []
    # p99.99 per run and class, and the latency series, each drawn with a size.
    assert found["svgs"] == [True] * 2
    assert "Document vs qoslab" in found["text"] and "about 6x (Fig. 4)" in found["text"]


def test_a_users_systor_traces_replay_instead_of_the_generator(qoslab, tmp_path):
    # Three hosts' SYSTOR '17 files, 1 s of DS3-like traffic, epoch timestamps as the archive has.
    traces = []
    for h, req in enumerate(study.generate("DS3", 1000, seed=3)):
        path = tmp_path / f"{study.CLASSES[h]}.csv"
        study.write_systor(path, req, 3, f"test/{h}")
        text = path.read_text().splitlines()
        epoch = [text[0]] + [
            f"{1485000000 + float(x.split(',')[0]):.9f},{x.split(',', 1)[1]}" for x in text[1:]
        ]
        path.write_text("\n".join(epoch) + "\n")
        traces.append((path, int((req[:, 1] == 0).sum())))
    args = [a for p, _ in traces for a in ("--trace", p)]
    out = tmp_path / "study"
    done = qoslab("plm", "study", "--out", out, "--configs", "2", "--policies", "sp", *args)
    assert done.returncode == 0, done.stderr
    results = pd.read_parquet(out / "results.parquet")
    assert sorted(results["run"].unique()) == [
        "trace-CoD-config2-sp", "trace-HoD-config2-sp", "trace-isolated-high",
        "trace-isolated-low", "trace-isolated-medium", "trace-shared",
    ]  # fmt: skip
    # Every read of each file was replayed, on its own host.
    shared = results[results["run"] == "trace-shared"].set_index("cls")["reads"]
    assert [shared[c] for c in study.CLASSES] == [n for _, n in traces]
    hod = results[results["variant"] == "HoD"]
    assert (hod["utilization_min"] == 1.0).all()


def test_a_trace_with_nothing_to_replay_is_named(qoslab, tmp_path):
    empty = tmp_path / "empty.csv"
    empty.write_text("Timestamp,Response,IOType,LUN,Offset,Size\n")
    args = ["--trace", empty] * 3
    done = qoslab("plm", "study", "--out", tmp_path / "o", *args)
    assert done.returncode == 2
    assert done.stderr.strip() == f"qoslab: error: {empty}: no read or write to replay"
    assert not (tmp_path / "o").exists()
