"""The knee rule, Little's law bookkeeping, the lab's units and priority syntax."""

from __future__ import annotations

import math

import pandas as pd
import pytest

from qoslab.errors import InputError
from qoslab.lab.analysis import KneeRule, add_littles_law, find_knee, knee_steps
from qoslab.lab.plans import StudyOptions, plan, tails_depths
from qoslab.lab.sched_jobs import prio_options
from qoslab.units import parse_duration, parse_size


def saturating_sweep(capacity_qd: int, per_io_us: float = 100.0) -> pd.DataFrame:
    """A device with `capacity_qd` parallel units of fixed service time: below that depth IOPS
    grow linearly at constant latency, above it IOPS stay flat and latency grows with depth
    (closed queueing network with c servers, deterministic service)."""
    rows = []
    for qd in (1, 2, 4, 8, 16, 32, 64, 128):
        busy = min(qd, capacity_qd)
        iops = busy / (per_io_us * 1e-6)
        latency_us = qd / iops * 1e6
        rows.append({"qd": qd, "iops": iops, "p99_us": latency_us})
    return pd.DataFrame(rows)


@pytest.mark.parametrize("capacity", [4, 16, 32])
def test_knee_is_the_saturation_depth_of_a_parallel_device(capacity):
    knee = find_knee(saturating_sweep(capacity), KneeRule())
    assert knee.depth == capacity
    assert knee.iops == pytest.approx(capacity / 100e-6)


def test_no_knee_while_throughput_keeps_doubling():
    knee = find_knee(saturating_sweep(1024), KneeRule())
    assert knee.depth is None
    assert math.isnan(knee.iops)


def test_knee_rule_normalises_growth_per_doubling():
    # Depths 1, 4, 16: a x4 IOPS gain over two doublings is a 100 % gain per doubling.
    sweep = pd.DataFrame({"qd": [1, 4, 16], "iops": [1e4, 4e4, 4.2e4], "p99_us": [100, 100, 400]})
    steps = knee_steps(sweep, KneeRule())
    assert steps.iops_gain_per_doubling.tolist() == pytest.approx([1.0, 1.05**0.5 - 1])
    assert steps.p99_growth_per_doubling.tolist() == pytest.approx([0.0, 1.0])
    assert steps.past_knee.tolist() == [False, True]
    assert find_knee(sweep, KneeRule()).depth == 4


def test_knee_rule_parameters_move_the_knee():
    # IOPS gain per doubling: 100 %, 50 %, 20 %, 5 %; p99 doubles on each of the last steps.
    sweep = pd.DataFrame(
        {"qd": [1, 2, 4, 8, 16], "iops": [1, 2, 3, 3.6, 3.78], "p99_us": [1, 1, 2, 4, 8]}
    )
    assert find_knee(sweep, KneeRule(min_gain=0.10)).depth == 8
    assert find_knee(sweep, KneeRule(min_gain=0.30)).depth == 4
    # p99 growth (100 %) must exceed 10x the IOPS gain (5 %): not the case.
    assert find_knee(sweep, KneeRule(min_gain=0.10, tail_ratio=25.0)).depth is None


def test_littles_ratio_sums_the_directions_of_a_run():
    table = pd.DataFrame(
        {
            "run": ["a", "a", "b"],
            "job_index": [0, 0, 0],
            "iodepth": [8, 8, 2],
            "numjobs": [1, 1, 1],
            "littles_l": [6.0, 2.0, 1.0],
        }
    )
    out = add_littles_law(table)
    assert out.littles_ratio.tolist() == [1.0, 1.0, 0.5]


def test_tails_depths_default_to_knee_and_its_geometric_middle():
    assert tails_depths(StudyOptions(), 16) == (4, 16)
    assert tails_depths(StudyOptions(), None) == (2 ** round(math.log2(128) / 2), 128)
    assert tails_depths(StudyOptions(mid_depth=3, knee_depth=9), 16) == (3, 9)


def test_every_study_point_is_one_job_without_group_reporting():
    opts = StudyOptions()
    counts = {s: len(plan(s, opts)) for s in ("baseline", "bs-sweep", "mix-sweep", "qd-sweep")}
    assert counts == {"baseline": 4, "bs-sweep": 14, "mix-sweep": 4, "qd-sweep": 8}
    for s in counts:
        for p in plan(s, opts):
            assert "group_reporting" not in p.job.options
            assert "numjobs" not in p.job.options


@pytest.mark.parametrize(
    ("text", "nbytes"),
    # fio's HOWTO, "Examples with kb_base=1024 (default)"; fio 3.33 reads `4KiB` as 4000.
    [
        ("4k", 4096),
        ("4KB", 4096),
        ("4KiB", 4000),
        ("256M", 256 << 20),
        ("10G", 10 << 30),
        ("512", 512),
    ],
)
def test_sizes_read_as_fio_reads_them(text, nbytes):
    assert parse_size(text) == nbytes


@pytest.mark.parametrize(
    ("text", "seconds"), [("30s", 30), ("500ms", 0.5), ("2m", 120), ("1.5", 1.5)]
)
def test_durations(text, seconds):
    assert parse_duration(text) == seconds


@pytest.mark.parametrize("text", ["", "4q", "-1G", "1.5k", "0"])
def test_bad_sizes_name_the_option(text):
    with pytest.raises(ValueError, match="--size"):
        parse_size(text, "--size")


def test_priorities_map_to_fio_prioclass_and_prio():
    assert prio_options("be1", "--db-prio") == {"prioclass": 2, "prio": 1}
    assert prio_options("rt0", "--db-prio") == {"prioclass": 1, "prio": 0}
    assert prio_options("idle", "--backup-prio") == {"prioclass": 3}
    with pytest.raises(InputError, match="--backup-prio: expected"):
        prio_options("be9", "--backup-prio")
