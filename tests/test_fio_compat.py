"""qoslab sim speaks fio: the same job files, command lines and terse output as fio 3.33.

fio itself is the oracle (installed by `make tools`): `fio --parse-only --debug=parse` prints
the value fio reads for every option of a job, `fio --showcmd` turns a job file into fio's
command line, and a real fio run writes terse lines that fio's HOWTO names field by field.
"""

from __future__ import annotations

import json
import math
import re
import shlex
import shutil
import subprocess

import pytest

from conftest import ROOT
from qoslab.sim.api import parse_jobs

FIO = shutil.which("fio")
pytestmark = pytest.mark.skipif(FIO is None, reason="fio is installed by make tools")

JOB_FILES = [
    *sorted((ROOT / "tests" / "data" / "fio" / "jobs").glob("*.fio")),
    ROOT / "configs" / "jobs" / "tour.fio",
    ROOT / "configs" / "jobs" / "randread-qd32.fio",
]
TERSE_FIELDS = (ROOT / "tests/data/fio/terse-v3-fields.txt").read_text().splitlines()[-1]
TERSE_NAMES = TERSE_FIELDS.split(";")
DISK_FIELDS = 9


def fio_values(path, section: str, cwd) -> dict[str, list[float]]:
    """The values fio reads for each option of `section` (its own options override the
    global ones), as `fio --parse-only --debug=parse` prints them."""
    done = subprocess.run(
        [FIO, "--parse-only", "--debug=parse", f"--section={section}", str(path)],
        capture_output=True,
        text=True,
        cwd=cwd,
    )
    assert done.returncode == 0, done.stderr
    values: dict[str, list[float]] = {}
    current = None
    for line in (done.stdout + done.stderr).splitlines():
        fields = line.split()
        if len(fields) >= 3 and fields[2].startswith("handle_option="):
            current = fields[2].removeprefix("handle_option=").rstrip(",")
            values[current] = []
        elif current and (m := re.search(r"(?:ret=(-?\d+), )?out=(\S+)$", line)):
            assert m.group(1) in (None, "0"), line
            values[current].append(float(m.group(2)))
    return values


def size_value(spec) -> int:
    # fio stores a percentage of the file as 2^64 - 1 - percent.
    if "percent" in spec:
        return 2**64 - 1 - int(spec["percent"])
    return spec["bytes"]


def us(ns: int) -> int:
    return ns // 1000


PRIO_CLASSES = {"none": 0, "rt": 1, "be": 2, "idle": 3}

# What qoslab read, in the units fio prints (bytes, microseconds), per fio option name.
OUR_VALUES = {
    "bs": lambda j: j["bs_bytes"],
    "ba": lambda j: j["blockalign_bytes"],
    "size": lambda j: [size_value(j["size"])],
    "offset": lambda j: [size_value(j["offset"])],
    "offset_increment": lambda j: [size_value(j["offset_increment"])],
    "io_size": lambda j: [j["io_size_bytes"]],
    "number_ios": lambda j: [j["number_ios"]],
    "numjobs": lambda j: [j["numjobs"]],
    "iodepth": lambda j: [j["iodepth"]],
    "iodepth_batch": lambda j: [j["iodepth_batch_submit"]],
    "loops": lambda j: [j["loops"]],
    "thinktime_blocks": lambda j: [j["thinktime_blocks"]],
    "log_avg_msec": lambda j: [j["log_avg_msec"]],
    "prio": lambda j: [j["prio"]],
    "prioclass": lambda j: [PRIO_CLASSES[j["prioclass"]]],
    "rwmixread": lambda j: [j["rwmixread_pct"]],
    "runtime": lambda j: [us(j["runtime_ns"])],
    "ramp_time": lambda j: [us(j["ramp_time_ns"])],
    "thinktime": lambda j: [us(j["thinktime_ns"])],
    "rate": lambda j: j["rate_bytes_per_s"],
    "percentile_list": lambda j: j["percentile_list"],
    "cmdprio_percentage": lambda j: j["cmdprio_percentage"],
    "randseed": lambda j: [j["randseed"]],
    "direct": lambda j: [int(j["direct"])],
    "time_based": lambda j: [int(j["time_based"])],
    "norandommap": lambda j: [int(j["norandommap"])],
    "stonewall": lambda j: [int(j["stonewall"])],
    "new_group": lambda j: [int(j["new_group"])],
    "group_reporting": lambda j: [int(j["group_reporting"])],
}


def qoslab_parse(qoslab, *args) -> dict:
    """`qoslab sim --parse-only --output-format json ARGS`, as the command prints it."""
    done = qoslab("sim", "--parse-only", "--output-format", "json", *args)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def canonical_names() -> dict[str, str]:
    from qoslab import _core

    return {n: name for name, aliases, *_ in _core.fio_options() for n in (name, *aliases)}


@pytest.mark.parametrize("path", JOB_FILES, ids=lambda p: p.name)
def test_every_option_reads_as_fio_reads_it(path, tmp_path):
    ours = parse_jobs(path)
    canonical = canonical_names()
    assert ours["jobs"], path
    for job in ours["jobs"]:
        fio = fio_values(path, job["section"], tmp_path)
        written = {canonical[k] for k, _ in [*ours["global_options"], *job["options"]]}
        compared = 0
        for option, fio_vals in fio.items():
            if option not in written or not fio_vals:
                continue
            assert option in OUR_VALUES, f"{path.name}: no comparison for '{option}'"
            mine = OUR_VALUES[option](job)
            for d, v in enumerate(fio_vals):
                assert math.isclose(mine[d], v), (
                    f"{path.name} [{job['section']}] {option}: fio {v}, qoslab {mine[d]}"
                )
            compared += 1
        assert compared > 0 or not written & OUR_VALUES.keys()


@pytest.mark.parametrize("path", JOB_FILES, ids=lambda p: p.name)
def test_showcmd_prints_fios_command_line_and_that_line_runs_the_same_jobs(qoslab, path):
    fio = subprocess.run([FIO, "--showcmd", str(path)], capture_output=True, text=True)
    assert fio.returncode == 0, fio.stderr
    done = qoslab("sim", "--showcmd", path)
    assert done.returncode == 0, done.stderr
    assert done.stdout.rstrip("\n") == fio.stdout.rstrip("\n")

    # The command line, given to qoslab, is the job file.
    words = shlex.split(fio.stdout)
    assert words[0] == "fio"
    from_line = qoslab_parse(qoslab, *words[1:])
    from_file = parse_jobs(path)

    def meaning(job):
        as_written = ("location", "options", "globals_before", "ignored")
        return {k: v for k, v in job.items() if k not in as_written}

    assert [meaning(j) for j in from_line["jobs"]] == [meaning(j) for j in from_file["jobs"]]


def terse_records(text: str) -> list[dict[str, str]]:
    """A terse v3 reader as fio's HOWTO specifies it: fields by position, named by the HOWTO's
    list; the disk utilization fields are present only when a disk was used."""
    records = []
    # fio prints each job's description line before its terse lines.
    for line in (t for t in text.splitlines() if t.startswith("3;")):
        fields = line.split(";")
        assert len(fields) in (len(TERSE_NAMES), len(TERSE_NAMES) - DISK_FIELDS), len(fields)
        records.append(dict(zip(TERSE_NAMES, fields, strict=False)))
    return records


# What each terse field looks like.
PERCENTILE = re.compile(r"^(\d+\.\d{6}%=\d+|0%=0)$")
SHARE = re.compile(r"^\d+\.\d+%$")
NUMBER = re.compile(r"^\d+(\.\d{6})?$")


def field_kind(name: str, value: str) -> str:
    if name in ("fio_version", "jobname"):
        return "text"
    for kind, pattern in (("percentile", PERCENTILE), ("share", SHARE), ("number", NUMBER)):
        if pattern.match(value):
            return kind
    raise AssertionError(f"{name}={value!r}")


def test_terse_lines_have_fios_fields_and_agree_with_the_json(qoslab, tmp_path):
    jobs = ["--direct=1", "--name=mixed", "--rw=randrw", "--number_ios=300", "--name=reader"]
    jobs += ["--rw=read"]
    jobs += ["--bs=16k", "--number_ios=200"]
    real = subprocess.run(
        [FIO, f"--filename={tmp_path / 'data'}", "--size=8m", *jobs, "--output-format=terse"],
        capture_output=True,
        text=True,
        cwd=tmp_path,
    )
    assert real.returncode == 0, real.stderr
    done = qoslab("sim", *jobs, "--output-format=terse,json")
    assert done.returncode == 0, done.stderr
    terse_text, json_text = done.stdout.split("\n", 2)[:2], done.stdout.split("\n", 2)[2]
    ours, theirs = terse_records("\n".join(terse_text)), terse_records(real.stdout)
    assert [r["jobname"] for r in ours] == [r["jobname"] for r in theirs] == ["mixed", "reader"]
    for mine, fio in zip(ours, theirs, strict=True):
        assert set(mine) == set(TERSE_NAMES[:-DISK_FIELDS])
        for name, value in mine.items():
            assert field_kind(name, value) == field_kind(name, fio[name]), name

    report = json.loads(json_text)
    for record, job in zip(ours, report["jobs"], strict=True):
        for op in ("read", "write"):
            o = job[op]
            assert int(record[f"{op}_kb"]) == o["io_bytes"] >> 10
            assert int(record[f"{op}_bandwidth_kb"]) == o["bw"]
            assert int(record[f"{op}_iops"]) == int(o["iops"])
            assert int(record[f"{op}_runtime_ms"]) == o["runtime"]
            assert float(record[f"{op}_clat_mean_us"]) == pytest.approx(
                o["clat_ns"]["mean"] / 1000, abs=1e-6
            )
            pct = o["clat_ns"].get("percentile", {})
            for i, (p, value) in enumerate(pct.items()):
                assert record[f"{op}_clat_pct{i + 1:02d}"] == f"{float(p):.6f}%={value // 1000}"
