"""`qoslab vm check`: the guest kernel test of `make test`, in one boot.

On a null_blk disk (2 ms per request, two tags) the guest:
1. inserts qoslab's two elevators and sees them registered;
2. switches through every scheduler (none, mq-deadline, kyber, bfq, prio, prio-advanced) twice
   while fio's two jobs run on the disk, and fio finishes without an error;
3. writes and reads back their sysfs tunables, and has out-of-range values refused;
4. runs two identical 4 KiB random readers, one at best effort 1 (HIGH) and one at best
   effort 7 (LOW), under none, prio and prio-advanced, with 64 scheduler tags so that requests
   wait where a scheduler can order them (identical jobs: any difference is the priority's);
5. switches back to none and removes both modules.

The host then checks what the kernel did: both modules loaded, registered, switched and unloaded;
the tunables behaved; under none the two readers get about the same IOPS, under prio and
prio-advanced the HIGH one at least twice the LOW one's (priority separation), while the LOW one
still completes I/O and none of its reads waited longer than the aging bound allows (no
starvation); dmesg has no warning, bug or oops from the modules' insertion on. Each check is one
line; any failure makes the command exit 1.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path

from qoslab.guest_devices import parse_spec, queue_limits, rotational, tags
from qoslab.vm import guest

DEVICE = "null_blk:completion_nsec=2000000,hw_queue_depth=2,irqmode=2"
SCHEDULERS = ("none", "mq-deadline", "kyber", "bfq", "prio", "prio-advanced")
AGING_MS = 100
RUNTIME_S = 4

JOB = f"""; the study's two jobs (configs/sched/database-backup.fio), {RUNTIME_S} s
[global]
ioengine=libaio
direct=1
lat_percentiles=1
time_based=1
runtime={RUNTIME_S}s
size=1g

[database_sim]
rw=randread
bs=4k
iodepth=4
prioclass=2
prio=1

[backup_sim]
rw=read
bs=128k
iodepth=16
prioclass=2
prio=7
"""

LOAD_JOB = JOB.replace(f"runtime={RUNTIME_S}s", "runtime=30s")

PAIR_JOB = f"""; two identical random readers, HIGH and LOW, {RUNTIME_S} s
[global]
ioengine=libaio
direct=1
lat_percentiles=1
time_based=1
runtime={RUNTIME_S}s
size=1g
rw=randread
bs=4k
iodepth=8
prioclass=2

[high]
prio=1

[low]
prio=7
"""
MARK = "qoslab-vm-check: modules follow"

# What a clean dmesg has none of.
DMESG_BAD = re.compile(
    r"WARNING:|BUG:|Oops|Call Trace|general protection|list_(add|del) corruption|"
    r"refcount_t|kernel BUG|rcu.*stall|hung_task|blocked for more than",
    re.I,
)


def steps() -> list[str]:
    cycle = " ".join(SCHEDULERS)
    return [
        "for s in prio prio-advanced; do grep -qw $s /sys/block/$DEV/queue/scheduler "
        "|| load_fail=1; done",
        'if [ -n "$load_fail" ]; then fail "prio or prio-advanced not offered on $DEV"; fi',
        "cat /sys/block/$DEV/queue/scheduler > $OUT/offered.txt",
        "say 'switching schedulers under load'",
        "fio --filename=/dev/$DEV --output-format=json --output=$OUT/switch.json "
        "$IN/load.fio > $OUT/switch.stdout 2>&1 &",
        "FIO=$!",
        "sleep 1",
        f"for round in 1 2; do for s in {cycle}; do "
        'scheduler $s; echo "$round $s $(cat /sys/block/$DEV/queue/scheduler)" '
        ">> $OUT/switched.txt; sleep 0.5; done; done",
        "scheduler none",
        "kill -INT $FIO 2>/dev/null",
        "wait $FIO; echo $? > $OUT/switch.status",
        "say 'tunables'",
        "scheduler prio",
        f"setting queue/iosched/aging_expire {AGING_MS}",
        "cat /sys/block/$DEV/queue/iosched/aging_expire > $OUT/prio-aging.txt",
        "if echo abc > /sys/block/$DEV/queue/iosched/aging_expire 2>/dev/null; then "
        "echo accepted > $OUT/prio-bad.txt; else echo refused > $OUT/prio-bad.txt; fi",
        "scheduler prio-advanced",
        "setting queue/iosched/seq_batch 4",
        "setting queue/iosched/per_task_detector 1",
        "cat /sys/block/$DEV/queue/iosched/seq_batch /sys/block/$DEV/queue/iosched/"
        "per_task_detector > $OUT/padv-set.txt",
        "if echo 0 > /sys/block/$DEV/queue/iosched/seq_batch 2>/dev/null; then "
        "echo accepted > $OUT/padv-bad.txt; else echo refused > $OUT/padv-bad.txt; fi",
        *[
            line
            for s in ("none", "prio", "prio-advanced")
            for line in (
                f"say 'a HIGH and a LOW reader under {s}'",
                f"scheduler {s}",
                *(
                    [
                        "setting queue/nr_requests 64",
                        f"setting queue/iosched/aging_expire {AGING_MS}",
                    ]
                    if s != "none"
                    else []
                ),
                f"fio_rep $OUT/sep-{s} $IN/pair.fio",
            )
        ],
        "scheduler none",
        "say 'unloading'",
        'rmmod prio_advanced_iosched 2>$OUT/rmmod.err || fail "rmmod prio-advanced: '
        '$(cat $OUT/rmmod.err)"',
        'rmmod prio_iosched 2>$OUT/rmmod.err || fail "rmmod prio: $(cat $OUT/rmmod.err)"',
        "lsmod > $OUT/lsmod.txt",
        "cat /sys/block/$DEV/queue/scheduler > $OUT/after.txt",
    ]


@dataclass
class Check:
    name: str
    ok: bool
    detail: str


def _jobs(path: Path) -> dict[str, dict]:
    data = json.loads(path.read_text())
    return {j["jobname"]: j["read"] for j in data["jobs"]}


def evaluate(out: Path) -> list[Check]:
    """The checks, from what the guest wrote."""
    checks: list[Check] = []

    def add(name: str, ok: bool, detail: str) -> None:
        checks.append(Check(name, bool(ok), detail))

    dmesg = (out / "dmesg.txt").read_text(errors="replace")
    offered = (out / "offered.txt").read_text().split()
    add(
        "both modules load and register",
        "io scheduler prio registered" in dmesg
        and "io scheduler prio-advanced registered" in dmesg
        and {"prio", "prio-advanced"} <= {s.strip("[]") for s in offered},
        f"offered: {' '.join(offered)}",
    )
    switched = (out / "switched.txt").read_text().splitlines()
    selected = [ln.split()[1] for ln in switched if f"[{ln.split()[1]}]" in ln]
    status = (out / "switch.status").read_text().strip()
    stdout = (out / "switch.stdout").read_text(errors="replace")
    # fio stopped with SIGINT after the switching exits 0 or 130; any I/O error says so.
    add(
        "every scheduler switches under load",
        len(selected) == 2 * len(SCHEDULERS) and "error" not in stdout.lower(),
        f"{len(selected)} of {2 * len(SCHEDULERS)} switches took effect while fio ran "
        f"(fio exit {status})",
    )
    aging = (out / "prio-aging.txt").read_text().strip()
    add(
        "sysfs tunables work",
        aging == str(AGING_MS)
        and (out / "prio-bad.txt").read_text().strip() == "refused"
        and (out / "padv-set.txt").read_text().split() == ["4", "1"]
        and (out / "padv-bad.txt").read_text().strip() == "refused",
        f"prio aging_expire={aging}; bad values refused",
    )
    runs = {s: _jobs(out / f"sep-{s}.json") for s in ("none", "prio", "prio-advanced")}
    ratio = runs["none"]["high"]["iops"] / max(runs["none"]["low"]["iops"], 1e-9)
    add(
        "without a scheduler the two readers share",
        0.67 <= ratio <= 1.5,
        f"none: HIGH {runs['none']['high']['iops']:.0f} IOPS, LOW "
        f"{runs['none']['low']['iops']:.0f}",
    )
    for s in ("prio", "prio-advanced"):
        high, low = runs[s]["high"], runs[s]["low"]
        add(
            f"{s} separates the priorities",
            high["iops"] >= 2 * low["iops"],
            f"HIGH {high['iops']:.0f} IOPS, LOW {low['iops']:.0f}",
        )
        worst_ms = low["lat_ns"]["max"] / 1e6
        # A LOW read waits at most aging_expire (HZ=250: 4 ms more) before it goes first,
        # then behind the reads aged before it: a second is far beyond any of that.
        add(
            f"{s} never starves the low class",
            low["total_ios"] > 0 and worst_ms < 1000,
            f"LOW {low['total_ios']} reads, the slowest {worst_ms:.0f} ms "
            f"(aging_expire {AGING_MS} ms)",
        )
    queue = dict(
        line.split("=", 1) for line in (out / "queue.txt").read_text().splitlines() if "=" in line
    )
    spec = parse_spec(DEVICE)
    twin = {
        **{k: v for k, v in queue_limits(spec).items() if v},
        "rotational": rotational(spec),
        "nr_requests": tags(spec),
    }
    differ = [
        f"{k} {queue.get(k, '?').strip()} (twin {v})"
        for k, v in twin.items()
        if queue.get(k, "").strip() != str(v)
    ]
    add(
        "the simulator's twin has the guest queue's limits",
        not differ,
        "; ".join(differ) or ", ".join(f"{k}={v}" for k, v in twin.items()),
    )
    lsmod = (out / "lsmod.txt").read_text()
    add(
        "both modules unload",
        "prio_iosched" not in lsmod and "prio_advanced_iosched" not in lsmod,
        "rmmod prio_advanced_iosched prio_iosched",
    )
    # From the mark written before the modules went in: the boot's own notes are the
    # emulated machine's, not the modules'.
    after = dmesg.split(MARK, 1)[1] if MARK in dmesg else dmesg
    bad = [ln for ln in after.splitlines() if DMESG_BAD.search(ln)]
    add(
        "dmesg is clean",
        MARK in dmesg and not bad,
        bad[0].strip() if bad else "no warning, bug or oops after the modules went in",
    )
    return checks


def session(kernel, modules: list[Path], job_dir: Path) -> guest.Session:
    (job_dir / "pair.fio").write_text(PAIR_JOB)
    (job_dir / "load.fio").write_text(LOAD_JOB)
    return guest.Session(
        kernel,
        parse_spec(DEVICE),
        steps=steps(),
        inputs={"pair.fio": job_dir / "pair.fio", "load.fio": job_dir / "load.fio"},
        modules=modules,
        mark=MARK,
    )
