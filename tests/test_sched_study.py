"""`qoslab sched study`: the block layer's schedulers under the lab's two jobs, simulated.

Each check runs real simulations of the hdd-7200 preset behind libata (a few seconds each).
"""

from __future__ import annotations

import json
import re

import duckdb
import pandas as pd
import pytest
from scipy.stats import ttest_ind

from chromium import chromium_probe, needs_chromium
from conftest import ROOT
from qoslab.lab.sched_jobs import SchedOptions
from qoslab.sched.report import findings, rank_agreement
from qoslab.sched.study import (
    HDD,
    Point,
    StudyOptions,
    hdd,
    job_text,
    registered_schedulers,
    run_point,
    summarise,
)
from qoslab.sim.api import parse_jobs

SEEDS = range(1, 6)


def runs(device, schedulers, seeds=SEEDS, sets=()) -> pd.DataFrame:
    opts = StudyOptions(devices=(device,), schedulers=tuple(schedulers))
    return pd.concat(
        [
            run_point(Point(device, s, seed, tuple(sets)), opts)[0]
            for s in schedulers
            for seed in seeds
        ],
        ignore_index=True,
    )


def stat(t: pd.DataFrame, sched: str, job: str, col: str) -> tuple[float, float]:
    v = t[(t.scheduler == sched) & (t.job == job)][col]
    return v.mean(), v.std(ddof=1)


def test_the_study_runs_the_labs_two_jobs_as_the_job_file_writes_them():
    mine = parse_jobs(jobtext=job_text(3.0, SchedOptions()), jobname="study")["jobs"]
    shipped = parse_jobs(ROOT / "configs" / "sched" / "database-backup.fio")["jobs"]
    keys = ("name", "rw", "bs_bytes", "iodepth", "prioclass", "prio")
    assert [{k: j[k] for k in keys} for j in mine] == [{k: j[k] for k in keys} for j in shipped]
    # The experiment: 4 KiB random reads at BE 1 beside 128 KiB sequential at BE 7.
    db, backup = mine
    assert (db["rw"], db["bs_bytes"][0], db["prioclass"], db["prio"]) == ("randread", 4096, "be", 1)
    assert (backup["rw"], backup["bs_bytes"][0], backup["prio"]) == ("read", 131072, 7)


def test_every_registered_scheduler_is_studied(qoslab, tmp_path):
    # The simulator's own message for an unknown scheduler lists the registry.
    done = qoslab("sim", "--device", "ideal", "--set", "block.scheduler=?", "--name=x",
                  "--rw=read", "--size=4k")  # fmt: skip
    listed = re.search(r"expected one of ([^,].*?), got", done.stderr).group(1).split(", ")
    assert registered_schedulers() == listed
    assert {"none", "mq-deadline", "prio", "prio-advanced"} <= set(listed)


def test_where_the_disk_takes_every_request_the_schedulers_cannot_differ():
    # NCQ's 32 commands hold the jobs' 20: nothing waits in the block layer for room below, so
    # the order is the disk's and every work-conserving scheduler gives none's results to the
    # last digit. bfq is not work-conserving: it serves one queue at a time and idles for it.
    all_runs = runs(hdd(32), registered_schedulers(), seeds=[1])
    t = all_runs[all_runs.scheduler != "bfq"]
    assert (t.read_sched_wait_max_ns == 0).all()
    for col in ("iops", "p99_us", "p99_9_us"):
        assert t.groupby("job")[col].nunique().eq(1).all(), col
    if "bfq" in registered_schedulers():
        bfq = all_runs[all_runs.scheduler == "bfq"]
        assert (bfq.read_sched_wait_max_ns > 0).all()


@pytest.fixture(scope="module")
def hdd_qd2():
    return runs(hdd(2), ["none", "mq-deadline", "prio", "prio-advanced"])


def test_on_the_hdd_prio_advanced_lowers_database_p99_below_none(hdd_qd2):
    adv, adv_sd = stat(hdd_qd2, "prio-advanced", "database_sim", "p99_us")
    none, none_sd = stat(hdd_qd2, "none", "database_sim", "p99_us")
    assert adv + adv_sd < none - none_sd, (adv, adv_sd, none, none_sd)
    assert adv < 0.6 * none


def test_backup_keeps_throughput_under_prio_and_prio_advanced_bounded_by_aging(hdd_qd2):
    # aging_expire (500 ms) bounds a LOW request's wait in the scheduler; the 16 backup
    # requests that aged together then go one after another (a few ms each at the disk).
    for sched in ("prio", "prio-advanced"):
        mb_s, _ = stat(hdd_qd2, sched, "backup_sim", "mb_s")
        assert mb_s > 2.0, sched
        worst = hdd_qd2[(hdd_qd2.scheduler == sched) & (hdd_qd2.job == "backup_sim")]
        assert (worst.p99_9_us < (500 + 16 * 25) * 1000).all(), sched
        assert (worst.p99_9_us > 500 * 1000).all(), "backup waits for aging: strict priority"


def test_a_longer_aging_limit_starves_backup_longer():
    t = runs(hdd(2), ["prio"], seeds=[1], sets=["block.prio.aging_expire=1500"])
    assert t[t.job == "backup_sim"].p99_9_us.iloc[0] > 1500 * 1000


@pytest.fixture(scope="module")
def study_out(tmp_path_factory):
    from conftest import run_qoslab as qoslab

    tmp = tmp_path_factory.mktemp("sched")
    out, store = tmp / "study", tmp / "store"
    # An earlier run, with one of the schedulers, kept its runs in the store: the study runs
    # only the other's.
    for schedulers in ("prio-advanced", "none,prio-advanced"):
        done = qoslab("sched", "study", "--devices", HDD, "--hdd-queue-depths", "2",
                      "--schedulers", schedulers, "--seeds", "2", "--runtime", "1s",
                      "--no-constants", "--store", store, "--out", out, "--quiet")  # fmt: skip
        assert done.returncode == 0, done.stderr
    return out


def test_a_run_keeps_its_points_in_the_store_and_a_rerun_runs_only_the_rest(study_out):
    meta = json.loads((study_out / "meta.json").read_text())
    assert meta["points"] == {"total": 4, "run": 2, "already_stored": 2}
    # The tables made from the store's rows are the runs of each point alone (one from this
    # run, one from the earlier one).
    runs = pd.read_parquet(study_out / "runs.parquet")
    opts = StudyOptions(devices=(hdd(2),), schedulers=("none", "prio-advanced"), runtime_s=1.0)
    for sched, seed in (("none", 1), ("prio-advanced", 2)):
        alone, _ = run_point(Point(hdd(2), sched, seed), opts)
        stored = runs[(runs.scheduler == sched) & (runs.seed == seed)].reset_index(drop=True)
        pd.testing.assert_frame_equal(stored, alone)


def test_the_cli_writes_parquet_duckdb_reads_and_a_report(study_out):
    out = study_out
    n = duckdb.sql(f"select count(*) from '{out / 'runs.parquet'}'").fetchall()[0][0]
    assert n == 1 * 2 * 2 * 2  # devices x schedulers x seeds x jobs
    by = duckdb.sql(
        f"select scheduler, avg(p99_us) from '{out / 'runs.parquet'}' "
        "where job = 'database_sim' group by scheduler order by 2"
    ).fetchall()
    assert [s for s, _ in by] == ["prio-advanced", "none"]
    summary = pd.read_csv(out / "summary.csv")
    assert set(summary.seeds) == {2}
    page = (out / "report.html").read_text()
    assert "hdd-7200 qd2" in page and page.count("<svg") == 3
    series = pd.read_parquet(out / "series.parquet")
    assert set(series.job) == {"database_sim", "backup_sim"} and series.time_ms.max() >= 900


def test_no_verdict_or_error_bar_from_fewer_than_three_repetitions(study_out):
    # The study of study_out ran 2 seeds: its findings give no verdict, its table no sd of 0.
    page = (study_out / "report.html").read_text()
    assert "no interval, no verdict" in page
    assert "significant" not in page and "within the error bars" not in page
    summary = pd.read_csv(study_out / "summary.csv")
    assert (summary.seeds == 2).all() and summary.p99_us_sd.notna().all()
    runs = pd.read_parquet(study_out / "runs.parquet")
    assert summarise(runs[runs.seed == 1], ["device", "scheduler"]).p99_us_sd.isna().all()
    one = summary.assign(seeds=1, p99_us_sd=float("nan"))
    lines = findings(one, "hdd-7200 qd2")
    assert lines and all("no verdict" in line for line in lines)

    # The real kernel beside the simulation: a pair is ordered only by a Welch t interval
    # from 3 repetitions or more on each side.
    def table(reps, p99s):
        return pd.DataFrame(
            [
                {"scheduler": sched, "rep": r, "job": "database_sim", "p99_us": p}
                for sched, ps in p99s.items()
                for r, p in enumerate(ps[:reps], 1)
            ]
        )

    p99s = {"none": [100.0, 130.0, 110.0, 120.0], "mq-deadline": [200.0, 260.0, 230.0, 240.0]}
    sim = table(3, {"none": [1.0] * 3, "mq-deadline": [2.0] * 3})
    for reps in (1, 2):
        pairs = rank_agreement(table(reps, p99s), sim)
        assert "significant" not in pairs.columns
        assert pairs.real_order.tolist() == ["too few repetitions (under 3)"]
        assert pairs.real_ci_low.isna().all()
    pairs = rank_agreement(table(4, p99s), sim)
    ci = ttest_ind(p99s["none"], p99s["mq-deadline"], equal_var=False).confidence_interval(0.95)
    assert (pairs.real_ci_low[0], pairs.real_ci_high[0]) == pytest.approx((ci.low, ci.high))
    assert pairs.real_order.tolist() == ["a lower"] and pairs.sim_order.tolist() == ["same"]


@needs_chromium
def test_chromium_draws_every_figure_of_the_report(study_out, tmp_path):
    found = chromium_probe(study_out / "report.html", tmp_path / "profile")
    assert found["errors"] == []
    # The device's bars, where reads wait, and the time series.
    assert found["svgs"] == [True] * 3


def test_bad_input_is_one_line_and_exit_2(qoslab, tmp_path):
    out = tmp_path / "study"
    for args, words in (
        (["--schedulers", "elevator"], "no scheduler 'elevator'"),
        (["--real", tmp_path / "nothing"], "no results.parquet"),
        (["--hdd-queue-depths", "64"], "expected depths 1 to 32"),
        (["--set", "block.no_such_key=1"], "--set: no tunable 'block.no_such_key'"),
        (["--set", "block.queue_depth"], "--set: expected KEY=VALUE"),
    ):
        done = qoslab("sched", "study", "--devices", HDD, *args, "--out", out, "--quiet")
        assert done.returncode == 2, done.stderr
        assert words in done.stderr and len(done.stderr.strip().splitlines()) == 1
        assert not out.exists()


def test_lat_percentiles_report_the_total_latency_a_scheduler_wait_is_part_of():
    from qoslab.sim.api import sim_json

    job = "[j]\ndirect=1\nrw=randread\nbs=4k\niodepth=1\nnumber_ios=2000\n"
    plain = sim_json(text=job, device="ideal")["jobs"][0]["read"]
    assert "percentile" not in plain["lat_ns"]
    # Nothing waits at QD 1 on an ideal device: the total latency is the completion latency.
    r = sim_json(text="[global]\nlat_percentiles=1\n" + job, device="ideal")["jobs"][0]["read"]
    assert r["lat_ns"]["percentile"] == r["clat_ns"]["percentile"] == plain["clat_ns"]["percentile"]
    # 20 I/Os for one disk slot: most of a request's life is spent in the scheduler, which
    # the total latency holds and the completion latency (from the driver on) does not.
    text = job_text(1.0, SchedOptions())
    r = sim_json(text=text, device=HDD, set=list(hdd(1).sets))["jobs"][0]["read"]
    lat, clat = r["lat_ns"]["percentile"]["50.000000"], r["clat_ns"]["percentile"]["50.000000"]
    assert lat > 4 * clat
    assert r["lat_ns"]["mean"] == pytest.approx(r["slat_ns"]["mean"] + r["clat_ns"]["mean"])
