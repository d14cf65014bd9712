"""The guest's initramfs: busybox, the host's fio and mke2fs with their shared libraries, and
kernel modules.

Built with busybox's own `cpio -H newc` (the host needs no cpio) and left uncompressed: under
TCG the guest would spend seconds on decompression that unpacking a plain archive saves. The
image is cached by what went into it (kernel, fio binary, module list), so a second boot reuses
it. What changes per run (the job, the plan, modules of the user's) reaches the guest over the
shared folder, not through the image.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import tempfile
from pathlib import Path

from qoslab.errors import InputError
from qoslab.vm.packages import Kernel, cache_root

# What a guest loads: the test devices, the schedulers built as modules (mq-deadline is built
# in), the shared folder (9p over virtio), the virtual disks of the document's setup, and ext4
# (the real file system the simulator's ext4 is checked against, docs/fs.md).
MODULES = (
    "null_blk",
    "scsi_debug",
    "sd_mod",
    "bfq",
    "kyber-iosched",
    "virtio_pci",
    "virtio_blk",
    "9pnet_virtio",
    "9p",
    "ahci",
    "ext4",
    "crc32c_generic",
)

# The host's mke2fs makes the guest's ext4 (busybox's mke2fs makes ext2 without a journal), with
# the host's /etc/mke2fs.conf, so the features are those a Debian user's `mkfs.ext4` gives.
MKE2FS_CONF = Path("/etc/mke2fs.conf")

APPLETS = (
    "sh",
    "mount",
    "umount",
    "mkdir",
    "cat",
    "echo",
    "ls",
    "modprobe",
    "insmod",
    "rmmod",
    "lsmod",
    "poweroff",
    "sleep",
    "dmesg",
    "grep",
    "sed",
    "sync",
    "head",
    "tail",
    "tr",
    "cut",
    "basename",
    "readlink",
    "wc",
    "seq",
    "test",
    "[",
    "printf",
    "date",
    "uname",
    "awk",
    "find",
    "timeout",
    "cp",
    "rm",
    "sort",
    "expr",
    "true",
    "false",
    "kill",
    "ps",
    "dd",
    "blockdev",
    "ionice",
    "nproc",
    "env",
    "xargs",
    "stat",
    "mknod",
    "chmod",
    "ln",
)

INIT = r"""#!/bin/sh
# qoslab's guest init: mount, join the shared folder, run the plan, power off.
export PATH=/bin
mount -t proc proc /proc
mount -t sysfs sysfs /sys
mount -t devtmpfs dev /dev
mount -t debugfs debugfs /sys/kernel/debug 2>/dev/null
echo "qoslab-guest: up $(cut -d' ' -f1 /proc/uptime) s, kernel $(uname -r)"
modprobe virtio_pci && modprobe 9pnet_virtio && modprobe 9p
if mount -t 9p -o trans=virtio,version=9p2000.L,msize=262144 qoslab /share; then
  sh /share/in/plan.sh > /share/out/plan.log 2>&1
  status=$?
  echo $status > /share/out/plan.status
  [ $status = 0 ] || tail -n 5 /share/out/plan.log
  dmesg > /share/out/dmesg.txt
  sync
  umount /share
else
  echo "qoslab-guest: error: the shared folder did not mount"
fi
echo "qoslab-guest: done"
poweroff -f
"""


def _fio() -> Path:
    found = shutil.which("fio")
    if found is None:
        raise InputError("fio not found: the guest runs the host's fio (apt-get install fio)")
    return Path(found).resolve()


def mke2fs() -> Path | None:
    """The host's mke2fs with its configuration, or None: a guest without it runs everything
    but `--fs` (`check_mke2fs` says so before a boot)."""
    found = shutil.which("mke2fs", path=f"{os.environ.get('PATH', '')}:/usr/sbin:/sbin")
    if found is None or not MKE2FS_CONF.exists():
        return None
    return Path(found).resolve()


def check_mke2fs() -> None:
    if mke2fs() is None:
        raise InputError(
            "--fs: mke2fs or /etc/mke2fs.conf not found: the guest makes its ext4 with the "
            "host's (apt-get install e2fsprogs)"
        )


def _libraries(binary: Path) -> list[Path]:
    done = subprocess.run(["ldd", str(binary)], capture_output=True, text=True)
    if done.returncode != 0:
        raise InputError(f"ldd {binary}: {done.stderr.strip() or 'failed'}")
    libs = []
    for line in done.stdout.splitlines():
        parts = line.split()
        if "=>" in parts and len(parts) >= 3 and parts[2].startswith("/"):
            libs.append(Path(parts[2]))
        elif parts and parts[0].startswith("/"):
            libs.append(Path(parts[0]))  # the dynamic loader
    return libs


def _module_closure(kernel: Kernel, names: tuple[str, ...]) -> list[str]:
    """Paths (relative to the modules directory) of `names` and everything they depend on."""
    deps: dict[str, list[str]] = {}
    for line in (kernel.modules / "modules.dep").read_text().splitlines():
        target, _, rest = line.partition(":")
        deps[target] = rest.split()
    by_name = {Path(p).name.removesuffix(".ko").replace("-", "_"): p for p in deps}
    wanted: list[str] = []
    for name in names:
        path = by_name.get(name.replace("-", "_"))
        if path is None:
            raise InputError(f"the guest kernel {kernel.release} has no module {name}")
        for p in [path, *deps[path]]:
            if p not in wanted:
                wanted.append(p)
    return wanted


def _copy(src: Path, root: Path, rel: str) -> None:
    dst = root / rel.lstrip("/")
    dst.parent.mkdir(parents=True, exist_ok=True)
    shutil.copy2(src, dst, follow_symlinks=True)


def build_image(kernel: Kernel) -> Path:
    """The initramfs for `kernel`, built once per kernel, fio binary and module list."""
    fio = _fio()
    mkfs = mke2fs()
    libs = list(dict.fromkeys([*_libraries(fio), *(_libraries(mkfs) if mkfs else [])]))
    key = hashlib.sha256(
        "\n".join(
            [
                kernel.release,
                kernel.version,
                str(fio),
                str(fio.stat().st_mtime_ns),
                str(mkfs),
                str(mkfs.stat().st_mtime_ns) if mkfs else "",
                MKE2FS_CONF.read_text() if mkfs else "",
                INIT,
                *MODULES,
                *APPLETS,
                *map(str, libs),
            ]
        ).encode()
    ).hexdigest()[:16]
    image = cache_root() / "images" / f"initramfs-{kernel.release}-{key}.cpio"
    if image.exists():
        return image
    # Built in a folder and a file of this process's own, then renamed into place: two boots
    # at once (two test workers) build the same bytes without writing into each other's.
    image.parent.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix=f"{image.stem}.", suffix=".d", dir=image.parent))
    tmp = work.with_suffix(".cpio")
    try:
        _build_image(kernel, work, tmp, fio, mkfs, libs)
        os.replace(tmp, image)
    finally:
        shutil.rmtree(work, ignore_errors=True)
        tmp.unlink(missing_ok=True)
    return image


def _build_image(kernel: Kernel, work: Path, tmp: Path, fio, mkfs, libs) -> None:
    """The initramfs's files in `work`, then their cpio archive in `tmp`."""
    for d in ("bin", "proc", "sys", "dev", "tmp", "share", "mnt", "sys/kernel/debug", "etc"):
        (work / d).mkdir(parents=True, exist_ok=True)
    shutil.copy2(kernel.busybox, work / "bin" / "busybox")
    for applet in APPLETS:
        (work / "bin" / applet).symlink_to("busybox")
    _copy(fio, work, "/bin/fio")
    if mkfs is not None:
        _copy(mkfs, work, "/bin/mke2fs")
        _copy(MKE2FS_CONF, work, str(MKE2FS_CONF))
        (work / "etc" / "mtab").symlink_to("/proc/mounts")  # mke2fs: is the device mounted?
    for lib in libs:
        _copy(lib, work, str(lib))
    rel_modules = f"lib/modules/{kernel.release}"
    for rel in _module_closure(kernel, MODULES):
        _copy(kernel.modules / rel, work, f"{rel_modules}/{rel}")
    for f in ("modules.builtin", "modules.builtin.modinfo", "modules.order"):
        if (kernel.modules / f).exists():
            _copy(kernel.modules / f, work, f"{rel_modules}/{f}")
    busybox = str(work / "bin" / "busybox")
    done = subprocess.run(
        [busybox, "depmod", "-b", str(work), kernel.release], capture_output=True, text=True
    )
    if done.returncode != 0:
        raise InputError(f"busybox depmod for the initramfs: {done.stderr.strip()}")
    (work / "init").write_text(INIT)
    (work / "init").chmod(0o755)
    names = subprocess.run(
        ["sh", "-c", "find . | sort"], cwd=work, capture_output=True, text=True, check=True
    ).stdout
    with open(tmp, "wb") as out:
        done = subprocess.run(
            [busybox, "cpio", "-o", "-H", "newc"],
            cwd=work,
            input=names.encode(),
            stdout=out,
            stderr=subprocess.PIPE,
        )
    if done.returncode != 0:
        raise InputError(f"busybox cpio: {done.stderr.decode().strip() or 'failed'}")
