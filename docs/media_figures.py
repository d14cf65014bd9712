"""Regenerates the measured parts of docs/media.md: the tunables reference, the tables of
measured figures and the figures, each from runs of `qoslab sim`.

    python docs/media_figures.py docs/media.md      (or: make media-figures)

The comparison models here (the mean-field write amplification, the link costs) are written
out independently of the simulator's code.
"""

from __future__ import annotations

import io
import json
import math
import sys
import tempfile
from pathlib import Path

from qoslab.outputs import write_file
from qoslab.sim.api import run, stage_counters, tunables_markdown

ROOT = Path(__file__).resolve().parent.parent
IMG = ROOT / "docs" / "img"

# MQSim's measured figures for its default configuration (configs/devices/mqsim/, README of
# the reference data): closed-loop single-flow runs, preconditioning off, as (IOPS, mean
# latency in us); IOPS are true values (requests over simulated time), the QD1 IOPS follow from
# its mean latency and the 128 KiB ones from its 1.49 GB/s.
MQSIM = {
    "randread QD1": (1e6 / 165, 165),
    "randread QD32": (109_889, 291),
    "randwrite QD32": (36_621, 873),
    "70/30 QD32": (64_951, 492),
    "seqread 128K QD8": (1.49e9 / 131_072, 702),
}

SMALL_MIXED = [
    "media.channels=4",
    "media.chips_per_channel=2",
    "media.dies_per_chip=1",
    "media.planes_per_die=2",
    "media.blocks_per_plane=256",
    "media.pages_per_block=64",
    "media.ftl.mapping=dram",
    "media.precondition.fill=1",
]

SMALL_WA = [
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
    "media.precondition.pattern=random",
]


def _splice(text: str, name: str, body: str) -> str:
    begin, end = f"<!-- {name}:begin -->", f"<!-- {name}:end -->"
    head, rest = text.split(begin, 1)
    _, tail = rest.split(end, 1)
    return f"{head}{begin}\n{body}{end}{tail}"


def _run(job: str, device: str, sets: list[str], fmt: str = "json") -> dict:
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "job.fio"
        path.write_text(job)
        return json.loads(run(path, device=device, sets=sets, output_format=fmt)["text"])


def _save(fig, name: str) -> None:
    import matplotlib.pyplot as plt

    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=110, metadata={"Software": None})
    plt.close(fig)
    write_file(IMG / name, buf.getvalue())


# ---- MQSim's default drive ------------------------------------------------------------------


def _pcie_ns(payload: int) -> int:
    tlps = -(-payload // 128)
    return -(-(payload + 28 * tlps) // 4)


def _mg1_reads_first(servers: int, read_share: float, write_us: float) -> tuple[float, float]:
    """Closed-loop QD 32 of 4 KiB random requests on `servers` independent flash servers (dies
    or chips), each an M/G/1 queue with non-preemptive priority for reads: a read visits two
    servers (its translation page, 76.8 us; its data, 87.6 us), a write's flash work visits two
    (its translation page; its program, 762.6 us) but the write completes from DRAM in
    `write_us`. Returns (IOPS, mean latency in us) at the fixed point of Little's law."""
    s_map, s_read, s_prog = 76.826, 87.578, 762.649
    alone_us, qd = 165.702, 32
    w = 1 - read_share
    x = qd / alone_us
    for _ in range(5000):
        lam_r, lam_w = read_share * x / servers, w * x / servers
        rho_reads = lam_r * (s_map + s_read) + lam_w * s_map
        residual = (lam_r * (s_map**2 + s_read**2) + lam_w * (s_map**2 + s_prog**2)) / 2
        wait = residual / (1 - rho_reads)
        mean = read_share * (alone_us + 2 * wait) + w * write_us
        x = 0.9 * x + 0.1 * qd / mean
    return x * 1e6, mean


def mqsim_table() -> str:
    random = "bs=4k\nblockalign=8k\n"
    jobs = {
        "randread QD1": "[j]\nrw=randread\n" + random + "iodepth=1\nnumber_ios=50000\n",
        "randread QD32": "[j]\nrw=randread\n" + random + "iodepth=32\nnumber_ios=200000\n",
        "randwrite QD32": "[j]\nrw=randwrite\n" + random + "iodepth=32\nnumber_ios=200000\n",
        "70/30 QD32": "[j]\nrw=randrw\nrwmixread=70\n" + random + "iodepth=32\nnumber_ios=200000\n",
        "seqread 128K QD8": "[j]\nrw=read\nbs=128k\niodepth=8\nnumber_ios=50000\n",
    }
    qd1 = 8 + 8 + _pcie_ns(64) + 290 + 75_000 + 4096 * 3 + _pcie_ns(4096) + _pcie_ns(16)
    miss = 290 + 75_000 + 512 * 3
    dram_ns = 13 + 13 + 2048 * 10
    # MQSim admits a cold write only while its back-pressure buffer has room, so the chips
    # bind: each write costs one translation read and one program on a chip.
    write_bound = 32 / ((miss + 361 + 4096 * 3 + 750_000) / 1e9)
    # MQSim's rounds: the 4 chips of a channel read at once, then their data-outs go one after
    # another before any new command; each chip moves one 8 KiB page per round.
    round_ns = 4 * 290 + 75_000 + 4 * 8192 * 3
    seq_iops = 32 / (round_ns / 1e9) / 16
    dies_read, chips_read = _mg1_reads_first(64, 1.0, 0), _mg1_reads_first(32, 1.0, 0)
    dies_mix, chips_mix = _mg1_reads_first(64, 0.7, 22.0), _mg1_reads_first(32, 0.7, 22.0)

    def fig(name: str, iops: float, lat_us: float) -> str:
        if name.startswith("seqread"):
            return f"{iops * 131072 / 1e9:.2f} GB/s, {lat_us:.0f} us"
        return f"{iops:,.0f} IOPS, {lat_us:.0f} us"

    closed = {
        "randread QD1": (f"{(qd1 + miss) / 1e3:.1f} us", f"{(qd1 + miss) / 1e3:.1f} us"),
        "randread QD32": (fig("", *dies_read), fig("", *chips_read)),
        "randwrite QD32": (f"{1e9 / dram_ns:,.0f} IOPS", f"{write_bound:,.0f} IOPS"),
        "70/30 QD32": (fig("", *dies_mix), fig("", *chips_mix)),
        "seqread 128K QD8": (
            "2.67 GB/s",
            fig("seqread", seq_iops, 8 / seq_iops * 1e6),
        ),
    }
    rows = []
    for name, job in jobs.items():
        cells = []
        for sets in ([], ["media.scheduling=mqsim"]):
            report = _run(job, "mqsim-default", sets)["jobs"][0]
            ios = report["read"]["total_ios"] + report["write"]["total_ios"]
            iops = report["read"]["iops"] + report["write"]["iops"]
            lat = (
                report["read"]["lat_ns"]["mean"] * report["read"]["total_ios"]
                + report["write"]["lat_ns"]["mean"] * report["write"]["total_ios"]
            ) / ios
            cells.append((iops, lat / 1e3))
        mq_iops, mq_us = MQSIM[name]
        (dies_iops, dies_us), (mode_iops, mode_us) = cells
        rows.append(
            f"| {name} | {fig(name, dies_iops, dies_us)} | {closed[name][0]} "
            f"| {fig(name, mode_iops, mode_us)} | {closed[name][1]} | {fig(name, mq_iops, mq_us)} "
            f"| {mode_iops / mq_iops:.3f}, {mode_us / mq_us:.3f} "
            f"| {dies_iops / mq_iops:.2f} |"
        )
    head = (
        "| workload | qoslab `dies` (default) | its closed form | qoslab `mqsim` "
        "| its closed form | MQSim measured | `mqsim` / MQSim (IOPS, latency) "
        "| `dies` / MQSim IOPS |\n|---|---|---|---|---|---|---|---|\n"
    )
    return head + "\n".join(rows) + "\n"


def saturation_table() -> str:
    bound_iops = min(64 / 75e-6, 8 / (4096 * 3e-9))
    reads = _run(
        "[r]\nrw=randread\nbs=4k\niodepth=1024\nnumber_ios=400000\n",
        "mqsim-default",
        ["media.ftl.mapping=dram"],
    )["jobs"][0]["read"]
    seq = _run(
        "[s]\nrw=read\nbs=128k\niodepth=8\nnumber_ios=50000\n",
        "mqsim-default",
        ["media.ftl.mapping=dram"],
    )["jobs"][0]["read"]
    seq_gbs = seq["iops"] * 131072 / 1e9
    return (
        "| workload | qoslab | bound | ratio |\n|---|---|---|---|\n"
        f"| 4 KiB random read, QD 1024 | {reads['iops']:,.0f} IOPS | {bound_iops:,.0f} IOPS "
        f"| {reads['iops'] / bound_iops:.1%} |\n"
        f"| 128 KiB sequential read, QD 8 | {seq_gbs:.3f} GB/s | 2.667 GB/s "
        f"| {seq_gbs / (8 / 3):.1%} |\n"
    )


# ---- read tails under GC --------------------------------------------------------------------


def _ccdf(bins: dict) -> tuple[list[float], list[float]]:
    points = sorted((int(k), v) for k, v in bins.items())
    total = sum(v for _, v in points)
    xs, ys, seen = [], [], 0
    for value, count in points:
        seen += count
        if seen < total:
            xs.append(value / 1e3)
            ys.append(1 - seen / total)
    return xs, ys


def tails_table_and_figure() -> str:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    job = "[mix]\nrw=randrw\nrwmixread=70\nbs=4k\niodepth=32\nnumber_ios=300000\n"
    cases = [
        ("GC on dies and channels, no erase suspension", ["media.nand.erase_suspend=false"]),
        ("GC on dies and channels, MQSim's erase suspension", []),
        ("GC work free (gc.timed = false)", ["media.gc.timed=false"]),
    ]
    fig, ax = plt.subplots(figsize=(7.5, 4.5), layout="constrained")
    rows = []
    for label, sets in cases:
        report = _run(job, "mqsim-default", SMALL_MIXED + sets, fmt="json+")
        read = report["jobs"][0]["read"]
        xs, ys = _ccdf(read["clat_ns"]["bins"])
        ax.step(xs, ys, where="post", label=label)
        p = read["clat_ns"]["percentile"]
        rows.append(
            f"| {label} | {read['iops'] / 1e3:.1f}k | {p['50.000000'] / 1e3:.0f} | "
            f"{p['99.000000'] / 1e3:.0f} | {p['99.900000'] / 1e3:.0f} | "
            f"{p['99.990000'] / 1e3:.0f} | {report['qoslab']['media']['gc_victims']:,.0f} |"
        )
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_ylim(1e-5, 1)
    ax.set_xlabel("read completion latency (us)")
    ax.set_ylabel("fraction of reads slower")
    ax.grid(alpha=0.3, which="both")
    ax.legend(fontsize="small")
    ax.set_title("70/30 random 4 KiB, QD32, full drive in GC steady state")
    _save(fig, "media-read-tail-gc.png")
    head = (
        "| case | read IOPS | p50 (us) | p99 (us) | p99.9 (us) | p99.99 (us) | GC victims |\n"
        "|---|---|---|---|---|---|---|\n"
    )
    return head + "\n".join(rows) + "\n"


# ---- write amplification --------------------------------------------------------------------


def greedy_mean_field_wa(rho: float, b: int) -> float:
    """The greedy fixed point of Van Houdt's mean-field model (docs/media.md): above the
    victims' level j, j x_j = c; level j holds m = 1 - c (H_b - H_j) with j m <= c; the valid
    pages c (b - j) + j m = rho b fix c, and WA = c / rho."""
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


def large_block_limit_wa(rho: float) -> float:
    """Desnoyers (SYSTOR 2012) / Hu et al. (SYSTOR 2009): v = exp(-(1 - v) / rho), WA = 1/(1-v)."""
    lo, hi = 0.0, 1 - 1e-6
    for _ in range(200):
        mid = (lo + hi) / 2
        if mid - math.exp(-(1 - mid) / rho) < 0:
            lo = mid
        else:
            hi = mid
    return 1 / (1 - lo)


def wa_table_and_figure() -> str:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows, measured = [], []
    ops = [0.07, 0.10, 0.15, 0.20, 0.28]
    for op in ops:
        physical = 2 * 512 * 64
        logical = int(physical * (1 - op))
        job = f"[w]\nrw=randwrite\nnorandommap=1\nbs=8k\niodepth=16\nnumber_ios={4 * logical}\n"
        report = _run(job, "mqsim-default", [*SMALL_WA, f"media.ftl.overprovisioning={op}"])
        wa = stage_counters(report, "media")["write_amplification"]
        measured.append(wa)
        # GC keeps two free blocks a plane and the frontiers are half written on average.
        rho_eff = logical / 2 / (509.5 * 64)
        model = greedy_mean_field_wa(rho_eff, 64)
        nominal = greedy_mean_field_wa(1 - op, 64)
        rows.append(
            f"| {op:.0%} | {wa:.3f} | {model:.3f} | {wa / model - 1:+.1%} | {nominal:.3f} | "
            f"{wa / nominal - 1:+.1%} | {large_block_limit_wa(1 - op):.3f} |"
        )
    grid = [0.05 + 0.005 * i for i in range(57)]
    fig, ax = plt.subplots(figsize=(7, 4.2), layout="constrained")
    ax.plot(
        [g * 100 for g in grid],
        [greedy_mean_field_wa(1 - g, 64) for g in grid],
        label="mean-field model, greedy, b = 64",
    )
    ax.plot(
        [g * 100 for g in grid],
        [large_block_limit_wa(1 - g) for g in grid],
        "--",
        label="large-block limit (Desnoyers; Hu et al.)",
    )
    ax.plot([o * 100 for o in ops], measured, "o", label="qoslab, greedy GC (2 x 512 blocks)")
    ax.set_xlabel("over-provisioning (%)")
    ax.set_ylabel("write amplification")
    ax.grid(alpha=0.3)
    ax.legend(fontsize="small")
    _save(fig, "media-wa.png")
    head = (
        "| OP | qoslab WA | model (spare in circulation) | diff | model (nominal OP) | diff "
        "| large-block limit |\n|---|---|---|---|---|---|---|\n"
    )
    return head + "\n".join(rows) + "\n"


# ---- the disk -------------------------------------------------------------------------------


def hdd_table_and_figure() -> str:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    depths = [1, 2, 4, 8, 16, 32]
    fig, ax = plt.subplots(figsize=(7, 4.2), layout="constrained")
    rows = []
    for preset in ["hdd-7200", "hdd-15k"]:
        curves = {}
        for sched in ["fifo", "sptf"]:
            curves[sched] = []
            for qd in depths:
                job = f"[r]\nrw=randread\nbs=4k\niodepth={qd}\nnumber_ios=10000\n"
                report = _run(job, preset, [f"media.scheduler={sched}"])
                curves[sched].append(report["jobs"][0]["read"]["iops"])
            ax.plot(depths, curves[sched], marker="o", label=f"{preset}, {sched.upper()}")
        base = curves["fifo"][0]
        rows.append(
            f"| {preset} | {base:.0f} | "
            + " | ".join(f"{v:.0f} ({v / base:.2f}x)" for v in curves["sptf"][1:])
            + " |"
        )
    ax.set_xscale("log", base=2)
    ax.set_xlabel("queue depth")
    ax.set_ylabel("4 KiB random read IOPS")
    ax.grid(alpha=0.3)
    ax.legend(fontsize="small")
    _save(fig, "media-hdd-sptf.png")
    head = "| drive | QD1 | " + " | ".join(f"SPTF QD{q}" for q in depths[1:]) + " |\n"
    head += "|---" * (len(depths) + 1) + "|\n"
    return head + "\n".join(rows) + "\n"


def update(path: Path) -> bool:
    text = path.read_text()
    new = _splice(text, "tunables", tunables_markdown(["ssd", "hdd"]))
    new = _splice(new, "mqsim-table", mqsim_table())
    new = _splice(new, "saturation-table", saturation_table())
    new = _splice(new, "wa-table", wa_table_and_figure())
    new = _splice(new, "tails-table", tails_table_and_figure())
    new = _splice(new, "hdd-table", hdd_table_and_figure())
    if new != text:
        write_file(path, new)
    return new != text


if __name__ == "__main__":
    target = Path(sys.argv[1]) if len(sys.argv) > 1 else ROOT / "docs" / "media.md"
    changed = update(target)
    print(f"{target}: {'updated' if changed else 'up to date'}")
