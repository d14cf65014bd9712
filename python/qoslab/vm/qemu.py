"""QEMU: which accelerator works here, and one boot of the guest that always ends.

KVM is used only when a probe boot under it reaches the guest's init; otherwise TCG (on the
machines this was built on, `/dev/kvm` exists but a KVM guest hangs in early boot). The probe's
verdict is cached per QEMU version and host kernel. A boot has a deadline; on any way out of
`boot` (done, timeout, error, Ctrl-C, SIGTERM) QEMU is killed, and it dies with this process
too (PR_SET_PDEATHSIG), so nothing is left running.
"""

from __future__ import annotations

import contextlib
import ctypes
import json
import os
import shutil
import signal
import subprocess
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from qoslab.errors import InputError
from qoslab.vm.packages import Kernel, cache_root

QEMU = "qemu-system-x86_64"
# tsc=reliable: no clocksource watchdog switching clocks (and warning) when a busy host slows
# the emulated CPU; noapictimer: hrtimers fire from the HPET, whose emulation is steadier under
# TCG than the local APIC timer's (docs/vm.md, "What TCG distorts").
KERNEL_ARGS = "console=ttyS0 quiet panic=-1 tsc=reliable noapictimer"
# Under TCG the guest's clock follows its instructions, not the host's time (-icount): one
# instruction takes 2^0 ns, and an idle guest jumps to its next timer at once (sleep=off). A
# device's 4 ms are then 4 ms of the guest's time however busy the host is, and a run is
# repeatable (docs/vm.md, "What TCG distorts"). QOSLAB_VM_ICOUNT sets another -icount value, or
# `off` for the host's clock.
ICOUNT = "shift=0,sleep=off"


def cpus() -> int:
    """vCPUs of the guest: 1 (QOSLAB_VM_CPUS for more; docs/vm.md says what one changes)."""
    text = os.environ.get("QOSLAB_VM_CPUS", "1").strip()
    if not text.isdigit() or not 1 <= int(text) <= 8:
        raise InputError(f"QOSLAB_VM_CPUS: expected 1 to 8, got {text!r}")
    return int(text)


def icount() -> str:
    return os.environ.get("QOSLAB_VM_ICOUNT", "").strip() or ICOUNT


PROBE_TIMEOUT_S = 20.0
MEMORY_MB = 1024


def qemu_binary() -> str:
    found = shutil.which(QEMU)
    if found is None:
        raise InputError(
            f"{QEMU} not found: the guest needs QEMU (make tools, or apt-get install "
            "qemu-system-x86)"
        )
    return found


def _qemu_version(qemu: str) -> str:
    done = subprocess.run([qemu, "--version"], capture_output=True, text=True)
    return (done.stdout.splitlines() or ["?"])[0]


def _set_pdeathsig() -> None:
    # Runs in the child before exec: QEMU gets SIGKILL when its parent dies, however it dies.
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG


@dataclass
class Boot:
    """What one boot gave: the console, whether the guest finished, how long it took."""

    console: str
    finished: bool
    seconds: float
    accel: str
    returncode: int | None = None
    extra: dict = field(default_factory=dict)


def boot(
    kernel: Kernel,
    image: Path,
    *,
    accel: str,
    timeout_s: float,
    share: Path | None = None,
    drives: list[str] | None = None,
    append: str = "",
    on_line: Callable[[str], None] | None = None,
) -> Boot:
    """Boots the guest once and waits until it powers off or `timeout_s` passes."""
    qemu = qemu_binary()
    cmd = [
        qemu,
        "-accel", accel,
        "-m", str(MEMORY_MB),
        "-smp", str(cpus()),
        "-nodefaults",
        "-no-user-config",
        "-display", "none",
        "-serial", "stdio",
        "-no-reboot",
        "-kernel", str(kernel.vmlinuz),
        "-initrd", str(image),
        "-append", f"{KERNEL_ARGS} {append}".strip(),
    ]  # fmt: skip
    if accel == "tcg" and icount() != "off":
        cmd += ["-icount", icount()]
    if share is not None:
        cmd += [
            "-virtfs",
            f"local,path={share},mount_tag=qoslab,security_model=none,id=qoslab",
        ]
    for d in drives or []:
        cmd += d.split()
    started = time.monotonic()
    try:
        proc = subprocess.Popen(
            cmd,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            preexec_fn=_set_pdeathsig,
        )
    except OSError as err:
        raise InputError(f"{QEMU}: cannot start: {err.strerror}") from None
    lines: list[str] = []
    finished = threading.Event()

    def read() -> None:
        assert proc.stdout is not None
        for raw in proc.stdout:
            line = raw.decode(errors="replace").rstrip("\r\n")
            lines.append(line)
            if "qoslab-guest: done" in line:
                finished.set()
            if on_line is not None:
                on_line(line)

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    try:
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(timeout=timeout_s)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        reader.join(timeout=5)
    return Boot(
        console="\n".join(lines),
        finished=finished.is_set(),
        seconds=time.monotonic() - started,
        accel=accel,
        returncode=proc.returncode,
    )


def _kvm_usable() -> bool:
    return os.access("/dev/kvm", os.R_OK | os.W_OK)


# The last accelerator `choose_accel` chose, and why (for a study's record).
last_choice: tuple[str, str] | None = None


def choose_accel(kernel: Kernel, image: Path, wanted: str, say) -> tuple[str, str]:
    """(accelerator, why): `wanted` is kvm, tcg or auto (a probe boot decides, cached)."""
    global last_choice
    last_choice = _choose_accel(kernel, image, wanted, say)
    return last_choice


def _choose_accel(kernel: Kernel, image: Path, wanted: str, say) -> tuple[str, str]:
    if wanted == "tcg":
        return "tcg", "asked for"
    if wanted == "kvm":
        if not _kvm_usable():
            raise InputError("--accel kvm: /dev/kvm is missing or not accessible")
        return "kvm", "asked for"
    if wanted != "auto":
        raise InputError(f"--accel: expected auto, kvm or tcg, got {wanted!r}")
    if not _kvm_usable():
        return "tcg", "no usable /dev/kvm"
    qemu = qemu_binary()
    key = f"{_qemu_version(qemu)} | {os.uname().release} | {kernel.release}"
    cache = cache_root() / "accel-probe.json"
    try:
        known = json.loads(cache.read_text())
    except (OSError, ValueError):
        known = {}
    if key in known:
        verdict = known[key]
    else:
        say(f"probing KVM (a boot of up to {PROBE_TIMEOUT_S:.0f} s)")
        probe = boot(kernel, image, accel="kvm", timeout_s=PROBE_TIMEOUT_S)
        up = "qoslab-guest: up" in probe.console
        verdict = {
            "kvm": up,
            "why": "a KVM probe boot reached init"
            if up
            else f"a KVM probe boot did not reach init within {PROBE_TIMEOUT_S:.0f} s",
        }
        known[key] = verdict
        cache.parent.mkdir(parents=True, exist_ok=True)
        cache.write_text(json.dumps(known, indent=1))
    return ("kvm" if verdict["kvm"] else "tcg"), verdict["why"]
