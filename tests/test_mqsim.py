"""MQSim's own input files run as they are: `qoslab sim --mqsim-workload workload.xml --device
ssdconfig.xml`, and `qoslab mqsim convert` writes their qoslab equivalents.

The check on the device is independent of the converter: configs/devices/mqsim-default.toml
was written by hand from MQSim's documentation and source, and the device read from MQSim's
shipped ssdconfig.xml must simulate exactly as that preset does.
"""

from __future__ import annotations

import json
import re
import xml.etree.ElementTree as ET

from conftest import ROOT

MQSIM = ROOT / "configs" / "devices" / "mqsim"
SSDCONFIG, WORKLOAD = MQSIM / "ssdconfig.xml", MQSIM / "workload.xml"
MIXED = [
    "--name=mixed",
    "--ioengine=libaio",
    "--direct=1",
    "--rw=randrw",
    "--rwmixread=70",
    "--iodepth=32",
    "--number_ios=20000",
]


def run_json(qoslab, *args, cwd=None):
    done = qoslab("sim", *args, "--output-format", "json", cwd=cwd)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout), done.stderr


def test_mqsims_ssdconfig_simulates_exactly_as_the_hand_made_preset(qoslab):
    # The XML runs in MQSim's scheduling mode; the preset keeps the model's default.
    preset, _ = run_json(
        qoslab, *MIXED, "--device", "mqsim-default", "--set", "media.scheduling=mqsim"
    )
    from_xml, warnings = run_json(qoslab, *MIXED, "--device", SSDCONFIG)
    assert from_xml["jobs"] == preset["jobs"]
    assert from_xml["qoslab"]["stages"] == preset["qoslab"]["stages"]
    assert from_xml["jobs"][0]["write"]["total_ios"] > 0
    assert from_xml["qoslab"]["device"] == str(SSDCONFIG)
    # Every parameter of the file is either mapped (named in the device file) or in the warning.
    (warning,) = warnings.splitlines()
    assert warning.startswith(f"qoslab: warning: {SSDCONFIG}: MQSim parameters qoslab does not")
    from qoslab.sim.mqsim import device_from_ssdconfig

    device_text = device_from_ssdconfig(SSDCONFIG).text
    for element in ET.parse(SSDCONFIG).iter():
        if len(element) == 0:
            assert element.tag in warning or element.tag in device_text, element.tag
    for unmapped in ("Use_Copyback_for_GC", "Static_Wearleveling_Threshold", "Seed"):
        assert f" {unmapped} (" in warning
    assert 'scheduling = "mqsim"' in device_text


def test_mqsims_shipped_workload_runs_its_scenarios_one_after_another(qoslab):
    report, stderr = run_json(qoslab, "--mqsim-workload", WORKLOAD, "--device", SSDCONFIG)
    jobs = report["jobs"]
    names = ["scenario1-flow1", "scenario1-flow2", "scenario2-flow1", "scenario2-flow2"]
    assert [j["jobname"] for j in jobs] == names
    assert [j["groupid"] for j in jobs] == [0, 0, 1, 1]
    # Scenario 1: random 4 KiB writes at QD 16 and 2; scenario 2: random reads at QD 16.
    assert [j["job options"]["iodepth"] for j in jobs] == ["16", "2", "16", "16"]
    for job, op in zip(jobs, ["write", "write", "read", "read"], strict=True):
        stats = job[op]
        # Stop_Time: 10 s, then the writes in flight drain (in MQSim's scheduling a write may
        # wait for a flash program, 0.76 ms).
        assert stats["total_ios"] > 0 and 10_000 <= stats["runtime"] <= 10_001
        assert stats["io_bytes"] == 4096 * stats["total_ios"]
        assert job["read" if op == "write" else "write"]["total_ios"] == 0
    # The queue depths hold: by Little's law, QD 16 completes 8 times what QD 2 does.
    ratio = jobs[0]["write"]["total_ios"] / jobs[1]["write"]["total_ios"]
    assert 7 < ratio < 9
    assert "Intensity (MQSim does not read it" in stderr
    assert "a trace replay of traces/tpcc-small.trace (use qoslab sim --trace)" in stderr


def test_convert_writes_a_device_file_and_a_job_file_that_run_the_same(qoslab, tmp_path):
    done = qoslab("mqsim", "convert", SSDCONFIG, WORKLOAD, "--out", tmp_path)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == [
        f"wrote {tmp_path}/device.toml",
        f"wrote {tmp_path}/workload.fio",
    ]
    converted, _ = run_json(qoslab, *MIXED, "--device", tmp_path / "device.toml")
    preset, _ = run_json(
        qoslab, *MIXED, "--device", "mqsim-default", "--set", "media.scheduling=mqsim"
    )
    assert converted["jobs"] == preset["jobs"]
    parsed = json.loads(
        qoslab("sim", "--parse-only", "--output-format=json", tmp_path / "workload.fio").stdout
    )
    first = parsed["jobs"][0]
    assert (first["rw"], first["bs_bytes"][1], first["blockalign_bytes"][1]) == (
        "randwrite",
        4096,
        8192,
    )
    assert first["size"] == {"percent": 50.0} and first["runtime_ns"] == 10**10


FLOW = """<IO_Flow_Parameter_Set_Synthetic>
<Priority_Class>MEDIUM</Priority_Class><Device_Level_Data_Caching_Mode>WRITE_CACHE</Device_Level_Data_Caching_Mode>
<Channel_IDs>0</Channel_IDs><Chip_IDs>0</Chip_IDs><Die_IDs>0</Die_IDs><Plane_IDs>0</Plane_IDs>
<Initial_Occupancy_Percentage>50</Initial_Occupancy_Percentage><Working_Set_Percentage>20</Working_Set_Percentage>
<Synthetic_Generator_Type>{generator}</Synthetic_Generator_Type><Read_Percentage>70</Read_Percentage>
<Address_Distribution>{distribution}</Address_Distribution><Percentage_of_Hot_Region>10</Percentage_of_Hot_Region>
<Generated_Aligned_Addresses>false</Generated_Aligned_Addresses><Address_Alignment_Unit>16</Address_Alignment_Unit>
<Request_Size_Distribution>FIXED</Request_Size_Distribution><Average_Request_Size>16</Average_Request_Size>
<Variance_Request_Size>0</Variance_Request_Size><Seed>5</Seed><Average_No_of_Reqs_in_Queue>4</Average_No_of_Reqs_in_Queue>
<Bandwidth>81920000</Bandwidth><Stop_Time>0</Stop_Time><Total_Requests_To_Generate>1000</Total_Requests_To_Generate>
</IO_Flow_Parameter_Set_Synthetic>"""


def test_flows_become_fio_jobs_by_mqsims_own_rules(tmp_path):
    from qoslab.sim.mqsim import jobs_from_workload

    path = tmp_path / "w.xml"
    flows = FLOW.format(generator="BANDWIDTH", distribution="RANDOM_HOTCOLD")
    flows += FLOW.format(generator="QUEUE_DEPTH", distribution="STREAMING")
    path.write_text(f"<MQSim_IO_Scenarios><IO_Scenario>{flows}</IO_Scenario></MQSim_IO_Scenarios>")
    converted, info = jobs_from_workload(path)
    head, bandwidth, streaming = converted.text.split("\n\n")
    # MQSim's host: asynchronous, direct, each request timed at its own completion.
    assert "\nioengine=libaio\ndirect=1\nio_submit_mode=offload" in head
    # 81,920,000 B/s of 16-sector (8 KiB) requests: 10,000 requests per second, exponential gaps.
    for line in ["rate_iops=10000", "rate_process=poisson", "rw=randrw", "rwmixread=70"]:
        assert f"\n{line}\n" in bandwidth, line
    # 90 % of the requests go to the first 10 % of the working set.
    assert "\nrandom_distribution=zoned:90/10:10/90\n" in bandwidth
    for line in ["rw=rw", "iodepth=4", "bs=8192", "size=20%", "number_ios=1000", "prio=4"]:
        assert f"\n{line}\n" in streaming, line
    assert "blockalign" not in converted.text
    assert info.occupancy == [50, 50]


def test_a_broken_xml_file_is_one_line_naming_file_and_line(qoslab, tmp_path):
    bad = tmp_path / "ssd.xml"
    bad.write_text("<Execution_Parameter_Set>\n<Host_Parameter_Set>\n</Execution_Parameter_Set>\n")
    done = qoslab("sim", "--name=x", "--device", bad)
    assert done.returncode == 2
    assert re.fullmatch(rf"qoslab: error: {bad}:3: not well-formed XML: .*\n", done.stderr)
