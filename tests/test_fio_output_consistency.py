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

import itertools
import json
import math
import re
import shutil
import subprocess
import tempfile
from pathlib import Path

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


PERCENTILE_BLOCK = re.compile(r"^\s+(clat|lat) percentiles \((?:nsec|usec|msec)\):")


def normal_percentile_blocks(lines: list[str]) -> dict[tuple[str, str, str], list[str]]:
    """The normal output's percentile blocks as written: (job, op, kind) -> their lines."""
    found: dict[tuple[str, str, str], list[str]] = {}
    job = op = None
    block = None
    for line in lines:
        if block is not None and line.startswith("     |"):
            block.append(line)
            continue
        block = None
        if m := JOB_HEADER.match(line):
            job = m.group(1)
        elif m := DIRECTION.match(line):
            op = m.group(1)
        elif m := PERCENTILE_BLOCK.match(line):
            block = found[(job, op, m.group(1))] = [line]
    return found


def fio_percentile_block(kind: str, percentiles: dict[str, int], precision: int) -> list[str]:
    """fio 3.33's stat.c, show_clat_percentiles, from the JSON's percentiles (ns): the unit
    from the smallest and largest value, each value rounded up to it, as wide as the largest
    one's whole units (at least 5), labels with the list's precision, as many cells a line as
    fit in 73 columns, a comma after each but the last."""
    labels = sorted(percentiles, key=float)
    values = [percentiles[k] for k in labels]
    lo, hi = min(values), max(values)
    if lo > 2_000_000 and hi > 99_999_999:
        unit, div = "msec", 1_000_000
    elif lo > 2000 and hi > 99_999:
        unit, div = "usec", 1000
    else:
        unit, div = "nsec", 1
    width = max(5, len(str(hi // div)))
    per_line = 73 // (precision + 10 + width)
    cells = [
        f" {float(k):{precision + 3}.{precision}f}th=[{-(-v // div):{width}d}]"
        for k, v in zip(labels, values, strict=True)
    ]
    rows = [cells[i : i + per_line] for i in range(0, len(cells), per_line)]
    return [f"    {kind} percentiles ({unit}):"] + [
        "     |" + ",".join(row) + ("" if i == len(rows) - 1 else ",") for i, row in enumerate(rows)
    ]


def test_the_normal_outputs_percentile_rows_are_fios(outputs):
    """Each percentile block of the normal output is the JSON's percentiles as fio writes them
    (and `lat_percentiles=1` adds the total latency's block after the completion's)."""
    _, _, report, normal = outputs
    blocks = normal_percentile_blocks(normal)
    expected = {}
    for job in report["jobs"]:
        listed = job["job options"].get("percentile_list", "1:99.95")
        precision = max(len(p.partition(".")[2]) for p in listed.split(":"))
        for op in OPS:
            for kind in percentile_kinds(job):
                percentiles = job[op][f"{kind}_ns"].get("percentile")
                if job[op]["total_ios"] and percentiles:
                    block = fio_percentile_block(kind, percentiles, precision)
                    expected[(job["jobname"], op, kind)] = block
    assert blocks == expected


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


LAT_KINDS = ("lat", "clat", "slat")


def averaged_as_fio_does(per_io, avg_ms: int, end_ms: int) -> list[tuple[int, int, int]]:
    """fio 3.33's averaged log (stat.c, add_log_sample with log_avg_msec) made from the
    per-I/O samples of the same run: (time, value, ddir) lines. Each direction's window
    starts at 0; a sample at least avg_ms after its window's start closes it, itself
    included: the line is the window's mean + 0.5 truncated, at the sample's time, and the
    next window starts at that time rounded down to a multiple of avg_ms. The job's end
    writes the open windows, read, write, trim."""
    lines = []
    start = [0, 0, 0]
    open_ = [[], [], []]
    for t, v, d in zip(per_io.time_ms, per_io.value, per_io.ddir, strict=True):
        t, d = int(t), int(d)
        open_[d].append(int(v))
        if t >= start[d] and t - start[d] >= avg_ms:
            lines.append((t, int(sum(open_[d]) / len(open_[d]) + 0.5), d))
            open_[d] = []
            start[d] = t - t % avg_ms
    for d in range(3):
        if open_[d]:
            lines.append((end_ms, int(sum(open_[d]) / len(open_[d]) + 0.5), d))
    return lines


def raw_log(path):
    frame = read_fio_log(path)
    frame["ddir"] = frame.op.map({"read": 0, "write": 1, "trim": 2})
    return frame


PER_IO = [
    # First: fio prints a line per job it reads while its format is still normal.
    "--output-format=json",
    "--ioengine=libaio",
    "--direct=1",
    "--bs=4k",
    "--log_offset=1",
    "--name=each",
    "--rw=randrw",
    "--iodepth=4",
    "--number_ios=2000",
    "--write_lat_log=each",
    "--write_bw_log=each",
    "--write_iops_log=each",
    "--name=sync",
    "--ioengine=psync",
    "--rw=randread",
    "--number_ios=500",
    "--write_lat_log=sync",
]


@pytest.mark.parametrize("producer", ["qoslab", "fio"])
def test_per_io_logs_hold_every_io_of_the_json(qoslab, tmp_path, producer):
    report = json.loads(produce(producer, qoslab, tmp_path, PER_IO))
    each, sync = report["jobs"]
    names = {p.name for p in tmp_path.glob("*.log")}
    assert names == {f"each_{k}.1.log" for k in (*LAT_KINDS, "bw", "iops")} | {
        f"sync_{k}.2.log" for k in LAT_KINDS
    }
    for job, number in ((each, 1), (sync, 2)):
        for kind in LAT_KINDS:
            path = tmp_path / f"{job['jobname']}_{kind}.{number}.log"
            lines = path.read_text().splitlines()
            # log_offset=1: time, value, direction, block size, offset, priority.
            assert all(len(line.split(", ")) == 6 for line in lines), (producer, path)
            log = raw_log(path)
            if log.empty:
                assert all(job[op][f"{kind}_ns"]["N"] == 0 for op in OPS), (producer, path)
                continue
            assert log.time_ms.is_monotonic_increasing or kind == "slat"
            assert (log.bs == 4096).all() and (log.offset % 4096 == 0).all()
            assert (log.prio == 0).all()
            assert log.time_ms.max() <= job["job_runtime"]
            for op in OPS:
                want = job[op][f"{kind}_ns"]
                values = log.value[log.op == op]
                where = (producer, job["jobname"], kind, op)
                # One line per I/O of the JSON, with its min, max and mean.
                assert len(values) == want["N"], where
                if want["N"] == 0:
                    continue
                assert (values.min(), values.max()) == (want["min"], want["max"]), where
                assert values.mean() == pytest.approx(want["mean"], rel=1e-9, abs=0.01), where
                # t/latency_percentiles.py: each JSON percentile is within fio's bucket error
                # of the I/O at its rank in the log.
                ranked = sorted(values)
                for p, v in want.get("percentile", {}).items():
                    rank = max(math.ceil(float(p) / 100 * len(ranked)), 1)
                    assert similar(v, ranked[rank - 1]), (*where, p)
    # A synchronous engine has no submission latency: fio's sync_slat log is empty.
    assert sync["read"]["slat_ns"]["N"] == 0
    # Bandwidth per I/O is fio's bytes * 1e6 / clat, line for line with the clat log; those
    # per-I/O values are then the JSON's bandwidth samples, as the IOPS ones are 1 per I/O.
    clat = raw_log(tmp_path / "each_clat.1.log")
    bw = raw_log(tmp_path / "each_bw.1.log")
    iops = raw_log(tmp_path / "each_iops.1.log")
    # One line per I/O, in the clat log's order. fio stamps its bandwidth and IOPS samples with
    # a time of their own, so a line may sit one millisecond from its clat line (real fio 3.33:
    # one line of a fresh clone's run, 60 against 61 ms); qoslab's are the same instant.
    slack = 1 if producer == "fio" else 0
    for other in (bw, iops):
        assert len(other) == len(clat), producer
        gaps = (other.time_ms.to_numpy() - clat.time_ms.to_numpy()).tolist()
        assert max(abs(g) for g in gaps) <= slack, producer
    assert list(bw.value) == [4096 * 10**6 // c for c in clat.value]
    assert (iops.value == 1).all()
    for op in OPS:
        o = each[op]
        assert o["bw_samples"] == o["iops_samples"] == o["total_ios"], (producer, op)
        assert (o["bw_min"], o["bw_max"]) == (
            bw.value[bw.op == op].min(),
            bw.value[bw.op == op].max(),
        )
        assert (o["iops_min"], o["iops_max"], o["iops_mean"]) == (1, 1, 1.0)


@pytest.mark.parametrize("producer", ["qoslab", "fio"])
def test_averaged_latency_log_agrees_with_the_json(qoslab, tmp_path, producer):
    # Real fio runs 1 s: on a loaded machine its submissions stall for tens of ms (seen: 4
    # windows in a 200 ms run, slat 30 ms), and fewer windows would check nothing.
    runtime = "--runtime=1s" if producer == "fio" else "--runtime=200ms"
    args = [runtime if a.startswith("--runtime") else a for a in LOGGED]
    report = json.loads(produce(producer, qoslab, tmp_path, args))
    read = report["jobs"][0]["read"]
    for kind in LAT_KINDS:
        want = read[f"{kind}_ns"]
        log = read_fio_log(tmp_path / f"logged_{kind}.1.log")
        assert set(log.op) == {"read"} and len(log) >= 5, (producer, kind)
        assert (log.bs == 0).all() and (log.prio == 0).all()
        # A window's mean lies within the run's range, and the run's mean within the windows'.
        assert log.value.between(want["min"], want["max"]).all(), (producer, kind)
        assert log.value.min() - 1 <= want["mean"] <= log.value.max() + 1, (producer, kind)
        # fio's windows: each but the last closes at least 20 ms after the start of its window
        # (the previous line's time rounded down to 20 ms).
        times = list(log.time_ms)
        starts = [0] + [t - t % 20 for t in times[:-2]]
        assert all(t - s >= 20 for t, s in zip(times[:-1], starts, strict=True)), (producer, kind)
    if producer == "qoslab":
        # The simulator runs the same I/Os with the per-I/O log: fio's averaging rule applied
        # to it (written out above, independently) gives the averaged log line for line.
        per_io = tmp_path / "per_io"
        per_io.mkdir()
        args = [a for a in LOGGED if not a.startswith("--log_avg_msec")]
        again = json.loads(produce(producer, qoslab, per_io, args))
        assert again["jobs"][0]["read"]["clat_ns"] == read["clat_ns"]
        for kind in LAT_KINDS:
            log = raw_log(tmp_path / f"logged_{kind}.1.log")
            end = int(log.time_ms.max())
            want = averaged_as_fio_does(raw_log(per_io / f"logged_{kind}.1.log"), 20, end)
            got = list(zip(log.time_ms, log.value, log.ddir, strict=True))
            assert got == want, kind


SYNCED = [
    # First: fio prints a line per job it reads while its format is still normal.
    "--output-format=json+",
    "--ioengine=psync",
    "--direct=1",
    "--bs=4k",
    "--name=synced",
    "--rw=randwrite",
    "--fsync=4",
    "--number_ios=400",
    "--percentile_list=10:50:90:99",
]


@pytest.mark.parametrize("producer", ["qoslab", "fio"])
def test_sync_latency_has_percentiles_and_bins_like_the_directions(qoslab, tmp_path, producer):
    job = json.loads(produce(producer, qoslab, tmp_path, SYNCED))["jobs"][0]
    sync = job["sync"]
    lat = sync["lat_ns"]
    # fio issues the fsync when it fetches the next write: none after the job's last write.
    assert sync["total_ios"] == lat["N"] == 99
    # fio counts the syncs at their depth (1 here) and divides by the writes: 499 / 400.
    assert job["iodepth_level"]["1"] == 124.75
    assert list(lat["percentile"]) == ["10.000000", "50.000000", "90.000000", "99.000000"]
    bins = {int(k): v for k, v in lat["bins"].items()}
    assert sum(bins.values()) == lat["N"]
    assert similar(min(bins), lat["min"]) and similar(max(bins), lat["max"])
    want = {float(p): v for p, v in lat["percentile"].items()}
    assert percentiles_from_bins(bins, want) == want, producer


STRACE = shutil.which("strace")


def syncs_issued(
    producer: str, qoslab, tmp_path, args: list[str], engine: str = "psync", files: bool = False
) -> tuple[dict, int]:
    """One job of 4 KiB writes (psync unless said; on a file of its own, or with `files` on
    files fio makes in tmp_path): its JSON and the syncs it really issued: the fsync and
    fdatasync calls strace counts in real fio, the FLUSHes qoslab's block layer saw."""
    args = ["--output-format=json", f"--ioengine={engine}", "--bs=4k", "--name=w", *args]
    if producer == "qoslab":
        report = json.loads(produce(producer, qoslab, tmp_path, ["--direct=1", *args]))
        (block,) = (s["counters"] for s in report["qoslab"]["stages"] if s["stage"] == "block")
        return report["jobs"][0], block["flushes_sent"] + block["flushes_not_sent"]
    if FIO is None or STRACE is None:
        pytest.skip("fio and strace are installed by make tools")
    trace = tmp_path / "strace.txt"
    strace = [STRACE, "-f", "-c", "-e", "trace=fsync,fdatasync", "-o", str(trace)]
    done = subprocess.run(
        [*strace, FIO, *([f"--directory={tmp_path}"] if files else fio_file(tmp_path)), *args],
        capture_output=True,
        text=True,
        cwd=tmp_path,
    )
    assert done.returncode == 0, done.stderr
    calls = sum(
        int(line.split()[3])
        for line in trace.read_text().splitlines()
        if line.split()[-1:] in (["fsync"], ["fdatasync"])
    )
    return json.loads(done.stdout)["jobs"][0], calls


# (options, writes, syncs timed, fsyncs counted, syncs issued). fio's rule ("sync the file
# after every N writes issued", man fio) as fio 3.33 applies it: at the fetch of the next write,
# so none after the last write of a job that runs out of writes: (writes - 1) // N; where
# fsync=N and fdatasync=M are both due, the fsync (its get_rw_ddir asks fsync first). end_fsync
# and fsync_on_close sync once more at the end if the file is unsynced (fsync_on_close: "fsync a
# dirty file on close"; after end_fsync it is clean), and the JSON counts neither. The JSON's
# sync.lat_ns times every periodic fsync and fdatasync; its total_ios counts the fsyncs only
# (fio 3.33's total_io_u has no slot for fdatasync).
SYNC_RULES = [
    (["--fsync=1"], 10, 9, 9, 9),
    (["--fsync=1"], 1, 0, 0, 0),
    (["--fsync=3"], 10, 3, 3, 3),
    (["--fsync=4"], 4, 0, 0, 0),
    (["--fsync=7"], 8, 1, 1, 1),
    (["--fdatasync=4"], 10, 2, 0, 2),
    (["--fsync=4", "--fdatasync=2"], 10, 4, 2, 4),
    (["--fdatasync=3", "--fsync=2"], 13, 8, 6, 8),
    (["--fsync=4", "--fdatasync=0"], 10, 2, 2, 2),
    (["--end_fsync=1"], 10, 0, 0, 1),
    (["--fsync_on_close=1"], 10, 0, 0, 1),
    (["--fsync=4", "--end_fsync=1"], 8, 1, 1, 2),
    (["--fsync=4", "--fsync_on_close=1"], 4, 0, 0, 1),
    (["--fsync=4", "--end_fsync=1", "--fsync_on_close=1"], 10, 2, 2, 3),
    (["--fdatasync=1", "--fsync_on_close=1"], 3, 2, 0, 3),
]


@pytest.mark.parametrize("producer", ["qoslab", "fio"])
@pytest.mark.parametrize(("options", "writes", "timed", "fsyncs", "issued"), SYNC_RULES)
def test_a_job_syncs_when_it_fetches_the_next_write_and_once_at_its_end(
    qoslab, tmp_path, producer, options, writes, timed, fsyncs, issued
):
    args = ["--rw=write", f"--number_ios={writes}", *options]
    job, calls = syncs_issued(producer, qoslab, tmp_path, args)
    assert job["write"]["total_ios"] == writes
    assert job["sync"]["lat_ns"]["N"] == timed
    assert job["sync"]["total_ios"] == fsyncs
    assert calls == issued
    # fio counts each periodic sync in iodepth_level (at depth 1 here: psync), though not in
    # the divisor, the writes; the end's sync is in neither.
    assert job["iodepth_level"] == {
        "1": pytest.approx(100 * (writes + timed) / writes, abs=1e-6),
        **dict.fromkeys(["2", "4", "8", "16", "32", ">=64"], 0.0),
    }


# libaio's fsync=N (fio 3.33, engines/libaio.c fio_libaio_queue): Linux has no asynchronous
# fsync, so the engine calls fsync(2) at once, beside every write it has submitted and not
# reaped; only while it holds writes not yet submitted (iodepth_batch_submit) does it answer
# busy, and fio then submits them, reaps as when busy (wait_for_completions) and queues the sync
# again. A sync is due at a fetch where the writes issued are a multiple of N and the job has
# reaped a read or write since its last sync (io_completed keeps last_was_sync). Measured with
# strace (io_submit, io_getevents, fsync; 3 runs each, the same calls every time), the writes
# in flight at each fsync: [3, 3, 3]; [4, 7, 7, 7, 7, 7, 7] (no reap while the queue has room);
# [3, 7, 7, 7, 7, 7] (`S3 S1 G1 F`: busy, submit, reap, fsync; after it 4 writes go before the
# next reap, so a multiple of 4 passes with no sync); [1, 3, 3, 3, 3, 3, 3, 3, 3] (fsync=1: the
# writes after a sync go until one is reaped); [4, 6, 6, 6, 6]. fio counts each sync in
# iodepth_level at the depth it holds with it, so the shares say where the syncs went: a job
# that waited for its writes before each sync would count the sync at depth 1.
# (options, syncs, iodepth_level's non-zero shares)
LIBAIO_SYNCS = [
    (["--iodepth=4", "--fsync=4", "--number_ios=16"], 3, {"1": 6.25, "2": 12.5, "4": 100.0}),
    (
        ["--iodepth=8", "--fsync=4", "--number_ios=32"],
        7,
        {"1": 3.125, "2": 6.25, "4": 15.625, "8": 96.875},
    ),
    (
        ["--iodepth=8", "--iodepth_batch_submit=3", "--fsync=4", "--number_ios=32"],
        6,
        {"2": 9.375, "4": 15.625, "8": 90.625},
    ),
    (
        ["--iodepth=4", "--fsync=1", "--number_ios=12"],
        9,
        {"1": 100 / 12, "2": 25.0, "4": 1700 / 12},
    ),
    (
        [
            "--iodepth=8",
            "--iodepth_batch_submit=4",
            "--iodepth_batch_complete_min=2",
            "--fsync=6",
            "--number_ios=32",
        ],
        5,
        {"4": 34.375, "8": 75.0},
    ),
]


@pytest.mark.parametrize("producer", ["qoslab", "fio"])
@pytest.mark.parametrize(("options", "syncs", "shares"), LIBAIO_SYNCS)
def test_libaio_syncs_beside_the_writes_in_flight(
    qoslab, tmp_path, producer, options, syncs, shares
):
    args = ["--output-format=json", "--name=w", "--ioengine=libaio", "--direct=1", "--bs=4k"]
    args += ["--rw=write", *options]
    job = json.loads(produce(producer, qoslab, tmp_path, args))["jobs"][0]
    assert job["sync"]["total_ios"] == job["sync"]["lat_ns"]["N"] == syncs
    levels = {k: v for k, v in job["iodepth_level"].items() if v}
    assert levels == pytest.approx(shares, abs=1e-6), producer


@pytest.mark.parametrize("producer", ["qoslab", "fio"])
def test_libaio_ends_with_a_sync_after_reaping_the_writes_beside_its_last(
    qoslab, tmp_path, producer
):
    """A libaio job's periodic syncs leave writes in flight; fio asks should_fsync for
    end_fsync once it has reaped them, so it syncs again (measured, strace, 3 runs, the same
    calls: `... S1 G1 G3 F`: 3 periodic fsyncs and the end's)."""
    args = ["--direct=1", "--rw=write", "--iodepth=4", "--fsync=4", "--end_fsync=1"]
    job, calls = syncs_issued(producer, qoslab, tmp_path, [*args, "--number_ios=16"], "libaio")
    assert job["sync"]["total_ios"] == 3
    assert calls == 4


# io_uring's and posixaio's fsync=N (fio 3.33, engines/io_uring.c: an IORING_OP_FSYNC in the
# ring; engines/posixaio.c: aio_fsync): the sync is an I/O of the queue, beside the writes in
# flight, counted in iodepth_level by the commit at the depth the job then holds. fio's fetch
# gives a sync while the writes issued are a multiple of N and the last I/O it reaped was not a
# sync (io_completed keeps last_was_sync), so while one is in flight the next fetch gives
# another, until the queue is full and a reap ends with a sync: at most iodepth per multiple.
# Measured on an ext4 file, 3 runs each (posixaio: the same numbers every time; io_uring's
# fsync is quicker and its count varies with timing: 7, 8, 12, 8, 10, 12, 9 syncs). qoslab
# runs on consumer-tlc, whose FLUSH takes longer than a write, as the file's fsync does here.
# (options, multiples of N passed, syncs at most)
QUEUED_SYNC_JOBS = [
    (["--iodepth=4", "--fsync=4", "--number_ios=16"], 3, 12),
    (["--iodepth=4", "--fdatasync=4", "--number_ios=16"], 3, 12),
    (["--iodepth=2", "--fsync=4", "--number_ios=16"], 3, 6),
]


def queued_sync_job(producer, qoslab, tmp_path, engine: str, options: list[str]) -> dict:
    args = ["--output-format=json", "--name=w", f"--ioengine={engine}", "--direct=1", "--bs=4k"]
    args += ["--rw=write", *options]
    if producer == "qoslab":
        args.append("--device=consumer-tlc")
    return json.loads(produce(producer, qoslab, tmp_path, args))["jobs"][0]


@pytest.mark.parametrize("producer", ["qoslab", "fio"])
@pytest.mark.parametrize("engine", ["io_uring", "posixaio"])
@pytest.mark.parametrize(("options", "multiples", "most"), QUEUED_SYNC_JOBS)
def test_a_queued_sync_goes_beside_the_writes_and_again_until_one_is_reaped(
    qoslab, tmp_path, producer, engine, options, multiples, most
):
    job = queued_sync_job(producer, qoslab, tmp_path, engine, options)
    writes = job["write"]["total_ios"]
    assert writes == 16
    syncs = job["sync"]["lat_ns"]["N"]
    fsyncs = 0 if "fdatasync" in options[1] else syncs
    assert job["sync"]["total_ios"] == fsyncs
    # More than one sync at a multiple (one was in flight at the next fetch), at most iodepth.
    assert multiples < syncs <= most, producer
    levels = {k: v for k, v in job["iodepth_level"].items() if v}
    # Every sync counted once, at a depth, beside the writes: not in the divisor.
    assert sum(levels.values()) == pytest.approx(100 * (writes + syncs) / writes, abs=1e-6)
    # After the first fill the queue stays full, syncs included: a job that waited for its
    # writes before each sync would count it at depth 1 (fio: 112.5-156.25 %).
    depth = options[0].split("=")[1]
    assert levels[depth] >= 100.0, levels


@pytest.mark.parametrize("producer", ["qoslab", "fio"])
def test_number_ios_counts_the_syncs_in_flight(qoslab, tmp_path, producer):
    """fio's exceeds_number_ios counts the I/Os completed, queued and in flight, syncs among
    them: a posixaio job holding 4 syncs when it reaches 28 writes stops there (measured, 3
    runs: 28 writes, 32 syncs; qoslab on consumer-tlc: 28 and 28). (io_uring's quicker fsync
    had none in flight then in the 3 runs measured: 32 writes.)"""
    options = ["--iodepth=8", "--fsync=4", "--number_ios=32"]
    job = queued_sync_job(producer, qoslab, tmp_path, "posixaio", options)
    assert job["write"]["total_ios"] == 28
    assert 7 < job["sync"]["total_ios"] <= 7 * 8


@pytest.mark.parametrize("producer", ["qoslab", "fio"])
@pytest.mark.parametrize("engine", ["io_uring", "posixaio"])
def test_a_queued_end_sync_is_counted_at_depth_one(qoslab, tmp_path, producer, engine):
    """end_fsync goes through the engine's queue and commit once the job has reaped
    everything: counted in iodepth_level at depth 1 (not in the JSON's sync), where libaio's
    and psync's, completed in the call, are not (measured: '1' 12.5 % with end_fsync=1, 6.25 %
    without, 3 runs each engine)."""
    options = ["--iodepth=4", "--fsync=4", "--number_ios=16", "--end_fsync=1"]
    job = queued_sync_job(producer, qoslab, tmp_path, engine, options)
    syncs = job["sync"]["lat_ns"]["N"]
    assert job["sync"]["total_ios"] == syncs
    levels = job["iodepth_level"]
    assert sum(levels.values()) == pytest.approx(100 * (16 + syncs + 1) / 16, abs=1e-6)
    # The first write and the end sync, at least.
    assert levels["1"] >= 12.5


def files_job(producer: str, qoslab, tmp_path, options: list[str]) -> dict:
    """The JSON of a libaio iodepth=2 writer of 4 KiB blocks, on files fio makes in tmp_path."""
    args = ["--output-format=json", "--name=j", "--bs=4k", "--direct=1", "--ioengine=libaio"]
    args += ["--iodepth=2", "--rw=write", *options]
    if producer == "qoslab":
        done = qoslab("sim", *args, cwd=tmp_path)
    else:
        if FIO is None:
            pytest.skip("fio is installed by make tools")
        done = subprocess.run(
            [FIO, f"--directory={tmp_path}", *args], capture_output=True, text=True, cwd=tmp_path
        )
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)["jobs"][0]


@pytest.mark.parametrize("producer", ["qoslab", "fio"])
def test_size_above_the_files_filesize_holds_is_cut_to_them(qoslab, tmp_path, producer):
    """With filesize, size is the amount of I/O, but fio 3.33 cuts a size above the files'
    total to it (filesetup.c; measured, 3 runs: 8 writes of 4 KiB over 4 files of 8 KiB)."""
    job = files_job(producer, qoslab, tmp_path, ["--nrfiles=4", "--filesize=8k", "--size=64k"])
    assert (job["write"]["total_ios"], job["write"]["io_bytes"]) == (8, 32768)
    assert {k: v for k, v in job["iodepth_level"].items() if v} == {"1": 12.5, "2": 87.5}


# fio 3.33 runs a job in passes (backend.c: one do_io call each): a pass ends when every file
# is done (a sequential file when its next I/O would cross its end, a random one when its map is
# full) or it has issued `size` bytes; fio reaps everything in between, so each pass starts at
# depth 1. Another pass while `loops` lasts, then while io_size is short by a whole block
# (keep_running). Measured with fio 3.33, libaio iodepth=2 bs=4k size=64k, 3 runs each: the same
# writes, bytes and depth shares every time (the rw given replaces rw=write).
PASS_JOBS = [
    (["--nrfiles=4", "--rw=write", "--loops=2"], 32, 131072, {"1": 6.25, "2": 93.75}),
    (["--nrfiles=4", "--rw=randwrite", "--io_size=96k"], 24, 98304, {"1": 8.333, "2": 91.667}),
    (["--nrfiles=4", "--rw=write", "--bs=12k", "--loops=2"], 8, 98304, {"1": 25.0, "2": 75.0}),
    (["--nrfiles=4", "--rw=write", "--number_ios=10", "--loops=2"], 20, 81920, {"1": 10, "2": 90}),
    (["--rw=write", "--bs=12k"], 5, 61440, {"1": 20.0, "2": 80.0}),
    (["--rw=write", "--io_size=96k", "--loops=2"], 32, 131072, {"1": 6.25, "2": 93.75}),
    (["--rw=write:4k", "--loops=2"], 32, 131072, {"1": 6.25, "2": 93.75}),
]


@pytest.mark.parametrize("producer", ["qoslab", "fio"])
@pytest.mark.parametrize(("options", "writes", "written", "shares"), PASS_JOBS)
def test_each_pass_over_the_files_starts_after_the_last_one_is_reaped(
    qoslab, tmp_path, producer, options, writes, written, shares
):
    job = files_job(producer, qoslab, tmp_path, ["--size=64k", *options])
    assert (job["write"]["total_ios"], job["write"]["io_bytes"]) == (writes, written)
    levels = {k: v for k, v in job["iodepth_level"].items() if v}
    assert levels.keys() == shares.keys()
    assert all(levels[k] == pytest.approx(v, abs=1e-3) for k, v in shares.items())


@pytest.mark.parametrize("producer", ["qoslab", "fio"])
@pytest.mark.parametrize(
    ("options", "passes"), [(["--rw=write"], True), (["--rw=randwrite"], False)]
)
def test_a_time_based_job_passes_over_several_sequential_files_and_wraps_random_ones(
    qoslab, tmp_path, producer, options, passes
):
    """fio 3.33 wraps a time-based sequential file in place only when it is the job's only
    one: over 4 files of 16 KiB a pass ends every 16 writes and the next starts at depth 1
    (3 runs of 300 ms: 180, 87 and 190 such starts in 2,880, 1,378 and 3,036 writes);
    random files start over in place (at most one write at depth 1)."""
    options = ["--size=64k", "--nrfiles=4", "--time_based", "--runtime=300ms", *options]
    job = files_job(producer, qoslab, tmp_path, options)
    writes = job["write"]["total_ios"]
    at_depth_one = round(job["iodepth_level"]["1"] * writes / 100)
    if passes:
        assert at_depth_one == -(-writes // 16)
    else:
        # At most one write at depth 1, as a share: fio's JSON gives shares to one decimal
        # (47 of 47,202 writes is 0.1), so no count can be read back from it, and on a loaded
        # machine real fio's 300 ms hold few writes (one of 25 at depth 1 is 4 %).
        assert job["iodepth_level"]["1"] <= max(0.1, 100 / writes)


@pytest.mark.parametrize("producer", ["qoslab", "fio"])
def test_a_sequential_length_that_would_cross_the_files_end_is_drawn_again(
    qoslab, tmp_path, producer
):
    """fio takes the offset first, then draws block sizes until one fits before the file's
    end (get_next_buflen), so bssplit=4k/50:12k/50 covers the 64 KiB file exactly on each of
    its 2 passes (fio 3.33, 3 runs: 20 writes, 128 KiB, 2 of them at depth 1). The number of
    writes depends on the draws: only the bytes and the two passes are fio's rule."""
    options = ["--size=64k", "--bssplit=4k/50:12k/50", "--loops=2"]
    job = files_job(producer, qoslab, tmp_path, options)
    assert job["write"]["io_bytes"] == 131072
    at_depth_one = job["iodepth_level"]["1"] * job["write"]["total_ios"] / 100
    assert at_depth_one == pytest.approx(2)


@pytest.mark.parametrize("producer", ["qoslab", "fio"])
def test_a_read_after_the_last_sync_makes_the_end_sync_due(qoslab, tmp_path, producer):
    """fio's end sync is due when the job writes and the last thing it issued was not a sync
    (its should_fsync), though it only read since that sync: a job bound by number_ios fetches
    nothing after its last I/O, so it always ends with one (measured, strace, randrw fsync=2
    end_fsync=1, 12 I/Os, seeds 1-6: every run, one ending `W W S R S`). Here fsync=1 syncs
    after every write but the last I/O, so most runs end with reads after a sync."""
    args = ["--rw=randrw", "--rwmixread=90", "--fsync=1", "--end_fsync=1", "--number_ios=20"]
    # fio lays out a file it reads and fsyncs it then (create_fsync): give it one of its size.
    with (tmp_path / "data").open("wb") as data:
        data.truncate(16 << 20)
    job, calls = syncs_issued(producer, qoslab, tmp_path, args)
    assert job["read"]["total_ios"] + job["write"]["total_ios"] == 20
    assert calls == job["sync"]["lat_ns"]["N"] + 1


def time_limited_syncs(producer: str, qoslab, tmp_path) -> tuple[dict, int]:
    """A 100 ms psync job of 4 KiB writes with fsync=1 and end_fsync, where a sync takes no
    time: real fio on tmpfs (/dev/shm), qoslab on a device without a volatile write cache
    (its block layer completes a FLUSH at once)."""
    args = ["--rw=write", "--time_based", "--runtime=100ms", "--fsync=1", "--end_fsync=1"]
    if producer == "qoslab":
        return syncs_issued(producer, qoslab, tmp_path, ["--device=nvme-analytic", *args])
    shm = Path("/dev/shm")
    if not shm.is_dir():
        pytest.skip("no tmpfs at /dev/shm")
    with tempfile.TemporaryDirectory(dir=shm) as d:
        return syncs_issued(producer, qoslab, Path(d), args)


@pytest.mark.parametrize("producer", ["qoslab", "fio"])
def test_a_job_whose_time_is_up_fetches_no_sync_after_its_last_write(qoslab, tmp_path, producer):
    """fio reads the clock before each fetch (do_io: runtime_exceeded, then break): once the
    time is up the job fetches nothing, not even the sync its last write made due, and
    end_fsync syncs that write (not counted in the JSON). Where a sync takes no time the
    time runs out in a write: one periodic sync fewer than writes. (Real fio measured on
    tmpfs: 5 of 6 runs so, the 6th's time ran out in its last sync, so real fio's check
    allows both; on a disk file system the time nearly always runs out in the slow sync.)"""
    job, calls = time_limited_syncs(producer, qoslab, tmp_path)
    writes = job["write"]["total_ios"]
    assert writes > 1
    counted = job["sync"]["total_ios"]
    assert counted == job["sync"]["lat_ns"]["N"]
    assert counted == writes - 1 if producer == "qoslab" else counted in (writes - 1, writes)
    # Every write synced once: periodic syncs and end_fsync's.
    assert calls == writes


GROUP = [
    # First: fio prints a line per job it reads while its format is still normal.
    "--output-format=json,terse,normal",
    "--ioengine=libaio",
    "--direct=1",
    "--bs=4k",
    "--rw=randread",
    "--time_based",
    "--runtime=1s",
    "--bwavgtime=100",
    "--name=slow",
    "--iodepth=1",
    "--name=fast",
    "--iodepth=8",
]


@pytest.mark.parametrize("producer", ["qoslab", "fio"])
def test_bw_agg_is_the_mean_bandwidth_sample_over_the_groups_aggregate(qoslab, tmp_path, producer):
    terse, report, normal = split_terse_json(produce(producer, qoslab, tmp_path, GROUP))
    jobs = report["jobs"]
    reads = [j["read"] for j in jobs]
    # fio's group aggregate (stat.c, rs->agg): the group's bytes over its longest run in ms.
    agg = sum(r["io_bytes"] for r in reads) * 1000 // max(r["runtime"] for r in reads)
    pers = [line for line in normal if "bw (" in line and "per=" in line]
    assert len(pers) == 2
    for r, fields, per in zip(reads, terse, pers, strict=True):
        assert r["bw_samples"] >= 2, producer
        # JSON: the samples' mean cut to whole KiB/s over the aggregate in KiB/s, at most 100.
        want = min(int(r["bw_mean"]) * 100 / (agg / 1024), 100.0)
        assert r["bw_agg"] == pytest.approx(want, abs=1e-6), producer
        assert f"per={want:.2f}%" in per
        # Terse: the unrounded mean over the aggregate in whole KiB/s.
        bw = fields[FIRST_DIRECTION + 36 : FIRST_DIRECTION + 41]  # min, max, agg, mean, dev
        terse_want = min(float(bw[3]) * 100 / (agg // 1024), 100.0)
        assert float(bw[2].rstrip("%")) == pytest.approx(terse_want, abs=2e-6), producer


SAMPLED = [
    "--output-format=json",
    "--ioengine=psync",
    "--bs=4k",
    "--name=sampled",
    "--rw=randrw",
    # Steady: every window holds I/Os of both directions.
    "--rate_iops=200",
    "--time_based",
    "--runtime=1s",
    "--log_avg_msec=100",
    "--write_bw_log=sampled",
    "--write_iops_log=sampled",
]


@pytest.mark.parametrize("producer", ["qoslab", "fio"])
def test_bandwidth_and_iops_are_sampled_every_log_avg_msec_as_their_logs(
    qoslab, tmp_path, producer
):
    """With `write_bw_log`/`write_iops_log` and `log_avg_msec` and no `bwavgtime`, fio samples
    bandwidth and IOPS every `log_avg_msec` instead of every 500 ms (1 or 2 samples in 1 s):
    the JSON's samples are the logs' lines."""
    args = SAMPLED if producer == "fio" else ["--direct=1", *SAMPLED]
    job = json.loads(produce(producer, qoslab, tmp_path, args))["jobs"][0]
    logs = {kind: raw_log(tmp_path / f"sampled_{kind}.1.log") for kind in ("bw", "iops")}
    for ddir, op in enumerate(OPS):
        lines = {kind: log[log.ddir == ddir] for kind, log in logs.items()}
        times = [int(t) for t in lines["bw"].time_ms]
        # fio stamps the two samples of one tick with times of their own (a ms apart at most).
        iops_times = [int(t) for t in lines["iops"].time_ms]
        assert all(abs(a - b) <= 1 for a, b in zip(times, iops_times, strict=True)), op
        # Every 100 ms of the 1 s run (fio's helper thread, loaded, misses some; at 500 ms
        # there would be 1 or 2).
        assert 5 <= len(times) <= 10, (op, times)
        assert all(b - a >= 90 for a, b in zip([0, *times], times, strict=False)), (op, times)
        for kind in ("bw", "iops"):
            values = [int(v) for v in lines[kind].value]
            stats = job[op]
            assert stats[f"{kind}_samples"] == len(values), (op, kind)
            assert stats[f"{kind}_min"] == min(values), (op, kind)
            assert stats[f"{kind}_max"] == max(values), (op, kind)
            assert stats[f"{kind}_mean"] == pytest.approx(sum(values) / len(values)), (op, kind)
        # 4 KiB I/Os: a window's KiB/s is four times its I/Os per second (each rounded), give
        # or take one I/O: the two samples' windows end up to a ms apart (above), and at 200
        # I/Os per second one may complete in between (fio, loaded: 800 KiB/s beside 209 IOPS
        # in a 100 ms window, one I/O less in the bandwidth's).
        windows = [b - a for a, b in zip([0, *times], times, strict=False)]
        for bw, iops, ms in zip(lines["bw"].value, lines["iops"].value, windows, strict=True):
            assert abs(bw - 4 * iops) <= 4 + 4 * 1000 / ms, (op, bw, iops, ms)


IDLE = [
    "--output-format=json",
    "--ioengine=psync",
    "--bs=4k",
    "--name=idle",
    "--rw=randread",
    # One read, then 250 ms of thinking: three of every 100 ms window out of four see no I/O.
    "--thinktime=250ms",
    "--time_based",
    "--runtime=1s",
    "--log_avg_msec=100",
    "--write_bw_log=idle",
    "--write_iops_log=idle",
]


@pytest.mark.parametrize("producer", ["qoslab", "fio"])
def test_a_window_without_io_leaves_no_bandwidth_or_iops_sample(qoslab, tmp_path, producer):
    """fio's helper thread samples a direction only if it moved since the last sample (stat.c,
    `__add_samples`: "No entries for interval"): a job that reads every 250 ms, sampled every
    100 ms, has a sample (and a log line) for each read's window only, never a zero."""
    args = IDLE if producer == "fio" else ["--direct=1", *IDLE]
    job = json.loads(produce(producer, qoslab, tmp_path, args))["jobs"][0]
    read = job["read"]
    # Reads at about 0, 250, 500 and 750 ms.
    reads = read["total_ios"]
    assert reads == 4
    for kind in ("bw", "iops"):
        log = raw_log(tmp_path / f"idle_{kind}.1.log")
        values = [int(v) for v in log.value]
        assert read[f"{kind}_samples"] == len(values), kind
        # A sample for each read's window, never a 0 (the job thinks after its last read to
        # its 1 s end, past that read's window's close at 800 ms).
        assert len(values) == reads, list(log.time_ms)
        assert min(values) > 0 and read[f"{kind}_min"] == min(values), kind
        times = [int(t) for t in log.time_ms]
        # One window of each 250 ms.
        assert all(150 <= b - a <= 350 for a, b in itertools.pairwise(times)), times


# (options, reads, run time in ms) of a psync reader whose last I/O is followed by a wait,
# measured on fio 3.33: it thinks after each I/O, the last one too, for the whole think time
# (3.33 does not cut it at the runtime), and only then reads the clock; it cuts a rate's sleep
# at the runtime and finds its time up there.
ENDS_WAITING = [
    # Reads at 0, 40 and 80 ms, a think to 120 ms; the fourth read would start past 115 ms.
    (["--thinktime=40ms", "--time_based", "--runtime=115ms"], 3, 120),
    (["--thinktime=40ms", "--number_ios=2"], 2, 80),
    # Reads due at 0, 33 and 67 ms; the fourth is due at 100 ms, where the sleep is cut.
    (["--rate_iops=30", "--time_based", "--runtime=100ms"], 3, 100),
]


@pytest.mark.parametrize("producer", ["qoslab", "fio"])
@pytest.mark.parametrize(("options", "reads", "run_ms"), ENDS_WAITING)
def test_a_job_that_ends_waiting_runs_to_the_end_of_its_wait(
    qoslab, tmp_path, producer, options, reads, run_ms
):
    """The run time is fio's loop's (do_io), to the end of the job's last think time or rate
    sleep, not to its last completion."""
    args = ["--output-format=json", "--ioengine=psync", "--bs=4k", "--name=waits"]
    args += ["--rw=randread", *options]
    if producer == "qoslab":
        args.insert(0, "--direct=1")
    job = json.loads(produce(producer, qoslab, tmp_path, args))["jobs"][0]
    assert job["read"]["total_ios"] == reads
    # Real fio's sleeps overrun under load (measured: up to 19 ms over 2 thinks).
    slack = 60 if producer == "fio" else 1
    assert run_ms <= job["job_runtime"] < run_ms + slack
    assert run_ms <= job["read"]["runtime"] < run_ms + slack + 1


# (options, syncs timed, fsyncs counted, syncs issued) of 3 passes (`loops=3`) over a 16 KiB
# file, 4 writes each. fio 3.33 ends a pass at the file's end: the fetch there gives a periodic
# sync if one is due; it reaps everything, closes the file (fsync_on_close: an fsync(2) if the
# last thing was not a sync), syncs it as at the job's end (end_fsync or fsync_on_close, if the
# last thing was still not a sync; not counted), and opens it for the next pass, where the last
# sync no longer counts (its reset_io_counters): fsync=4 runs `WWWWS | SWWWWS | SWWWW`.
LOOP_RULES = [
    (["--fsync=4"], 4, 4, 4),
    (["--fsync=1"], 13, 13, 13),
    (["--fsync=3"], 3, 3, 3),
    (["--fsync_on_close=1"], 0, 0, 5),
    (["--end_fsync=1"], 0, 0, 3),
    (["--fsync=4", "--end_fsync=1"], 4, 4, 5),
]


@pytest.mark.parametrize("producer", ["qoslab", "fio"])
@pytest.mark.parametrize(("options", "timed", "fsyncs", "issued"), LOOP_RULES)
def test_a_job_syncs_between_its_passes_as_fio(
    qoslab, tmp_path, producer, options, timed, fsyncs, issued
):
    args = ["--rw=write", "--size=16k", "--loops=3", *options]
    job, calls = syncs_issued(producer, qoslab, tmp_path, args)
    assert job["write"]["total_ios"] == 12
    assert job["sync"]["lat_ns"]["N"] == timed
    assert job["sync"]["total_ios"] == fsyncs
    assert calls == issued
    assert job["iodepth_level"]["1"] == pytest.approx(100 * (12 + timed) / 12, abs=1e-6)


# (engine, job, syncs options, writes, fsyncs counted, syncs issued) of rw=write bs=4k jobs
# over several passes, measured with fio 3.33 and strace (3 runs each, the same every time).
# An engine that queues its I/O (libaio, posixaio, vsync) ends a pass once it has issued `size`
# bytes, before fetching again: no periodic sync at the pass's end, one at the next pass's start
# (`W | S W`); psync counts no pass bytes, so its pass runs on to the files' ends, and the
# fetch that finds them done gives the sync due (`W S | S W`; nrfiles=2 filesize=32k size=32k:
# one pass of 16 writes, where libaio runs two of 8). A pass's end syncs every file (do_io's
# end_fsync or fsync_on_close) unless the last thing done was a sync, then fio forgets that
# sync and closes the files still open (fsync_on_close: an fsync(2) per file); psync's files
# are closed when a fetch finds them done, before that end.
AIO2 = ("libaio", ["--iodepth=2"])
ONE_FILE = ["--size=16k", "--loops=3"]
FOUR_FILES = ["--nrfiles=4", "--size=64k", "--loops=2"]
TWO_BIG_FILES = ["--nrfiles=2", "--filesize=32k", "--size=32k", "--loops=2"]
PASS_SYNC_RULES = [
    (AIO2, ONE_FILE, ["--fsync=4"], 12, 2, 2),
    (AIO2, ONE_FILE, ["--fsync=4", "--end_fsync=1"], 12, 2, 5),
    (AIO2, ONE_FILE, ["--fsync=4", "--fsync_on_close=1"], 12, 2, 7),
    (("posixaio", ["--iodepth=2"]), ONE_FILE, ["--fsync=4"], 12, 4, 4),
    (AIO2, FOUR_FILES, ["--fsync=4"], 32, 7, 7),
    (AIO2, FOUR_FILES, ["--fsync=4", "--fsync_on_close=1"], 32, 7, 19),
    (AIO2, FOUR_FILES, ["--fsync_on_close=1"], 32, 0, 12),
    (AIO2, FOUR_FILES, ["--end_fsync=1"], 32, 0, 8),
    (("psync", []), FOUR_FILES, ["--fsync=4", "--fsync_on_close=1"], 32, 8, 12),
    (("psync", []), TWO_BIG_FILES, ["--fsync=4"], 16, 3, 3),
    (("vsync", []), TWO_BIG_FILES, ["--fsync=4"], 16, 3, 3),
]


@pytest.mark.parametrize("producer", ["qoslab", "fio"])
@pytest.mark.parametrize(
    ("engine", "shape", "options", "writes", "fsyncs", "issued"), PASS_SYNC_RULES
)
def test_a_pass_ends_at_its_bytes_or_its_files_and_syncs_every_file(
    qoslab, tmp_path, producer, engine, shape, options, writes, fsyncs, issued
):
    name, depth = engine
    args = ["--rw=write", "--direct=1", *depth, *shape, *options]
    job, calls = syncs_issued(producer, qoslab, tmp_path, args, engine=name, files=True)
    assert job["write"]["total_ios"] == writes
    assert job["sync"]["total_ios"] == fsyncs
    assert calls == issued


@pytest.mark.parametrize("producer", ["qoslab", "fio"])
def test_each_pass_starts_with_an_empty_queue(qoslab, tmp_path, producer):
    """fio reaps every I/O at a pass's end: each of 3 passes of 16 writes at iodepth=4 queues
    its first write at depth 1 and its next two at 2 (one pass of 48 writes: 1 and 2)."""
    args = ["--output-format=json", "--ioengine=libaio", "--direct=1", "--iodepth=4"]
    args += ["--bs=4k", "--name=passes", "--rw=write", "--size=64k", "--loops=3"]
    job = json.loads(produce(producer, qoslab, tmp_path, args))["jobs"][0]
    assert job["write"]["total_ios"] == 48
    level = {k: v for k, v in job["iodepth_level"].items() if v}
    assert level == {"1": 6.25, "2": 12.5, "4": 81.25}
