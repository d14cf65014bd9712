"""One run, four of fio's outputs: JSON, json+, terse and the latency logs agree.

The checks are those of fio's own t/latency_percentiles.py, with the rules of fio 3.33's
stat.c: a percentile is the value of the first json+ bin whose running count reaches p % of
the samples (so every percentile is a bin's key), json+ is the JSON plus the bins, the bins
count N samples from near min to near max (within fio's bucket error of 1/128), and a terse
field is the JSON's number in µs: whole µs cut down (`ovals[i] / 1000`), means and deviations
with six decimals; with `lat_percentiles=1` the terse percentiles are the total latency's.
The percentiles are recomputed independently here, from the bins, by
`qoslab.fio.percentiles_from_bins`, which reproduces fio's own JSON from its own bins
(tests/test_fio_installed.py). Every check runs on real fio 3.33's output of the same jobs
(on a file) too, so the rules are fio's, not qoslab's reading of them.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess

import pytest

from qoslab.fio import percentiles_from_bins
from qoslab.fio.logs import read_fio_log

FIO = shutil.which("fio")

JOBS = [
    "--ioengine=libaio",
    "--direct=1",
    "--bs=4k",
    "--name=reader",
    "--rw=randread",
    "--iodepth=8",
    "--number_ios=4000",
    "--percentile_list=1:25:50:90:99:99.5:99.9",
    "--name=mixed",
    "--rw=randrw",
    "--iodepth=4",
    "--number_ios=3000",
    "--lat_percentiles=1",
    "--name=writer",
    "--ioengine=psync",
    "--rw=randwrite",
    "--number_ios=1500",
]
OPS = ("read", "write")


def fio_file(tmp_path) -> list[str]:
    """Real fio's target: a 16 MiB file (never a block device)."""
    return [f"--filename={tmp_path / 'data'}", "--size=16m"]


def produce(producer: str, qoslab, tmp_path, args: list[str]) -> str:
    if producer == "fio":
        if FIO is None:
            pytest.skip("fio is installed by make tools")
        done = subprocess.run(
            [FIO, *fio_file(tmp_path), *args], capture_output=True, text=True, cwd=tmp_path
        )
    else:
        done = qoslab("sim", *args, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    return done.stdout


def split_terse_json(text: str) -> tuple[list[list[str]], dict, list[str]]:
    """`--output-format=json+,terse[,normal]`: the terse lines come first, then the JSON
    document (to its closing brace alone on a line), then the normal output."""
    lines = text.splitlines()
    terse = [line.split(";") for line in lines if line.startswith("3;")]
    start = next(i for i, line in enumerate(lines) if line.startswith("{"))
    end = lines.index("}", start)
    return terse, json.loads("\n".join(lines[start : end + 1])), lines[end + 1 :]


JOB_HEADER = re.compile(r"^(\S+): \(groupid=")
DIRECTION = re.compile(r"^\s+(read|write|trim): IOPS=")
CLAT_PERCENTILES = re.compile(r"^\s+clat percentiles \((nsec|usec|msec)\):")
CELL = re.compile(r"(\d+\.\d+)th=\[\s*(\d+)\]")


def normal_percentiles(lines: list[str]) -> dict[tuple[str, str], tuple[str, list[int]]]:
    """The normal output's completion-latency percentile blocks: (job, op) -> (unit, values)."""
    found: dict[tuple[str, str], tuple[str, list[int]]] = {}
    job = op = None
    block = None
    for line in lines:
        if block is not None:
            if line.startswith("     |"):
                block[1].extend(int(v) for _, v in CELL.findall(line))
                continue
            block = None
        if m := JOB_HEADER.match(line):
            job = m.group(1)
        elif m := DIRECTION.match(line):
            op = m.group(1)
        elif m := CLAT_PERCENTILES.match(line):
            block = found[(job, op)] = (m.group(1), [])
    return found


def similar(approximation: int, actual: int) -> bool:
    """t/latency_percentiles.py: fio's bins are within 1/128 of the value they hold."""
    if actual == 0:
        return approximation == 0
    return abs(approximation - actual) / actual <= 1 / 128


def without_bins(doc):
    if isinstance(doc, dict):
        return {k: without_bins(v) for k, v in doc.items() if k != "bins"}
    if isinstance(doc, list):
        return [without_bins(v) for v in doc]
    return doc


def percentile_kinds(job: dict) -> list[str]:
    lat_percentiles = job["job options"].get("lat_percentiles") == "1"
    return ["clat", "lat"] if lat_percentiles else ["clat"]


def us(ns: int) -> str:
    return str(ns // 1000)


# Terse version 3, per direction (fio's HOWTO, "Terse output"): kb, bw, iops, runtime, slat
# (4), clat (4), 20 percentiles, lat (4), bw (5).
DIRECTION_FIELDS = 41
FIRST_DIRECTION = 5


@pytest.fixture(scope="module", params=["qoslab", "fio"])
def outputs(request, tmp_path_factory):
    from conftest import run_qoslab

    tmp = tmp_path_factory.mktemp(request.param)
    text = produce(request.param, run_qoslab, tmp, [*JOBS, "--output-format=json+,terse,normal"])
    return (request.param, *split_terse_json(text))


@pytest.mark.parametrize("producer", ["qoslab"])
def test_json_is_json_plus_without_its_bins_and_terse_alone_is_the_same(qoslab, tmp_path, producer):
    # fio's timings differ run to run; the simulator's do not, so one run of each format
    # alone must give the same numbers as the run of all of them.
    plus_and_terse = produce(producer, qoslab, tmp_path, [*JOBS, "--output-format=json+,terse"])
    terse, plus, _ = split_terse_json(plus_and_terse)
    plain = json.loads(produce(producer, qoslab, tmp_path, [*JOBS, "--output-format=json"]))
    assert plain == without_bins(plus)
    alone = produce(producer, qoslab, tmp_path, [*JOBS, "--output-format=terse"])
    assert [line.split(";") for line in alone.splitlines()] == terse
    assert any("bins" in job["read"]["clat_ns"] for job in plus["jobs"])


def test_json_plus_bins_hold_the_json_percentiles_min_max_and_count(outputs):
    producer, _, plus, _ = outputs
    checked = 0
    for job in plus["jobs"]:
        for op in OPS:
            for kind in percentile_kinds(job):
                lat = job[op][f"{kind}_ns"]
                if lat["N"] == 0:
                    assert "bins" not in lat and "percentile" not in lat
                    continue
                bins = {int(k): v for k, v in lat["bins"].items()}
                assert sum(bins.values()) == lat["N"], (producer, job["jobname"], op, kind)
                assert similar(min(bins), lat["min"]) and similar(max(bins), lat["max"])
                want = {float(p): v for p, v in lat["percentile"].items()}
                got = percentiles_from_bins(bins, want)
                assert got == want, (producer, job["jobname"], op, kind)
                checked += 1
    assert checked == 6  # reader read; mixed read and write, clat and lat; writer write


def test_terse_fields_are_the_jsons_in_microseconds(outputs):
    producer, terse, plus, _ = outputs
    assert [t[2] for t in terse] == [j["jobname"] for j in plus["jobs"]]
    for fields, job in zip(terse, plus["jobs"], strict=True):
        for d, op in enumerate(OPS):
            f = fields[FIRST_DIRECTION + d * DIRECTION_FIELDS :][:DIRECTION_FIELDS]
            o = job[op]
            where = (producer, job["jobname"], op)
            assert f[0] == str(o["io_kbytes"]), where
            assert f[1] == str(o["bw"]), where
            assert f[2] == str(int(o["iops"])), where
            assert f[3] == str(o["runtime"]), where
            for at, kind in ((4, "slat"), (8, "clat"), (32, "lat")):
                lat = o[f"{kind}_ns"]
                assert f[at : at + 2] == [us(lat["min"]), us(lat["max"])], (*where, kind)
                # fio's terse line formats its unrounded mean and deviation, where the JSON
                # holds them already rounded, so the two may differ by one in the sixth
                # decimal (real fio 3.33: 312.964189 against 312.964188 from the JSON)
                got = [float(x) for x in f[at + 2 : at + 4]]
                want = [lat["mean"] / 1000, lat["stddev"] / 1000]
                assert got == pytest.approx(want, rel=0, abs=1.5e-6), (*where, kind)
            # With lat_percentiles the terse percentiles are the total latency's (stat.c).
            kind = percentile_kinds(job)[-1]
            pct = o[f"{kind}_ns"].get("percentile", {})
            want = [f"{float(p):.6f}%={us(v)}" for p, v in pct.items()]
            if o[f"{kind}_ns"]["N"] == 0:
                # An idle direction: fio's list with zeros.
                want = [f"{float(p):.6f}%=0" for p in next(iter_percentiles(job))]
            want += ["0%=0"] * (20 - len(want))
            assert f[12:32] == want, where


def iter_percentiles(job: dict):
    for op in OPS:
        if "percentile" in job[op]["clat_ns"]:
            yield list(job[op]["clat_ns"]["percentile"])


LOGGED = [
    "--ioengine=libaio",
    "--direct=1",
    "--bs=4k",
    "--name=logged",
    "--rw=randread",
    "--iodepth=4",
    "--time_based",
    "--runtime=200ms",
    "--log_avg_msec=20",
    "--write_lat_log=logged",
    "--write_iops_log=logged",
    "--output-format=json",
]


@pytest.mark.parametrize("producer", ["qoslab", "fio"])
def test_averaged_latency_log_agrees_with_the_json(qoslab, tmp_path, producer):
    report = json.loads(produce(producer, qoslab, tmp_path, LOGGED))
    clat = report["jobs"][0]["read"]["clat_ns"]
    log = read_fio_log(tmp_path / "logged_clat.1.log")
    iops = read_fio_log(tmp_path / "logged_iops.1.log")
    assert set(log.op) == {"read"} and len(log) >= 5
    # A window's mean lies within the run's range, and the run's mean within the windows'.
    assert log.value.between(clat["min"], clat["max"]).all()
    assert log.value.min() - 1 <= clat["mean"] <= log.value.max() + 1
    if producer == "qoslab":
        # Simulated windows are exact (fio's close when its timer next looks): every window but
        # the last lasts log_avg_msec and holds IOPS x 20 ms I/Os, a whole number; the last
        # holds the rest of the run's I/Os (those in flight at the runtime's end complete
        # after it, as in fio). The window means weighted by those counts give the run's mean,
        # to the rounding of the logged values.
        assert list(log.time_ms) == list(iops.time_ms)
        full, last = log.iloc[:-1], log.iloc[-1]
        assert (full.time_ms.diff().dropna() == 20).all()
        ios = iops.value.iloc[:-1] * 20 / 1000
        assert (ios - ios.round()).abs().max() < 1e-9
        rest = clat["N"] - ios.sum()
        assert rest > 0
        weighted = ((full.value * ios).sum() + last.value * rest) / clat["N"]
        assert weighted == pytest.approx(clat["mean"], abs=0.5)
