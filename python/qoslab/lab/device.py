"""Loop devices and files that qoslab creates to measure, written in full before any run.

A measurement over a sparse file reads holes: the kernel returns zeros from the page cache
without touching a drive (a sparse loop device here reads 128K blocks at about 7 GB/s), so
every backing file and file target is written end to end with random data first. Loop devices
are attached with direct I/O on, so the loop driver reads the backing file with O_DIRECT
rather than through a second page cache. Every file and device is entered in the registry
before it exists, and removed from the system before it leaves the registry.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

from qoslab.errors import InputError
from qoslab.lab.loops import run_tool
from qoslab.lab.registry import Created, Registry, remove
from qoslab.units import human_bytes

DEFAULT_BACKING_DIR = Path("/var/tmp/qoslab")
MEMORY_FILE_SYSTEMS = {"tmpfs", "ramfs", "devtmpfs", "hugetlbfs"}
_FILL_CHUNK = 4 << 20
_SYNC_EVERY = 256 << 20


# ---- facts about files -----------------------------------------------------------------------


def file_system_type(path: str | os.PathLike) -> str:
    """The type of the file system holding `path` (from /proc/self/mountinfo)."""
    real = os.path.realpath(path)
    best, best_type = "", ""
    with open("/proc/self/mountinfo") as f:
        for line in f:
            left, _, right = line.partition(" - ")
            mount_point = left.split()[4].replace("\\040", " ")
            inside = real == mount_point or real.startswith(mount_point.rstrip("/") + "/")
            if inside and len(mount_point) >= len(best):
                best, best_type = mount_point, right.split()[0]
    return best_type


def has_holes(path: str | os.PathLike) -> bool:
    """True if any byte range of the file is unallocated (reads would not touch a device)."""
    size = os.stat(path).st_size
    if size == 0:
        return False
    fd = os.open(path, os.O_RDONLY)
    try:
        first_hole = os.lseek(fd, 0, os.SEEK_HOLE)
    except OSError:  # file systems without SEEK_HOLE: compare allocated blocks instead
        first_hole = size
    finally:
        os.close(fd)
    st = os.stat(path)
    return first_hole < size or st.st_blocks * 512 < st.st_size


def check_backing_location(path: Path, size: int) -> None:
    """Refuses memory file systems and file systems without room for `size` more bytes."""
    fs = file_system_type(path.parent)
    if fs in MEMORY_FILE_SYSTEMS:
        raise InputError(
            f"{path.parent} is on {fs}: a file in memory measures RAM, not a drive; "
            "choose a directory on a disk file system",
            path=path,
        )
    free = os.statvfs(path.parent)
    available = free.f_bavail * free.f_frsize
    if available < size:
        raise InputError(
            f"not enough space for {human_bytes(size)} (only {human_bytes(available)} free)",
            path=path,
        )


def fill_file(fd: int, size: int, progress=None, label: str = "writing") -> None:
    """Writes `size` bytes of random data from offset 0 and syncs them to the device.

    Fresh random bytes per chunk, so a drive that compresses or deduplicates stores it all.
    """
    import numpy as np

    rng = np.random.default_rng(0x51_05_1AB)
    task = progress.add_task(label, total=size) if progress is not None else None
    os.lseek(fd, 0, os.SEEK_SET)
    written, since_sync = 0, 0
    while written < size:
        chunk = rng.bytes(min(_FILL_CHUNK, size - written))
        view = memoryview(chunk)
        while view:
            n = os.write(fd, view)
            view = view[n:]
        written += len(chunk)
        since_sync += len(chunk)
        if since_sync >= _SYNC_EVERY:  # keeps dirty pages (and memory) bounded
            os.fdatasync(fd)
            since_sync = 0
        if task is not None:
            progress.update(task, completed=written)
    os.fsync(fd)
    os.posix_fadvise(fd, 0, size, os.POSIX_FADV_DONTNEED)


def create_filled_file(
    path: Path, size: int, purpose: str, registry: Registry, progress=None
) -> Created:
    """Creates `path` (which must not exist), records it, and writes it in full."""
    path = Path(os.path.abspath(path))
    if path.exists() or path.is_symlink():
        raise InputError("already exists; qoslab writes only files it creates itself", path=path)
    if not path.parent.is_dir():
        raise InputError("no such directory", path=path.parent)
    check_backing_location(path, size)
    entry = Created(file=str(path), purpose=purpose, size_bytes=size)
    registry.add(entry)
    fd = None
    try:
        try:
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        except OSError as err:
            raise InputError(f"cannot create: {err.strerror}", path=path) from None
        st = os.fstat(fd)
        entry.inode, entry.fs_dev = st.st_ino, st.st_dev
        registry.update(entry.file, inode=st.st_ino, fs_dev=st.st_dev)
        fill_file(fd, size, progress, f"writing {path.name}")
    except BaseException:
        remove(entry, registry)
        raise
    finally:
        if fd is not None:
            os.close(fd)
    return entry


# ---- loop devices ----------------------------------------------------------------------------


def create_loop_device(
    size: int, backing: Path | None, registry: Registry, progress=None
) -> Created:
    """A loop device with direct I/O over a new, fully written backing file."""
    from qoslab.lab.journal import Journal

    if backing is None:
        DEFAULT_BACKING_DIR.mkdir(parents=True, exist_ok=True)
        backing = DEFAULT_BACKING_DIR / f"loop-{time.strftime('%Y%m%d-%H%M%S')}-{os.getpid()}.img"
    # Until the device is attached, a kill leaves a half-written file (and perhaps a device)
    # that the next lab command removes.
    with Journal().change("creating", file=os.path.abspath(backing)):
        return _create_loop_device(size, Path(backing), registry, progress)


def _create_loop_device(size: int, backing: Path, registry: Registry, progress) -> Created:
    entry = create_filled_file(backing, size, "loop-backing", registry, progress)
    try:
        device = run_tool(
            ["losetup", "--find", "--show", "--direct-io=on", entry.file],
            "attaching a loop device (needs root)",
        ).strip()
        entry.loop = device
        registry.update(entry.file, loop=device)
        dio = Path(f"/sys/block/{Path(device).name}/loop/dio")
        if dio.exists() and dio.read_text().strip() != "1":
            raise InputError(
                f"{device}: the kernel refused direct I/O on the backing file (its file system "
                "or block size does not allow O_DIRECT); reads would hit the page cache",
                path=entry.file,
            )
    except BaseException:
        remove(entry, registry)
        raise
    return entry
