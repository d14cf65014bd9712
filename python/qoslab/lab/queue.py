"""A block device's request queue in sysfs: its settings, its I/O scheduler and tunables.

Every run records the queue it measured (`/sys/block/X/queue/*` and the scheduler's
`queue/iosched/*`). `restore_scheduler()` puts a scheduler back with its tunables: the kernel
gives a freshly selected scheduler its default tunables, so restoring the name alone would
lose a user's settings (`qoslab.lab.journal.scheduler_restored()` does it however a `with`
block ends, even after a `kill -9`).
"""

from __future__ import annotations

import contextlib
import os
import platform
import stat
from pathlib import Path

from qoslab.errors import InputError

SYS_BLOCK = Path("/sys/block")
SYS_DEV_BLOCK = Path("/sys/dev/block")


def disk_name(device: str | os.PathLike) -> str:
    """The whole-disk name whose queue serves a block device (`nvme0n1` for `nvme0n1p7`)."""
    st = os.stat(device)
    if not stat.S_ISBLK(st.st_mode):
        raise InputError("not a block device", path=device)
    return _disk_of_devnum(os.major(st.st_rdev), os.minor(st.st_rdev), device)


def disk_of_file(path: str | os.PathLike) -> str | None:
    """The disk holding a file's file system, or None (tmpfs, overlay without a block device)."""
    st = os.stat(path)
    try:
        return _disk_of_devnum(os.major(st.st_dev), os.minor(st.st_dev), path)
    except InputError:
        return None


def _disk_of_devnum(major: int, minor: int, what: str | os.PathLike) -> str:
    node = SYS_DEV_BLOCK / f"{major}:{minor}"
    if not node.exists():
        raise InputError(f"no sysfs entry for block device {major}:{minor}", path=what)
    real = node.resolve()
    if (real / "partition").exists():
        real = real.parent
    return real.name


def queue_dir(disk: str) -> Path:
    return SYS_BLOCK / disk / "queue"


def _read(path: Path) -> str | None:
    try:
        return path.read_text().strip()
    except OSError:  # write-only or vanished attributes
        return None


def queue_settings(disk: str) -> dict[str, str]:
    """Every readable attribute of the disk's queue (scheduler, nr_requests, rotational, ...)."""
    out = {}
    for attr in sorted(queue_dir(disk).iterdir()):
        if attr.is_file():
            value = _read(attr)
            if value is not None:
                out[attr.name] = value
    return out


def schedulers(disk: str) -> tuple[list[str], str]:
    """The schedulers the kernel offers for this queue, and the active one."""
    text = _read(queue_dir(disk) / "scheduler") or ""
    names, active = [], ""
    for word in text.split():
        if word.startswith("[") and word.endswith("]"):
            word = word[1:-1]
            active = word
        names.append(word)
    return names, active


def scheduler_tunables(disk: str) -> dict[str, str]:
    """The active scheduler's tunables (`queue/iosched/*`); empty for `none`."""
    iosched = queue_dir(disk) / "iosched"
    if not iosched.is_dir():
        return {}
    return {a.name: v for a in sorted(iosched.iterdir()) if (v := _read(a)) is not None}


def device_metadata(disk: str | None) -> dict:
    """What a run records about the device it measured."""
    meta: dict = {"kernel": platform.release(), "uname": " ".join(platform.uname())}
    if disk is None:
        return meta
    names, active = schedulers(disk)
    meta.update(
        disk=disk,
        scheduler=active,
        schedulers_available=names,
        scheduler_tunables=scheduler_tunables(disk),
        queue=queue_settings(disk),
    )
    for attr in ("device/model", "device/firmware_rev", "loop/backing_file", "loop/dio"):
        value = _read(SYS_BLOCK / disk / attr)
        if value is not None:
            meta[attr.replace("/", "_")] = value
    backing = meta.get("loop_backing_file")
    if backing and os.path.exists(backing):
        # A loop device's I/O continues to the disk under its backing file, through that
        # disk's own scheduler: it shapes what the loop device shows.
        lower = disk_of_file(backing)
        if lower is not None:
            _names, lower_active = schedulers(lower)
            meta["backing_disk"] = {
                "disk": lower,
                "scheduler": lower_active,
                "scheduler_tunables": scheduler_tunables(lower),
                "queue": queue_settings(lower),
            }
    return meta


def select_scheduler(disk: str, name: str) -> None:
    """Makes `name` the disk's I/O scheduler (root only)."""
    names, _active = schedulers(disk)
    if name not in names:
        raise InputError(
            f"scheduler {name!r} is not available on {disk} (available: {', '.join(names)})"
        )
    try:
        (queue_dir(disk) / "scheduler").write_text(name)
    except OSError as err:
        raise InputError(
            f"cannot select scheduler {name!r} on {disk}: {err.strerror}"
            + (" (needs root)" if os.geteuid() != 0 else ""),
            path=queue_dir(disk) / "scheduler",
        ) from None


def restore_scheduler(disk: str, name: str, tunables: dict[str, str]) -> None:
    """Makes `name` the disk's scheduler again, with its `tunables` as saved."""
    if schedulers(disk)[1] != name:
        select_scheduler(disk, name)
    iosched = queue_dir(disk) / "iosched"
    for attr_name, value in tunables.items():
        attr = iosched / attr_name
        if _read(attr) != value:
            with contextlib.suppress(OSError):  # read-only attributes cannot differ
                attr.write_text(value)
