"""What a study measures: a block device qoslab may write to, or a plain file.

Both are written in full before the first run (see `qoslab.lab.device`). A file target that
does not exist is created for the study and removed afterwards unless `keep` is set; an
existing file is used only if qoslab created it or `--destructive-ok FILE` names it. A
block device must pass `qoslab.lab.safety`; one that qoslab did not create (a real drive
named by `--destructive-ok`) is preconditioned by writing the measured region once.
"""

from __future__ import annotations

import contextlib
import os
import stat
from dataclasses import dataclass
from pathlib import Path

from qoslab.errors import InputError
from qoslab.lab import device as dev
from qoslab.lab.journal import Journal
from qoslab.lab.queue import disk_name, disk_of_file
from qoslab.lab.registry import Created, Registry
from qoslab.lab.safety import check_block_device


@dataclass
class Target:
    path: str  # fio's filename=
    kind: str  # "block" or "file"
    size_bytes: int  # the region the runs address
    disk: str | None  # the disk whose request queue serves the I/O
    owned: Created | None  # the registry entry when qoslab created it
    scratch: Created | None = None  # created for this command, removed at its end
    preconditioned: bool = False
    journal_id: str | None = None  # the scratch file's entry in the lab's journal

    def describe(self) -> dict:
        return {
            "path": self.path,
            "kind": self.kind,
            "size_bytes": self.size_bytes,
            "disk": self.disk,
            "created_by_qoslab": self.owned is not None,
            "preconditioned_by_this_run": self.preconditioned,
        }


def _block_size(path: str) -> int:
    fd = os.open(path, os.O_RDONLY)
    try:
        return os.lseek(fd, 0, os.SEEK_END)
    finally:
        os.close(fd)


def prepare_target(
    target: str,
    size: int,
    *,
    registry: Registry,
    destructive_ok: str | None = None,
    precondition: bool = True,
    require_block: bool = False,
    progress=None,
) -> Target:
    path = os.path.abspath(target)
    try:
        st = os.stat(path)
    except FileNotFoundError:
        st = None
    if (
        st is None
        and Path(path).is_relative_to("/dev")
        and not Path(path).is_relative_to("/dev/shm")
    ):
        # Under /dev a missing name is a mistyped device, never a file to create.
        raise InputError("no such block device", path=target)
    if st is not None and stat.S_ISBLK(st.st_mode):
        return _prepare_block(path, size, registry, destructive_ok, precondition, progress)
    if require_block:
        raise InputError(
            "needs a block device (the I/O scheduler lives in its request queue); "
            "make a loop device with `qoslab lab device create`",
            path=target,
        )
    if st is not None and not stat.S_ISREG(st.st_mode):
        raise InputError("expected a block device or a regular file", path=target)
    return _prepare_file(Path(path), st, size, registry, destructive_ok, progress)


def _prepare_block(path, size, registry, destructive_ok, precondition, progress) -> Target:
    owned = check_block_device(path, registry, destructive_ok)
    region = min(size, _block_size(path))
    target = Target(path=path, kind="block", size_bytes=region, disk=disk_name(path), owned=owned)
    if owned is None and precondition:
        # A drive's never-written blocks read back without touching flash; write them first.
        try:
            fd = os.open(path, os.O_WRONLY | os.O_EXCL)
        except OSError as err:
            raise InputError(f"cannot open for writing: {err.strerror}", path=path) from None
        try:
            dev.fill_file(fd, region, progress, f"preconditioning {Path(path).name}")
        finally:
            os.close(fd)
        target.preconditioned = True
    return target


def _prepare_file(path: Path, st, size, registry, destructive_ok, progress) -> Target:
    if st is None:
        # In the lab's journal until released: after a kill the next lab command removes it.
        journal = Journal()
        journal_id = journal.record("scratch", file=str(path))
        try:
            entry = dev.create_filled_file(path, size, "file-target", registry, progress)
        except BaseException:
            journal.drop(journal_id)
            raise
        return Target(
            path=str(path),
            kind="file",
            size_bytes=size,
            disk=disk_of_file(path),
            owned=entry,
            scratch=entry,
            journal_id=journal_id,
        )
    owned = registry.find_file(path)
    allowed = destructive_ok is not None and os.path.realpath(destructive_ok) == str(path.resolve())
    if owned is None and not allowed:
        raise InputError(
            "refusing to write into a file qoslab did not create; name a new file, "
            f"or pass --destructive-ok {path} to overwrite it",
            path=path,
        )
    fs = dev.file_system_type(path)
    if fs in dev.MEMORY_FILE_SYSTEMS:
        raise InputError(f"the file is on {fs}: it would measure RAM, not a drive", path=path)
    target = Target(
        path=str(path),
        kind="file",
        size_bytes=min(size, st.st_size),
        disk=disk_of_file(path),
        owned=owned,
    )
    if st.st_size < size or dev.has_holes(path):
        fd = os.open(path, os.O_WRONLY)
        try:
            dev.fill_file(fd, max(size, st.st_size), progress, f"writing {path.name}")
        finally:
            os.close(fd)
        target.size_bytes = size
        target.preconditioned = True
    return target


def release_target(target: Target, registry: Registry, keep: bool) -> list[str]:
    """Removes a scratch target at the end of a command (unless kept)."""
    done: list[str] = []
    if target.scratch is not None and not keep:
        with contextlib.suppress(FileNotFoundError):
            done = dev.remove(target.scratch, registry)
    if target.journal_id is not None:
        Journal().drop(target.journal_id)
    return done
