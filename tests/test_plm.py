"""`qoslab plm coordinate`: each allocation rule on windows worked by hand.

The rules: requests R = ceil(P); if they fit in C each host gets R; otherwise each gets its
minimum min(R, floor(C x S / k)) and the residual goes by strict priority (class order, then
first appearance; each takes min(R - minimum, left)) or fixed ratio (each takes
min(R - minimum, floor(residual x r_class))); then a host short of its demand asks for the
shortfall from the pool nobody was allocated (strict priority: min(shortfall, left); fixed
ratio: min(shortfall, floor(pool_at_start x r_class), left)). consumed = min(D, allocated +
extra), deficiency = (D - consumed) / D, utilization = consumed / (allocated + extra).
"""

from __future__ import annotations

import csv
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from qoslab.plm.coordinate import COLUMNS, coordinate


def demands_csv(tmp_path: Path, rows: list[tuple], name: str = "demands.csv") -> Path:
    path = tmp_path / name
    lines = ["window,host,class,demand"] + [",".join(map(str, r)) for r in rows]
    path.write_text("\n".join(lines) + "\n")
    return path


def run(qoslab, tmp_path: Path, rows: list[tuple], *args: str) -> list[dict]:
    demands = demands_csv(tmp_path, rows)
    out = tmp_path / "alloc.csv"
    done = qoslab("plm", "coordinate", demands, *args, "--out", out)
    assert done.returncode == 0, done.stderr
    with out.open() as f:
        reader = csv.DictReader(f)
        assert tuple(reader.fieldnames) == COLUMNS
        return list(reader)


def counts(rows: list[dict], window: str) -> list[tuple[int, int, int, int]]:
    """(requested, allocated, extra, consumed) of each host of `window`."""
    return [
        (int(r["requested"]), int(r["allocated"]), int(r["extra"]), int(r["consumed"]))
        for r in rows
        if r["window"] == window
    ]


def test_requests_that_fit_are_granted_as_asked(qoslab, tmp_path):
    # 30 + 20 + 10 = 60 <= 100: each host gets its demand.
    rows = run(
        qoslab,
        tmp_path,
        [(0, "a", "high", 30), (0, "b", "medium", 20), (0, "c", "low", 10)],
        "--capacity", "100", "--predictor", "exact", "--policy", "sp",
    )  # fmt: skip
    assert counts(rows, "0") == [(30, 30, 0, 30), (20, 20, 0, 20), (10, 10, 0, 10)]
    assert [r["deficiency"] for r in rows] == ["0.000000"] * 3
    assert [r["utilization"] for r in rows] == ["1.000000"] * 3
    assert [r["predicted"] for r in rows] == ["30.000000", "20.000000", "10.000000"]


def test_strict_priority_serves_the_residual_in_class_order_not_file_order(qoslab, tmp_path):
    # R = 50 (low), 60 (high), 40 (medium): 150 > 100. Minimum floor(100 x 0.5 / 3) = 16
    # each; residual 100 - 48 = 52: high min(44, 52) = 44, medium min(24, 8) = 8, low 0.
    rows = run(
        qoslab,
        tmp_path,
        [(1, "l", "low", 50), (1, "h", "high", 60), (1, "m", "medium", 40)],
        "--capacity", "100", "--predictor", "exact", "--policy", "sp", "--min-share", "0.5",
    )  # fmt: skip
    assert [r["host"] for r in rows] == ["l", "h", "m"]
    assert counts(rows, "1") == [(50, 16, 0, 16), (60, 60, 0, 60), (40, 24, 0, 24)]
    assert [r["deficiency"] for r in rows] == ["0.680000", "0.000000", "0.400000"]


def test_fixed_ratio_gives_each_class_its_share_of_the_residual(qoslab, tmp_path):
    # R = 60, 40, 50; minimum 16 each; residual 52: high min(44, floor(26)) = 26, medium
    # min(24, floor(15.6)) = 15, low min(34, floor(10.4)) = 10. Pool 1: every class's share
    # of it floors to 0, so no extra.
    rows = run(
        qoslab,
        tmp_path,
        [(0, "h", "high", 60), (0, "m", "medium", 40), (0, "l", "low", 50)],
        "--capacity", "100", "--predictor", "exact", "--policy", "fr", "--ratios", "0.5,0.3,0.2",
    )  # fmt: skip
    assert counts(rows, "0") == [(60, 42, 0, 42), (40, 31, 0, 31), (50, 26, 0, 26)]
    assert [r["deficiency"] for r in rows] == ["0.300000", "0.225000", "0.480000"]


def test_fixed_ratio_caps_the_extra_at_the_class_share_of_the_pool(qoslab, tmp_path):
    # R = 90, 20, 5 (115 > 100). Minimum 16, 16, 5 (low asks only 5); residual 63: high
    # min(74, floor(31.5)) = 31, medium min(4, floor(18.9)) = 4, low 0. Allocated 47, 20, 5;
    # pool 28. High is short 43: min(43, floor(28 x 0.5) = 14, 28) = 14.
    rows = run(
        qoslab,
        tmp_path,
        [(0, "h", "high", 90), (0, "m", "medium", 20), (0, "l", "low", 5)],
        "--capacity", "100", "--predictor", "exact", "--policy", "fr",
    )  # fmt: skip
    assert counts(rows, "0") == [(90, 47, 14, 61), (20, 20, 0, 20), (5, 5, 0, 5)]
    assert rows[0]["deficiency"] == f"{29 / 90:.6f}"
    assert rows[0]["utilization"] == "1.000000"


def test_the_moving_average_predicts_and_extras_come_from_the_pool(qoslab, tmp_path):
    # P(0) = C / k = 33.33: R = 34 each (102 > 100): minimum 16 each, residual 52 by strict
    # priority: 18, 18, 16 -> 34, 34, 32; pool 0. Window 1: P = 0.5 D + 0.5 P: 41.67, 21.67,
    # 26.67 -> R = 42, 22, 27 = 91 fit; pool 9; high is short 60 - 42 = 18 and gets 9.
    rows = run(
        qoslab,
        tmp_path,
        [
            (0, "h", "high", 50), (0, "m", "medium", 10), (0, "l", "low", 20),
            (1, "h", "high", 60), (1, "m", "medium", 10), (1, "l", "low", 20),
        ],
        "--capacity", "100", "--predictor", "ewma", "--zeta", "0.5", "--policy", "sp",
    )  # fmt: skip
    assert counts(rows, "0") == [(34, 34, 0, 34), (34, 34, 0, 10), (34, 32, 0, 20)]
    assert counts(rows, "1") == [(42, 42, 9, 51), (22, 22, 0, 10), (27, 27, 0, 20)]
    assert [r["predicted"] for r in rows[:3]] == ["33.333333"] * 3
    assert [r["predicted"] for r in rows[3:]] == ["41.666667", "21.666667", "26.666667"]
    assert rows[0]["deficiency"] == f"{16 / 50:.6f}"
    assert rows[1]["utilization"] == f"{10 / 34:.6f}"
    assert rows[2]["utilization"] == f"{20 / 32:.6f}"
    assert rows[3]["deficiency"] == f"{9 / 60:.6f}"
    assert rows[5]["utilization"] == f"{20 / 27:.6f}"


def test_initial_prediction_and_strict_priority_extras(qoslab, tmp_path):
    # P(0) = 10: R = 10 each, 30 fit, pool 70. High short 30 gets 30, medium short 20 gets 20.
    # Window 1 with zeta 0.25: P = 0.25 D + 0.75 x 10 = 17.5, 15, 8.75 -> R = 18, 15, 9.
    rows = run(
        qoslab,
        tmp_path,
        [
            ("w0", "h", "high", 40), ("w0", "m", "medium", 30), ("w0", "l", "low", 5),
            ("w1", "h", "high", 0), ("w1", "m", "medium", 0), ("w1", "l", "low", 0),
        ],
        "--capacity", "100", "--zeta", "0.25", "--initial", "10",
    )  # fmt: skip
    assert counts(rows, "w0") == [(10, 10, 30, 40), (10, 10, 20, 30), (10, 10, 0, 5)]
    assert rows[2]["utilization"] == "0.500000"
    assert [r["predicted"] for r in rows[3:]] == ["17.500000", "15.000000", "8.750000"]
    assert counts(rows, "w1") == [(18, 18, 0, 0), (15, 15, 0, 0), (9, 9, 0, 0)]
    # No demand: no deficiency, and nothing used of what was given.
    assert [r["deficiency"] for r in rows[3:]] == ["0.000000"] * 3
    assert [r["utilization"] for r in rows[3:]] == ["0.000000"] * 3


def test_nothing_given_and_nothing_asked_is_full_utilization(qoslab, tmp_path):
    rows = run(
        qoslab,
        tmp_path,
        [(0, "h", "high", 0), (0, "l", "low", 0)],
        "--capacity", "10", "--initial", "0",
    )  # fmt: skip
    assert counts(rows, "0") == [(0, 0, 0, 0), (0, 0, 0, 0)]
    assert [r["utilization"] for r in rows] == ["1.000000"] * 2


@settings(max_examples=60, deadline=None)
@given(
    st.integers(0, 300),
    st.sampled_from(["sp", "fr", "proportional", "maxmin"]),
    st.lists(st.lists(st.integers(0, 200), min_size=3, max_size=3), min_size=1, max_size=8),
)
def test_host_directed_utilization_is_one_in_every_window(tmp_path_factory, c, policy, windows):
    # Allocated + extra never exceed the request, which is the demand itself; nor, over the
    # hosts, the capacity.
    rows = [
        (n, f"h{h}", cls, d)
        for n, w in enumerate(windows)
        for h, (cls, d) in enumerate(zip(("high", "medium", "low"), w, strict=True))
    ]
    path = demands_csv(tmp_path_factory.mktemp("hod"), rows)
    out = coordinate(path, capacity=c, predictor="exact", policy=policy)
    for _, _, _, requested, allocated, extra, _, _, util in out:
        assert util == 1.0
        assert allocated + extra <= requested
    for n in range(len(windows)):
        assert sum(r[4] + r[5] for r in out if r[0] == str(n)) <= c


def test_bad_input_is_one_line_naming_the_file_and_line(qoslab, tmp_path):
    path = demands_csv(tmp_path, [(0, "a", "high", 3), (0, "b", "urgent", 4)])
    done = qoslab("plm", "coordinate", path, "--capacity", "10", "--out", tmp_path / "o.csv")
    assert done.returncode == 2
    assert done.stderr.strip().splitlines() == [
        f"qoslab: error: {path}:3: field 'class': expected high, medium or low, got 'urgent'"
    ]
    assert not (tmp_path / "o.csv").exists()
    done = qoslab(
        "plm", "coordinate", path, "--capacity", "10", "--policy", "wfq", "--out", tmp_path / "o"
    )
    assert done.returncode == 2
    assert "--policy: expected one of sp, fr, proportional, maxmin, got 'wfq'" in done.stderr


PLM_JOBS = """[global]
ioengine=libaio
direct=1
bs=4k
time_based=1
runtime=400ms
norandommap=1

[reader]
rw=randread
iodepth=8

[writer]
rw=randwrite
iodepth=4
rate_iops=2000
"""

PLM_DEVICE = [
    "media.nvm_sets=2",
    "media.gc.gate=plm",
    "media.precondition.fill=0",
    "media.gc.plm.dtwin_time_max_ns=50ms",
    "host.replicas=plm",
    "host.plm.coordinate=false",
]


def plm_run(tmp_path: Path, sections: list[str], sets: tuple[str, ...] = ()) -> dict:
    import json

    from qoslab.sim import api

    jobs = tmp_path / "plm.fio"
    jobs.write_text(PLM_JOBS)
    text = api.run(
        jobs,
        sections=sections,
        device="enterprise-tlc-plp",
        sets=[*PLM_DEVICE, *sets],
        output_format="json",
    )["text"]
    return json.loads(text)


def test_reads_go_to_a_copy_in_dtwin_and_the_copies_take_turns(tmp_path):
    from qoslab.sim.api import stage_counters

    report = plm_run(tmp_path, ["reader"])
    host, ssd = stage_counters(report, "nvme-host"), stage_counters(report, "ssd")
    reads = report["jobs"][0]["read"]["total_ios"]
    assert reads > 0
    assert host["plm_reads_to_dtwin"] == reads
    assert host["plm_reads_to_ndwin"] == 0
    # 400 ms of 50 ms windows: 8 windows after the first, four for each copy; each DTWin
    # ends at DTWIN Time Maximum (50 ms) as the other copy takes over.
    assert host["plm_windows"] == 8
    assert ssd["set1_dtwin_entries"] + ssd["set2_dtwin_entries"] == 9
    assert ssd["set1_dtwin_ms"] + ssd["set2_dtwin_ms"] == 400.0
    # Each DTWin that ran out raised the asynchronous event, which the host heard.
    assert ssd["set1_dtwin_exits_time"] + ssd["set2_dtwin_exits_time"] == 8
    assert host["plm_async_events"] == 8


def test_a_set_leaves_dtwin_when_its_read_budget_is_spent_and_the_host_hears_of_it(tmp_path):
    from qoslab.sim.api import stage_counters

    report = plm_run(tmp_path, ["reader"], ["media.gc.plm.dtwin_reads_typical=1000"])
    host, ssd = stage_counters(report, "nvme-host"), stage_counters(report, "ssd")
    exits = {
        why: ssd[f"set1_dtwin_exits_{why}"] + ssd[f"set2_dtwin_exits_{why}"]
        for why in ("reads", "time", "host")
    }
    # About 2,400 reads a window against a budget of 1,000: each of the 8 full windows' DTWin
    # ends on its reads (the ninth begins as the run ends).
    assert exits == {"reads": 8, "time": 0, "host": 0}
    assert host["plm_async_events"] == 8
    # Until the next window no copy is deterministic, which the library learns from the
    # event: a window's DTWin copy got its 1,000 reads, the 1,001st that ended it, and at most
    # the 7 others of the queue depth of 8 already on their way.
    assert host["plm_reads_to_ndwin"] > 0
    assert 8 * 1001 <= host["plm_reads_to_dtwin"] <= 8 * (1001 + 7)


def traced_reader_runs(
    tmp_path: Path,
    sets: list[str],
    key: str,
    values: tuple[str, ...],
    sections: tuple[str, ...] = ("reader",),
):
    """The reader (alone, or with the other `sections`) for 100 ms with `sets`, once with each
    of `key`'s `values`, every read traced (the diagnostic keeps the N slowest, N above the
    run's reads): (reads, the host's counters, the SSD's) by value."""
    import json

    from qoslab.sim import api
    from qoslab.sim.api import stage_counters

    jobs = tmp_path / "reader.fio"
    jobs.write_text(PLM_JOBS.replace("runtime=400ms", "runtime=100ms"))
    runs = {}
    for value in values:
        text = api.run(
            jobs,
            sections=list(sections),
            device="enterprise-tlc-plp",
            sets=[*PLM_DEVICE, *sets, "media.diag.slow_reads=400000", f"{key}={value}"],
            output_format="json",
        )["text"]
        report = json.loads(text)
        reads = report["jobs"][0]["read"]["total_ios"]
        runs[value] = (reads, stage_counters(report, "nvme-host"), stage_counters(report, "ssd"))
    return runs


def test_with_drain_every_read_sent_to_a_copy_in_dtwin_ends_there(tmp_path):
    # Windows of 8 ms, 2 ms before DTWIN Time Maximum (10 ms), so that no DTWin runs out on
    # its own.
    sets = ["media.gc.plm.dtwin_time_max_ns=10ms", "host.plm.handover_ns=2ms"]
    runs = traced_reader_runs(tmp_path, sets, "host.plm.drain", ("false", "true"))
    ended = {}
    for drain, (reads, host, ssd) in runs.items():
        assert ssd["slowest_reads"] == reads == host["plm_reads_to_dtwin"] < 400000
        ended[drain] = (ssd["slowest_done_own_dtwin"], ssd["slowest_done_own_ndwin"])
    # Asked into NDWin at the turn, a copy ends there the reads on their way to it or at it
    # (at most the queue depth of 8 a turn, 12 turns); asked once they are done, none: every
    # read sent to a copy in DTWin arrives and ends in DTWin.
    assert host["plm_windows"] == 12
    assert 0 < ended["false"][1] <= 8 * 12
    assert ended["true"] == (reads, 0)
    assert ssd["slowest_arrival_own_dtwin"] == reads
    assert host["plm_drains"] == 12
    assert 0 < host["plm_drain_max_ms"] < 1


def test_a_window_whose_counts_are_all_used_ends_early_and_serves_its_reads_in_dtwin(tmp_path):
    """The PLMC paper (section III-C): "if all of the available DCs are exhausted early, i.e.
    W_d(n) <= T_DW, the window also ends prematurely. The premature end of the window would
    include the service of all the requests arriving during the window." One host (class high)
    reads 4 KiB at depth 8 for 100 ms, about 1,460 reads a millisecond (the drive is empty); a
    window's C is 10,000 counts (DTWIN Reads Typical) and its T 50 ms, so the counts run out
    after about 7 ms of each."""
    sets = ["host.plm.coordinate=true", "media.gc.plm.dtwin_reads_typical=10000"]
    rules = ("ndwin_copy", "end_window")
    runs = traced_reader_runs(tmp_path, sets, "host.plm.counts_run_out", rules)

    def exits(ssd: dict, why: str) -> float:
        return ssd[f"set1_dtwin_exits_{why}"] + ssd[f"set2_dtwin_exits_{why}"]

    # Today's rule: each window runs its 50 ms (the third begins as the run ends); once its
    # 10,000 counts are used the host's reads go, not covered, to a copy the host does not
    # know to be in DTWin (about 63,000 a window).
    reads, host, ssd = runs["ndwin_copy"]
    assert host["plm_windows"] == 2 and "plm_windows_ended_early" not in host
    assert host["host0_covered_reads"] == 2 * 10000 < reads
    assert host["plm_reads_to_ndwin"] == reads - 2 * 10000

    # The document's: the window whose counts are all used ends there and the next begins, on
    # the other copy with new counts, so every window serves exactly its C reads and no read
    # goes to a copy in NDWin; the last window is the only one that did not end early.
    reads, host, ssd = runs["end_window"]
    early = host["plm_windows_ended_early"]
    assert early == host["plm_windows"] == (reads - 1) // 10000 > 2
    assert host["host0_covered_reads"] == reads == host["plm_reads_to_dtwin"]
    assert host["plm_reads_to_ndwin"] == 0
    # The host, not the drive, ended each window: no DTWin ran past its reads budget or time;
    # each window's copy entered DTWin once.
    assert exits(ssd, "reads") == exits(ssd, "time") == exits(ssd, "excursion") == 0
    assert ssd["set1_dtwin_entries"] + ssd["set2_dtwin_entries"] == early + 1
    # Every read arrived at, was served by and ended at a copy in DTWin, the reads of an
    # ended window's copy included (the drain keeps it in DTWin until they are done).
    assert ssd["slowest_reads"] == reads
    assert ssd["slowest_arrival_own_dtwin"] == ssd["slowest_done_own_dtwin"] == reads
    assert host["plm_drains"] == early


def test_within_budget_no_dtwin_gets_more_reads_than_its_budget_at_a_handover(tmp_path):
    """NVMe: a set leaves DTWin on its own once its reads pass DTWIN Reads Typical; the PLMC
    paper: "a host needs to access the device during DTWin while respecting DTWin attribute
    values". One host (class high) reads 4 KiB at depth 8 for 100 ms, about 1,460 reads a
    millisecond, beside a writer whose destages keep each copy asked into DTWin waiting about
    1.4 ms; a window's C is 10,000 counts, so they are all used in about 7 ms, and the copies
    take turns every 15 ms (DTWIN Time Maximum 20 ms, handed over 5 ms before). While the next
    copy is entering, the window's covered reads go to the previous copy, still in DTWin."""
    sets = [
        "host.plm.coordinate=true",
        "media.gc.plm.dtwin_reads_typical=10000",
        "media.gc.plm.dtwin_time_max_ns=20ms",
        "host.plm.handover_ns=5ms",
    ]
    rules = ("previous_copy", "within_budget")
    runs = traced_reader_runs(
        tmp_path, sets, "host.plm.handover_reads", rules, ("reader", "writer")
    )

    def exits(ssd: dict, why: str) -> float:
        return ssd[f"set1_dtwin_exits_{why}"] + ssd[f"set2_dtwin_exits_{why}"]

    # The rule moves only where those reads go: the same reads, windows and counts either way.
    same = {r: (n, h["plm_windows"], h["host0_covered_reads"]) for r, (n, h, _) in runs.items()}
    assert same["previous_copy"] == same["within_budget"]
    _, host, ssd = runs["previous_copy"]
    assert host["plm_late_windows"] == host["plm_windows"] > 2
    # Today's rule: the previous copy, whose DTWin has had its window's 10,000 reads, gets more;
    # the drive ends that DTWin on its reads and no copy is deterministic until the next enters.
    assert exits(ssd, "reads") > 0 and ssd["no_dtwin_ms"] > 0
    assert host["plm_async_events"] == exits(ssd, "reads")
    # Within the budget: the reads past it go to the entering copy (not in DTWin); no DTWin
    # passes its budget, the host asks every copy out itself, and a copy is deterministic
    # throughout.
    _, host, ssd = runs["within_budget"]
    past = host["plm_handover_reads_past_budget"]
    assert past > 0
    assert host["plm_reads_to_dtwin"] == host["host0_covered_reads"] - past
    assert exits(ssd, "reads") == exits(ssd, "time") == exits(ssd, "excursion") == 0
    assert exits(ssd, "host") == host["plm_drains"] == host["plm_windows"]
    assert ssd["no_dtwin_ms"] == 0 and host["plm_async_events"] == 0


def test_with_hold_a_read_its_counts_do_not_cover_waits_at_the_host_for_a_windows_counts(
    tmp_path, monkeypatch
):
    """The PLMC paper (section III-A): "a host needs to access the device during DTWin while
    respecting DTWin attribute values"; "If the host receives fewer than the required counts
    during DTWin, it can request PLMC for additional DC allocation." One host (class high)
    reads 4 KiB at depth 32 for 100 ms; a window's C is 20 counts and its T 20 ms, so each
    window's counts cover 20 reads and the others wait. fio's submission-latency log gives
    each read's dispatch (ms) and its time from submission to dispatch (ns)."""
    import json

    from qoslab.sim import api
    from qoslab.sim.api import stage_counters

    monkeypatch.chdir(tmp_path)
    jobs = tmp_path / "reader.fio"
    jobs.write_text(
        PLM_JOBS.replace("runtime=400ms", "runtime=100ms").replace(
            "iodepth=8", "iodepth=32\nwrite_lat_log=r\nlog_offset=1"
        )
    )
    sets = [
        *PLM_DEVICE,
        "host.plm.coordinate=true",
        "media.gc.plm.dtwin_reads_typical=20",
        "media.gc.plm.dtwin_time_max_ns=20ms",
        "media.diag.slow_reads=400000",
    ]
    runs = {}
    for rule in ("ndwin_copy", "hold"):
        report = json.loads(
            api.run(
                jobs,
                sections=["reader"],
                device="enterprise-tlc-plp",
                sets=[*sets, f"host.plm.counts_run_out={rule}"],
                fio_logs=True,
            )["text"]
        )
        reads = report["jobs"][0]["read"]["total_ios"]
        runs[rule] = (reads, stage_counters(report, "nvme-host"), stage_counters(report, "ssd"))
    # Today's rule: the reads past the counts go, not covered, to the copy in NDWin.
    reads, host, ssd = runs["ndwin_copy"]
    assert host["plm_reads_to_ndwin"] == reads - host["host0_covered_reads"] > 0
    assert ssd["slowest_arrival_own_ndwin"] > 0

    reads, host, ssd = runs["hold"]
    held = host["plm_reads_held"]
    # None is lost: every read submitted completed, every held one was released.
    assert host["host0_reads"] == reads and held == host["plm_held_released"] > reads / 2
    assert host["plm_held_left"] == 0
    # No held read (no read at all) reached a copy not in DTWin, as the drive saw them; no
    # DTWin got more reads than its budget.
    assert ssd["slowest_reads"] == reads == host["plm_reads_to_dtwin"]
    assert ssd["slowest_arrival_own_dtwin"] == ssd["slowest_done_own_dtwin"] == reads
    assert ssd["set1_dtwin_exits_reads"] + ssd["set2_dtwin_exits_reads"] == 0
    # The log: a read sent at once spent only the driver's submission time (the least); a
    # held one was sent at a window's start (a multiple of 20 ms, plus that time) and arrived
    # before it.
    lines = (tmp_path / "r_slat.1.log").read_text().splitlines()
    rows = [[int(f) for f in line.split(",")[:2]] for line in lines]
    assert len(rows) == reads
    submit = min(slat for _, slat in rows)
    sent = [(ms * 1_000_000 + submit - slat, ms * 1_000_000) for ms, slat in rows if slat > submit]
    # (A read sent at once arrived within the millisecond the log gives.)
    at_once = [ms * 1_000_000 for ms, slat in rows if slat == submit]
    assert len(sent) == held
    assert all(start % 20_000_000 == 0 and arrived < start for arrived, start in sent)
    # In arrival order: a held read that arrived later was never sent before an earlier one,
    # and no read sent at once arrived while an older one waited (the held take the counts
    # first).
    starts = [start for _, start in sorted(sent)]
    assert starts == sorted(starts) and max(starts) > min(starts)
    assert not any(a < t < start for t in at_once for a, start in sent)


def test_writes_reach_every_copy_and_no_gc_runs_on_a_set_in_dtwin(tmp_path):
    from qoslab.sim.api import stage_counters

    report = plm_run(tmp_path, [], ["media.diag.dtwin_audit=true"])
    host, ssd = stage_counters(report, "nvme-host"), stage_counters(report, "ssd")
    by_name = {j["jobname"]: j for j in report["jobs"]}
    reads = by_name["reader"]["read"]["total_ios"]
    writes = by_name["writer"]["write"]["total_ios"]
    assert reads > 0 and writes > 0
    # Every write is a command to each of the two copies; every read one command.
    assert host["commands"] == reads + 2 * writes
    assert host["plm_reads_to_dtwin"] + host["plm_reads_to_ndwin"] == reads
    assert ssd["set1_background_in_dtwin_us"] == ssd["set2_background_in_dtwin_us"] == 0
    assert ssd["host_page_programs"] > 0
    # The latency split adds up to the mean latency of each job.
    for split in report["qoslab"]["latency_split"]:
        job = by_name[split["jobname"]]
        for op, parts in split.items():
            if op == "jobname":
                continue
            mean = job[op]["lat_ns"]["mean"]
            assert abs(sum(parts.values()) - mean) <= 1e-6 * mean
