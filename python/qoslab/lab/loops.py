"""The kernel's table of loop devices, as `losetup` lists it: which file backs which device.
Both the registry of what qoslab created and the device commands ask it."""

from __future__ import annotations

import json
import os
import subprocess

from qoslab.errors import InputError


def run_tool(cmd: list[str], what: str) -> str:
    """Runs a system tool; its failure is one line naming what it was for."""
    try:
        done = subprocess.run(cmd, capture_output=True, text=True)
    except FileNotFoundError:
        raise InputError(f"{cmd[0]} not found: install util-linux ({what})") from None
    if done.returncode != 0:
        msg = (done.stderr.strip().splitlines() or ["failed"])[-1]
        raise InputError(f"{' '.join(cmd[:2])}: {msg} ({what})")
    return done.stdout


def _loop_table() -> list[dict]:
    out = run_tool(
        ["losetup", "--list", "--json", "--output", "NAME,BACK-INO,BACK-MAJ:MIN,DIO"],
        "listing loop devices",
    )
    if not out.strip():
        return []
    return json.loads(out).get("loopdevices", [])


def _devnum(maj_min: str) -> int | None:
    try:
        major, minor = (int(x) for x in str(maj_min).strip().split(":"))
    except ValueError:
        return None
    return os.makedev(major, minor)


def loop_backing(device: str) -> tuple[int | None, int | None] | None:
    """(st_dev, inode) of the file behind loop `device`, or None if it is not attached."""
    real = os.path.realpath(device)
    for row in _loop_table():
        if os.path.realpath(row["name"]) == real:
            return _devnum(row.get("back-maj:min", "")), int(row["back-ino"])
    return None


def loops_backed_by(inode: int | None, fs_dev: int | None) -> list[str]:
    """The loop devices backed by the file with this inode on this file system."""
    if inode is None:
        return []
    return [
        row["name"]
        for row in _loop_table()
        if str(row.get("back-ino")) == str(inode) and _devnum(row.get("back-maj:min", "")) == fs_dev
    ]
