"""Modules import each other in one direction only: no module of the qoslab package reaches
itself through its imports (imports inside functions included: a late import does not make a
cycle go away). In particular `qoslab.dut` tests implementations against `qoslab.nvmelite`, so
it depends on the model and never the reverse, and the lab's record of what it created asks the
kernel's loop table, not the device commands that use the record.

Packages sit on layers and import only from layers below theirs (the shared options read units
from the neutral `qoslab.units`, not the lab's; `qoslab.report` renders for every study and
imports none, the sweep's store report lives with the sweep), and each package imports alone,
in a fresh interpreter, whatever was imported before it.
"""

from __future__ import annotations

import ast
import subprocess
import sys

from conftest import ROOT

SOURCE = ROOT / "python"


def module_name(path) -> str:
    parts = path.relative_to(SOURCE).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def import_graph() -> dict[str, set[str]]:
    modules = {module_name(p): p for p in (SOURCE / "qoslab").rglob("*.py")}
    graph: dict[str, set[str]] = {}
    for name, path in modules.items():
        targets = set()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                targets.update(alias.name for alias in node.names)
            elif isinstance(node, ast.ImportFrom) and node.module:
                for alias in node.names:
                    # `from qoslab import nvmelite` imports the module qoslab.nvmelite (and
                    # `from qoslab import _core` the compiled one); other names come from the
                    # module itself.
                    sub = f"{node.module}.{alias.name}"
                    targets.add(sub if sub in modules or alias.name == "_core" else node.module)
        graph[name] = {t for t in targets if t in modules and t != name}
    return graph


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    state: dict[str, int] = {}  # 1: on the path, 2: done
    path: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        path.append(node)
        for nxt in sorted(graph[node]):
            if state.get(nxt) == 1:
                return [*path[path.index(nxt) :], nxt]
            if nxt not in state and (cycle := visit(nxt)):
                return cycle
        path.pop()
        state[node] = 2
        return None

    for node in sorted(graph):
        if node not in state and (cycle := visit(node)):
            return cycle
    return None


def test_the_model_does_not_import_its_differential_tester():
    graph = import_graph()
    assert "qoslab.dut.harness" in graph["qoslab.dut.cli"]  # the scan sees imports
    for name, targets in graph.items():
        if name.startswith("qoslab.nvmelite"):
            assert not {t for t in targets if t.startswith("qoslab.dut")}, name


def test_no_module_reaches_itself_through_its_imports():
    graph = import_graph()
    assert "qoslab.lab.loops" in graph["qoslab.lab.registry"]  # the scan covers every package
    assert find_cycle(graph) is None


def test_a_cycle_is_found_when_there_is_one():
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": set()}
    assert find_cycle(graph) == ["a", "b", "c", "a"]
    assert find_cycle({"a": {"b"}, "b": set()}) is None


# Bottom to top: a package imports only from the layers below its own (`guest_devices`, the
# guest's device specs, below both the simulator that builds their twins and the kernel study).
LAYERS = (
    ("errors", "interrupts", "progress"),
    ("limits", "outputs", "fio"),
    ("units", "store", "guest_devices", "yamlnodes"),
    ("options", "report", "sim"),
    ("nvmelite", "rio"),
    ("dut", "lab", "plm"),
    # A study command runs its points through the sweep engine (qoslab.sweep.planned); the
    # sweep's adapter of a study holds what runs one of its points (the lab's fio runs: the
    # machinery in `lab` below, the commands in `labstudy` above).
    ("sweep",),
    ("sched", "vm", "labstudy", "plmstudy"),
    ("fs",),  # `qoslab fs kernel` runs its jobs in the guest kernel too (qoslab.vm)
    ("cli",),
    ("__main__",),
)


def package_of(module: str) -> str:
    """The name in LAYERS that places `module`: its package's, or its own (`qoslab.units`)."""
    return module.split(".")[1] if module.count(".") else ""


def test_the_layers_run_one_way():
    graph = import_graph()
    layer = {name: i for i, names in enumerate(LAYERS) for name in names}
    assert len(layer) == sum(map(len, LAYERS)), "a package stands on two layers of LAYERS"
    packages = {m.split(".")[1] for m in graph if m.count(".")}
    unplaced = sorted(packages - set(layer))
    assert not unplaced, f"place {unplaced} on a layer of LAYERS in tests/test_imports.py"
    upward = sorted(
        f"{m} -> {t}"
        for m, targets in graph.items()
        for t in targets
        if package_of(m) and package_of(t) != package_of(m)
        if layer[package_of(t)] >= layer[package_of(m)]
    )
    assert upward == []


def test_an_upward_import_is_found():
    graph = import_graph()
    assert "qoslab.units" in graph["qoslab.options"]  # the scan sees late imports
    assert not any(package_of(t) == "lab" for t in graph["qoslab.options"])
    assert not any(
        package_of(t) == "sweep" for m in graph if package_of(m) == "report" for t in graph[m]
    )


# Imports every module of one package, alone in this interpreter.
IMPORT_ALONE = """
import importlib, pkgutil, sys
pkg = importlib.import_module(sys.argv[1])
for m in pkgutil.walk_packages(getattr(pkg, "__path__", []), sys.argv[1] + "."):
    importlib.import_module(m.name)
"""


def test_each_package_imports_alone_in_a_fresh_interpreter():
    names = sorted(n for layer in LAYERS for n in layer if n != "__main__")
    runs = {
        n: subprocess.Popen(
            [sys.executable, "-c", IMPORT_ALONE, f"qoslab.{n}"],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for n in names
    }
    failed = {n: p.communicate()[1].strip().splitlines()[-1:] for n, p in runs.items()}
    assert {n: err for n, err in failed.items() if runs[n].returncode} == {}
