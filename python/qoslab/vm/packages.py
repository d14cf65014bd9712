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

Several qoslab commands may fetch into one cache at once (`make lint` beside a `qoslab vm fetch`,
two test workers): a lock file lets one fetch at a time download and unpack, the others wait and
then find the cache complete. A tree is unpacked beside its final name and renamed into place
when whole, so a killed fetch leaves no half tree under that name; a cache missing a file a
build or a boot needs (deleted, or left by an older qoslab) is unpacked again, and what cannot
be mended is one line naming the cache, never a traceback.
"""

from __future__ import annotations

import fcntl
import os
import shutil
import subprocess
import tarfile
from collections.abc import Iterator
from contextlib import contextmanager
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

    @property
    def stamp(self) -> Path:
        """Written last into an unpacked tree: the packages are all in it."""
        return self.root / ".qoslab-complete"

    def missing_from_root(self) -> Path | None:
        """The first file of the unpacked packages that a build or a boot needs and that is not
        there (None: the tree is complete)."""
        needed = (
            self.stamp,
            self.vmlinuz,
            self.config,
            self.modules / "modules.dep",
            self.build_dir / "Makefile",
            self.busybox,
        )
        return next((p for p in needed if not p.exists()), None)

    def missing_from_source(self) -> Path | None:
        needed = (self.private_headers / "elevator.h", self.checkpatch)
        return next((p for p in needed if not p.exists()), None)


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


def _unpack(deb: Path | None, into: Path) -> None:
    if deb is None:
        raise InputError(f"a package is missing from the download into {into.parent / 'debs'}")
    into.mkdir(parents=True, exist_ok=True)
    done = subprocess.run(["dpkg-deb", "-x", str(deb), str(into)], capture_output=True, text=True)
    if done.returncode != 0:
        msg = (done.stderr.strip().splitlines() or ["failed"])[-1]
        raise InputError(f"dpkg-deb -x {deb.name}: {msg} (delete it from {deb.parent} and retry)")


def _fix_headers_makefile(kernel: Kernel, tree: Path) -> None:
    # The -amd64 headers' Makefile includes the -common one by its absolute installed path;
    # unpacked elsewhere it must point into the cache (the tree's final place, kernel.root).
    makefile = tree / kernel.build_dir.relative_to(kernel.root) / "Makefile"
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
    kernel = Kernel(abi, version, cache / f"root-{abi}", cache / f"source-{version}")
    if kernel.missing_from_root() is None and kernel.missing_from_source() is None:
        return kernel
    try:
        with _cache_lock(cache, say):
            _fill(kernel, cache / "debs", say)
    except OSError as err:
        # Not a bug of qoslab's: the cache's disk, its permissions, or someone deleting in it.
        what = f"{err.strerror or err}" + (f": {err.filename}" if err.filename else "")
        raise InputError(
            f"the guest kernel's cache {cache}: {what} (delete {cache} and run qoslab vm fetch)"
        ) from err
    return kernel


@contextmanager
def _cache_lock(cache: Path, say) -> Iterator[None]:
    """One fetch at a time into `cache`; the others wait for it (the kernel frees the lock of a
    process that dies)."""
    cache.mkdir(parents=True, exist_ok=True)
    with open(cache / ".lock", "w") as lock:
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            say(f"waiting for another qoslab fetching into {cache}")
            fcntl.flock(lock, fcntl.LOCK_EX)
        yield


def _fill(kernel: Kernel, debs: Path, say) -> None:
    """Downloads and unpacks what the cache lacks (under the cache's lock)."""
    missing_root, missing_source = kernel.missing_from_root(), kernel.missing_from_source()
    if missing_root is None and missing_source is None:
        return  # another process filled it while this one waited
    debs.mkdir(parents=True, exist_ok=True)
    specs = _packages(kernel.abi, kernel.version)
    missing = [s for s in specs if _deb_of(debs, s) is None]
    if missing:
        _download(missing, debs, say)
    if missing_root is not None:
        if kernel.root.exists() and missing_root != kernel.stamp:
            say(f"{kernel.root} is incomplete (no {missing_root.relative_to(kernel.root)})")
        say(f"unpacking linux {kernel.abi} ({kernel.version}) into {kernel.root}")
        tree = kernel.root.with_name(kernel.root.name + ".partial")
        shutil.rmtree(tree, ignore_errors=True)
        for spec in specs:
            if not spec.startswith("linux-source"):
                _unpack(_deb_of(debs, spec), tree)
        _fix_headers_makefile(kernel, tree)
        # busybox's own depmod writes modules.dep for the whole tree; the initramfs takes
        # what it needs from it.
        _run_busybox(tree / "bin" / "busybox", ["depmod", "-b", str(tree), kernel.release])
        (tree / kernel.stamp.name).write_text(f"{kernel.abi} {kernel.version}\n")
        shutil.rmtree(kernel.root, ignore_errors=True)
        tree.rename(kernel.root)
    if missing_source is not None:
        say("taking the block layer's private headers out of linux-source-6.1")
        deb = _deb_of(debs, f"linux-source-6.1={kernel.version}")
        if deb is None:
            raise InputError(f"linux-source-6.1 is missing from the download into {debs}")
        _extract_source(deb, kernel.source)


def _run_busybox(busybox: Path, args: list[str]) -> str:
    done = subprocess.run([str(busybox), *args], capture_output=True, text=True)
    if done.returncode != 0:
        msg = (done.stderr.strip().splitlines() or ["failed"])[-1]
        raise InputError(f"busybox {args[0]}: {msg}")
    return done.stdout
