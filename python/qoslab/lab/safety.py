"""Which block devices qoslab may write to.

A block device is measured only if all of these hold:

1. it is not in use: neither it nor a partition of it is mounted or used as swap, and no
   device-mapper or md device sits on it (`/sys/block/X/holders`). Nothing overrides this:
   writing under a live file system destroys it whatever the user intended;
2. it carries no partition table and no file-system or RAID signature (`wipefs --no-act`,
   partitions in `lsblk`);
3. qoslab created it: a loop device in the registry, still backed by the very file qoslab
   wrote.

`--destructive-ok DEVICE` lifts rules 2 and 3 for the one device it names: the path given
must resolve to the same block device as the target. There is no wildcard.
"""

from __future__ import annotations

import json
import os
import stat
import subprocess
from pathlib import Path

from qoslab.errors import InputError
from qoslab.lab.registry import Created, Registry


def _tool(cmd: list[str]) -> subprocess.CompletedProcess:
    try:
        return subprocess.run(cmd, capture_output=True, text=True)
    except FileNotFoundError:
        raise InputError(f"{cmd[0]} not found: install util-linux to check devices") from None


def _devnums(device: str) -> set[str]:
    """major:minor of the device and of each of its partitions."""
    name = Path(os.path.realpath(device)).name
    sys_dir = Path("/sys/class/block") / name
    nums = set()
    for node in [sys_dir, *sys_dir.glob(f"{name}*")]:
        dev = node / "dev"
        if dev.exists():
            nums.add(dev.read_text().strip())
    return nums


def in_use(device: str) -> str | None:
    """Why the device is busy (mounted, swap, held), or None."""
    nums = _devnums(device)
    with open("/proc/self/mountinfo") as f:
        for line in f:
            fields = line.split()
            if fields[2] in nums:
                return f"mounted on {fields[4]}"
    done = _tool(["lsblk", "--json", "--output", "PATH,MOUNTPOINTS", device])
    if done.returncode == 0 and done.stdout.strip():
        stack = list(json.loads(done.stdout).get("blockdevices", []))
        while stack:
            node = stack.pop()
            mounts = [m for m in node.get("mountpoints") or [] if m]
            if mounts:
                return f"{node.get('path')} is mounted on {mounts[0]}"
            stack.extend(node.get("children") or [])
    real = os.path.realpath(device)
    with open("/proc/swaps") as f:
        for line in f.readlines()[1:]:
            if line.split() and os.path.realpath(line.split()[0]) == real:
                return "in use as swap"
    holders = Path("/sys/class/block") / Path(real).name / "holders"
    if holders.is_dir() and any(holders.iterdir()):
        names = ", ".join(sorted(h.name for h in holders.iterdir()))
        return f"held by {names} (device-mapper or md)"
    return None


def signatures(device: str) -> list[str]:
    """Partition tables and file-system/RAID signatures on the device (read-only probe)."""
    found = []
    done = _tool(["wipefs", "--no-act", "--json", device])
    if done.returncode != 0:
        msg = (done.stderr.strip().splitlines() or ["failed"])[-1]
        raise InputError(f"wipefs cannot probe the device: {msg}", path=device)
    if done.stdout.strip():
        for sig in json.loads(done.stdout).get("signatures", []):
            found.append(f"{sig.get('type')} at offset {sig.get('offset')}")
    name = Path(os.path.realpath(device)).name
    parts = sorted(p.name for p in (Path("/sys/class/block") / name).glob(f"{name}*"))
    if parts:
        found.append(f"partitions {', '.join(parts)}")
    return found


def same_device(a: str, b: str) -> bool:
    try:
        sa, sb = os.stat(a), os.stat(b)
    except OSError:
        return False
    return stat.S_ISBLK(sa.st_mode) and stat.S_ISBLK(sb.st_mode) and sa.st_rdev == sb.st_rdev


def check_block_device(
    device: str, registry: Registry, destructive_ok: str | None
) -> Created | None:
    """Raises InputError unless qoslab may write to `device`; returns its registry entry."""
    busy = in_use(device)
    if busy:
        raise InputError(f"refusing a device in use: {busy}", path=device)
    allowed = destructive_ok is not None and same_device(destructive_ok, device)
    owned = registry.find_loop(device)
    if allowed:
        return owned
    sigs = signatures(device)
    if sigs:
        raise InputError(
            f"refusing a device that holds data ({'; '.join(sigs)}); "
            f"pass --destructive-ok {device} to overwrite it",
            path=device,
        )
    if owned is None:
        raise InputError(
            "refusing a block device qoslab did not create; make one with "
            f"`qoslab lab device create`, or pass --destructive-ok {device} to overwrite it",
            path=device,
        )
    return owned
