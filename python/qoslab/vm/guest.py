"""A guest session: what the guest does (a shell plan over the shared folder) and what comes back.

The host writes `in/plan.sh` (the helpers of `LIB` and the steps of one session) into a fresh
folder shared with the guest over 9p; the guest's init runs it and writes every result under
`out/`: fio's JSON per repetition, the scheduler's `queue/iosched/*` after each, the device's
`/proc/diskstats` line before and after each, the queue's settings, `dmesg`. A step that fails
writes one line to `out/error` and stops the plan; the host turns that line, a boot that did not
finish, or a plan without a status into one error.
"""

from __future__ import annotations

import json
import shlex
import shutil
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from qoslab.errors import InputError
from qoslab.guest_devices import DeviceSpec
from qoslab.vm import qemu
from qoslab.vm.image import build_image
from qoslab.vm.packages import Kernel

# The plan's helpers. Each step says what it does on the console (`qoslab-step:`), which the
# host shows as progress; `fail` records the reason and stops.
LIB = r"""
OUT=/share/out
IN=/share/in
say() { echo "qoslab-step: $*" > /dev/console; echo "qoslab-step: $*"; }
fail() { echo "$*" > $OUT/error; say "error: $*"; exit 1; }
last_kmsg() { dmesg | tail -n 1 | sed 's/^\[[ 0-9.]*\] //'; }

load() {  # load MODULE [ARGS...]: a module of the guest kernel
  modprobe "$@" 2>$OUT/modprobe.err \
    || fail "modprobe $*: $(cat $OUT/modprobe.err) $(last_kmsg)"
}
insert() {  # insert FILE.ko: a module built by qoslab vm build
  insmod "$1" 2>$OUT/insmod.err \
    || fail "insmod $(basename $1): $(cat $OUT/insmod.err) $(last_kmsg)"
}

wait_block() {  # wait_block GLOB: the first block device matching GLOB in sysfs, into DEV
  n=0
  while [ $n -lt 200 ]; do
    for p in $1; do
      if [ -e "$p" ]; then DEV=$(basename "$p"); return 0; fi
    done
    sleep 0.1; n=$((n + 1))
  done
  fail "no block device appeared at $1 within 20 s"
}

scheduler() {  # scheduler NAME: select it on DEV, loading its module if needed
  if ! grep -qw -- "$1" /sys/block/$DEV/queue/scheduler; then
    case "$1" in
      bfq) load bfq ;;
      kyber) load kyber-iosched ;;
    esac
  fi
  echo "$1" > /sys/block/$DEV/queue/scheduler 2>/dev/null \
    || fail "the guest kernel refused scheduler $1 on $DEV" \
      "(has: $(cat /sys/block/$DEV/queue/scheduler))"
  grep -q "\[$1\]" /sys/block/$DEV/queue/scheduler || fail "scheduler $1 not selected on $DEV"
}

setting() {  # setting FILE VALUE: write a sysfs file of DEV (queue/..., queue/iosched/...)
  echo "$2" > /sys/block/$DEV/$1 2>/dev/null || fail "$DEV: $1=$2 was refused"
}

snapshot() {  # snapshot DIR FILE: every readable file of DIR as name=value lines
  : > "$2"
  for f in "$1"/*; do
    [ -f "$f" ] && [ -r "$f" ] || continue
    printf '%s=%s\n' "$(basename $f)" "$(head -c 300 $f 2>/dev/null | tr '\n' ' ')" >> "$2"
  done
}

diskstats() { grep " $DEV " /proc/diskstats > "$1"; }

make_fs() {  # make_fs TYPE [OPTIONS]: a new TYPE file system on DEV, mounted at /mnt (with the
  # mount options OPTIONS besides noinit_itable), fio's directory
  umount /mnt 2>/dev/null
  # ext4's and jbd2's checksums (metadata_csum) ask the crypto API for crc32c, whose module the
  # kernel cannot load itself here (no /sbin/modprobe in the initramfs).
  [ "$1" = ext4 ] && load crc32c_generic
  load "$1"
  # mke2fs zeroes no inode tables or journal (a memory-backed null_blk reads zeros where
  # nothing was written) and the mount starts no thread to zero them later (ext4lazyinit), so
  # once mounted nothing but the job's own I/O reaches the device; no discard, as the drivers
  # here have none.
  [ -x /bin/mke2fs ] || fail "no mke2fs in the guest (the host has none: apt-get install e2fsprogs)"
  # By its path: busybox's shell would run its own mke2fs applet (ext2, no -t, no journal).
  /bin/mke2fs -q -F -t "$1" -E nodiscard,lazy_itable_init=1,lazy_journal_init=1 /dev/$DEV \
    > $OUT/mke2fs.log 2>&1 || fail "mke2fs -t $1 /dev/$DEV: $(tail -n 1 $OUT/mke2fs.log)"
  mount -t "$1" -o "noinit_itable${2:+,$2}" /dev/$DEV /mnt 2>$OUT/mount.err \
    || fail "mount -t $1 /dev/$DEV: $(cat $OUT/mount.err) $(last_kmsg)"
  grep " /mnt " /proc/mounts > $OUT/mount.txt
  FIO_TARGET=--directory=/mnt
}

fio_rep() {  # fio_rep OUTBASE JOBFILE [SEED]: one repetition and its counters
  diskstats "$1.diskstats-before"
  fio ${FIO_TARGET:-"--filename=/dev/$DEV"} --randseed=${3:-1} --output-format=json \
    --output="$1.json" "$2" \
    > "$1.fio-stdout" 2>&1 \
    || fail "fio failed on $DEV: $(grep -m 1 -i 'error\|fio:\|no job' $1.fio-stdout \
      || tail -n 1 $1.fio-stdout)"
  diskstats "$1.diskstats-after"
  if [ -d /sys/block/$DEV/queue/iosched ]; then
    snapshot /sys/block/$DEV/queue/iosched "$1.iosched"
  fi
  cp /sys/block/$DEV/stat "$1.stat"
}
"""


def device_steps(spec: DeviceSpec) -> list[str]:
    """Shell steps that create the SPEC's device and leave its name in DEV."""
    args = " ".join(shlex.quote(a) for a in spec.modprobe_args)
    steps = [f"say 'loading {spec.module} {args}'"]
    if spec.module == "null_blk":
        steps += [f"load null_blk {args}", "wait_block '/sys/block/nullb0'"]
    else:
        steps += [
            "load sd_mod",
            f"load scsi_debug {args}",
            "wait_block '/sys/bus/pseudo/drivers/scsi_debug/adapter*/host*/target*/*/block/*'",
        ]
    if spec.rotational is not None:
        steps.append(f"setting queue/rotational {spec.rotational}")
    steps.append("snapshot /sys/block/$DEV/queue $OUT/queue.txt")
    steps.append(
        "[ -d /sys/block/$DEV/device ] && cat /sys/block/$DEV/device/queue_depth "
        "> $OUT/device-queue-depth.txt 2>/dev/null"
    )
    steps.append('say "device $DEV ready"')
    return steps


@dataclass
class Session:
    """One boot: modules to insert, a device, then the steps."""

    kernel: Kernel
    spec: DeviceSpec | None
    steps: list[str] = field(default_factory=list)
    inputs: dict[str, Path] = field(default_factory=dict)  # name in in/ -> host file
    modules: list[Path] = field(default_factory=list)
    mark: str = ""  # written to the kernel log before the modules go in

    def plan(self) -> str:
        lines = ["#!/bin/sh", LIB]
        if self.mark:
            lines.append(f"echo {shlex.quote(self.mark)} > /dev/kmsg")
        for ko in self.modules:
            lines.append(f"say 'inserting {ko.name}'")
            lines.append(f"insert $IN/{shlex.quote(ko.name)}")
        if self.spec is not None:
            lines += device_steps(self.spec)
        lines += self.steps
        lines += ["say 'plan complete'", "exit 0"]
        return "\n".join(lines) + "\n"


@dataclass
class Result:
    out: Path  # the guest's out/ folder, copied back
    boot: qemu.Boot
    accel_why: str


def run_session(
    session: Session,
    *,
    accel: str,
    timeout_s: float,
    say: Callable[[str], None],
    on_line: Callable[[str], None] | None = None,
    drives: list[str] | None = None,
    scratch: Path | None = None,
) -> Result:
    """Boots the guest with `session`; returns its out/ folder or raises one clear error."""
    image = build_image(session.kernel)
    accel_used, why = qemu.choose_accel(session.kernel, image, accel, say)
    say(f"booting Linux {session.kernel.release} under {accel_used.upper()} ({why})")
    share = Path(tempfile.mkdtemp(prefix="qoslab-vm-", dir=scratch))
    try:
        (share / "in").mkdir()
        (share / "out").mkdir()
        for ko in session.modules:
            shutil.copy2(ko, share / "in" / ko.name)
        for name, src in session.inputs.items():
            shutil.copy2(src, share / "in" / name)
        (share / "in" / "plan.sh").write_text(session.plan())
        result = qemu.boot(
            session.kernel,
            image,
            accel=accel_used,
            timeout_s=timeout_s,
            share=share,
            drives=drives,
            on_line=on_line,
        )
        out = share / "out"
        (out / "console.log").write_text(result.console + "\n")
        _check(result, out, timeout_s)
        kept = Path(tempfile.mkdtemp(prefix="qoslab-vm-out-", dir=scratch))
        shutil.rmtree(kept)
        shutil.move(str(out), kept)
        return Result(kept, result, why)
    finally:
        shutil.rmtree(share, ignore_errors=True)


def _last_console_line(console: str) -> str:
    lines = [ln.strip() for ln in console.splitlines() if ln.strip()]
    return lines[-1] if lines else "(nothing on the console)"


def _check(result: qemu.Boot, out: Path, timeout_s: float) -> None:
    error = out / "error"
    if error.exists():
        raise InputError(f"in the guest: {error.read_text().strip()}")
    if not result.finished:
        if result.returncode not in (None, 0) and result.seconds < timeout_s:
            raise InputError(
                f"qemu exited with status {result.returncode} before the guest finished: "
                f"{_last_console_line(result.console)}"
            )
        if result.seconds >= timeout_s:
            raise InputError(
                f"the guest did not finish within {timeout_s:.0f} s (boot timeout; last console "
                f"line: {_last_console_line(result.console)}); give more with --timeout"
            )
        raise InputError(
            f"the guest stopped before finishing: {_last_console_line(result.console)}"
        )
    status = out / "plan.status"
    if not status.exists():
        raise InputError(
            "the guest finished without running the plan (the shared folder did not mount?): "
            f"{_last_console_line(result.console)}"
        )
    if status.read_text().strip() != "0":
        tail = (
            (out / "plan.log").read_text().strip().splitlines()[-1:]
            if (out / "plan.log").exists()
            else ["no log"]
        )
        raise InputError(f"the guest's plan failed: {tail[0] if tail else 'no log'}")


def read_meta(out: Path) -> dict:
    """What a session records about itself (`meta.json`), if it wrote it."""
    path = out / "meta.json"
    return json.loads(path.read_text()) if path.exists() else {}
