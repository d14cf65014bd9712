"""Guest devices described once and built both ways: in the guest kernel, and as a simulator twin.

A SPEC is the kernel module's name and its own parameters, as `modprobe` takes them:

    null_blk:completion_nsec=4000000,hw_queue_depth=2,irqmode=2
    scsi_debug:ndelay=1000000,max_queue=16

plus `rotational=0|1`, written to `queue/rotational` once the disk exists (neither module has
that parameter in Linux 6.1). The guest loads the module with those parameters; `twin_toml`
writes the simulator's device file of the same device: the same tags below the block layer,
the same request size limit, the same completion time, the same capacity.

What each twin is, from the drivers' behaviour in Linux 6.1:

- null_blk (queue_mode 2, blk-mq): one tag set of `hw_queue_depth` tags per submission queue;
  with `irqmode=2` every request completes `completion_nsec` after the driver took it (an
  hrtimer started in queue_rq), with `irqmode` 0 or 1 at once. The twin is the `simple` driver
  with `hw_queue_depth` tags over an analytic device of as many servers with a fixed service of
  `completion_nsec`. The guest has one vCPU, so only the first submission queue is ever used:
  `submit_queues` changes nothing there, nor in the twin. `max_sectors` (0 = 255 sectors:
  127 KiB) is the largest request. `memory_backed` copies data (CPU only); `cache_size` (with
  `memory_backed`) adds a volatile write cache, so the twin takes flushes (each completing like
  a request).
- scsi_debug: one host of `max_queue` commands; each completes `ndelay` ns after it was queued
  or, without `ndelay`, `delay` jiffies (the guest kernel has HZ=250: `delay=1` is 4 ms); with
  `random=1` after a time drawn uniformly between 0 and that delay (the twin's service is the
  empirical distribution of two points, 0 and the delay, which is that uniform one).

A twin also carries its device's CPU costs per I/O in the guest (`[cpu.one]`), used when a run
chooses that CPU model (`--set cpu.model=one`) and kept unused otherwise (docs/vm.md, findings
13 and 15): fio's own turn per I/O, the same on both devices, and on scsi_debug the copy its
driver makes in `queuecommand`, which kblockd's worker runs under a scheduler. null_blk with
`memory_backed` (a copy per KiB, not measured) keeps the model's defaults.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from qoslab.errors import InputError, did_you_mean

GUEST_HZ = 250  # CONFIG_HZ of Debian's 6.1 amd64 kernel

# Each module's parameters a SPEC may set, with (minimum, maximum); `rotational` is not a
# module parameter but a sysfs setting applied after the disk appears.
NULL_BLK_PARAMS: dict[str, tuple[int, int]] = {
    "completion_nsec": (0, 10_000_000_000),
    "irqmode": (0, 2),
    "hw_queue_depth": (1, 4096),
    "submit_queues": (1, 64),
    "queue_mode": (2, 2),
    "bs": (512, 4096),
    "gb": (1, 1 << 20),
    "max_sectors": (0, 1 << 22),
    "memory_backed": (0, 1),
    "cache_size": (0, 1 << 20),
    "mbps": (0, 1 << 20),
}
SCSI_DEBUG_PARAMS: dict[str, tuple[int, int]] = {
    "delay": (0, 100_000),
    "ndelay": (0, 10_000_000_000),
    "max_queue": (1, 4096),
    "dev_size_mb": (1, 1 << 20),
    "sector_size": (512, 4096),
    "submit_queues": (1, 64),
    "random": (0, 1),
}
MODULES = {"null_blk": NULL_BLK_PARAMS, "scsi_debug": SCSI_DEBUG_PARAMS}
EXTRA = {"rotational": (0, 1)}

# Linux 6.1 defaults the twins need (drivers/block/null_blk/main.c, drivers/scsi/scsi_debug.c).
NULL_BLK_DEFAULTS = {
    "completion_nsec": 10_000,
    "irqmode": 1,
    "hw_queue_depth": 64,
    "submit_queues": 1,
    "queue_mode": 2,
    "bs": 512,
    "gb": 250,
    "max_sectors": 0,
    "memory_backed": 0,
    "cache_size": 0,
    "mbps": 0,
}
SCSI_DEBUG_DEFAULTS = {
    "delay": 1,
    "ndelay": 0,
    "max_queue": 192,  # SDEBUG_CANQUEUE
    "dev_size_mb": 8,
    "sector_size": 512,
    "submit_queues": 1,
    "random": 0,
}
BLK_SAFE_MAX_SECTORS = 255  # what a queue gets when its driver sets no max_hw_sectors

# fio's CPU per I/O of one job's turn in the guest (QEMU TCG, one vCPU): the line through fio's
# own usr_cpu + sys_cpu per I/O of 6 untraced runs on null_blk (prio and mq-deadline, 4 ms x 2
# tags): 15.73 us at 4 KiB, 29.28 us at 128 KiB (docs/vm.md, finding 13). On scsi_debug the
# tasks were on the CPU as long (traced, prio, 3 repetitions: 15.4 to 16.6 us per 4 KiB bio,
# 28.7 to 29.0 per 128 KiB bio; finding 15): the driver's copy is not in the task's turn.
FIO_CPU_ONE = {"submit_ns": 15_300, "per_kib_ns": 109}
# scsi_debug's queuecommand copies the data before it arms the command's timer; under a
# scheduler kblockd's worker runs it: the line through the worker's one-request turns, 10 us at
# 4 KiB and 33 us at 128 KiB (traced, prio, 3 repetitions; docs/vm.md, finding 12).
SCSI_DEBUG_QUEUE_RUN = {"queue_run_per_rq_ns": 4_260, "queue_run_per_kib_ns": 185}


@dataclass(frozen=True)
class DeviceSpec:
    module: str
    params: dict[str, int]  # as given, module parameters only
    rotational: int | None = None
    text: str = ""
    defaults: dict[str, int] = field(default_factory=dict)

    def value(self, name: str) -> int:
        return self.params.get(name, self.defaults[name])

    @property
    def modprobe_args(self) -> list[str]:
        return [f"{k}={v}" for k, v in self.params.items()]


def parse_spec(text: str, option: str = "--device") -> DeviceSpec:
    """Reads `MODULE[:k=v,...]`; every mistake is one line naming the part that is wrong."""
    text = text.strip()
    module, _, rest = text.partition(":")
    if module not in MODULES:
        raise InputError(
            f"{option}: expected null_blk:... or scsi_debug:... (a kernel module and its "
            f"parameters), got {text!r}{did_you_mean(module, MODULES)}"
        )
    allowed = MODULES[module]
    params: dict[str, int] = {}
    rotational = None
    for item in filter(None, (p.strip() for p in rest.split(","))):
        key, eq, value = item.partition("=")
        key = key.strip()
        if not eq:
            raise InputError(f"{option}: {module} parameter {key!r} needs a value (key=value)")
        limits = allowed.get(key) or EXTRA.get(key)
        if limits is None:
            names = ", ".join([*allowed, *EXTRA])
            raise InputError(
                f"{option}: {module} has no parameter {key!r} here "
                f"(these are: {names}){did_you_mean(key, [*allowed, *EXTRA])}"
            )
        try:
            number = int(value.strip(), 0)
        except ValueError:
            raise InputError(f"{option}: {module} {key}={value!r}: expected an integer") from None
        lo, hi = limits
        if not lo <= number <= hi:
            raise InputError(f"{option}: {module} {key}={number}: expected {lo} to {hi}")
        if key in params or (key == "rotational" and rotational is not None):
            raise InputError(f"{option}: {module} parameter {key!r} is given twice")
        if key == "rotational":
            rotational = number
        else:
            params[key] = number
    defaults = NULL_BLK_DEFAULTS if module == "null_blk" else SCSI_DEBUG_DEFAULTS
    spec = DeviceSpec(module, params, rotational, text, dict(defaults))
    _check_combination(spec, option)
    return spec


def _check_combination(spec: DeviceSpec, option: str) -> None:
    if spec.module == "null_blk":
        if spec.value("cache_size") and not spec.value("memory_backed"):
            raise InputError(f"{option}: null_blk cache_size needs memory_backed=1")
        if spec.value("mbps"):
            raise InputError(
                f"{option}: null_blk mbps has no simulator twin yet (its throttle refills a "
                "byte budget every 20 ms and requeues what overdraws it); leave it out"
            )


# ---- the twin -------------------------------------------------------------------------------


def completion_ns(spec: DeviceSpec) -> int:
    """How long the device takes with a request, from the driver's queue_rq to completion."""
    if spec.module == "null_blk":
        return spec.value("completion_nsec") if spec.value("irqmode") == 2 else 0
    if spec.value("ndelay") > 0:
        return spec.value("ndelay")
    return spec.value("delay") * 1_000_000_000 // GUEST_HZ


def tags(spec: DeviceSpec) -> int:
    """Tags of the hardware queue the guest's one CPU submits to."""
    return spec.value("hw_queue_depth") if spec.module == "null_blk" else spec.value("max_queue")


def queue_limits(spec: DeviceSpec) -> dict[str, int]:
    """The queue's limits as the guest's sysfs shows them (`queue/*`): what the twin's block
    layer must have. null_blk sets only max_hw_sectors (255 sectors unless `max_sectors`);
    scsi_debug gets sd's from its Block Limits page: 512 KiB requests (its optimal transfer,
    1024 blocks), 2048 segments of up to 4 GiB. Both measured in the guest (queue.txt of
    `qoslab vm fio`) and checked against it by `qoslab vm check`."""
    if spec.module == "null_blk":
        sectors = spec.value("max_sectors") or BLK_SAFE_MAX_SECTORS
        kb = sectors * 512 // spec.value("bs") * spec.value("bs") // 1024
        return {
            "max_hw_sectors_kb": kb,
            "max_sectors_kb": kb,
            "max_segments": 128,
            "max_segment_size": 65536,
        }
    return {
        "max_hw_sectors_kb": 0,  # no limit of its own (sysfs: 2147483647)
        "max_sectors_kb": 512,
        "max_segments": 2048,
        "max_segment_size": 4294967295,
    }


def capacity_bytes(spec: DeviceSpec) -> int:
    if spec.module == "null_blk":
        return spec.value("gb") << 30
    return spec.value("dev_size_mb") << 20


def rotational(spec: DeviceSpec) -> int:
    return spec.rotational if spec.rotational is not None else 0


def twin_toml(spec: DeviceSpec) -> str:
    """The simulator's device file of the guest's device."""
    n = tags(spec)
    service = completion_ns(spec)
    limits = queue_limits(spec)
    flush = spec.module == "null_blk" and spec.value("memory_backed") and spec.value("cache_size")
    lines = [
        f"description = \"The simulator's twin of the guest device {spec.text}: "
        f'{n} tags, every request done {service} ns after the driver takes it."',
        "",
        "[path]",
        'driver = "simple"',
        f"hw_queue_depth = {n}",
        f"max_hw_sectors_kb = {limits['max_hw_sectors_kb']}",
        "",
        "[block]",
        f"max_sectors_kb = {limits['max_sectors_kb']}",
        f"max_segments = {limits['max_segments']}",
        f"max_segment_size = {limits['max_segment_size']}",
        f"rotational = {rotational(spec)}",
        "",
        "[media]",
        'model = "analytic"',
        f"servers = {n}",
        *(
            [
                'service = "empirical"',
                f"service_points_ns = [0, {service}]",
                "service_points_pct = [0, 100]",
                f"service_mean_ns = {service // 2}",
            ]
            if spec.module == "scsi_debug" and spec.value("random")
            else ['service = "fixed"', f"service_mean_ns = {service}"]
        ),
        f"capacity_bytes = {capacity_bytes(spec)}",
    ]
    if flush:
        # A flush goes through the same completion path as a request.
        lines.append(f"flush_ns = {max(service, 1)}")
    cpu = {}
    if spec.module == "null_blk" and not spec.value("memory_backed"):
        # Measured only without memory_backed (whose copy costs per KiB): with it, the CPU
        # model's defaults, whose per-KiB time holds a driver's copy.
        cpu = FIO_CPU_ONE
    elif spec.module == "scsi_debug":
        cpu = FIO_CPU_ONE | SCSI_DEBUG_QUEUE_RUN
    if cpu:
        lines += ["", "[cpu.one]", *(f"{k} = {v}" for k, v in cpu.items())]
    return "\n".join(lines) + "\n"


def is_spec(text: str) -> bool:
    """Whether a --device value is a guest device SPEC rather than a preset or a file."""
    module = text.partition(":")[0]
    return module in MODULES and (":" in text or text == module)
