"""The timed half of the ordered-write study: NVMe-oF transports in the simulator path, the
four stacks as stages of it (`qoslab sim` with `ordering=`, `qoslab rio run`), and `qoslab rio
study`."""

import json
from statistics import mean

import pytest

from chromium import chromium_probe, needs_chromium

WRITES = """[global]
ioengine=libaio
direct=1
bs=4k
rw=randwrite
iodepth=1
number_ios=200
norandommap=1

[w]
"""


def _sim(tmp_path, transport):
    from qoslab.sim import api

    jobs = tmp_path / "w.fio"
    jobs.write_text(WRITES)
    text = api.run(
        jobs, device="ideal", sets=[f"path.transport={transport}"], output_format="json"
    )["text"]
    return json.loads(text)


def test_rdma_counts_each_servers_cycles_from_its_operations(tmp_path):
    from qoslab.sim.api import stage_counters

    report = _sim(tmp_path, "rdma")
    c = stage_counters(report, "rdma")
    ios = 200
    # A 4 KiB write rides in its capsule (inline): one capsule and one response message each.
    assert c["commands"] == c["completions"] == ios
    assert c["messages"] == 2 * ios
    # At QD1 no two commands leave at once: each rings its own doorbell.
    assert c["doorbells"] == ios
    # The [rdma] table's defaults (submit, complete, message, doorbell cycles).
    submit, complete, message, doorbell = 3000, 2500, 1500, 300
    assert c["initiator_cycles"] == ios * (submit + complete + 2 * message + doorbell)
    assert c["target_cycles"] == ios * (complete + 2 * message)
    assert c["initiator_requests_per_cycle"] == ios / c["initiator_cycles"]


def test_the_fabric_adds_its_round_trip_to_every_write(tmp_path):
    pcie = _sim(tmp_path, "pcie")["jobs"][0]["write"]["clat_ns"]["mean"]
    rdma = _sim(tmp_path, "rdma")["jobs"][0]["write"]["clat_ns"]["mean"]
    tcp = _sim(tmp_path, "tcp")["jobs"][0]["write"]["clat_ns"]["mean"]
    # Capsule: 830 ns + 4160 B at 25 GB/s (166 ns); response: 830 ns + 16 B (1 ns). The ideal
    # preset's PCIe path costs nothing and its service times come from the same seeded stream
    # whatever the transport: the difference is exact.
    assert rdma - pcie == pytest.approx(830 + 166 + 830 + 1, abs=1)
    assert tcp - pcie == pytest.approx(5000 + 166 + 5000 + 1, abs=1)


def test_a_background_term_adds_cycles_per_second_of_the_run_at_each_server():
    from qoslab.rio import chain
    from qoslab.sim.api import stage_counters

    # Linux on two flash targets: a FLUSH per write, so the run lasts milliseconds.
    job = chain.job_text("linux", 1, 8, 4, 1, 0, 32)
    report = chain.run(job, device="rio-flash", sets=[], seed=1)
    ns = report["qoslab"]["simulated_ns"]
    ops = chain.measured("linux", report)
    per_s = 22e6  # 1 % of one of the targets' 2.2 GHz cores
    with_bg = chain.measured("linux", report, per_s)
    # The initiator's cycles are its transport's, one rdma stage per target.
    initiator = sum(stage_counters(report, f"rdma[{i}]")["initiator_cycles"] for i in range(2))
    targets = [stage_counters(report, f"target[{i}]")["target_cycles"] for i in range(2)]
    assert ops["initiator_cycles"] == initiator
    assert ops["target_cycles"] == sum(targets)
    # Each server, the initiator and both targets, adds per_s for every second of the run.
    assert with_bg["initiator_requests_per_kcycle"] == pytest.approx(
        1e3 * 8 / (initiator + per_s * ns / 1e9)
    )
    assert with_bg["target_requests_per_kcycle"] == pytest.approx(
        1e3 * 8 / (sum(targets) + 2 * per_s * ns / 1e9)
    )
    assert with_bg["requests_per_s"] == ops["requests_per_s"]


@pytest.fixture(scope="module")
def quick_study(tmp_path_factory):
    """`qoslab rio study --quick`'s output folder (3 seeds, the default)."""
    from conftest import run_qoslab

    out = tmp_path_factory.mktemp("rio") / "study"
    r = run_qoslab("rio", "study", "--quick", "--out", str(out))
    assert r.returncode == 0, r.stderr
    return out


def test_the_quick_study_writes_its_report_and_has_the_documents_shape(quick_study):
    out = quick_study
    data = json.loads((out / "study.json").read_text())
    # Figures 10 (flash, Optane), 10(d), 11, 12, recovery over threads and on the
    # document's setup.
    assert (out / "report.html").read_text().count("<svg") == 7
    table = {row["claim"]: row for row in data["document_vs_qoslab"]}
    flash = table["throughput Rio / Linux, flash, mean over threads"]
    assert flash["interval"][0] >= 30 and flash["verdict"] == "inside"
    assert table["throughput Rio / orderless, flash, lowest over threads"]["qoslab"] >= 0.8
    assert table["throughput Rio / orderless, Optane, lowest over threads"]["qoslab"] >= 0.8
    # Every row not inside its target says why.
    assert all(row["verdict"] == "inside" or row["why"] for row in data["document_vs_qoslab"])
    # Merging: Rio with batches of 8 spends fewer initiator cycles per request than without.
    for seed in (1, 2, 3):
        points = [
            p
            for p in data["points"]
            if p["figure"] == "12" and p["batch"] == 8 and p["seed"] == seed
        ]
        eff = {p["stack"]: p["initiator_requests_per_kcycle"] for p in points}
        assert eff["rio"] > 2 * eff["rio w/o merge"]
    # Figure 10(d): at 4 threads a second flash target lifts Rio and orderless.
    at4 = {
        (p["figure"], p["stack"], p["seed"]): p["requests_per_s"]
        for p in data["points"]
        if p["threads"] == 4 and p["figure"] in ("10", "10d") and p["ssd"] == "flash"
    }
    # (The quick study's 32 writes per thread end before the second drive's share is whole.)
    for stack in ("rio", "orderless"):
        for seed in (1, 2, 3):
            assert at4[("10d", stack, seed)] > 1.3 * at4[("10", stack, seed)]
    # Recovery (document 6.5): power cuts at seeded moments of Rio's and HORAE's runs.
    cuts = data["recovery"]
    # 2 thread counts x 2 stacks x 3 seeds x 1 seeded cut (3 per point, shared out among the
    # seeds), each recovered to a prefix.
    assert len(cuts) == 12 and all(c["violations"] == 0 for c in cuts)
    assert sorted({c["seed"] for c in cuts}) == [1, 2, 3]
    for stack in ("rio", "horae"):
        mine = [c for c in cuts if c["stack"] == stack]
        few = mean(c["entries_read"] for c in mine if c["threads"] == 1)
        many = mean(c["entries_read"] for c in mine if c["threads"] == 4)
        assert 0 < few < many
        assert all(c["recovery_ns"] == c["rebuild_ns"] + c["data_recovery_ns"] for c in mine)
    grows = table["order rebuild grows with the requests in flight (Rio and HORAE)"]
    assert grows["verdict"] in ("inside", "undecided") and grows["seeds"] == 3
    # The document's setup (6.5): 36 threads issuing without waiting on two flash targets,
    # 3 cuts per stack here (30 in the full study), one per seed, each recovered to a prefix.
    setup = data["recovery_on_the_documents_setup"]
    assert sorted((c["stack"], c["seed"]) for c in setup) == [
        (s, seed) for s in ("horae", "rio") for seed in (1, 2, 3)
    ]
    assert all(c["violations"] == 0 and c["threads"] == 36 for c in setup)
    rebuild = [row for claim, row in table.items() if claim.startswith("order rebuild Rio / HORAE")]
    assert len(rebuild) == 1 and rebuild[0]["seeds"] == 3
    lift = table["throughput Linux, flash, two targets / one target, mean over threads"]
    assert lift["qoslab"] > 0 and (lift["verdict"] == "inside" or "dm-stripe" in lift["why"])
    # The study counts every simulator run and its events: the points at each seed, and each
    # recovery point's run to the end, then one run to its last cut taking every cut on the way
    # (here one cut per run).
    taken_in = data["cut_runs"]
    assert len(taken_in) == len(cuts) + len(setup)
    assert all(r["cuts"] == 1 for r in taken_in)
    assert data["runs"] == len(data["points"]) + 2 * len(taken_in)
    counted = sum(p["events"] for p in data["points"]) + sum(r["events"] for r in taken_in)
    assert data["events"] > counted > sum(p["events"] for p in data["points"])
    # A cut's events are the run's before it: its run stops there.
    assert sorted(c["events"] for c in cuts + setup) == sorted(r["events"] for r in taken_in)


def test_every_verdict_of_the_study_comes_from_an_interval_over_3_seeds(quick_study):
    """No verdict, interval or error bar from fewer than 3 repetitions (the guide): each row
    is the mean over the seeds, its 95 % t interval, and the verdict that interval gives."""
    from qoslab.report.stats import mean_interval
    from qoslab.rio import study as st

    data = json.loads((quick_study / "study.json").read_text())
    points = data["points"]
    assert sorted({p["seed"] for p in points}) == [1, 2, 3]
    # Every point at every seed.
    assert len(points) == 3 * len(
        {
            (p["figure"], p["ssd"], p["stack"], p["threads"], p["size_kib"], p["batch"])
            for p in points
        }
    )
    table = {row["claim"]: row for row in data["document_vs_qoslab"]}
    assert all(row["seeds"] == 3 for row in table.values())
    assert {row["verdict"] for row in table.values()} <= {"inside", "outside", "undecided"}
    # A ratio row, recomputed from the points seed by seed.
    claim = next(c for c in st.CLAIMS if c.what.startswith("throughput Rio / HORAE, flash, mean"))
    values = [
        st._ratio(
            [p for p in points if p["seed"] == s],
            claim.figure,
            claim.ssd,
            claim.a,
            claim.b,
            claim.field,
            claim.how,
        )
        for s in (1, 2, 3)
    ]
    m, (lo, hi) = mean_interval(values)
    row = table[claim.what]
    assert row["qoslab"] == round(m, 2) and row["interval"] == [round(lo, 2), round(hi, 2)]
    inside = claim.lo <= lo and hi <= claim.hi
    outside = hi < claim.lo or lo > claim.hi
    assert row["verdict"] == ("inside" if inside else "outside" if outside else "undecided")
    for row in table.values():
        if row["verdict"] == "undecided":
            assert "straddles" in row["why"]


def test_fewer_than_3_seeds_give_no_interval_and_no_verdict(quick_study):
    """The same points from two seeds only: means, but no interval and no verdict."""
    from qoslab.rio import study as st

    data = json.loads((quick_study / "study.json").read_text())
    two = [p for p in data["points"] if p["seed"] in (1, 2)]
    cuts = [c for c in data["recovery"] if c["seed"] in (1, 2)]
    setup = [c for c in data["recovery_on_the_documents_setup"] if c["seed"] in (1, 2)]
    table = st.compare(two, cuts, setup)
    assert len(table) == len(data["document_vs_qoslab"])
    for row in table:
        assert row["seeds"] == 2 and row["interval"] is None
        assert row["verdict"] == "no verdict" and "no verdict from 2 seeds" in row["why"]


def test_cuts_sets_the_power_cuts_of_every_recovery_point(tmp_path):
    """`--cuts N`: N power cuts per recovery point over its seeds, the document's 30 by
    default; one seed takes them all."""
    from conftest import run_qoslab

    out = tmp_path / "cuts"
    r = run_qoslab(
        "rio", "study", "--quick", "--seeds", "1", "--cuts", "4", "--quiet", "--out", str(out)
    )
    assert r.returncode == 0, r.stderr
    data = json.loads((out / "study.json").read_text())
    assert data["plan"]["repeats"] == 4
    assert data["cut_runs"] and {run["cuts"] for run in data["cut_runs"]} == {4}
    assert len(data["recovery_on_the_documents_setup"]) == 4 * 2  # Rio's and HORAE's cuts


def test_an_interval_across_the_targets_edge_is_undecided():
    from qoslab.report.stats import band_verdict, mean_interval

    # Seed 1 and seed 2 of the quick study's "order rebuild Rio / HORAE" (session 7: 1.24 and
    # 0.87) with a third between: the interval straddles the target's edge at 1x.
    _, interval = mean_interval([1.24, 0.87, 1.05])
    assert interval[0] < 1 < interval[1]
    assert band_verdict(interval, 1.0, lo_open=True) == "undecided"
    assert band_verdict((1.1, 1.3), 1.0, lo_open=True) == "inside"
    assert band_verdict((0.8, 1.0), 1.0, lo_open=True) == "outside"
    assert band_verdict((1.0, 1.1), 1.0) == "inside"
    assert band_verdict((1.1, 1.3), 1.5, 6.0) == "outside"
    assert band_verdict((5.0, 7.0), 1.5, 6.0) == "undecided"
    assert band_verdict(None, 1.0) == "no verdict"
    # Three identical seeds: a zero-width interval at the value.
    assert mean_interval([2.0, 2.0, 2.0]) == (2.0, (2.0, 2.0))
    assert mean_interval([1.0, 2.0]) == (1.5, None)


def test_the_study_is_byte_identical_whatever_the_number_of_workers(quick_study, tmp_path):
    from conftest import run_qoslab

    out = tmp_path / "one-worker"
    r = run_qoslab("rio", "study", "--quick", "--jobs", "1", "--quiet", "--out", str(out))
    assert r.returncode == 0, r.stderr
    for name in ("study.json", "report.html", "figure10-flash.svg", "recovery-setup.svg"):
        assert (out / name).read_bytes() == (quick_study / name).read_bytes(), name


@needs_chromium
def test_the_study_report_opens_in_chromium_with_every_figure_drawn(quick_study, tmp_path):
    found = chromium_probe(quick_study / "report.html", tmp_path / "profile")
    assert found["errors"] == [] and all(found["images"])
    assert found["svgs"] == [True] * 7
    assert "Document vs qoslab" in found["text"]


# A crash of one target early in a run of 2 x 16 writes: each stack has writes in flight.
CRASH_AT = "60us"

ORDERED_JOBS = """[global]
ioengine=libaio
direct=1
bs=4k
number_ios=40
iodepth=8

[log]
rw=write
ordering=rio
numjobs=2

[sync]
rw=randwrite
ordering=flush
fsync=4
"""


def test_rio_run_is_the_job_it_shows_run_by_qoslab_sim(qoslab, tmp_path):
    # `rio run` is a front end of the simulator: the fio job it builds from its options, run
    # by `qoslab sim` on the same device, is the same run.
    args = ["rio", "run", "--threads", "2", "--writes", "40", "--flush-every", "4"]
    job = qoslab(*args, "--show-job", check=True).stdout
    for line in ("ordering=rio", "numjobs=2", "number_ios=40", "fsync=4", "iodepth=32"):
        assert line in job.splitlines(), line
    path = tmp_path / "rio.fio"
    path.write_text(job)
    sim = ["sim", str(path), "--device", "rio-flash", "--set", "fabric.targets=2"]
    report = json.loads(qoslab(*sim, "--output-format", "json", check=True).stdout)
    run = json.loads(qoslab(*args, check=True).stdout)
    assert run["requests"] == 80 == sum(j["write"]["total_ios"] for j in report["jobs"])
    assert run["elapsed_ns"] == report["qoslab"]["simulated_ns"]
    assert run["requests_per_s"] == pytest.approx(80 / run["elapsed_ns"] * 1e9)
    assert run["initiator_cycles"] > 0 and run["target_cycles"] > 0


def test_a_run_cut_by_a_power_failure_recovers_to_a_prefix(qoslab):
    # 8 outstanding: a libaio job's fsync=4 is due once it has reaped a write since its last
    # sync (fio 3.33), so at the default 32 a thread of 40 writes syncs after its 4th and then
    # only when its queue is full, and a cut at half the run finds nothing acknowledged yet.
    args = ["rio", "run", "--threads", "2", "--writes", "40", "--flush-every", "4"]
    args += ["--iodepth", "8"]
    full = json.loads(qoslab(*args, check=True).stdout)
    half = full["elapsed_ns"] // 2
    r = qoslab(*args, "--power-fail-at", f"{half}ns")
    assert r.returncode == 0, r.stdout + r.stderr
    cut = json.loads(r.stdout)
    assert cut["violations"] == [] and cut["prefix_ok"] and cut["acked_lost"] == 0
    assert cut["power_fail_at_ns"] == half
    # Requests not yet known durable at the cut (a request a FLUSH acknowledged is durable
    # and no longer counted), some of them acknowledged.
    assert 0 < cut["acknowledged"] < cut["requests"] <= 80
    assert cut["in_flight"] == cut["requests"] - cut["acknowledged"]


@pytest.mark.parametrize(("stack", "replays"), [("rio", True), ("linux", False)])
def test_a_run_with_one_target_crashed_replays_or_loses_the_cached_writes(qoslab, stack, replays):
    # 2 threads of 16 4 KiB writes at random offsets over two flash targets.
    args = ["rio", "run", "--stack", stack, "--threads", "2", "--writes", "16"]
    r = qoslab(*args, "--power-fail-at", CRASH_AT, "--crash-target", "0")
    assert r.returncode == 0, r.stdout + r.stderr
    crash = json.loads(r.stdout)
    assert (crash["stack"], crash["crashed_target"]) == (stack, 0)
    assert crash["violations"] == [] and crash["lost_from_cache"] > 0
    # Rio replays every write the crashed cache held (its attributes are not persistent in
    # the PMR log); Linux replays none, and loses only writes no FLUSH covered yet.
    if replays:
        assert crash["replayed"] == crash["lost_from_cache"] and crash["lost_for_good"] == 0
    else:
        assert crash["replayed"] == 0 and 0 < crash["lost_for_good"] <= crash["in_flight"]


def test_a_run_with_one_target_crashed_breaks_the_order_of_orderless(qoslab):
    args = ["rio", "run", "--stack", "orderless", "--threads", "2", "--writes", "16"]
    r = qoslab(*args, "--power-fail-at", CRASH_AT, "--crash-target", "0")
    assert r.returncode == 1
    crash = json.loads(r.stdout)
    assert crash["lost_for_good"] > 0 and crash["replayed"] == 0
    assert {v["kind"] for v in crash["violations"]} == {"prefix"}


def test_recovery_after_a_cut_is_timed_from_what_the_logs_held(qoslab):
    # One thread on one flash target without FLUSH: no attribute is ever persistent, so at the
    # end of the run the PMR log holds all 20 and recovery discards all 20 commands.
    args = ["rio", "run", "--threads", "1", "--writes", "20"]
    args += ["--set", "targets=1", "--set", "merge_batch=1"]
    end = json.loads(qoslab(*args, check=True).stdout)["elapsed_ns"]
    cut = json.loads(qoslab(*args, "--power-fail-at", f"{end}ns", check=True).stdout)
    r = cut["recovery"]
    assert (r["entries_read"], r["discarded_commands"], cut["survived"]) == (20, 20, 0)
    assert r["recovery_ns"] == r["rebuild_ns"] + r["data_recovery_ns"]
    # The log is read back at 32 B per 0.6 us: 20 x 32 B take 12,008 ns; twice the PMR read
    # rate halves the read (6,004 ns) and nothing else.
    fast = qoslab(
        *args,
        "--set",
        "recovery.pmr_read_gb_per_s=0.1066",
        "--power-fail-at",
        f"{end}ns",
        check=True,
    )
    assert json.loads(fast.stdout)["recovery"]["rebuild_ns"] == r["rebuild_ns"] - 6_004


def test_an_ordering_job_is_refused_clearly_where_it_cannot_run(qoslab, tmp_path):
    bad = tmp_path / "bad.fio"
    bad.write_text("[w]\nrw=write\nbs=4k\nnumber_ios=8\nordering=raid\n")
    r = qoslab("sim", str(bad), "--device", "rio-flash")
    assert r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1
    assert f"{bad}:5: option 'ordering': expected one of none, flush, horae, rio" in r.stderr
    good = tmp_path / "ordered.fio"
    good.write_text(ORDERED_JOBS)
    # Rio needs target servers with a PMR: on a device without, qoslab sim names the job.
    r = qoslab("sim", str(good), "--device", "ideal")
    assert r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1
    assert f"{good}:8: job 'log': ordering=rio needs target servers with a PMR" in r.stderr


ORDERED_SIM_JOBS = """[global]
ioengine=libaio
direct=1
bs=4k
number_ios=200
iodepth=8
rw=write

[rio]
ordering=rio

[horae]
ordering=horae
offset=1g

[linux]
ordering=flush
fsync=4
offset=2g

[orderless]
ordering=none
offset=3g
"""


def test_qoslab_sim_runs_ordered_streams_and_recovers_them_after_a_cut(qoslab, tmp_path):
    jobs = tmp_path / "ordered.fio"
    jobs.write_text(ORDERED_SIM_JOBS)
    base = ["sim", str(jobs), "--device", "rio-flash", "--set", "path.transport=rdma"]
    base += ["--set", "fabric.targets=2", "--output-format", "json"]
    full = json.loads(qoslab(*base, check=True).stdout)
    assert [j["jobname"] for j in full["jobs"]] == ["rio", "horae", "linux", "orderless"]
    assert all(j["write"]["total_ios"] == 200 for j in full["jobs"])
    assert "recovery" not in full["qoslab"]
    cut = json.loads(qoslab(*base, "--power-fail-at", "300us", check=True).stdout)
    rec = cut["qoslab"]["recovery"]
    assert rec["power_fail_at_ns"] == 300_000
    # Every ordered stack leaves each stream at a prefix of its groups, and nothing that a
    # FLUSH acknowledged is lost; the orderless stack promises no order.
    by_ordering = {s["ordering"]: s for s in rec["streams"]}
    assert set(by_ordering) == {"rio", "horae", "flush", "none"}
    for name in ("rio", "horae", "flush"):
        assert by_ordering[name]["violations"] == [], name
    assert rec["acked_lost"] == 0
    assert isinstance(rec["prefix_ok"], bool)
    # Rio's and HORAE's logs were read back, and rebuilding the order took simulated time.
    assert rec["attributes_scanned"] > 0
    assert rec["order_rebuild_ms"] > 0 and rec["data_recovery_ms"] >= 0
    # The same cut twice is the same report.
    again = json.loads(qoslab(*base, "--power-fail-at", "300us", check=True).stdout)
    assert again["qoslab"]["recovery"] == rec


def test_qoslab_sim_crashes_one_target_as_rio_run_does(qoslab, tmp_path):
    # `qoslab sim --crash-target` is the cut `rio run --crash-target` makes: the same job on
    # the same device, target 0 crashed alone at the same time, reports the same losses.
    run = ["rio", "run", "--stack", "rio", "--threads", "2", "--writes", "16"]
    job = tmp_path / "rio.fio"
    job.write_text(qoslab(*run, "--show-job", check=True).stdout)
    crash = ["--power-fail-at", CRASH_AT, "--crash-target", "0"]
    by_rio = json.loads(qoslab(*run, *crash, check=True).stdout)
    sim = ["sim", str(job), "--device", "rio-flash", "--set", "fabric.targets=2"]
    sim += ["--output-format", "json"]
    rec = json.loads(qoslab(*sim, *crash, check=True).stdout)["qoslab"]["recovery"]
    lost = rec["target_crash"]
    assert lost["target"] == 0 and lost["lost_from_cache"] > 0
    for key in ("lost_from_cache", "replayed", "lost_for_good"):
        assert lost[key] == by_rio[key], key
    # Rio writes again every command the crashed cache held: nothing is lost for good, and
    # every stream is still a prefix of its order.
    assert lost["replayed"] == lost["lost_from_cache"] and lost["lost_for_good"] == 0
    assert rec["prefix_ok"] and all(s["violations"] == [] for s in rec["streams"])
    # The other target crashed instead: its own cache's commands; a power cut has no
    # target_crash.
    other = json.loads(qoslab(*sim, "--power-fail-at", CRASH_AT, "--crash-target", "1").stdout)
    assert other["qoslab"]["recovery"]["target_crash"]["target"] == 1
    cut = json.loads(qoslab(*sim, "--power-fail-at", CRASH_AT, check=True).stdout)
    assert "target_crash" not in cut["qoslab"]["recovery"]


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--crash-target", "0"], "--crash-target: only with --power-fail-at"),
        (["--power-fail-at", "1us", "--crash-target", "2"], "--crash-target: expected 0 to 1"),
        (["--power-fail-at", "1us", "--crash-target", "-1"], "--crash-target"),
        (["--power-fail-at", "1us", "--crash-target", "one"], "--crash-target"),
        (["--power-fail-at", "1us", "--crash-target", "70000"], "--crash-target"),
        (
            ["--power-fail-at", "1us", "--crash-target", "0", "--device", "ideal"],
            "--crash-target: the device has no target servers",
        ),
    ],
)
def test_bad_crash_targets_of_qoslab_sim_are_one_line_and_exit_2(qoslab, tmp_path, args, message):
    job = tmp_path / "w.fio"
    job.write_text("[w]\nioengine=libaio\ndirect=1\nbs=4k\nrw=write\nnumber_ios=8\n")
    device = [] if "--device" in args else ["--device", "rio-flash", "--set", "fabric.targets=2"]
    r = qoslab("sim", str(job), *device, *args)
    assert r.returncode == 2 and r.stdout == ""
    assert message in r.stderr and len(r.stderr.strip().splitlines()) == 1


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--power-fail-at", "soon"], "--power-fail-at: expected a simulated time"),
        (["--crash-target", "0"], "--crash-target: only with --power-fail-at"),
        (["--power-fail-at", "1us", "--crash-target", "2"], "--crash-target: expected 0 to 1"),
        (["--size-kib", "6"], "--size-kib: expected a multiple of 4"),
        (["--stack", "rioo"], "--stack: expected one of"),
        (["--set", "timed.window=8"], "--set timed.window: the fabric's timed model is gone"),
        (["--set", "path.transport=ib"], "path.transport"),
        (["--set", "recovery.merge_nanos=5"], "merge_nanos"),
        (["--iodepth", "0"], "--iodepth: expected at least 1"),
    ],
)
def test_bad_input_to_a_run_is_one_line_and_exit_2(qoslab, args, message):
    r = qoslab("rio", "run", *args)
    assert r.returncode == 2
    assert message in r.stderr and len(r.stderr.strip().splitlines()) == 1


@pytest.mark.parametrize(
    ("device", "targets", "gb_per_s"),
    [("rio-flash", 1, 2.4), ("rio-optane", 1, 2.2), ("rio-flash", 2, 4.8)],
)
@pytest.mark.parametrize("ordering", ["none", "rio"])
def test_a_64k_write_stream_never_exceeds_the_devices_bandwidth(
    qoslab, tmp_path, device, targets, gb_per_s, ordering
):
    # Issue 31: the fabric's timed SSD booked bandwidth per unit, so its 2.4 GB/s flash drive
    # wrote 64 KiB at 11.7 GB/s. The chain's drive has one device-wide channel (its preset's
    # `bandwidth`), one per target server.
    jobs = tmp_path / "w.fio"
    jobs.write_text(
        "[w]\nioengine=libaio\ndirect=1\nbs=64k\nrw=write\niodepth=32\nnumber_ios=2000\n"
        f"ordering={ordering}\n"
    )
    args = ["sim", str(jobs), "--device", device, "--set", f"fabric.targets={targets}"]
    report = json.loads(qoslab(*args, "--output-format", "json", check=True).stdout)
    bw = report["jobs"][0]["write"]["bw_bytes"] / 1e9
    # Saturated (32 writes of 64 KiB outstanding), and never above the channels.
    assert 0.95 * gb_per_s < bw <= gb_per_s, bw


def _counter(report, name):
    return sum(st["counters"].get(name, 0) for st in report["qoslab"]["stages"])


def test_a_rio_stream_without_a_flush_gets_one_before_the_pmr_log_fills(qoslab, tmp_path):
    # Without PLP an ordering attribute is recycled only once an acknowledged FLUSH covers it
    # (the crash checker shows that recycling at acknowledgement breaks the prefix), so a Rio
    # stream that never flushes would fill the log (64 slots of 32 B here) and stop. Rio adds
    # a FLUSH to the stream's write when a log is three quarters full: the stream runs to its
    # end, the log never holds more than its slots, and a cut still recovers to a prefix.
    jobs = tmp_path / "w.fio"
    aio = "[w]\nioengine=libaio\ndirect=1\n"
    jobs.write_text(aio + "bs=4k\nrw=write\niodepth=8\nnumber_ios=200\nordering=rio\n")

    def run(device, *more):
        args = ["sim", str(jobs), "--device", device, "--set", "fabric.pmr_bytes=2KiB", *more]
        return json.loads(qoslab(*args, "--output-format", "json", check=True).stdout)

    done = run("rio-flash")
    assert done["jobs"][0]["write"]["total_ios"] == 200
    assert _counter(done, "ordered_forced_flushes") > 0
    assert 48 <= _counter(done, "log_max") <= 64
    assert _counter(done, "attributes_recycled") > 100
    rec = run("rio-flash", "--power-fail-at", "2ms")["qoslab"]["recovery"]
    assert rec["prefix_ok"] and rec["acked_lost"] == 0
    # With PLP an acknowledged write is durable and its attribute goes at acknowledgement:
    # no FLUSH is added.
    optane = run("rio-optane")
    assert optane["jobs"][0]["write"]["total_ios"] == 200
    assert _counter(optane, "ordered_forced_flushes") == 0


def test_a_horae_stream_without_a_flush_gets_one_before_its_metadata_fills_the_pmr(
    qoslab, tmp_path
):
    # HORAE's ordering metadata (16 B a request) stays in the target's PMR log until a FLUSH
    # covers its request, as Rio's attributes do: the log of a stream that never flushes would
    # outgrow the PMR (2 KiB here: 128 entries). HORAE too gets a FLUSH when a log is three
    # quarters full, so a cut at the end of the run reads back no more than the PMR holds.
    jobs = tmp_path / "w.fio"
    aio = "[w]\nioengine=libaio\ndirect=1\n"
    jobs.write_text(aio + "bs=4k\nrw=write\niodepth=8\nnumber_ios=400\nordering=horae\n")
    args = ["sim", str(jobs), "--device", "rio-flash", "--set", "fabric.pmr_bytes=2KiB"]
    args += ["--set", "fabric.targets=1", "--output-format", "json"]
    done = json.loads(qoslab(*args, check=True).stdout)
    assert done["jobs"][0]["write"]["total_ios"] == 400
    assert _counter(done, "ordered_forced_flushes") >= 400 // 128
    end = done["qoslab"]["simulated_ns"]
    cut = json.loads(qoslab(*args, "--power-fail-at", f"{end}ns", check=True).stdout)
    rec = cut["qoslab"]["recovery"]
    assert rec["prefix_ok"] and rec["acked_lost"] == 0
    assert 0 < rec["attributes_scanned"] <= 128


def test_horae_reads_back_only_the_metadata_of_requests_not_known_durable(qoslab):
    # With PLP an acknowledged request is durable: its metadata leaves HORAE's PMR log, so a
    # cut late in a run reads back at most the requests in flight (4 threads x 32), not the
    # metadata of every request the run made.
    args = ["rio", "run", "--stack", "horae", "--threads", "4", "--writes", "400"]
    args += ["--device", "rio-optane"]
    end = json.loads(qoslab(*args, check=True).stdout)["elapsed_ns"]
    cut = json.loads(qoslab(*args, "--power-fail-at", f"{end * 4 // 5}ns", check=True).stdout)
    assert cut["prefix_ok"] and cut["in_flight"] <= 4 * 32
    assert 0 < cut["recovery"]["entries_read"] <= cut["in_flight"]


def test_a_rio_log_held_by_a_stream_that_stopped_writing_is_named(qoslab, tmp_path):
    # A stream that stopped writing keeps its unflushed attributes at the head of the log, so
    # another stream's FLUSHes free nothing behind them: the run stops, and the error says why
    # (open in docs/rio.md). A FLUSH at the end of each job (end_fsync=1) frees it.
    jobs = tmp_path / "w.fio"
    two = "[a]\nnumber_ios=10\n[b]\nnumber_ios=400\n"
    aio = "[global]\nioengine=libaio\ndirect=1\n"
    jobs.write_text(aio + "bs=4k\nrw=write\niodepth=8\nordering=rio\n" + two)
    args = ["sim", str(jobs), "--device", "rio-flash", "--set", "fabric.pmr_bytes=2KiB"]
    r = qoslab(*args)
    assert r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1
    assert "a target's PMR log is full and no FLUSH frees it" in r.stderr
    assert "a stream that stopped writing without a FLUSH holds the log's head" in r.stderr
    assert "end_fsync=1" in r.stderr
    jobs.write_text(aio + "bs=4k\nrw=write\niodepth=8\nordering=rio\nend_fsync=1\n" + two)
    done = json.loads(qoslab(*args, "--output-format", "json", check=True).stdout)
    assert [j["write"]["total_ios"] for j in done["jobs"]] == [10, 400]
