"""The SSD and HDD device models through `qoslab sim`: MQSim's default drive to the nanosecond,
the disk presets against their datasheets, and bad device files."""

from __future__ import annotations

import json

import pytest

from qoslab.sim.api import stage_counters

QD1_READS = """
[qd1]
rw=randread
bs=4k
iodepth=1
number_ios={n}
"""


def run_json(qoslab, tmp_path, job: str, device: str, *sets: str) -> dict:
    jobfile = tmp_path / "job.fio"
    # At the depth each test asks for, straight to the device.
    jobfile.write_text("[global]\nioengine=libaio\ndirect=1\n" + job)
    args = ["sim", str(jobfile), "--device", device, "--output-format", "json"]
    for s in sets:
        args += ["--set", s]
    done = qoslab(*args)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


# The parts of a 4 KiB read on MQSim's default drive, worked out by hand from MQSim's
# ssdconfig.xml and PCIe model (docs/media.md, "QD1 read"), never by the code under test. The
# link: TLPs of at most 128 B payload, 28 B of overhead each, 4 lanes of 1 B/ns.
DOORBELL = 8  # SQ tail doorbell: (4 + 28) B / 4 B/ns
READ_REQUEST = 8  # the controller's read request for the SQ entry, the same size
SQ_ENTRY = 23  # (64 + 28) B / 4 B/ns
FLASH_READ = 87_578  # command and address 290, tR 75,000, 4096 B at 3 ns/B 12,288
DATA = 1_248  # 32 TLPs: (4096 + 32 x 28) B / 4 B/ns
CQ_ENTRY = 11  # (16 + 28) B / 4 B/ns
MAPPING_READ = 76_826  # a translation page read on a mapping-cache miss: 290 + 75,000 + 512 x 3
LINK = DOORBELL + READ_REQUEST + SQ_ENTRY + DATA + CQ_ENTRY  # 1,298
QD1_READ_DRAM_MAPPING = LINK + FLASH_READ  # 88,876
QD1_READ_CACHE_MISS = QD1_READ_DRAM_MAPPING + MAPPING_READ  # 165,702


def test_the_link_costs_are_mqsims(qoslab, tmp_path):
    job = QD1_READS.format(n=100)
    dram = "media.ftl.mapping=dram"
    with_link = run_json(qoslab, tmp_path, job, "mqsim-default", dram)
    free = ("link.lane_rate=0", "link.doorbell_ns=0", "controller.cmd_ns=0")
    without = run_json(qoslab, tmp_path, job, "mqsim-default", dram, *free)
    clat = [r["jobs"][0]["read"]["clat_ns"] for r in (with_link, without)]
    assert clat[0]["min"] == clat[0]["max"]
    assert clat[1]["min"] == clat[1]["max"] == FLASH_READ
    assert clat[0]["min"] - clat[1]["min"] == LINK


def test_qd1_random_read_on_mqsim_default_with_the_mapping_in_dram_is_88_9_us(qoslab, tmp_path):
    report = run_json(
        qoslab, tmp_path, QD1_READS.format(n=500), "mqsim-default", "media.ftl.mapping=dram"
    )
    clat = report["jobs"][0]["read"]["clat_ns"]
    assert clat["min"] == clat["max"] == QD1_READ_DRAM_MAPPING


def test_qd1_random_read_with_mqsims_2mib_mapping_cache_adds_a_translation_read(qoslab, tmp_path):
    report = run_json(qoslab, tmp_path, QD1_READS.format(n=500), "mqsim-default")
    clat = report["jobs"][0]["read"]["clat_ns"]
    # 233,016 cached entries out of 62.4 M: a random read all but always misses.
    assert clat["max"] == QD1_READ_CACHE_MISS
    assert clat["mean"] > QD1_READ_CACHE_MISS - 0.01 * (QD1_READ_CACHE_MISS - QD1_READ_DRAM_MAPPING)
    assert stage_counters(report, "media")["mapping_reads"] >= 495


@pytest.mark.parametrize(
    ("preset", "seek_ms", "rpm", "inner_mb_s", "outer_mb_s"),
    [("hdd-7200", 12.0, 7200, 55, 110), ("hdd-15k", 3.3, 15000, 100, 170)],
)
def test_disk_qd1_random_read_is_seek_plus_half_a_revolution_plus_transfer(
    qoslab, tmp_path, preset, seek_ms, rpm, inner_mb_s, outer_mb_s
):
    report = run_json(qoslab, tmp_path, QD1_READS.format(n=5000), preset, "media.scheduler=fifo")
    mean_ns = report["jobs"][0]["read"]["clat_ns"]["mean"]
    half_turn_ns = 60e9 / rpm / 2
    transfer_ns = 4096 / ((inner_mb_s + outer_mb_s) / 2 / 1000)
    closed = seek_ms * 1e6 + half_turn_ns + transfer_ns
    assert mean_ns == pytest.approx(closed, rel=0.05)


def test_sptf_at_queue_depth_32_more_than_doubles_random_read_throughput(qoslab, tmp_path):
    job = "[q]\nrw=randread\nbs=4k\niodepth={qd}\nnumber_ios=4000\n"
    iops = {}
    # Pure SPTF (no age limit), and with the drive's default age limit (500 ms), which goes in
    # arrival order once the oldest command is past it.
    for qd, sched, age in [(1, "fifo", 0), (32, "fifo", 0), (32, "sptf", 0), (32, "aged", 500)]:
        report = run_json(
            qoslab, tmp_path, job.format(qd=qd), "hdd-7200",
            f"media.scheduler={'fifo' if sched == 'fifo' else 'sptf'}",
            f"media.max_command_age_ns={age}ms",
        )  # fmt: skip
        iops[(qd, sched)] = report["jobs"][0]["read"]["iops"]
    assert iops[(32, "fifo")] == pytest.approx(iops[(1, "fifo")], rel=0.05)
    assert iops[(32, "sptf")] > 2 * iops[(1, "fifo")]
    assert 1.5 * iops[(1, "fifo")] < iops[(32, "aged")] < 0.9 * iops[(32, "sptf")]


BAD_DEVICES = [
    ('[media]\nmodel = "ssd"\nchanels = 4\n', 3, "unknown key 'media.chanels'"),
    (
        '[media]\nmodel = "ssd"\n[media.nand]\nread_lsb_ns = "4KiB"\n',
        4,
        "field 'media.nand.read_lsb_ns': expected a time",
    ),
    (
        '[media]\nmodel = "ssd"\n[media.ftl]\noverprovisioning = -0.05\n',
        4,
        "field 'media.ftl.overprovisioning': expected a fraction",
    ),
    ('[media]\nmodel = "ssd"\n[media.ftl]\noverprovisioning = 0.02\n', None, "impossible geometry"),
    ('[media]\nmodel = "hdd"\nrpm = "fast"\n', 3, "field 'media.rpm'"),
    (
        '[media]\nmodel = "hdd"\naverage_seek_ns = "19.9ms"\n',
        None,
        "no rising seek curve",
    ),
]


@pytest.mark.parametrize(("text", "line", "message"), BAD_DEVICES)
def test_a_bad_device_file_stops_with_one_line_and_exit_2(qoslab, tmp_path, text, line, message):
    device = tmp_path / "dev.toml"
    device.write_text(text)
    jobfile = tmp_path / "job.fio"
    jobfile.write_text(QD1_READS.format(n=10))
    done = qoslab("sim", str(jobfile), "--device", str(device))
    assert done.returncode == 2
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    where = f"{device}:{line}: " if line else f"{device}: "
    assert lines[0].startswith(f"qoslab: error: {where}"), lines[0]
    assert message in lines[0]
    assert done.stdout == ""


def test_every_media_preset_is_listed(qoslab):
    listed = qoslab("sim", "--list-devices", check=True).stdout
    for preset in ["mqsim-default", "consumer-tlc", "enterprise-tlc-plp", "hdd-7200", "hdd-15k"]:
        assert preset in listed


def greedy_mean_field_wa(rho: float, b: int) -> float:
    """Van Houdt's mean-field fixed point for greedy GC (docs/media.md), written out here
    independently of the simulator: above the victims' level j, j x_j = c; level j holds
    m = 1 - c (H_b - H_j) with j m <= c; valid pages c (b - j) + j m = rho b; WA = c / rho."""
    harmonic = [0.0]
    for k in range(1, b + 1):
        harmonic.append(harmonic[-1] + 1 / k)
    for j in range(b - 1, -1, -1):
        tail = harmonic[b] - harmonic[j]
        c = (rho * b - j) / ((b - j) - j * tail)
        m = 1 - c * tail
        if c > 0 and 0 <= m <= 1 and j * m <= c:
            return c / rho
    raise ValueError(rho)


def test_uniform_random_writes_amplify_as_the_mean_field_model_says(qoslab, tmp_path):
    # 2 planes x 512 blocks x 64 pages at 7 % OP, greedy GC, no write cache; fio's
    # norandommap makes the offsets independent and uniform, as the model assumes.
    sets = [
        "media.channels=1",
        "media.chips_per_channel=1",
        "media.dies_per_chip=1",
        "media.planes_per_die=2",
        "media.blocks_per_plane=512",
        "media.pages_per_block=64",
        "media.gc.victim=greedy",
        "media.gc.threshold=0",
        "media.ftl.mapping=dram",
        "media.cache.bytes=0",
        "media.precondition.fill=1",
    ]
    logical = int(2 * 512 * 64 * 0.93)
    job = f"[w]\nrw=randwrite\nnorandommap=1\nbs=8k\niodepth=16\nnumber_ios={3 * logical}\n"
    report = run_json(qoslab, tmp_path, job, "mqsim-default", *sets)
    wa = stage_counters(report, "media")["write_amplification"]
    assert wa == pytest.approx(greedy_mean_field_wa(0.93, 64), rel=0.10)
    # Counting only the blocks in circulation (two free and half of the two open ones kept
    # out of 512 a plane) the model is closer still.
    assert wa == pytest.approx(greedy_mean_field_wa(logical / 2 / (509.5 * 64), 64), rel=0.03)


BESIDE_A_STREAM = """
[global]
ioengine=libaio
direct=1
lat_percentiles=1
time_based=1
runtime=4s
[random]
rw=randread
bs=4k
iodepth=1
[stream]
rw=read
bs=128k
iodepth=31
"""


def test_a_random_reader_beside_a_stream_gets_service_within_the_age_limit(qoslab, tmp_path):
    # At NCQ's 32 the disk's shortest-positioning-time-first pick keeps choosing the stream's
    # next block, the head being there already; the random read waits until it is the oldest
    # command past max_command_age_ns (500 ms), then goes next: at most that, the command in
    # progress and its own service.
    def random_reader(*sets):
        out = run_json(qoslab, tmp_path, BESIDE_A_STREAM, "hdd-7200", "path.driver=ata", *sets)
        job = next(j for j in out["jobs"] if j["jobname"] == "random")["read"]
        return job, stage_counters(out, "media")

    job, media = random_reader()
    assert job["total_ios"] >= 6  # 4 s at one read per ~0.5 s
    assert job["lat_ns"]["max"] <= 500e6 + 2 * 40e6
    assert media["aged_commands"] >= job["total_ios"] - 1
    # Without the bound the reader starves: a read waits most of the 4 s run.
    starved, _ = random_reader("media.max_command_age_ns=0")
    assert starved["total_ios"] <= 2 and starved["lat_ns"]["max"] >= 3e9
