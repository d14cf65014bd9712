"""The guest's pinned Debian packages: fetched once with `apt-get download`, kept in a cache.

One kernel is pinned (its image, headers, kbuild and source all of one version), so that every
module qoslab builds loads into the kernel it was built for, and results name the kernel they
came from. Bookworm's point release carries it (bookworm/main, not -security, which moves on
faster); `QOSLAB_GUEST_KERNEL=ABI:VERSION` (e.g. `6.1.0-56:6.1.192-2`) chooses another one that
the configured apt sources carry.

The cache is `$QOSLAB_CACHE_DIR/vm`, by default `$XDG_CACHE_HOME/qoslab/vm` (`~/.cache/qoslab/vm`):
the downloaded .deb files, each package unpacked once (a stamp file marks a complete unpacking),
and the private block-layer headers taken out of the source tarball. Nothing of it is committed
or installed on the machine; only `qemu-system-x86` is (`make tools`).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tarfile
from dataclasses import dataclass
from fnmatch import fnmatch
from pathlib import Path

from qoslab.errors import InputError

KERNEL_ABI = "6.1.0-50"
KERNEL_VERSION = "6.1.176-1"
BUSYBOX = "busybox-static"

# What a build and a boot need from the source tarball: the block layer's private headers
# (an elevator includes elevator.h and blk-mq-sched.h) and checkpatch with its data files.
SOURCE_MEMBERS = (
    "block/*.h",
    "scripts/checkpatch.pl",
    "scripts/spelling.txt",
    "scripts/const_structs.checkpatch",
)


def cache_root() -> Path:
    if os.environ.get("QOSLAB_CACHE_DIR"):
        base = Path(os.environ["QOSLAB_CACHE_DIR"])
    else:
        base = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "qoslab"
    return base / "vm"


def _madison(package: str) -> set[str]:
    """The versions of `package` the apt sources carry (none when apt is missing)."""
    try:
        done = subprocess.run(
            ["apt-cache", "madison", package], capture_output=True, text=True, check=False
        )
    except FileNotFoundError:
        return set()
    return {line.split("|")[1].strip() for line in done.stdout.splitlines() if "|" in line}


def _available(abi: str, version: str) -> bool:
    return all(
        version in _madison(p)
        for p in (f"linux-image-{abi}-amd64", f"linux-headers-{abi}-amd64", "linux-source-6.1")
    )


def _newest_available() -> tuple[str, str] | None:
    """The newest 6.1 kernel whose image, headers and source of one version apt carries."""
    try:
        done = subprocess.run(
            ["apt-cache", "search", "--names-only", r"^linux-image-6\.1\.0-[0-9]+-amd64$"],
            capture_output=True,
            text=True,
            check=False,
        )
    except FileNotFoundError:
        return None
    abis = sorted(
        (
            line.split()[0].removeprefix("linux-image-").removesuffix("-amd64")
            for line in done.stdout.splitlines()
            if line.strip()
        ),
        key=lambda a: int(a.rsplit("-", 1)[1]),
        reverse=True,
    )
    for abi in abis:
        for version in sorted(_madison(f"linux-image-{abi}-amd64"), reverse=True):
            if _available(abi, version):
                return abi, version
    return None


def pinned_kernel(say=lambda _msg: None) -> tuple[str, str]:
    """(ABI, Debian version) of the guest kernel: the pin, or QOSLAB_GUEST_KERNEL. When the
    apt sources no longer carry the pin (a Debian point release replaced it) and nothing of it
    is in the cache, the newest 6.1 kernel they carry in full, said in one line."""
    text = os.environ.get("QOSLAB_GUEST_KERNEL", "").strip()
    if not text:
        cached = cache_root() / f"root-{KERNEL_ABI}" / ".qoslab-complete"
        if cached.exists() or _available(KERNEL_ABI, KERNEL_VERSION):
            return KERNEL_ABI, KERNEL_VERSION
        newer = _newest_available()
        if newer is None:
            return KERNEL_ABI, KERNEL_VERSION  # the download names what is missing
        say(
            f"the pinned kernel {KERNEL_ABI} ({KERNEL_VERSION}) is not in the apt sources; "
            f"using {newer[0]} ({newer[1]})"
        )
        return newer
    abi, sep, version = text.partition(":")
    if not sep or not abi or not version:
        raise InputError(
            f"QOSLAB_GUEST_KERNEL: expected ABI:VERSION such as 6.1.0-50:6.1.176-1, got {text!r}"
        )
    return abi, version


@dataclass(frozen=True)
class Kernel:
    """Where the pinned kernel's parts are, once fetched."""

    abi: str
    version: str
    root: Path  # the unpacked packages, laid out as on a Debian system
    source: Path  # the chosen files of the source tarball

    @property
    def release(self) -> str:
        return f"{self.abi}-amd64"

    @property
    def vmlinuz(self) -> Path:
        return self.root / "boot" / f"vmlinuz-{self.release}"

    @property
    def config(self) -> Path:
        return self.root / "boot" / f"config-{self.release}"

    @property
    def modules(self) -> Path:
        return self.root / "lib" / "modules" / self.release

    @property
    def build_dir(self) -> Path:
        """The headers tree an out-of-tree module builds against (`make -C`)."""
        return self.root / "usr" / "src" / f"linux-headers-{self.release}"

    @property
    def private_headers(self) -> Path:
        return self.source / "block"

    @property
    def checkpatch(self) -> Path:
        return self.source / "scripts" / "checkpatch.pl"

    @property
    def busybox(self) -> Path:
        return self.root / "bin" / "busybox"


def _packages(abi: str, version: str) -> list[str]:
    return [
        f"linux-image-{abi}-amd64={version}",
        f"linux-headers-{abi}-amd64={version}",
        f"linux-headers-{abi}-common={version}",
        f"linux-kbuild-6.1={version}",
        f"linux-source-6.1={version}",
        BUSYBOX,
    ]


def _deb_of(debs: Path, spec: str) -> Path | None:
    name, _, version = spec.partition("=")
    # apt-get download names a file NAME_VERSION_ARCH.deb, with ':' in VERSION as %3a.
    pattern = f"{name}_{version.replace(':', '%3a')}_*.deb" if version else f"{name}_*.deb"
    found = sorted(debs.glob(pattern))
    return found[-1] if found else None


def _download(specs: list[str], debs: Path, say) -> None:
    if shutil.which("apt-get") is None:
        raise InputError(
            "apt-get not found: qoslab vm fetches the guest kernel from Debian's packages "
            "(run it on Debian or Ubuntu)"
        )
    say(f"downloading {', '.join(s.split('=')[0] for s in specs)} (apt-get download)")
    done = subprocess.run(
        ["apt-get", "download", "-q", *specs], cwd=debs, capture_output=True, text=True
    )
    if done.returncode != 0:
        lines = (
            [ln for ln in done.stderr.splitlines() if ln.startswith("E:") or "Unable" in ln]
            or done.stderr.strip().splitlines()
            or ["failed"]
        )
        raise InputError(
            f"apt-get download {' '.join(specs)}: {lines[-1].removeprefix('E: ')} "
            "(is the package in your apt sources? try apt-get update, or set "
            "QOSLAB_GUEST_KERNEL=ABI:VERSION to one that is)"
        )


def _unpack(deb: Path, into: Path) -> None:
    into.mkdir(parents=True, exist_ok=True)
    done = subprocess.run(["dpkg-deb", "-x", str(deb), str(into)], capture_output=True, text=True)
    if done.returncode != 0:
        msg = (done.stderr.strip().splitlines() or ["failed"])[-1]
        raise InputError(f"dpkg-deb -x {deb.name}: {msg} (delete it from {deb.parent} and retry)")


def _fix_headers_makefile(kernel: Kernel) -> None:
    # The -amd64 headers' Makefile includes the -common one by its absolute installed path;
    # unpacked elsewhere it must point into the cache.
    makefile = kernel.build_dir / "Makefile"
    text = makefile.read_text()
    common = f"/usr/src/linux-headers-{kernel.abi}-common/"
    if f"include {common}" in text:
        makefile.write_text(text.replace(f"include {common}", f"include {kernel.root}{common}"))


def _extract_source(deb: Path, into: Path) -> None:
    """The chosen members of the linux-source tarball inside the .deb (no full unpacking:
    the tarball is 140 MB of xz, its tree 1.3 GB)."""
    work = into.with_name(into.name + ".partial")
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    deb_tar = subprocess.Popen(["dpkg-deb", "--fsys-tarfile", str(deb)], stdout=subprocess.PIPE)
    try:
        with tarfile.open(fileobj=deb_tar.stdout, mode="r|") as outer:
            for member in outer:
                if not member.name.endswith(".tar.xz"):
                    continue
                inner_file = outer.extractfile(member)
                with tarfile.open(fileobj=inner_file, mode="r|xz") as inner:
                    for m in inner:
                        rel = m.name.split("/", 1)[1] if "/" in m.name else ""
                        if m.isfile() and any(fnmatch(rel, p) for p in SOURCE_MEMBERS):
                            target = work / rel
                            target.parent.mkdir(parents=True, exist_ok=True)
                            with inner.extractfile(m) as src, open(target, "wb") as dst:
                                shutil.copyfileobj(src, dst)
                break
    finally:
        deb_tar.stdout.close()
        deb_tar.wait()
    if not (work / "block" / "elevator.h").exists():
        raise InputError(f"{deb.name}: no block/elevator.h in its source tarball")
    shutil.rmtree(into, ignore_errors=True)
    work.rename(into)


def fetch(say=lambda _msg: None) -> Kernel:
    """The pinned kernel, downloaded and unpacked into the cache if not there yet."""
    abi, version = pinned_kernel(say)
    cache = cache_root()
    debs = cache / "debs"
    root = cache / f"root-{abi}"
    source = cache / f"source-{version}"
    kernel = Kernel(abi, version, root, source)
    stamp = root / ".qoslab-complete"
    if stamp.exists() and (source / "block" / "elevator.h").exists():
        return kernel
    debs.mkdir(parents=True, exist_ok=True)
    specs = _packages(abi, version)
    missing = [s for s in specs if _deb_of(debs, s) is None]
    if missing:
        _download(missing, debs, say)
    if not stamp.exists():
        say(f"unpacking linux {abi} ({version}) into {root}")
        shutil.rmtree(root, ignore_errors=True)
        for spec in specs:
            if not spec.startswith("linux-source"):
                _unpack(_deb_of(debs, spec), root)
        _fix_headers_makefile(kernel)
        # busybox's own depmod writes modules.dep for the whole tree; the initramfs takes
        # what it needs from it.
        _run_busybox(kernel, ["depmod", "-b", str(root), kernel.release])
        stamp.write_text(f"{abi} {version}\n")
    if not (source / "block" / "elevator.h").exists():
        say("taking the block layer's private headers out of linux-source-6.1")
        _extract_source(_deb_of(debs, f"linux-source-6.1={version}"), source)
    return kernel


def _run_busybox(kernel: Kernel, args: list[str]) -> str:
    done = subprocess.run([str(kernel.busybox), *args], capture_output=True, text=True)
    if done.returncode != 0:
        msg = (done.stderr.strip().splitlines() or ["failed"])[-1]
        raise InputError(f"busybox {args[0]}: {msg}")
    return done.stdout
