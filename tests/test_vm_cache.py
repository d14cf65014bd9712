"""The guest kernel's cache (`qoslab vm fetch`, python/qoslab/vm/packages.py) when it is half
made: a fetch killed half way, a file deleted, two fetches at once (`make lint` beside a
`qoslab vm fetch`). Each ends in a complete cache or one line naming the cache, never a
traceback.

The cases unpack the packages the machine's own cache holds (`make lint` fetches them into it
before the tests run) into a cache of their own; without them they are skipped.
"""

from __future__ import annotations

import os
import shutil
import subprocess

import pytest

from conftest import QOSLAB
from qoslab.vm import packages


def fetched_kernel() -> packages.Kernel | None:
    """The machine's cache's kernel when its packages were all downloaded, else None."""
    abi, version = packages.KERNEL_ABI, packages.KERNEL_VERSION
    cache = packages.cache_root()
    debs = cache / "debs"
    source = cache / f"source-{version}"
    kernel = packages.Kernel(abi, version, cache / f"root-{abi}", source)
    if not debs.is_dir() or kernel.missing_from_source() is not None:
        return None
    if any(packages._deb_of(debs, s) is None for s in packages._packages(abi, version)):
        return None
    return kernel


def cache_env(base) -> dict:
    return {**os.environ, "QOSLAB_CACHE_DIR": str(base), "QOSLAB_GUEST_KERNEL": ""}


def test_two_fetches_at_once_into_a_half_unpacked_cache_unpack_it_once(tmp_path):
    fetched = fetched_kernel()
    if fetched is None:
        pytest.skip("the guest kernel's packages are not fetched (make lint fetches them)")
    cache = tmp_path / "vm"
    (cache / "debs").mkdir(parents=True)
    for deb in (fetched.root.parent / "debs").glob("*.deb"):
        os.link(deb, cache / "debs" / deb.name)  # read only: unpacking never writes a .deb
    shutil.copytree(fetched.source, cache / fetched.source.name)
    kernel = packages.Kernel(fetched.abi, fetched.version, cache / fetched.root.name,
                             cache / fetched.source.name)  # fmt: skip
    # A tree whose stamp says complete but that lost its kernel image and everything after it,
    # and the half tree of a fetch killed while unpacking beside it.
    (kernel.root / "boot").mkdir(parents=True)
    kernel.stamp.write_text(f"{kernel.abi} {kernel.version}\n")
    partial = kernel.root.with_name(kernel.root.name + ".partial")
    (partial / "boot").mkdir(parents=True)

    fetches = [
        subprocess.Popen(
            [str(QOSLAB), "vm", "fetch"],
            env=cache_env(tmp_path),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for _ in range(2)
    ]
    outs = [(p.wait(timeout=600), *p.communicate()) for p in fetches]

    for rc, stdout, stderr in outs:
        assert rc == 0, stderr
        assert stdout.strip().endswith(str(kernel.root))
        assert "Traceback" not in stderr and "error" not in stderr
    said = "".join(stderr for _, _, stderr in outs)
    # One of the two unpacked (the other waited for it, or came after), and said why.
    assert said.count("unpacking linux") == 1, said
    assert said.count(f"is incomplete (no boot/vmlinuz-{kernel.release})") == 1, said
    assert kernel.missing_from_root() is None and kernel.missing_from_source() is None
    assert not partial.exists()
    # The headers point at the -common headers in the tree's final place.
    makefile = (kernel.build_dir / "Makefile").read_text()
    assert f"include {kernel.root}/usr/src/linux-headers-{kernel.abi}-common/" in makefile


def test_a_cache_that_cannot_be_written_is_one_line(tmp_path):
    (tmp_path / "vm").write_text("not a folder\n")
    done = subprocess.run(
        [str(QOSLAB), "vm", "fetch"], env=cache_env(tmp_path), capture_output=True, text=True
    )
    assert done.returncode == 2
    assert done.stderr.count("\n") == 1, done.stderr
    assert done.stderr.startswith(f"qoslab: error: the guest kernel's cache {tmp_path / 'vm'}: ")
