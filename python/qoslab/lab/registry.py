"""The record of what qoslab created: files it wrote and the loop devices over them.

qoslab may only measure (and write to) what it created itself, and `qoslab lab device remove`
and Ctrl-C clean up exactly that. The record is a JSON list in `created.json` under
`$QOSLAB_STATE_DIR`, or `/run/qoslab` for root (gone after a reboot, like the loop devices
it describes), or `$XDG_RUNTIME_DIR/qoslab` otherwise. Each entry is one file qoslab created,
identified by path *and* inode, and the loop device attached to it, if any: a loop device
counts as qoslab's only while the kernel says it is backed by that very inode, so a device
number reused by someone else after a detach is never mistaken for ours.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import time
from collections.abc import Iterator
from dataclasses import asdict, dataclass
from pathlib import Path

from qoslab.errors import InputError
from qoslab.lab.loops import loop_backing, loops_backed_by, run_tool

STATE_ENV = "QOSLAB_STATE_DIR"


def state_dir() -> Path:
    if os.environ.get(STATE_ENV):
        return Path(os.environ[STATE_ENV])
    if os.geteuid() == 0:
        return Path("/run/qoslab")
    runtime = os.environ.get("XDG_RUNTIME_DIR") or f"/tmp/qoslab-{os.geteuid()}"
    return Path(runtime) / "qoslab"


@contextlib.contextmanager
def locked_json(path: Path, corrupt: str) -> Iterator[list]:
    """The JSON list in `path` (empty if there is none yet), held under an exclusive lock on the
    `.lock` file beside it and written back whole, by rename, if the caller changed it. The
    lab's state files (this registry, the journal) are kept so; `corrupt` is the error for a
    file that is not JSON, with `{}` for what is wrong."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    except OSError as err:
        raise InputError(
            f"cannot create the state directory: {err.strerror}", path=path.parent
        ) from None
    with open(path.with_suffix(".lock"), "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            entries = json.loads(path.read_text()) if path.exists() else []
        except ValueError as err:
            raise InputError(corrupt.format(err), path=path) from None
        before = json.dumps(entries)
        yield entries
        if json.dumps(entries) != before:
            tmp = path.with_suffix(f".tmp{os.getpid()}")
            tmp.write_text(json.dumps(entries, indent=1) + "\n")
            os.replace(tmp, path)


_CORRUPT = "corrupt qoslab state file ({}); inspect it and remove what it lists by hand"


@dataclass
class Created:
    """One file qoslab created and, for a loop device's backing file, the device."""

    file: str
    purpose: str  # "loop-backing" or "file-target"
    size_bytes: int
    inode: int | None = None  # None until the file exists
    fs_dev: int | None = None  # st_dev of the file system holding the file
    loop: str | None = None
    created_at: float = 0.0
    pid: int = 0

    def matches_file(self, st: os.stat_result) -> bool:
        return self.inode == st.st_ino and self.fs_dev == st.st_dev


class Registry:
    """The state file, read and written under an exclusive lock."""

    def __init__(self, directory: Path | None = None):
        self.directory = directory or state_dir()
        self.path = self.directory / "created.json"

    @contextlib.contextmanager
    def _locked(self) -> Iterator[list[Created]]:
        with locked_json(self.path, _CORRUPT) as raw:
            try:
                entries = [Created(**entry) for entry in raw]
            except TypeError as err:
                raise InputError(_CORRUPT.format(err), path=self.path) from None
            before = [asdict(e) for e in entries]
            yield entries
            if [asdict(e) for e in entries] != before:
                raw[:] = [asdict(e) for e in entries]

    def entries(self) -> list[Created]:
        with self._locked() as entries:
            return list(entries)

    def add(self, entry: Created) -> None:
        entry.created_at = entry.created_at or time.time()
        entry.pid = entry.pid or os.getpid()
        with self._locked() as entries:
            if any(e.file == entry.file for e in entries):
                raise InputError("qoslab already has a record of this file", path=entry.file)
            entries.append(entry)

    def update(self, file: str, **fields) -> None:
        with self._locked() as entries:
            for e in entries:
                if e.file == file:
                    for k, v in fields.items():
                        setattr(e, k, v)

    def drop(self, file: str) -> None:
        with self._locked() as entries:
            entries[:] = [e for e in entries if e.file != file]

    def find_file(self, path: str | os.PathLike) -> Created | None:
        """The record of an existing file, if qoslab created this very file (same inode)."""
        try:
            st = os.stat(path)
        except OSError:
            return None
        real = os.path.realpath(path)
        for e in self.entries():
            if os.path.realpath(e.file) == real and e.matches_file(st):
                return e
        return None

    def find_loop(self, device: str | os.PathLike) -> Created | None:
        """The record whose loop device is `device`, if still backed by the recorded file."""
        real = os.path.realpath(device)
        for e in self.entries():
            if e.loop and os.path.realpath(e.loop) == real:
                backing = loop_backing(real)
                if backing is not None and backing == (e.fs_dev, e.inode):
                    return e
        return None


def remove(entry: Created, registry: Registry) -> list[str]:
    """Detaches qoslab's loop devices on the file, deletes the file, forgets the record.

    Returns what was done, one line per action, for the user.
    """
    done = []
    for device in loops_on(entry):
        run_tool(["losetup", "--detach", device], f"detaching {device}")
        done.append(f"detached {device}")
    try:
        st = os.stat(entry.file)
    except FileNotFoundError:
        st = None
    if st is not None and entry.matches_file(st):
        os.unlink(entry.file)
        done.append(f"removed {entry.file}")
    elif st is not None:
        done.append(f"left {entry.file}: it is not the file qoslab created (inode differs)")
    registry.drop(entry.file)
    return done


def loops_on(entry: Created) -> list[str]:
    """The loop devices the kernel says are backed by the recorded file (same inode)."""
    return loops_backed_by(entry.inode, entry.fs_dev)
