"""The lab's journal: what a lab command is changing on this machine, written down before
each change, so that the next `qoslab lab ...` (or `qoslab lab restore`) undoes what a command
killed with `kill -9`, which runs no clean-up, left behind.

The journal is `journal.json` in the state directory of the registry of created files
(`qoslab.lab.registry.state_dir()`); each entry is one change in progress:

    scheduler  a disk whose I/O scheduler the command switches: the scheduler and tunables
               active before, to put back
    fio        a fio run, by its job file: fio runs in a session of its own (a Ctrl-C reaches
               qoslab first), so it outlives a killed qoslab; it is found again by that job
               file on its command line, and its process group is ended
    creating   a file (and loop device) qoslab is making: removed if the making did not finish
    scratch    a file target made for one command: removed if the command did not release it
    partial    a command's partial output folder: removed

Every entry names its owner, the process and the kernel's start time of that process (a pid
reused by another process is never taken for it). An entry of a live owner is left alone: two
lab commands may run at once. An entry whose owner is gone is undone and dropped. Undoing
touches only what the entry names: a scheduler in sysfs, processes whose command line is fio
with that very job file, files and loop devices qoslab's registry says it created (which
`qoslab lab device remove` would remove), and folders named like qoslab's partial outputs.
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import signal
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

from qoslab.errors import InputError
from qoslab.lab.queue import (
    queue_dir,
    restore_scheduler,
    scheduler_tunables,
    schedulers,
)
from qoslab.lab.registry import Registry, locked_json, remove, state_dir

_PARTIAL = re.compile(r"^\..+\.partial-")


def _start_time(pid: int) -> int | None:
    """The kernel's start time of process `pid` (clock ticks after boot), None if there is no
    such process."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    # The command name (field 2) is in parentheses and may hold spaces: fields after its end.
    return int(stat.rsplit(")", 1)[1].split()[19])


def _me() -> dict:
    return {"pid": os.getpid(), "start": _start_time(os.getpid())}


def _alive(entry: dict) -> bool:
    return entry.get("start") is not None and _start_time(entry["pid"]) == entry["start"]


class Journal:
    """The journal file, read and written under an exclusive lock."""

    def __init__(self, directory: Path | None = None):
        self.directory = directory or state_dir()
        self.path = self.directory / "journal.json"

    def _locked(self) -> contextlib.AbstractContextManager[list[dict]]:
        return locked_json(
            self.path,
            "corrupt qoslab journal ({}); inspect it, undo what it lists by hand and remove it",
        )

    def record(self, kind: str, **fields) -> str:
        """Writes down a change about to be made; returns its id for `drop`."""
        entry = {"id": uuid.uuid4().hex, "kind": kind, **fields, **_me(), "at": time.time()}
        with self._locked() as entries:
            if kind == "scheduler":
                for e in entries:
                    if e["kind"] == "scheduler" and e["disk"] == fields["disk"] and _alive(e):
                        raise InputError(
                            f"the I/O scheduler of {fields['disk']} is being switched by "
                            f"another qoslab lab command (pid {e['pid']}); wait for it"
                        )
            entries.append(entry)
        return entry["id"]

    def drop(self, entry_id: str) -> None:
        """The change is undone (or was kept on purpose): forgets it."""
        with self._locked() as entries:
            entries[:] = [e for e in entries if e["id"] != entry_id]

    @contextlib.contextmanager
    def change(self, kind: str, **fields) -> Iterator[str]:
        """Records the change before the block and forgets it after, however the block ends
        (a kill -9 is the one way it stays recorded)."""
        entry_id = self.record(kind, **fields)
        try:
            yield entry_id
        finally:
            self.drop(entry_id)

    def entries(self) -> list[dict]:
        with self._locked() as entries:
            return list(entries)

    def recover(self, registry: Registry | None = None) -> list[str]:
        """Undoes every change whose owner is gone, fio first (it may be writing), and
        returns what was done, a line per action."""
        order = {"fio": 0, "scheduler": 1, "creating": 2, "scratch": 2, "partial": 3}
        done: list[str] = []
        with self._locked() as entries:
            stale = sorted((e for e in entries if not _alive(e)), key=lambda e: order[e["kind"]])
            for e in stale:
                try:
                    done += _UNDO[e["kind"]](e, registry or Registry())
                except (InputError, OSError) as err:  # kept, to try again next time
                    done.append(f"could not undo a {e['kind']} change of pid {e['pid']}: {err}")
                    continue
                entries.remove(e)
        return done


# ---- undoing each kind of change --------------------------------------------------------------


def _fio_processes(job_file: str) -> list[int]:
    """Process ids of the fio processes running `job_file` (their command line names it)."""
    found = []
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            argv = (proc / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if argv and os.path.basename(argv[0]) == b"fio" and job_file.encode() in argv:
            found.append(int(proc.name))
    return found


def _undo_fio(entry: dict, _registry: Registry) -> list[str]:
    pids = _fio_processes(entry["job_file"])
    groups = set()
    for pid in pids:
        with contextlib.suppress(ProcessLookupError):
            groups.add(os.getpgid(pid))
    groups.discard(os.getpgrp())  # never this command's own group
    for group in sorted(groups):
        for sig, wait_s in ((signal.SIGTERM, 5.0), (signal.SIGKILL, 5.0)):
            try:
                os.killpg(group, sig)
            except ProcessLookupError:
                break
            deadline = time.monotonic() + wait_s
            while time.monotonic() < deadline and _fio_processes(entry["job_file"]):
                time.sleep(0.05)
            if not _fio_processes(entry["job_file"]):
                break
    if not pids:
        return []
    return [f"ended fio left running by qoslab (pid {entry['pid']}): {entry['job_file']}"]


def _undo_scheduler(entry: dict, _registry: Registry) -> list[str]:
    disk = entry["disk"]
    if not (queue_dir(disk) / "scheduler").exists():
        return [f"{disk} is gone; its scheduler needs no restoring"]
    active = schedulers(disk)[1]
    restore_scheduler(disk, entry["scheduler"], entry.get("tunables", {}))
    return [f"{disk}: I/O scheduler {active} -> {entry['scheduler']} (as before the killed run)"]


def _undo_created(entry: dict, registry: Registry) -> list[str]:
    real = os.path.realpath(entry["file"])
    mine = [e for e in registry.entries() if os.path.realpath(e.file) == real]
    done = []
    for e in mine:
        done += remove(e, registry)
    return done


def _undo_partial(entry: dict, _registry: Registry) -> list[str]:
    path = Path(entry["path"])
    if not _PARTIAL.match(path.name) or not path.is_dir():
        return []
    shutil.rmtree(path, ignore_errors=True)
    return [f"removed the partial output {path}"]


_UNDO = {
    "fio": _undo_fio,
    "scheduler": _undo_scheduler,
    "creating": _undo_created,
    "scratch": _undo_created,
    "partial": _undo_partial,
}


@contextlib.contextmanager
def scheduler_restored(disk: str) -> Iterator[str]:
    """Inside the block the scheduler may be switched at will; after it, however the block
    ends (error, Ctrl-C), the scheduler active before and its tunables are put back. They are
    written into the lab's journal before the block, so that after a `kill -9` the next lab
    command puts them back (`qoslab.lab.journal`)."""
    _names, previous = schedulers(disk)
    saved = scheduler_tunables(disk)
    with Journal().change("scheduler", disk=disk, scheduler=previous, tunables=saved):
        try:
            yield previous
        finally:
            restore_scheduler(disk, previous, saved)
