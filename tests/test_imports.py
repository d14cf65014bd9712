"""Modules import each other in one direction only: no module of the qoslab package reaches
itself through its imports (imports inside functions included: a late import does not make a
cycle go away). In particular `qoslab.dut` tests implementations against `qoslab.nvmelite`, so
it depends on the model and never the reverse, and the lab's record of what it created asks the
kernel's loop table, not the device commands that use the record.
"""

from __future__ import annotations

import ast

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
