"""MQSim's two input files, read directly: `ssdconfig.xml` (the device) and `workload.xml`
(the I/O flows).

The device becomes a device file of the SSD model: each MQSim parameter that maps onto one of
the model's tunables is written there (with its MQSim name as a comment), the constants of
MQSim's code that are not parameters (its TLP and doorbell costs, its ONFI NV-DDR2 command
timings) are written as MQSim has them, and every parameter that maps onto nothing is named in
one warning. The workload becomes a fio job file: each synthetic flow a job, each scenario a
reporting group started after the previous one (`stonewall`). The parameter names and their
meanings are MQSim's (CMU-SAFARI/MQSim, `src/exec/*_Parameter_Set.cpp` and its README);
configs/devices/mqsim/ holds MQSim's own pair, with its licence.
"""

from __future__ import annotations

import math
import xml.etree.ElementTree as ET
from dataclasses import dataclass, field
from pathlib import Path

from qoslab import limits
from qoslab.errors import InputError

SECTOR_BYTES = 512

# The SSD model's scheduling that follows MQSim's transaction scheduler (docs/media.md): a
# device read from ssdconfig.xml runs in it, so MQSim's two files give MQSim's figures.
MQSIM_SCHEDULING = ("scheduling", "mqsim")

# MQSim's code constants (not parameters of ssdconfig.xml), as configs/devices/mqsim-default
# documents them: its PCIe TLP framing, the doorbell and SQ-entry request messages, the
# on-flash translation entries, and the ONFI NV-DDR2 command timings of
# ssd/ONFI_Channel_NVDDR2.h.
MQSIM_CONSTANTS = {
    "link.doorbell_ns": 8,
    "controller.cmd_ns": 8,
    "link.tlp_payload_bytes": 128,
    "link.tlp_overhead_bytes": 28,
    "link.queue_entries": True,
    "media.ftl.translation_entry_bytes": 6,
    "media.ftl.translation_read_bytes": SECTOR_BYTES,
    "media.ftl.unmapped_reads_hit_flash": True,
    "media.cache.plp": False,
    "media.nand.multiplane": True,
}
NVDDR2_COMMANDS = {
    "media.nand.read_cmd_ns": 290,
    "media.nand.read_cmd_per_plane_ns": 650,
    "media.nand.program_cmd_ns": 361,
    "media.nand.program_cmd_per_plane_ns": 816,
    "media.nand.erase_cmd_ns": 220,
    "media.nand.erase_cmd_per_plane_ns": 700,
}


@dataclass
class Converted:
    """A converted file: the text (TOML or fio job file), and the MQSim parameters that map
    onto nothing, each with why."""

    text: str
    unmapped: list[str] = field(default_factory=list)

    def warning(self, source: Path) -> str | None:
        if not self.unmapped:
            return None
        return f"{source}: MQSim parameters qoslab does not model: " + ", ".join(self.unmapped)


def _parse(path: Path, root_tag: str) -> ET.Element:
    try:
        root = ET.parse(path).getroot()
    except FileNotFoundError:
        raise InputError("no such file", path=path) from None
    except ET.ParseError as err:
        line = err.position[0] if err.position else None
        raise InputError(f"not well-formed XML: {err.msg}", path=path, line=line) from None
    except LookupError as err:  # <?xml encoding="..."?> names an encoding Python lacks
        raise InputError(f"not readable XML: {err}", path=path) from None
    if root.tag != root_tag:
        raise InputError(f"expected MQSim's <{root_tag}>, found <{root.tag}>", path=path)
    return root


class _Params:
    """The parameters of one XML element, read with their file and name in messages."""

    def __init__(self, element: ET.Element, path: Path):
        self.path = path
        self.values = {child.tag: (child.text or "").strip() for child in element}
        self.used: set[str] = set()

    def has(self, name: str) -> bool:
        return name in self.values

    def text(self, name: str) -> str:
        if name not in self.values:
            raise InputError(f"<{name}> is missing", path=self.path)
        self.used.add(name)
        return self.values[name]

    def number(self, name: str, *, lo: float = 0, hi: float | None = None) -> float:
        """A finite number in [lo, hi] (qoslab.limits' one rule)."""
        return float(limits.number(self.text(name), f"<{name}>", lo=lo, hi=hi, path=self.path))

    def integer(self, name: str, *, lo: int = 0, hi: int | None = None) -> int:
        """An integer in [lo, hi] (at most 2^63 - 1 when `hi` is not given)."""
        value = limits.number(
            self.text(name), f"<{name}>", lo=lo, hi=hi, integer=True, path=self.path
        )
        return int(value)

    def time_ns(self, name: str) -> int:
        """A time in whole ns, at most the simulated clock's range."""
        return self.integer(name, hi=limits.MAX_TIME_NS)

    def flag(self, name: str) -> bool:
        value = self.text(name).lower()
        if value not in ("true", "false"):
            raise InputError(f"<{name}>: expected true or false, got '{value}'", path=self.path)
        return value == "true"

    def choice(self, name: str, choices: dict[str, object]):
        value = self.text(name)
        if value not in choices:
            raise InputError(
                f"<{name}>: expected one of {', '.join(choices)}, got '{value}'", path=self.path
            )
        return choices[value]

    def unused(self) -> list[str]:
        return [n for n in self.values if n not in self.used]


# Unmapped parameters of ssdconfig.xml, with why they change nothing qoslab simulates.
DEVICE_UNMAPPED = {
    "SATA_Processing_Delay": "SATA only",
    "Enable_ResponseTime_Logging": "use --timeseries",
    "ResponseTime_Logging_Period_Length": "use --timeseries",
    "Seed": "use --seed",
    "Caching_Mechanism": "one write-back cache",
    "Data_Cache_Sharing_Mode": "one cache for all jobs",
    "CMT_Sharing_Mode": "one mapping cache for all jobs",
    "Use_Copyback_for_GC": "GC moves data over the channel",
    "Preemptible_GC_Enabled": "GC is not pre-empted",
    "GC_Hard_Threshold": "GC is not pre-empted",
    "Dynamic_Wearleveling_Enabled": "no wear levelling",
    "Static_Wearleveling_Enabled": "no wear levelling",
    "Static_Wearleveling_Threshold": "no wear levelling",
    "Preferred_suspend_erase_time_for_write": "writes do not suspend erases",
    "Preferred_suspend_write_time_for_read": "one suspension threshold",
    "Block_PE_Cycles_Limit": "no wear-out",
    "Page_Metadat_Capacity": "metadata is not transferred",
}


def device_from_ssdconfig(path: str | Path, workload: Workload | None = None) -> Converted:
    """The SSD model's device file for MQSim's ssdconfig.xml; `workload` gives the occupancy
    that MQSim's preconditioning fills the drive to."""
    path = Path(path)
    root = _parse(path, "Execution_Parameter_Set")
    sections = {child.tag: child for child in root}
    for tag in ("Host_Parameter_Set", "Device_Parameter_Set"):
        if tag not in sections:
            raise InputError(f"<{tag}> is missing", path=path)
    host = _Params(sections["Host_Parameter_Set"], path)
    device = _Params(sections["Device_Parameter_Set"], path)
    flash_element = sections["Device_Parameter_Set"].find("Flash_Parameter_Set")
    if flash_element is None:
        raise InputError("<Flash_Parameter_Set> is missing", path=path)
    flash = _Params(flash_element, path)
    device.used.add("Flash_Parameter_Set")

    keys: dict[str, tuple[object, str]] = {}

    def put(key: str, value: object, source: str) -> None:
        keys[key] = (value, source)

    put("link.lane_rate", host.number("PCIe_Lane_Bandwidth"), "PCIe_Lane_Bandwidth (GB/s)")
    put("link.lanes", host.integer("PCIe_Lane_Count"), "PCIe_Lane_Count")
    depth = device.integer("IO_Queue_Depth")
    put("host.sq_depth", depth, "IO_Queue_Depth")
    put("host.cq_depth", depth, "IO_Queue_Depth")
    put("controller.fetch_limit_per_sq", device.integer("Queue_Fetch_Size"), "Queue_Fetch_Size")
    # What the SSD model is; anything else is refused.
    for name, value in (
        ("Memory_Type", "FLASH"),
        ("HostInterface_Type", "NVME"),
        ("Address_Mapping", "PAGE_LEVEL"),
    ):
        device.choice(name, {value: None})
    put(
        "media.model",
        "ssd",
        "Memory_Type = FLASH, HostInterface_Type = NVME, Address_Mapping = PAGE_LEVEL",
    )

    geometry = [
        ("channels", device, "Flash_Channel_Count"),
        ("chips_per_channel", device, "Chip_No_Per_Channel"),
        ("dies_per_chip", flash, "Die_No_Per_Chip"),
        ("planes_per_die", flash, "Plane_No_Per_Die"),
        ("blocks_per_plane", flash, "Block_No_Per_Plane"),
        ("pages_per_block", flash, "Page_No_Per_Block"),
        ("page_bytes", flash, "Page_Capacity"),
    ]
    sizes = {}
    for key, params, name in geometry:
        # A drive has at least one of each; a page holds at least one sector.
        sizes[key] = params.integer(name, lo=SECTOR_BYTES if key == "page_bytes" else 1)
        put(f"media.{key}", sizes[key], name)
    # MQSim times a channel transfer in whole ns: (int)(1000 / rate) per transfer of `width`
    # bytes (ssd/ONFI_Channel_NVDDR2), so 333 MT/s x 1 B is 3 ns per byte. Past 1,000 MT/s
    # that whole number is 0, a free channel in MQSim; NAND interfaces run at 1,200 to
    # 2,400 MT/s, so there the channel takes its exact rate (1,000 MT/s and 1,001 MT/s then
    # give 1,000 and 1,001 MB/s per byte of width: the rate never falls as the clock rises).
    width = device.integer("Flash_Channel_Width", lo=1)
    mts = device.number("Channel_Transfer_Rate")
    if mts <= 0:
        raise InputError(f"<Channel_Transfer_Rate>: expected MT/s above 0, got {mts:g}", path=path)
    ns_per_transfer = int(1000 / mts)
    mb_per_s = width * 1000 / ns_per_transfer if ns_per_transfer >= 1 else width * mts
    put(
        "media.channel_rate",
        f"{mb_per_s:.6f}MB/s",
        "Channel_Transfer_Rate x Flash_Channel_Width, whole ns per transfer up to 1,000 MT/s",
    )
    put(
        "media.allocation_order",
        device.choice(
            "Plane_Allocation_Scheme",
            {s: s.lower() for s in _ALLOCATION_SCHEMES},
        ),
        "Plane_Allocation_Scheme",
    )

    cell = flash.choice("Flash_Technology", {"SLC": "slc", "MLC": "mlc", "TLC": "tlc"})
    put("media.nand.cell", cell, "Flash_Technology")
    for kind, name in (("read", "Page_Read_Latency"), ("program", "Page_Program_Latency")):
        for bits in ("LSB", "CSB", "MSB"):
            put(
                f"media.nand.{kind}_{bits.lower()}_ns",
                flash.time_ns(f"{name}_{bits}"),
                f"{name}_{bits}",
            )
    put("media.nand.erase_ns", flash.time_ns("Block_Erase_Latency"), "Block_Erase_Latency")
    suspension = flash.choice(
        "CMD_Suspension_Support",
        {
            "NONE": (False, False),
            "ERASE": (True, False),
            "PROGRAM": (False, True),
            "PROGRAM_ERASE": (True, True),
        },
    )
    put("media.nand.erase_suspend", suspension[0], "CMD_Suspension_Support")
    put("media.nand.program_suspend", suspension[1], "CMD_Suspension_Support")
    put("media.nand.suspend_erase_ns", flash.time_ns("Suspend_Erase_Time"), "Suspend_Erase_Time")
    put(
        "media.nand.suspend_program_ns",
        flash.time_ns("Suspend_Program_Time"),
        "Suspend_Program_Time",
    )
    # MQSim's parser looks for "Prefered_..." (one r), so the shipped file's spelling is not
    # read and MQSim's default (700 us, the same) applies; either spelling is read here.
    for name in ("Preferred_suspend_erase_time_for_read", "Prefered_suspend_erase_time_for_read"):
        if device.has(name):
            put("media.nand.suspend_min_remaining_ns", device.time_ns(name), name)
    if device.choice("Flash_Comm_Protocol", {"NVDDR2": True}):
        for key, value in NVDDR2_COMMANDS.items():
            put(key, value, "Flash_Comm_Protocol = NVDDR2 (ONFI NV-DDR2 timing)")

    put(
        "media.ftl.overprovisioning",
        device.number("Overprovisioning_Ratio"),
        "Overprovisioning_Ratio",
    )
    ideal = device.flag("Ideal_Mapping_Table")
    put("media.ftl.mapping", "dram" if ideal else "cached", "Ideal_Mapping_Table")
    put("media.ftl.cmt_bytes", device.integer("CMT_Capacity"), "CMT_Capacity")
    # ssd/Address_Mapping_Unit_Page_Level.cpp: an entry holds two page numbers and a bitmap of
    # the page's sectors.
    pages = math.prod(sizes[k] for k, _, _ in geometry[:6])
    sectors = sizes["page_bytes"] // SECTOR_BYTES
    entry = math.ceil((2 * math.ceil(math.log2(pages)) + sectors) / 8)
    put("media.ftl.cmt_entry_bytes", entry, "CMT entry: ceil((2 log2(pages) + sectors) / 8)")
    policy = device.choice("GC_Block_Selection_Policy", _GC_POLICIES)
    put("media.gc.victim", policy, "GC_Block_Selection_Policy")
    if device.values["GC_Block_Selection_Policy"].startswith("RANDOM"):
        # A random victim is the best of one random choice.
        put("media.gc.rga.choices", 1, "GC_Block_Selection_Policy = RANDOM: one random choice")
    elif policy == "rga":
        choices = int(math.log2(sizes["blocks_per_plane"]))
        put("media.gc.rga.choices", choices, "MQSim's RGA: log2(Block_No_Per_Plane) choices")
    put("media.gc.threshold", device.number("GC_Exec_Threshold"), "GC_Exec_Threshold")

    cache_bytes = device.integer("Data_Cache_Capacity")
    if workload is not None and workload.caching and workload.caching <= {"TURNED_OFF"}:
        cache_bytes = 0
    put("media.cache.bytes", cache_bytes, "Data_Cache_Capacity (write cache)")
    for key, name in (
        ("dram_row_bytes", "Data_Cache_DRAM_Row_Size"),
        ("dram_rate_mts", "Data_Cache_DRAM_Data_Rate"),
        ("dram_burst_bytes", "Data_Cache_DRAM_Data_Busrt_Size"),
        ("dram_trcd_ns", "Data_Cache_DRAM_tRCD"),
        ("dram_tcl_ns", "Data_Cache_DRAM_tCL"),
        ("dram_trp_ns", "Data_Cache_DRAM_tRP"),
    ):
        put(f"media.cache.{key}", device.integer(name), name)

    device.text("Transaction_Scheduling_Policy")
    put(f"media.{MQSIM_SCHEDULING[0]}", MQSIM_SCHEDULING[1], "Transaction_Scheduling_Policy")

    unmapped = []
    fill = 0.0
    if device.flag("Enabled_Preconditioning"):
        if workload is not None and workload.occupancy:
            fill = max(workload.occupancy) / 100
        else:
            unmapped.append("Enabled_Preconditioning (the fill comes from a workload's flows)")
    put("media.precondition.fill", fill, "Enabled_Preconditioning x Initial_Occupancy_Percentage")
    for key, value in {**MQSIM_CONSTANTS}.items():
        put(key, value, "MQSim's code")

    for params in (host, device, flash):
        for name in params.unused():
            why = DEVICE_UNMAPPED.get(name, "not an MQSim parameter qoslab knows")
            unmapped.append(f"{name} ({why})")
    return Converted(_toml(keys, path), unmapped)


_ALLOCATION_SCHEMES = [
    "CWDP",
    "CWPD",
    "CDWP",
    "CDPW",
    "CPWD",
    "CPDW",
    "WCDP",
    "WCPD",
    "WDCP",
    "WDPC",
    "WPCD",
    "WPDC",
    "DCWP",
    "DCPW",
    "DWCP",
    "DWPC",
    "DPCW",
    "DPWC",
    "PCWD",
    "PCDW",
    "PWCD",
    "PWDC",
    "PDCW",
    "PDWC",
]
_GC_POLICIES = {
    "GREEDY": "greedy",
    "RGA": "rga",
    "FIFO": "fifo",
    # MQSim's random variants differ in which blocks may be drawn; all draw one at random.
    "RANDOM": "rga",
    "RANDOM_P": "rga",
    "RANDOM_PP": "rga",
}


def _toml_value(value: object) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return f'"{value}"'
    return repr(value)


def _toml(keys: dict[str, tuple[object, str]], source: Path) -> str:
    sections: dict[str, list[str]] = {}
    for key, (value, why) in keys.items():
        section, _, name = key.rpartition(".")
        sections.setdefault(section, []).append(f"{name} = {_toml_value(value)}  # {why}")
    lines = [f'description = "MQSim device {source.name}, converted by qoslab"']
    for section in (
        "host",
        "controller",
        "link",
        "media",
        "media.nand",
        "media.ftl",
        "media.gc",
        "media.gc.rga",
        "media.cache",
        "media.precondition",
    ):
        if section in sections:
            lines += ["", f"[{section}]", *sections[section]]
    return "\n".join(lines) + "\n"


@dataclass
class Workload:
    """What the device conversion needs to know of the flows."""

    occupancy: list[float] = field(default_factory=list)
    caching: set[str] = field(default_factory=set)


FLOW_UNMAPPED = {
    "Intensity": "MQSim does not read it; BANDWIDTH flows take Bandwidth",
    "Channel_IDs": "a job uses the whole drive",
    "Chip_IDs": "a job uses the whole drive",
    "Die_IDs": "a job uses the whole drive",
    "Plane_IDs": "a job uses the whole drive",
    "Initial_Occupancy_Percentage": "only with the device's Enabled_Preconditioning",
}
_PRIORITIES = {
    # MQSim's NVMe priority classes as the I/O priorities qoslab's WRR arbitration maps onto
    # the same SQ classes (real-time: urgent; best effort 0-2 high, 3-5 medium, 6-7 low).
    "URGENT": "prioclass=1\nprio=0",
    "HIGH": "prioclass=2\nprio=0",
    "MEDIUM": "prioclass=2\nprio=4",
    "LOW": "prioclass=2\nprio=7",
}


def jobs_from_workload(path: str | Path) -> tuple[Converted, Workload]:
    """A fio job file for MQSim's workload.xml: a job per synthetic flow, a `stonewall` at
    each scenario after the first. Trace-based flows are named among the unmapped parameters
    (replay their traces with `qoslab sim --trace`)."""
    path = Path(path)
    root = _parse(path, "MQSim_IO_Scenarios")
    info = Workload()
    unmapped: list[str] = []
    sections: list[str] = []
    for s, scenario in enumerate(root.findall("IO_Scenario"), start=1):
        first = True
        for f, flow in enumerate(scenario, start=1):
            params = _Params(flow, path)
            if flow.tag == "IO_Flow_Parameter_Set_Trace_Based":
                unmapped.append(
                    f"scenario {s} flow {f}: a trace replay of {params.text('File_Path')} "
                    "(use qoslab sim --trace)"
                )
                continue
            if flow.tag != "IO_Flow_Parameter_Set_Synthetic":
                raise InputError(f"scenario {s}: unknown flow <{flow.tag}>", path=path)
            lines = [f"[scenario{s}-flow{f}]"]
            if first and sections:
                lines.append("stonewall")
            first = False
            lines += _synthetic_flow(params, info)
            for name in params.unused():
                why = FLOW_UNMAPPED.get(name, "not an MQSim parameter qoslab knows")
                if f"{name} ({why})" not in unmapped:
                    unmapped.append(f"{name} ({why})")
            sections.append("\n".join(lines) + "\n")
    if not sections:
        raise InputError("no synthetic flow to run", path=path)
    header = (
        f"; MQSim workload {path.name}, converted by qoslab: a job per synthetic flow.\n"
        "; MQSim's host submits asynchronously, straight to the device, each request timed\n"
        "; at its own completion and (BANDWIDTH flows) issued at its time whatever is in\n"
        "; flight: in fio, libaio with direct=1 and io_submit_mode=offload.\n"
        "[global]\nioengine=libaio\ndirect=1\nio_submit_mode=offload\n\n"
    )
    return Converted(header + "\n".join(sections), unmapped), info


def _synthetic_flow(p: _Params, info: Workload) -> list[str]:
    lines = []
    lines += _PRIORITIES[p.choice("Priority_Class", {k: k for k in _PRIORITIES})].split("\n")
    caching = p.choice(
        "Device_Level_Data_Caching_Mode",
        {m: m for m in ("WRITE_CACHE", "TURNED_OFF", "READ_CACHE", "WRITE_READ_CACHE")},
    )
    info.caching.add(caching)
    info.occupancy.append(p.number("Initial_Occupancy_Percentage"))
    working_set = p.number("Working_Set_Percentage")
    if not 0 < working_set <= 100:
        raise InputError(
            f"<Working_Set_Percentage>: expected 1 to 100, got {working_set:g}", path=p.path
        )
    lines.append(f"size={working_set:g}%")
    reads = p.number("Read_Percentage")
    distribution = p.choice(
        "Address_Distribution",
        {d: d for d in ("RANDOM_UNIFORM", "RANDOM_HOTCOLD", "STREAMING")},
    )
    pattern = {100: "read", 0: "write"}.get(reads, "rw")
    if distribution != "STREAMING":
        pattern = "rand" + pattern
    lines.append(f"rw={pattern}")
    if pattern in ("rw", "randrw"):
        lines.append(f"rwmixread={reads:g}")
    hot = p.number("Percentage_of_Hot_Region")
    if distribution == "RANDOM_HOTCOLD":
        # (100 - hot) % of the requests go to the first hot % of the working set.
        lines.append(f"random_distribution=zoned:{100 - hot:g}/{hot:g}:{hot:g}/{100 - hot:g}")
    sectors = p.integer("Average_Request_Size")
    p.choice("Request_Size_Distribution", {"FIXED": None, "NORMAL": None})
    variance = p.integer("Variance_Request_Size")
    if variance and p.values["Request_Size_Distribution"] == "NORMAL":
        low, high = max(1, sectors - 2 * variance), sectors + 2 * variance
        lines.append(f"bsrange={low * SECTOR_BYTES}-{high * SECTOR_BYTES}")
    else:
        lines.append(f"bs={sectors * SECTOR_BYTES}")
    if p.flag("Generated_Aligned_Addresses"):
        lines.append(f"blockalign={p.integer('Address_Alignment_Unit') * SECTOR_BYTES}")
    else:
        p.text("Address_Alignment_Unit")
    lines.append(f"randseed={p.integer('Seed')}")
    generator = p.choice("Synthetic_Generator_Type", {"QUEUE_DEPTH": 0, "BANDWIDTH": 1})
    if generator == 0:
        lines.append(f"iodepth={p.integer('Average_No_of_Reqs_in_Queue')}")
        if p.has("Bandwidth"):
            p.text("Bandwidth")
    else:
        # Host_System.cpp: exponential gaps of 1e9 / (Bandwidth / 512 / request sectors) ns.
        rate = p.number("Bandwidth") / SECTOR_BYTES / sectors
        lines += [f"rate_iops={max(1, round(rate))}", "rate_process=poisson", "iodepth=65535"]
        p.text("Average_No_of_Reqs_in_Queue")
    stop_ns = p.time_ns("Stop_Time")
    total = p.integer("Total_Requests_To_Generate")
    # host/IO_Flow_Synthetic.cpp: a non-zero Stop_Time wins over the request count.
    if stop_ns > 0:
        lines += [f"runtime={stop_ns // 1000}us", "time_based"]
    elif total > 0:
        lines.append(f"number_ios={total}")
    else:
        raise InputError("a flow needs a Stop_Time or a Total_Requests_To_Generate", path=p.path)
    return lines
