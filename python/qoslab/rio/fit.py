"""The rio presets' fitted CPU costs: the initiator's cycles per request (`[rdma]`) and HORAE's
synchronous wait (`[fabric] context_switch_ns`), fitted together to the document's Figure 2
(Liao et al., "Rio", EuroSys'23, section 3.1) by the procedure of docs/rio.md ("Fitted CPU
costs"). `qoslab rio fit` runs it and prints what the presets hold; tests/test_rio_fit.py
requires `configs/devices/rio-flash.toml` and `rio-optane.toml` to hold exactly its values.

What goes in: the document's statements below (each with its section), the drives' bandwidths
from the presets (data sheets, cited in their descriptions) and the model itself, measured on
the simulator. Nothing is fitted to a ratio the study checks (`qoslab rio study`'s table)."""

from __future__ import annotations

import re
import tomllib
from collections.abc import Callable
from dataclasses import dataclass

# The document's numbers behind the fit.
# 6.1: the servers' Xeon Gold 5220 cores run at 2.20 GHz.
CPU_GHZ = 2.2
# 3.1, Figure 2's workload: each thread writes an ordered request of two 4 KB blocks, then an
# ordered 4 KB request (a journal's descriptor and metadata, then its commit record).
REQUEST_BYTES = (8192, 4096)
# 3.1: orderless requests fill both the flash and the Optane SSD "with only a single thread".
ORDERLESS_FULL_AT = 1
# 3.1: "HORAE needs more than 8 CPU cores to fully drive existing SSDs".
HORAE_SHORT_AT = 8
# 3.1: the test runs "up to 12 threads"; read with the sentence above, HORAE drives the SSDs
# fully at some thread count above 8 and at most 12.
MOST_THREADS = 12
# Figure 2(a) and 2(b): the flash and the Optane SSD, the presets of the document's drives.
DRIVES = ("rio-flash", "rio-optane")

# The transport's cycle costs the fit scales (their split among the operations stays the
# model's assumption; the document bounds only their sum per request).
CYCLE_KEYS = ("submit_cycles", "complete_cycles", "message_cycles", "doorbell_cycles")
# Two scales of the model's assumed cycles at which one orderless thread is bound by its CPU
# (below either drive's channel): its time per request is a line through them.
SCALES = (1.0, 0.8)
# Writes per run of a fit point: Figure 2's pattern, enough for the rate to settle.
WRITES = 4000


def figure2_job(ordering: str, threads: int, writes: int = WRITES, iodepth: int = 32) -> str:
    """Figure 2's journaling pattern as a fio job: each thread one ordered stream of 8 KiB and
    4 KiB sequential writes to its own area. fio's `bssplit` draws the two sizes at random
    (half each) where the document alternates them; the mean request is the same."""
    return "\n".join(
        [
            "[global]",
            "ioengine=libaio",
            "direct=1",
            "rw=write",
            "bssplit=8k/50:4k/50",
            f"iodepth={iodepth}",
            f"number_ios={writes}",
            f"numjobs={threads}",
            f"ordering={ordering}",
            "group_reporting=1",
            "",
            "[figure2]",
            "",
        ]
    )


def mean_request_bytes() -> float:
    return sum(REQUEST_BYTES) / len(REQUEST_BYTES)


_RATE = re.compile(r"^\s*([0-9.]+)\s*([kMG]?)B/s\s*$")


def channel_bytes_per_s(device: str) -> float:
    """The drive's device-wide bandwidth, `[media] bandwidth` of the preset (in its `kb_base`)."""
    from qoslab.sim.api import preset_text

    text = preset_text(device)
    if text is None:
        raise ValueError(f"{device}: no such preset")
    doc = tomllib.loads(text)
    m = _RATE.match(str(doc["media"]["bandwidth"]))
    if m is None:
        raise ValueError(f"{device}: [media] bandwidth {doc['media']['bandwidth']!r} is not N GB/s")
    base = float(doc.get("kb_base", 1024))
    return float(m.group(1)) * {"": 1.0, "k": base, "M": base**2, "G": base**3}[m.group(2)]


def initiator_budget_ns(channels: dict[str, float]) -> float:
    """The most an orderless thread may spend per request when ORDERLESS_FULL_AT of them fill
    every drive of Figure 2: that many mean requests over the fastest channel."""
    return ORDERLESS_FULL_AT * mean_request_bytes() / max(channels.values()) * 1e9


def horae_window_ns(channels: dict[str, float]) -> tuple[float, float]:
    """One HORAE thread's time per request that the document allows: with n threads at r
    requests per second each, HORAE fills a drive once n r reaches its channel, and that n is
    above HORAE_SHORT_AT and at most MOST_THREADS on every drive of Figure 2. The interval
    (low, high] common to the drives."""
    per_drive = [
        (
            HORAE_SHORT_AT * mean_request_bytes() / bw * 1e9,
            MOST_THREADS * mean_request_bytes() / bw * 1e9,
        )
        for bw in channels.values()
    ]
    low = max(lo for lo, _ in per_drive)
    high = min(hi for _, hi in per_drive)
    if low >= high:
        raise ValueError("Figure 2's statements leave no time per request for HORAE")
    return low, high


def assumed_cycles() -> dict[str, int]:
    """The transport's cycle costs the model assumes (`[rdma]`'s defaults)."""
    from qoslab.sim.api import tunables

    found = {
        name: int(float(default))
        for table, name, _, default, _ in tunables()
        if table.startswith("rdma") and name in CYCLE_KEYS
    }
    return {k: found[k] for k in CYCLE_KEYS}


def cycle_sets(cycles: dict[str, float]) -> list[str]:
    return [f"rdma.{k}={round(v)}" for k, v in cycles.items()]


def per_request_ns(ordering: str, device: str, sets: list[str], seed: int = 1) -> float:
    """One thread's simulated time per request on Figure 2's pattern."""
    from qoslab.sim.api import sim_json

    report = sim_json(text=figure2_job(ordering, 1), device=device, set=sets, seed=seed)
    return report["qoslab"]["simulated_ns"] / report["jobs"][0]["write"]["total_ios"]


@dataclass(frozen=True)
class Fit:
    channels: dict[str, float]
    budget_ns: float
    scale: float
    cycles: dict[str, int]
    window_ns: tuple[float, float]
    horae_target_ns: float
    horae_without_wait_ns: float
    context_switch_ns: int
    points: dict[str, float]

    def preset_lines(self) -> list[str]:
        """The values as the presets hold them."""
        return [
            "[fabric]",
            f"context_switch_ns = {self.context_switch_ns}",
            "[rdma]",
            *(f"{k} = {v}" for k, v in self.cycles.items()),
        ]


Measure = Callable[[str, str, list[str]], float]


def fit(measure: Measure = per_request_ns) -> Fit:
    """The procedure of docs/rio.md: (1) the initiator's cycles, the model's assumed ones
    scaled by one factor so that one orderless thread's time per request on Figure 2's pattern
    is the budget (the line through SCALES, measured on the flash preset); (2) with them,
    `context_switch_ns` so that one HORAE thread's time per request is the middle of the window
    Figure 2 allows (the time without any wait measured on each drive, their mean)."""
    channels = {d: channel_bytes_per_s(d) for d in DRIVES}
    budget = initiator_budget_ns(channels)
    base = assumed_cycles()
    points: dict[str, float] = {}
    for s in SCALES:
        t = measure("none", DRIVES[0], cycle_sets({k: s * v for k, v in base.items()}))
        if t <= budget:
            raise ValueError(f"one orderless thread fills the drive at scale {s}: no line to fit")
        points[f"orderless_ns_at_scale_{s}"] = t
    (s1, s2) = SCALES
    t1, t2 = (points[f"orderless_ns_at_scale_{s}"] for s in SCALES)
    slope = (t1 - t2) / (s1 - s2)
    scale = s1 + (budget - t1) / slope
    cycles = {k: round(scale * v) for k, v in base.items()}
    low, high = horae_window_ns(channels)
    target = (low + high) / 2
    without = [
        measure("horae", d, [*cycle_sets(cycles), "fabric.context_switch_ns=0"]) for d in DRIVES
    ]
    for d, t in zip(DRIVES, without, strict=True):
        points[f"horae_ns_without_wait_{d}"] = t
    horae0 = sum(without) / len(without)
    return Fit(
        channels=channels,
        budget_ns=budget,
        scale=scale,
        cycles=cycles,
        window_ns=(low, high),
        horae_target_ns=target,
        horae_without_wait_ns=horae0,
        context_switch_ns=round(target - horae0),
        points=points,
    )


def preset_values(device: str) -> dict[str, int]:
    """The fitted keys as preset `device` holds them (missing ones absent)."""
    from qoslab.sim.api import preset_text

    doc = tomllib.loads(preset_text(device) or "")
    out = {f"rdma.{k}": v for k, v in doc.get("rdma", {}).items() if k in CYCLE_KEYS}
    if "context_switch_ns" in doc.get("fabric", {}):
        out["fabric.context_switch_ns"] = doc["fabric"]["context_switch_ns"]
    return out


def fitted_values(f: Fit) -> dict[str, int]:
    return {
        "fabric.context_switch_ns": f.context_switch_ns,
        **{f"rdma.{k}": v for k, v in f.cycles.items()},
    }


def figure2_rates(
    ordering: str, device: str, threads: int, seed: int, sets: list[str] | None = None
) -> tuple[float, float]:
    """Requests per second and bytes per second of Figure 2's pattern on a preset as it is."""
    from qoslab.sim.api import sim_json

    report = sim_json(text=figure2_job(ordering, threads), device=device, set=sets or [], seed=seed)
    w = report["jobs"][0]["write"]
    ns = report["qoslab"]["simulated_ns"]
    return w["total_ios"] / ns * 1e9, w["io_bytes"] / ns * 1e9


def report_lines(f: Fit) -> list[str]:
    """What `qoslab rio fit` prints: the document's numbers, what was measured, the values."""
    gb = ", ".join(f"{d} {bw / 1e9:g} GB/s" for d, bw in f.channels.items())
    low, high = f.window_ns
    sizes = " + ".join(f"{b // 1024} KiB" for b in REQUEST_BYTES)
    lines = [
        f"Figure 2 (the document's 3.1): ordered {sizes} requests, mean "
        f"{mean_request_bytes():g} B; cores at {CPU_GHZ} GHz; channels {gb}",
        f"(1) one orderless thread fills both drives: at most {f.budget_ns:.1f} ns per request",
    ]
    for s in SCALES:
        t = f.points[f"orderless_ns_at_scale_{s}"]
        lines.append(f"    {DRIVES[0]}, one orderless thread, assumed cycles x{s:g}: {t:.1f} ns")
    lines.append(
        f"    scale {f.scale:.4f}: " + ", ".join(f"rdma.{k} = {v}" for k, v in f.cycles.items())
    )
    lines.append(
        f"(2) HORAE full above {HORAE_SHORT_AT} threads and by {MOST_THREADS}: one thread's time "
        f"per request in ({low:.1f}, {high:.1f}] ns, middle {f.horae_target_ns:.1f} ns"
    )
    for d in DRIVES:
        t = f.points[f"horae_ns_without_wait_{d}"]
        lines.append(f"    {d}, one HORAE thread without the wait: {t:.1f} ns")
    lines.append(
        f"    mean {f.horae_without_wait_ns:.1f} ns: fabric.context_switch_ns = "
        f"{f.context_switch_ns}"
    )
    return lines
