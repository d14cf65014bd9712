"""`qoslab lab study all` on a real loop device, with 1 s runs, checked against the kernel's and
fio's own bookkeeping: Little's law at every depth, ordered percentiles, metadata, clean-up.
"""

from __future__ import annotations

import json
import re
import tomllib
from pathlib import Path
from types import SimpleNamespace

import pandas as pd
import pytest

from chromium import chromium_probe, needs_chromium
from lab_helpers import lab_env, loops_backed_by, needs_root, qoslab_device, registry_entries
from qoslab.fio import parse_fio_json, read_fio_json

pytestmark = [pytest.mark.root, needs_root]

DEPTHS = [1, 2, 4, 8, 16, 32, 64, 128]


@pytest.fixture(scope="module")
def study_all(tmp_path_factory):
    from conftest import run_qoslab

    tmp = tmp_path_factory.mktemp("study")
    state, backing, out = tmp / "state", tmp / "backing.img", tmp / "out"
    with qoslab_device(run_qoslab, state, backing, size="256M") as device:
        done = run_qoslab(
            "lab",
            "study",
            "all",
            "--target",
            device,
            "--out",
            out,
            "--runtime",
            "1s",
            "--ramp",
            "250ms",
            "--block-sizes",
            "4k,128k",
            "--mixes",
            "100,50,0",
            "--quiet",
            env=lab_env(state),
        )
        assert done.returncode == 0, done.stderr
        yield SimpleNamespace(device=device, out=out, state=state)
    # Clean-up verified: no loop device on the backing file, no file, no record.
    assert loops_backed_by(backing) == []
    assert not backing.exists()
    assert registry_entries(state) == []


def table(out: Path) -> pd.DataFrame:
    return pd.read_parquet(out / "results.parquet")


def test_qd_sweep_obeys_littles_law_at_every_depth(study_all):
    out = study_all.out
    sweep = table(out).query("study == 'qd-sweep'").sort_values("qd")
    assert sweep.qd.tolist() == DEPTHS
    for row in sweep.itertuples():
        in_flight = row.iops * row.lat_mean_us / 1e6
        assert in_flight == pytest.approx(row.qd, rel=0.10), (
            f"QD {row.qd}: {row.iops:.0f} IOPS x {row.lat_mean_us:.1f} us = {in_flight:.2f}, "
            f"fio CPU usr {row.usr_cpu:.1f} % sys {row.sys_cpu:.1f} %"
        )
        assert row.littles_ratio == pytest.approx(in_flight / row.qd)
    summary = json.loads((out / "summary.json").read_text())
    assert [r["qd"] for r in summary["littles_law"]] == DEPTHS


def test_percentiles_are_ordered_in_every_row(study_all):
    out = study_all.out
    t = table(out)
    assert set(t.study) == {"baseline", "bs-sweep", "mix-sweep", "qd-sweep", "tails"}
    assert (t.pct_of == "lat").all()
    for row in t.itertuples():
        assert 0 < row.p50_us <= row.p95_us <= row.p99_us <= row.p99_9_us, row.run
        assert row.lat_min_us <= row.p50_us and row.p99_9_us <= row.lat_max_us * 1.02


def test_table_agrees_with_the_raw_fio_output(study_all):
    out = study_all.out
    t = table(out)
    assert len(t) == t.run.nunique() + 1  # one row per run, two for the 50 % mix
    for row in t.itertuples():
        raw = read_fio_json(out / "raw" / f"{row.run}.json")
        (job,) = raw.jobs  # one job per run, as fio reported it
        op = job.ops[row.op]
        assert row.bs_bytes in (4096, 131072)
        assert row.total_ios == op.total_ios
        assert op.io_bytes / row.bs_bytes == pytest.approx(op.total_ios, rel=0.01)
        # IOPS is what fio counted over the measured time (runtime in ms).
        assert row.iops == pytest.approx(op.total_ios / (op.runtime_ms / 1000), rel=0.01)
    csv = pd.read_csv(out / "results.csv")
    assert csv.run.tolist() == t.run.tolist()


def test_mix_sweep_directions_follow_the_read_share(study_all):
    out = study_all.out
    mix = table(out).query("study == 'mix-sweep'")
    assert set(zip(mix.rwmixread, mix.op, strict=True)) == {
        (100, "read"),
        (50, "read"),
        (50, "write"),
        (0, "write"),
    }
    half = mix[mix.rwmixread == 50].set_index("op")
    assert half.total_ios["read"] / half.total_ios.sum() == pytest.approx(0.5, abs=0.05)


def test_job_files_and_metadata_record_the_run(study_all):
    device, out = study_all.device, study_all.out
    for job_file in (out / "jobs").rglob("*.fio"):
        text = job_file.read_text()
        assert "group_reporting" not in text.replace("no group_reporting", "")
        assert re.search(r"^direct=1$", text, re.M)
        assert re.search(rf"^filename={device}$", text, re.M)
        assert text.count("\n[") == 2  # [global] and one job
    meta_files = list((out / "raw").rglob("*.meta.json"))
    assert len(meta_files) == table(out).run.nunique()
    meta = json.loads(meta_files[0].read_text())
    assert meta["fio_version"].startswith("fio-")
    assert meta["kernel"] == Path("/proc/sys/kernel/osrelease").read_text().strip()
    name = Path(device).name
    assert meta["disk"] == name
    assert meta["loop_dio"] == "1"
    for attr in ("scheduler", "nr_requests", "rotational", "max_sectors_kb"):
        assert attr in meta["queue"]
    assert meta["scheduler"] in meta["queue"]["scheduler"]
    assert "backing_disk" in meta


def test_knee_tails_and_report(study_all):
    out = study_all.out
    summary = json.loads((out / "summary.json").read_text())
    knee = summary["knee"]
    assert knee["rule"] == {"min_gain": 0.1, "tail_ratio": 1.0, "text": knee["rule"]["text"]}
    tails = table(out).query("study == 'tails'").sort_values("qd")
    expected_knee = knee["depth"] or max(DEPTHS)
    assert tails.qd.max() == expected_knee
    html = (out / "report.html").read_text()
    figures = sorted(p.stem for p in (out / "figures").glob("*.png"))
    assert figures == sorted(
        [
            "baseline",
            "bs-sweep",
            "mix-sweep",
            "qd-tradeoff",
            "littles-law",
            "qd-cdf",
            "tails",
            "tails-cdf",
        ]
    )
    assert sorted(p.stem for p in (out / "figures").glob("*.svg")) == figures
    assert html.count("<svg") == len(figures)  # inline, the page stands alone
    assert "Knee" in html or "No knee" in html
    assert not list(out.parent.glob(f".{out.name}.partial-*"))


@needs_chromium
def test_the_report_opens_in_chromium_with_every_figure_drawn(study_all, tmp_path):
    found = chromium_probe(study_all.out / "report.html", tmp_path / "profile")
    assert found["errors"] == [] and all(found["images"])
    assert found["svgs"] == [True] * 8


@pytest.fixture(scope="module")
def calibration(study_all, tmp_path_factory):
    """Two more qd-sweeps of the same device, then `qoslab lab calibrate` on all three."""
    from conftest import run_qoslab

    tmp = tmp_path_factory.mktemp("calibrate")
    sweeps = [study_all.out]
    for i in (2, 3):
        out = tmp / f"sweep{i}"
        done = run_qoslab(
            "lab",
            "study",
            "qd-sweep",
            "--target",
            study_all.device,
            "--out",
            out,
            "--runtime",
            "1s",
            "--ramp",
            "250ms",
            "--quiet",
            env=lab_env(study_all.state),
        )
        assert done.returncode == 0, done.stderr
        sweeps.append(out)
    device_toml = tmp / "loop.toml"
    done = run_qoslab("lab", "calibrate", *sweeps, "--out", device_toml)
    assert done.returncode == 0, done.stderr
    return device_toml, done.stdout, sweeps


def test_calibrated_device_predicts_the_held_out_depths(calibration):
    device_toml, stdout, _ = calibration
    comparison = pd.read_csv(device_toml.with_name("loop.calibration.csv"))
    assert comparison.iodepth.tolist() == DEPTHS
    held = comparison[comparison.role == "held out"]
    assert held.iodepth.tolist() == [2, 8, 32]
    # p50 within 15 % and p99 within 25 % of the measurement, or within how far the three
    # measured sweeps disagree among themselves where that is wider: on a VM whose disk is
    # shared, the tail comes and goes with other load, and a prediction cannot be judged more
    # finely than the measurement repeats. A held-out depth is predicted from the fitted depths
    # either side of it, so their spread counts too (one noisy p99 at QD 4 moves the QD 2
    # prediction). On a quiet machine the spreads are small and 15 % / 25 % is what applies.
    by_depth = comparison.set_index("iodepth")
    fitted_depths = comparison[comparison.role == "fitted"].iodepth.tolist()
    for row in held.itertuples():
        below = max(d for d in fitted_depths if d < row.iodepth)
        above = min(d for d in fitted_depths if d > row.iodepth)
        spread = by_depth.loc[[below, row.iodepth, above]]
        assert abs(row.p50_error) <= max(0.15, *spread.p50_spread), f"QD {row.iodepth}: {row}"
        # The model is linear in depth between measured depths (docs/sim.md), so a p99 it
        # predicts lies between the measured p99s either side; where the measured tail is far
        # from linear in depth (this VM's loop device at QD 64 has had p99s of 10 ms and more
        # beside 1 ms at QD 32), that is the model's limit, and the prediction is judged by it.
        lo, hi = sorted(by_depth.loc[[below, above]].measured_p99_us)
        within_neighbours = lo * 0.999 <= row.predicted_p99_us <= hi * 1.001
        close = abs(row.p99_error) <= max(0.25, *spread.p99_spread)
        assert close or within_neighbours, f"QD {row.iodepth}: {row}"
    fitted = comparison[comparison.role == "fitted"]
    assert (fitted.p50_error.abs() <= 0.05).all()
    assert "held out" in stdout


def test_calibration_writes_a_profile_the_simulator_reads(calibration, qoslab):
    device_toml, _, _ = calibration
    profile = tomllib.loads(device_toml.with_name("loop.profile.toml").read_text())
    assert profile["format"] == "qoslab-empirical-1"
    assert [p["iodepth"] for p in profile["point"]] == [1, 4, 16, 64, 128]
    for point in profile["point"]:
        assert point["clat_ns"] == sorted(point["clat_ns"])
    # Re-run one held-out depth through `qoslab sim` by hand: the table shows what sim says.
    job = device_toml.with_name("qd8.fio")
    job.write_text(
        "[qd8]\nioengine=libaio\ndirect=1\nrw=randread\nbs=4096\niodepth=8\ntime_based\nruntime=2s\n"
    )
    done = qoslab("sim", job, "--device", device_toml, "--output-format", "json")
    assert done.returncode == 0, done.stderr
    sim = parse_fio_json(done.stdout).jobs[0].ops["read"].latency["clat"]
    row = pd.read_csv(device_toml.with_name("loop.calibration.csv")).set_index("iodepth").loc[8]
    # Another seed stream (one job, not the sweep's eight): the same distribution.
    assert sim.percentiles_ns[50.0] / 1e3 == pytest.approx(row.predicted_p50_us, rel=0.03)
    html = device_toml.with_name("loop.calibration.html").read_text()
    assert html.count("<svg") == 1


def test_calibration_is_deterministic(calibration, tmp_path):
    from conftest import run_qoslab

    device_toml, _, sweeps = calibration
    again = tmp_path / "loop.toml"
    done = run_qoslab("lab", "calibrate", *sweeps, "--out", again)
    assert done.returncode == 0, done.stderr
    # Same measurements, same seed: the same profile and comparison, byte for byte.
    for suffix in (".profile.toml", ".calibration.csv"):
        first = device_toml.with_name(f"loop{suffix}").read_bytes()
        assert again.with_name(f"loop{suffix}").read_bytes() == first


@needs_chromium
def test_the_calibration_report_opens_in_chromium_with_its_figure_drawn(calibration, tmp_path):
    device_toml, _, _ = calibration
    page = device_toml.with_name(f"{device_toml.stem}.calibration.html")
    found = chromium_probe(page, tmp_path / "profile")
    assert found["errors"] == [] and all(found["images"])
    assert found["svgs"] == [True]
    assert "Measured vs predicted" in found["text"]
