"""`make test` compiles the crates the extension and the Rust tests share once: the extension's
build (`maturin develop --profile nolto`: the qoslab-py package alone, its normal dependencies)
and `cargo test --workspace` (every package, dev-dependencies too) must resolve the same features
for each crate they share, or cargo compiles that crate and every crate above it twice (about
350 CPU seconds, crates/py/Cargo.toml says how they are kept the same). `cargo tree` resolves
features as those builds do, without building."""

from __future__ import annotations

import shutil
import subprocess
from collections import defaultdict

import pytest

from conftest import ROOT


def features(*args: str) -> dict[str, set[str]]:
    """Each package of the resolved graph (name and version) -> its feature sets (a crate built
    for the host, a proc macro's dependency, may have a second). `extension-module` is left out:
    it is the extension's own feature (pyo3's), in no crate the tests build."""
    out = subprocess.run(
        ["cargo", "tree", *args, "-f", "{p}|{f}", "--prefix", "none", "--no-dedupe"],
        cwd=ROOT,
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    graph: dict[str, set[str]] = defaultdict(set)
    for line in filter(None, out.splitlines()):  # a blank line between two packages' trees
        package, _, feats = line.partition("|")
        name, version = package.split()[:2]
        kept = [f for f in feats.removesuffix(" (*)").split(",") if f != "extension-module"]
        graph[f"{name} {version}"].add(",".join(kept))
    return graph


@pytest.mark.skipif(shutil.which("cargo") is None, reason="needs cargo")
def test_the_extension_and_the_rust_tests_resolve_the_same_features_for_every_shared_crate():
    # The extension's build: pyproject.toml's [tool.maturin] manifest and features.
    extension = features("-p", "qoslab-py", "--features", "qoslab-py/extension-module")
    # The Makefile's CARGO_TEST_FLAGS: the whole workspace, its tests' dev-dependencies too.
    tests = features("--workspace", "-e", "normal,build,dev")
    shared = set(extension) & set(tests)
    assert any(name.startswith("qoslab-sim ") for name in shared), sorted(shared)
    differ = {n: (extension[n], tests[n]) for n in sorted(shared) if extension[n] != tests[n]}
    assert not differ, differ
