"""`qoslab plm study`: the document's evaluation on a reduced setting, end to end, and its
demand (the generator calibrated to Table I; the SYSTOR '17 reader for a user's trace).

Cost: about 45 s each for the two studies below (19 simulations of 2 s, one seed; docs/plm.md's
3 x 9 of 2 s), and the trace's (3 x 7 of 1 s), on two workers."""

from __future__ import annotations

import json
import math
import re
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from conftest import ROOT
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
         "--quick", "--slow-reads", "20", "--write-sensitivity", "0.1", "--seeds", "1"],
    )  # fmt: skip
    assert done.exit_code == 0, done.output
    return out


DOC = ROOT / "docs" / "plm.md"
DOC_STUDY = ("qoslab plm study --out plm-study --datasets DS1 --configs 2 --policies sp "
             "--quick --slow-reads 20")  # fmt: skip


@pytest.fixture(scope="module")
def repeated(tmp_path_factory):
    """docs/plm.md's commands, every block in order as tests/test_docs_commands.py runs a
    document (which leaves this one to this fixture: it ran the same study twice). Its reduced
    study: DS1, Config 2, sp, 2 s per run, on three seeds (1 to 3), 9 runs each (7, and the
    write sensitivity's 2), then `qoslab plm report` on it."""
    import test_docs_commands as docs

    tmp = tmp_path_factory.mktemp("plm-docs")
    blocks = docs.command_blocks(DOC)
    assert [b for _, b in blocks if b.startswith("qoslab plm study")] == [DOC_STUDY + "\n"]
    work = docs.reader_folder(tmp)
    assert docs.run_blocks(DOC, blocks, work, docs.reader_env(tmp, tmp / "cache")) == len(blocks)
    return work / "plm-study"


# Per dataset: shared, three isolated, HoD and CoD x sp and fr on Config 2; on DS1, PLM without
# the coordinator on Config 2; then the write sensitivity on DS1: its shared baseline and CoD
# sp on Config 2 with 10 % writes.
RUNS = 2 * (1 + 3 + 4) + 1 + 2
DIAGNOSTICS = (
    "gc_victims", "write_amplification", "reads_outside_dtwin", "no_dtwin_time_frac",
    "entry_wait_p50_ms", "entry_wait_max_ms", "ndwin_min_advertised_ms", "p9999_per_dtwin_us",
)  # fmt: skip


def test_the_study_writes_the_report_and_its_tables(reduced):
    for name in ("report.html", "results.parquet", "series.parquet", "fig6.csv", "targets.csv"):
        assert (reduced / name).is_file(), name
    results = pd.read_parquet(reduced / "results.parquet")
    runs = sorted(results["run"].unique())
    assert len(runs) == RUNS
    assert "DS4-CoD-config2-sp" in runs and "DS1-isolated-high" in runs
    assert "DS1-CoD-config2-sp-writes0.1" in runs and "DS1-shared-writes0.1" in runs
    assert "DS1-uncoordinated-config2" in runs
    for column in DIAGNOSTICS:
        assert column in results.columns, column
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
    meta = json.loads((reduced / "meta.json").read_text())
    assert meta["configs"] == [2] and meta["duration_ms"] == study.QUICK_DURATION_MS
    assert meta["workload"]["write_fraction"] == 0 and meta["write_sensitivity"] == [0.1]


def test_one_seed_gives_values_but_no_verdict_and_no_why(reduced):
    # No verdict, interval or error bar from fewer than 3 repetitions.
    tg = pd.read_csv(reduced / "targets.csv", keep_default_na=False)
    assert len(tg) > 10
    assert (tg["seeds"] == 1).all() and (tg["ci95"] == "").all()
    assert (tg["inside"] == "no verdict (1 seed)").all()
    assert (tg["why"] == "").all()
    assert not tg["qoslab"].str.contains(r"\[").any()


def test_every_run_is_repeated_on_each_seed_with_its_own_demand(repeated):
    results = pd.read_parquet(repeated / "results.parquet")
    assert sorted(results["seed"].unique()) == [1, 2, 3]
    assert (results.groupby(["run", "cls"])["seed"].nunique() == 3).all()
    assert results["run"].nunique() == 1 + 3 + 2 + 1 + 2
    shared = results[(results["run"] == "DS1-shared") & (results["cls"] == "high")]
    assert shared["reads"].nunique() == 3
    series = pd.read_parquet(repeated / "series.parquet")
    assert sorted(series["seed"].unique()) == [1, 2, 3]
    meta = json.loads((repeated / "meta.json").read_text())
    assert meta["seed"] == 1 and meta["seeds"] == [1, 2, 3]


# The 97.5th percentile of Student's t with 2 degrees of freedom (tables: 4.303).
T_975_2 = 4.302652729911275


def test_each_claim_is_the_mean_over_the_seeds_with_the_95_percent_interval(repeated):
    results = pd.read_parquet(repeated / "results.parquet")
    tg = pd.read_csv(repeated / "targets.csv", keep_default_na=False).set_index("shape")
    high = results[results["cls"] == "high"].set_index(["seed", "run"])["p9999_per_dtwin_us"]
    ratios = np.array([high[s, "DS1-shared"] / high[s, "DS1-isolated-high"] for s in (1, 2, 3)])
    half = T_975_2 * ratios.std(ddof=1) / np.sqrt(3)
    row = tg.loc["High's p99.99 per DTWin, shared / isolated (bare SSD)"]
    assert row["seeds"] == 3
    assert float(row["measured"]) == pytest.approx(ratios.mean(), abs=1e-6)
    assert float(row["ci95"]) == pytest.approx(half, abs=1e-6)
    lo, hi = ratios.mean() - half, ratios.mean() + half
    want = "yes" if lo >= 3 and hi <= 12 else "no" if hi < 3 or lo > 12 else "straddles"
    assert row["inside"] == want
    assert row["qoslab"] == f"{ratios.mean():.2f}x [{lo:.2f}x, {hi:.2f}x]"
    # Every claim has a verdict from 3 seeds, and a why exactly where it is not yes.
    assert set(tg["inside"]) <= {"yes", "no", "straddles"}
    assert ((tg["why"] != "") == (tg["inside"] != "yes")).all()
    html = (repeated / "report.html").read_text()
    assert "95 % t-interval" in html and f"{ratios.mean():.2f}x [{lo:.2f}x, {hi:.2f}x]" in html


def test_every_why_names_a_claim_and_the_command_of_its_experiment(repeated):
    from qoslab.plm import report

    results = pd.read_parquet(repeated / "results.parquet")
    keys = {c.key for c in report._claims(results[results["seed"] == 1])}
    # Config 4's rows are named as Config 2's (this study has Config 2 only).
    keys |= {k[:-2] + "-4" for k in keys if k.endswith("-2")}
    # DS4's rows need DS4's runs (this study has DS1 only), fr's rows fr's (it has sp only).
    keys |= {"ds4", "ds4-hod-cod"} | {k[:-3] + "-fr" for k in keys if k.endswith("-sp")}
    assert report.WHY and set(report.WHY) <= keys
    for text in report.WHY.values():
        assert "`qoslab plm study --out" in text or "`python -c 'from qoslab.plm" in text


def test_a_verdict_is_the_whole_interval_against_the_band():
    from qoslab.plm.report import Target

    def verdict(values, band, kind="num"):
        return Target("k", "n", "d", values, band, kind).inside

    # Mean 2, sd 1, 3 seeds: 2 +- 4.303 / sqrt(3) = [-0.484, 4.484].
    assert verdict([1.0, 2.0, 3.0], (-1.0, 5.0)) == "yes"
    assert verdict([1.0, 2.0, 3.0], (0.0, 5.0)) == "straddles"
    assert verdict([1.0, 2.0, 3.0], (4.5, 9.0)) == "no"
    assert verdict([1.0, 2.0, 3.0], (-9.0, -0.5)) == "no"
    assert verdict([1.0, 2.0], (-9.0, 9.0)) == "no verdict (2 seeds)"
    assert verdict([1.0, 2.0, 3.0, math.nan], (-1.0, 5.0)) == "yes"
    # A yes-or-no claim: yes only when every seed says yes.
    assert verdict([1.0, 1.0, 1.0], (1.0, 1.0), "bool") == "yes"
    assert verdict([0.0, 0.0, 0.0], (1.0, 1.0), "bool") == "no"
    assert verdict([1.0, 0.0, 1.0], (1.0, 1.0), "bool") == "straddles"
    t = Target("k", "n", "d", [1.0, 2.0, 3.0], (0.0, 5.0), "pct")
    assert t.shown == "2.0 % [-0.5 %, 4.5 %]"
    assert Target("k", "n", "d", [1.0, 0.0, 1.0], (1, 1), "bool").shown == "yes in 2 of 3 seeds"


def test_reads_alone_collect_nothing_on_the_bare_drive_or_under_plm(reduced):
    # The document's scope: reads only. Neither drive has background work to do, and PLM's
    # windows start none.
    results = pd.read_parquet(reduced / "results.parquet")
    main = results[results["write_fraction"].isna()]
    assert (main["writes"] == 0).all() and (main["gc_victims"] == 0).all()
    assert (main["write_amplification"] == 0).all()
    sens = results[results["write_fraction"] == 0.1]
    assert ((sens["writes"] / (sens["reads"] + sens["writes"])).between(0.08, 0.12)).all()


def test_window_diagnostics_are_there_for_plm_runs_only(reduced):
    results = pd.read_parquet(reduced / "results.parquet")
    plm = results["variant"].isin(["HoD", "CoD", "uncoordinated"])
    windowed = ["reads_outside_dtwin", "no_dtwin_time_frac", "entry_wait_p50_ms",
                "entry_wait_max_ms", "ndwin_min_advertised_ms", "dtwin_exits_reads",
                "dtwin_exits_time", "dtwin_exits_excursion"]  # fmt: skip
    assert results.loc[~plm, windowed].isna().all().all()
    # No read is held at the host unless counts_run_out = hold.
    held = ["reads_held", "held_wait_mean_ms", "held_wait_max_ms", "held_release_max",
            "held_release_mean", "held_released_to_previous"]  # fmt: skip
    assert results[held].isna().all().all()
    got = results.loc[plm]
    assert got[windowed].notna().all().all()
    assert got["reads_outside_dtwin"].between(0, 1).all()
    assert got["no_dtwin_time_frac"].between(0, 1).all()
    # MQSim's drive advertises an erase and its channel transfers, rounded up to whole ms, and
    # no set waited longer to enter DTWin.
    assert (got["ndwin_min_advertised_ms"] == 6).all()
    assert (got["entry_wait_p50_ms"] <= got["entry_wait_max_ms"]).all()
    assert (got["entry_wait_max_ms"] <= got["ndwin_min_advertised_ms"]).all()


def test_plm_keys_given_with_set_reach_the_plm_runs_only():
    # The bare drive has no plm gate and its path no PLM host library: a study given
    # media.gc.plm.* or host.plm.* keys passes them to the PLM runs alone, every other key to all.
    keys = ["media.gc.plm.dtwin_reads_typical=1000000", "host.plm.release_delay_ns=3ms",
            "media.cache.dram_rate_mts=2400"]  # fmt: skip
    runs = study.plan(["DS1"], [2], ["sp"], [0.1])
    assert {r.variant for r in runs} >= {"shared", "isolated", "HoD", "CoD", "uncoordinated"}
    for run in runs:
        if run.variant in study.PLM_VARIANTS:
            assert study.run_keys(run, keys) == keys
        else:
            assert study.run_keys(run, keys) == ["media.cache.dram_rate_mts=2400"]


def test_the_per_dtwin_tail_is_the_documents_metric_over_the_series(reduced):
    # Per window, the p99.99 of the class's reads; then the 99.99th percentile over the
    # windows, nearest rank (fewer than 10,000 windows: the largest).
    results = pd.read_parquet(reduced / "results.parquet")
    series = pd.read_parquet(reduced / "series.parquet")
    for row in results.itertuples():
        s = series[(series["run"] == row.run) & (series["cls"] == row.cls) & (series["ios"] > 0)]
        assert len(s) >= 19
        assert row.p9999_per_dtwin_us == s["lat_p9999_ns"].max() / 1e3
        assert (s["lat_p99_ns"] <= s["lat_p9999_ns"]).all()
        assert (s["lat_p9999_ns"] <= s["lat_max_ns"]).all()
        # The same from the host driver's dispatch, a part of each read's latency.
        assert row.p9999_per_dtwin_dispatch_us == s["dispatch_lat_p9999_ns"].max() / 1e3
        assert (s["dispatch_lat_p9999_ns"] <= s["dispatch_lat_max_ns"]).all()
        assert (s["dispatch_lat_max_ns"] <= s["lat_max_ns"]).all()
        assert 0 < row.p9999_per_dtwin_dispatch_us <= row.p9999_per_dtwin_us


def test_the_slow_read_split_accounts_for_the_whole_time_of_the_slowest_reads(reduced):
    slow = pd.read_csv(reduced / "slow_reads.csv")
    assert len(slow) == RUNS
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


def test_host_directed_deficiency_in_the_simulation_is_the_coordinators_alone_on_its_demand(
    reduced, tmp_path
):
    # HoD is the document's baseline: each window's exact demand is known, so what the hosts
    # get depends on the demand and C alone. The host library, counting the 4 KiB units of the
    # reads as they arrive window by window, must then record the same deficiency as the
    # coordinator run alone (`qoslab plm coordinate --predictor exact`) over the demand the
    # generator drew: a window misaligned with the demand file, or a read counted in the
    # wrong window or unit, would show here.
    from qoslab.plm.coordinate import coordinate

    results = pd.read_parquet(reduced / "results.parquet")
    hod = results[results["variant"] == "HoD"]
    checked = lacking = 0
    for dataset in ("DS1", "DS4"):
        traces = study.generate(dataset, study.QUICK_DURATION_MS, 1, study.Workload(), tmp_path)
        demand = traces.window_demand(100)
        for policy in ("sp", "fr"):
            rows = hod[(hod["dataset"] == dataset) & (hod["policy"] == policy)]
            n = int(rows["windows"].iloc[0])
            capacity = int(rows["capacity"].iloc[0])
            assert capacity == traces.capacity(2)
            path = tmp_path / f"demand-{dataset}.csv"
            study.write_demands(path, demand[:n])
            alone = coordinate(path, capacity=capacity, predictor="exact", policy=policy)
            deficiency = np.array([r[7] for r in alone]).reshape(n, 3)
            # Nearest rank, to the 1e-4 the library's histogram keeps.
            binned = np.round(deficiency * 10_000) / 10_000
            for q in (50, 90):
                want = np.sort(binned, axis=0)[math.ceil(q / 100 * n) - 1]
                col = f"deficiency_p{q}"
                got = [rows.loc[rows["cls"] == c, col].iloc[0] for c in study.CLASSES]
                assert got == pytest.approx(want, abs=1e-9), (dataset, policy, q)
                lacking += int(np.count_nonzero(want))
            checked += 1
    assert checked == 4
    # Not vacuous: on DS1 (synchronised peaks) the low class lacks counts in some windows.
    assert lacking > 0


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


def test_the_generator_has_table_one_read_intensity_and_ds4_is_ds1_later():
    # 20,000 slots of 100 ms: each host's mean read units per slot within 3 % of Table I
    # (the factors have mean 1; the shared one's coefficient of variation, 0.36, gives a
    # standard error under 0.3 %).
    wl = study.Workload()
    rate = study.slot_intensity("DS1", 20_000, 7, wl)
    for got, want in zip(rate.mean(axis=0), (420, 0.78 * 420, 0.71 * 420), strict=True):
        assert abs(got / want - 1) < 0.03
    # Synchronised: the hosts rise and fall together; DS4's medium host follows DS1's medium
    # host two slots (200 ms) later, and its low host four.
    assert np.corrcoef(rate[:, 0], rate[:, 1])[0, 1] > 0.5
    ds4 = study.slot_intensity("DS4", 20_000, 7, wl)
    assert np.corrcoef(ds4[:, 0], ds4[:, 1])[0, 1] < 0.1
    assert (ds4[:, 0] == rate[:, 0]).all()
    assert (ds4[2:, 1] == rate[:-2, 1]).all()
    assert (ds4[4:, 2] == rate[:-4, 2]).all()


def _records(path):
    """A generated SYSTOR '17 file's records, each time in whole ns."""
    frame = pd.read_csv(path, dtype={"Timestamp": str})
    whole, frac = frame["Timestamp"].str.split(".", expand=True).T.to_numpy()
    frame["ns"] = whole.astype(np.int64) * 1_000_000_000 + frac.astype(np.int64)
    return frame[["ns", "IOType", "Offset", "Size"]]


def test_ds4_is_ds1s_requests_with_the_medium_host_200_ms_and_the_low_host_400_ms_later(tmp_path):
    # IV-C: the document made "Dataset4 from Dataset1 by adding an offset of 200 ms and 400 ms
    # to 'Medium' and 'Low' traffic". Over a whole 30 s run, with writes and two sizes so that
    # every field counts: DS4's high host is DS1's byte for byte; every request of DS1's medium
    # (low) host that still falls in the run is in DS4's 200 (400) ms later, in order, with its
    # type, offset and size, and DS4's other requests all come before the offset (the traffic
    # before DS1's first slot). Each file starts at time 0: a replay counts from a file's first
    # record, and the offset must survive it.
    wl = study.Workload(write_fraction=0.1, sizes=study.parse_sizes("4k:0.8,64k:0.2"))
    end_ns = 30_000 * 1_000_000
    (tmp_path / "one").mkdir()
    (tmp_path / "four").mkdir()
    one = study.generate("DS1", 30_000, 3, wl, tmp_path / "one")
    four = study.generate("DS4", 30_000, 3, wl, tmp_path / "four")
    assert Path(four.paths[0]).read_bytes() == Path(one.paths[0]).read_bytes()
    for h, offset_ms in ((1, 200), (2, 400)):
        shift = offset_ms * 1_000_000
        a, b = _records(one.paths[h]), _records(four.paths[h])
        moved = a[a["ns"] + shift < end_ns].copy()
        moved["ns"] += shift
        later = b[b["ns"] >= shift]
        assert len(moved) > 20_000
        assert later.reset_index(drop=True).equals(moved.reset_index(drop=True))
        earlier = b[b["ns"] < shift]
        assert b["ns"].iloc[0] == 0 and len(earlier) == len(b) - len(later) > 0
        assert (earlier["IOType"] == "W").any()
        # The demand the coordinator is given moves with the requests, window by window.
        lag = offset_ms // study.SLOT_MS
        d1, d4 = one.window_demand(100)[:, h], four.window_demand(100)[:, h]
        assert (d4[lag:] == d1[:-lag]).all()
        assert four.reads[h] == (later["IOType"] == "R").sum() + (earlier["IOType"] == "R").sum()


def _requests(path):
    frame = pd.read_csv(path)
    return frame["IOType"].to_numpy(), frame["Size"].to_numpy(), frame["Timestamp"].to_numpy()


def test_generated_traces_have_the_intensity_writes_and_sizes_asked_for(tmp_path):
    # 60 s: 600 slots. Reads alone by default; writes on top of Table I's reads when asked;
    # with 16 KiB reads, a quarter as many requests for the same 4 KiB units.
    t = study.generate("DS3", 60_000, 5, study.Workload(), tmp_path, "reads")
    kinds, sizes, stamps = _requests(t.paths[0])
    assert (kinds == "R").all() and (sizes == 4096).all() and stamps[0] == 0
    assert t.reads[0] == len(kinds) and t.writes == [0, 0, 0]
    assert abs(len(kinds) / 600 / 165 - 1) < 0.1
    # The demand the coordinator sees: the reads of each 100 ms window.
    assert t.window_demand(100).sum(axis=0).tolist() == t.reads
    w = study.generate("DS3", 60_000, 5, study.Workload(write_fraction=0.2), tmp_path, "writes")
    kinds, _, _ = _requests(w.paths[0])
    assert abs((kinds == "W").mean() - 0.2) < 0.02
    assert abs(w.reads[0] / t.reads[0] - 1) < 0.1
    big = study.Workload(sizes=study.parse_sizes("16k:1"))
    b = study.generate("DS3", 60_000, 5, big, tmp_path, "big")
    _, sizes, _ = _requests(b.paths[0])
    assert (sizes == 16384).all()
    assert abs(len(sizes) / (t.reads[0] / 4) - 1) < 0.1
    assert abs(b.window_demand(100).sum() / t.window_demand(100).sum() - 1) < 0.1
    # The same seed writes the same bytes.
    (tmp_path / "again").mkdir()
    again = study.generate("DS3", 60_000, 5, study.Workload(), tmp_path / "again", "reads")
    assert Path(again.paths[1]).read_bytes() == Path(t.paths[1]).read_bytes()


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
    t = study.read_systor(path)
    # Times from the first record; the blank IOType skipped; a 64 KiB read is 16 units.
    assert (t.reads, t.writes, t.span_ns) == ([3], [1], 200_001_000)
    # Read units by 100 ms window: the write does not count, 199.999 ms is still window 1.
    assert t.window_demand(100).tolist() == [[1], [16]]
    assert t.demand[100].tolist() == [[1], [16], [1]]


def test_systor_reader_names_the_line_of_a_bad_record(tmp_path):
    path = tmp_path / "bad.csv"
    path.write_text(
        "Timestamp,Response,IOType,LUN,Offset,Size\n1.0,0,R,0,0,4096\n2.0,0,X,0,0,4096\n"
    )
    with pytest.raises(InputError) as err:
        study.read_systor(path)
    assert str(err.value) == f"{path}:3: field 'IOType': expected R, W or blank, got 'X'"
    path.write_text("Timestamp,Response,IOType,LUN,Offset,Size\n2.0,0,R,0,0,4096\n1.0,0,R,0,0,1\n")
    with pytest.raises(InputError) as err:
        study.read_systor(path)
    assert str(err.value) == f"{path}:3: field 'Timestamp': goes back in time"


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
        (["--slow-reads", "-1"], "Invalid value for '--slow-reads': '-1' is not in the range "
         "0..9223372036854775807."),
        (["--writes", "1.5"], "--writes: expected a fraction in [0, 1), got '1.5'"),
        (["--sizes", "6k:1"], "--sizes: a size must be a multiple of 4 KiB, got '6k'"),
        (["--quick", "--duration", "1s"], "--quick: sets the duration itself; give --quick or "
         "--duration"),
        (["--seeds", "0"], "Invalid value for '--seeds': 0 is not in the range 1<=x<=1000."),
        (["--seed", str(2**64 - 2)], f"--seeds: the last seed, --seed + 2, is above {2**64 - 1}"),
    ):  # fmt: skip
        done = qoslab("plm", "study", "--out", tmp_path / "o", *args)
        assert done.returncode == 2
        assert done.stderr.strip() == f"qoslab: error: {message}"
        assert not (tmp_path / "o").exists()


def test_the_report_is_written_again_from_the_tables_alone(qoslab, reduced, tmp_path):
    copy = tmp_path / "study"
    shutil.copytree(reduced, copy)
    for name in ("report.html", "fig6.csv", "targets.csv"):
        (copy / name).unlink()
    done = qoslab("plm", "report", copy)
    assert done.returncode == 0, done.stderr
    for name in ("fig6.csv", "targets.csv"):
        assert (copy / name).read_bytes() == (reduced / name).read_bytes(), name
    # The same report, byte for byte: nothing in it depends on when it was rendered.
    assert (copy / "report.html").read_bytes() == (reduced / "report.html").read_bytes()
    done = qoslab("plm", "report", tmp_path)
    assert done.returncode == 2
    assert done.stderr.strip() == (
        f"qoslab: error: {tmp_path}: not a `qoslab plm study` output (no meta.json or "
        "results.parquet)"
    )


def test_a_study_written_before_repetitions_is_reported_again(qoslab, reduced, tmp_path):
    # A folder of a qoslab before --seeds has no seed column: one seed, reported as such.
    old = tmp_path / "old"
    shutil.copytree(reduced, old)
    for name in ("results.parquet", "series.parquet"):
        pd.read_parquet(old / name).drop(columns=["seed"]).to_parquet(old / name, index=False)
    done = qoslab("plm", "report", old)
    assert done.returncode == 0, done.stderr
    for name in ("fig6.csv", "targets.csv"):
        assert (old / name).read_bytes() == (reduced / name).read_bytes(), name


@pytest.mark.skipif(shutil.which("chromium") is None, reason="chromium is installed by make tools")
def test_chromium_loads_the_report_with_no_error_and_every_figure_drawn(reduced, tmp_path):
    from chromium import PROBE

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
    assert "Document vs qoslab" in found["text"] and "about 6x (Fig. 4;" in found["text"]


def test_a_users_systor_traces_replay_instead_of_the_generator(qoslab, tmp_path):
    # Three hosts' SYSTOR '17 files, 2 s of DS3-like traffic with writes, epoch timestamps as
    # the archive has; the study cut to its first second, its repetitions from seed 4.
    made = study.generate("DS3", 2000, 3, study.Workload(write_fraction=0.1), tmp_path, "gen")
    traces = []
    for h, path in enumerate(made.paths):
        lines = Path(path).read_text().splitlines()
        epoch = [lines[0]] + [
            f"{1485000000 + float(x.split(',')[0]):.9f},{x.split(',', 1)[1]}" for x in lines[1:]
        ]
        out = tmp_path / f"{study.CLASSES[h]}.csv"
        out.write_text("\n".join(epoch) + "\n")
        kinds = pd.read_csv(path)
        first_second = kinds[kinds["Timestamp"] < 1.0]
        traces.append((out, int((first_second["IOType"] == "R").sum())))
    args = [a for p, _ in traces for a in ("--trace", p)]
    out = tmp_path / "study"
    done = qoslab("plm", "study", "--out", out, "--configs", "2", "--policies", "sp",
                  "--duration", "1s", "--datasets", "DS3", "--seed", "4", "--quiet",
                  *args)  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "--datasets chooses the generator's demand" in done.stderr
    assert done.stdout == "", "--quiet: no closing line"
    results = pd.read_parquet(out / "results.parquet")
    assert sorted(results["run"].unique()) == [
        "trace-CoD-config2-sp", "trace-HoD-config2-sp", "trace-isolated-high",
        "trace-isolated-low", "trace-isolated-medium", "trace-shared",
        "trace-uncoordinated-config2",
    ]  # fmt: skip
    # Every read of each file's first second was replayed, on its own host, on each of the
    # three seeds, --seed and the next two (the trace is the same demand on every seed).
    assert sorted(results["seed"].unique()) == [4, 5, 6]
    assert (results.groupby(["run", "cls"])["seed"].nunique() == 3).all()
    assert sorted(pd.read_parquet(out / "series.parquet")["seed"].unique()) == [4, 5, 6]
    meta = json.loads((out / "meta.json").read_text())
    assert meta["seed"] == 4 and meta["seeds"] == [4, 5, 6]
    for _, one in results[results["run"] == "trace-shared"].groupby("seed"):
        shared = one.set_index("cls")["reads"]
        assert [shared[c] for c in study.CLASSES] == [n for _, n in traces]
    assert (results["writes"] > 0).all()
    hod = results[results["variant"] == "HoD"]
    assert (hod["utilization_min"] == 1.0).all()


def test_the_study_started_again_takes_every_run_from_its_store(reduced, tmp_path):
    # Its simulations are points of the sweep engine's `plm` study, kept in `<out>.store`: the
    # same study into another folder with that store simulates nothing and writes the same
    # tables, byte for byte.
    from typer.testing import CliRunner

    from qoslab.cli import app

    again = tmp_path / "again"
    done = CliRunner().invoke(
        app,
        ["plm", "study", "--out", str(again), "--datasets", "DS1,DS4", "--configs", "2",
         "--quick", "--slow-reads", "20", "--write-sensitivity", "0.1", "--seeds", "1",
         "--store", str(reduced.with_name("study.store")), "--quiet"],
    )  # fmt: skip
    assert done.exit_code == 0, done.output
    for name in ("results.parquet", "series.parquet", "slow_reads.csv", "fig6.csv", "targets.csv"):
        assert (again / name).read_bytes() == (reduced / name).read_bytes(), name
    meta = json.loads((again / "meta.json").read_text())
    assert meta["points"] == {"total": 19, "run": 0, "already_stored": 19}


def test_the_sweeps_plm_adapter_speaks_the_studys_vocabulary():
    from qoslab.sweep.studies import plm as adapter

    assert (*study.DATASETS, "trace") == adapter.DATASETS
    assert ("shared", "isolated", *study.PLM_VARIANTS) == adapter.VARIANTS
    assert (adapter.POLICIES, adapter.CLASSES) == (study.POLICIES, study.CLASSES)
    assert adapter.STUDY.param("burst_sigma").default == study.BURST_SIGMA
    assert adapter.STUDY.param("duration_ms").default == study.QUICK_DURATION_MS
    sizes = ((4096, 0.7), (16384, 0.2), (65536, 0.1 + 1e-17))
    assert adapter._sizes(adapter.sizes_text(sizes)) == sizes


def test_a_worker_keeps_its_last_demands_but_never_one_a_running_point_replays(monkeypatch):
    from pathlib import Path

    from qoslab.sweep.studies import plm as adapter

    monkeypatch.setattr(adapter, "KEPT_DEMANDS", 1)
    monkeypatch.setattr(adapter, "_demands", type(adapter._demands)())
    params = {p.name: p.default for p in adapter.STUDY.params} | {"duration_ms": 300}
    run = study.Run("DS3", "shared")
    with adapter._demand(run, 1, params) as first:
        with adapter._demand(run, 2, params) as second:
            assert second is not first
        # The other seed's demand went (one is kept), not the one still replayed.
        assert not Path(second.folder.name).exists()
        assert all(Path(p).is_file() for p in first.made.paths)
    with adapter._demand(run, 1, params) as again:
        assert again is first  # made once
    first.folder.cleanup()


def test_a_trace_with_nothing_to_replay_is_named(qoslab, tmp_path):
    empty = tmp_path / "empty.csv"
    empty.write_text("Timestamp,Response,IOType,LUN,Offset,Size\n")
    args = ["--trace", empty] * 3
    done = qoslab("plm", "study", "--out", tmp_path / "o", *args)
    assert done.returncode == 2
    assert done.stderr.strip() == f"qoslab: error: {empty}: no read or write to replay"
    assert not (tmp_path / "o").exists()
