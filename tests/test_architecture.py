"""docs/architecture.md's registry table is the code's.

Each row names where a plug-in is chosen, the plug-ins, what a plug-in is, the registry (its
file and line) and the plug-ins' tunable tables. Here:
- the names a row lists are exactly those its key accepts, asked as a user asks: an unknown name
  is refused with the list of the known ones;
- the row's file holds its registry line (`static NAME: &[&Ops]`, or a `type_registry!` list) and
  every type the row names;
- every registry in the crates has a row;
- every plug-in's tunable table is one a row names, and every table a row names exists.
"""

from __future__ import annotations

import re
import subprocess
from concurrent.futures import ThreadPoolExecutor

from conftest import QOSLAB, ROOT
from qoslab import _core
from qoslab.sim.api import tunables

DOC = ROOT / "docs" / "architecture.md"
SEED = ROOT / "configs" / "nvmelite" / "seeds" / "seed_001_long32.json"

# What a key needs around it to be read at all: the SSD's plug-ins are read with an SSD, the
# PLM coordinator's policy with replicas in Predictable Latency Mode on a PLM drive.
SSD = ["--device", "mqsim-default"]
CONTEXT = {
    "host.plm.policy": [*SSD, "--set", "media.gc.gate=plm", "--set", "host.replicas=plm"],
}
# A registry of types: the list in `qoslab_engine::type_registry!`, named by its names function.
TYPE_REGISTRY = r"(?m)^qoslab_engine::type_registry! \{{[^}}]*?names {names},"
COMMAND_ARGS = {  # what the other commands need besides the option
    "nvmelite run": [str(SEED), "--bound", "0", "--seed", "1"],
    "nvmelite worst": [str(SEED), "--bound", "0"],
}


def registry_rows() -> list[dict]:
    text = DOC.read_text(encoding="utf-8")
    section = text[text.index("## The registries\n") :]
    section = section[: section.index("\n## ", 1)]
    rows = []
    for line in section.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) != 5 or not cells[0].startswith("`"):
            continue
        set_by, plugins, kind, registry, tables = cells
        file, name = re.fullmatch(r"`([^`]+)`, `([^`]+)`", registry).groups()
        rows.append(
            {
                "set_by": set_by,
                "names": [n.strip() for n in plugins.split(",")],
                "types": re.findall(r"`([A-Z]\w+)`", kind),
                "file": file,
                "registry": name,
                "tables": re.findall(r"`\[([^\]]+)\]`", tables),
            }
        )
    return rows


def probe(row: dict) -> list[str]:
    """The command that reads the row's key, given a name no plug-in has."""
    key = re.match(r"`\[([\w.]+)\] (\w+)`", row["set_by"])
    if key:
        field = f"{key[1]}.{key[2]}"
        context = CONTEXT.get(field, SSD if "(model `ssd`)" in row["set_by"] else [])
        return [
            "sim",
            "--name=x",
            "--number_ios=1",
            "--direct=1",
            *context,
            "--set",
            f"{field}=nonesuch",
        ]
    command, option = re.match(r"`qoslab ([\w -]+?) (--[\w-]+)`", row["set_by"]).groups()
    return [*command.split(), *COMMAND_ARGS.get(command, []), option, "nonesuch"]


def accepted_names(args: list[str]) -> list[str]:
    done = subprocess.run([QOSLAB, *args], capture_output=True, text=True)
    assert done.returncode == 2, (args, done.stderr)
    # "expected one of a, b, got 'nonesuch'", "expected a policy: A, B or C, got ..."
    listed = re.search(r"expected (?:one of |a \w+: )?(.*), got 'nonesuch'", done.stderr)
    assert listed, (args, done.stderr)
    return re.split(r", | or ", listed[1])


def test_the_registry_table_has_every_registry_once():
    rows = registry_rows()
    assert len(rows) >= 16
    documented = {(r["file"], r["registry"]) for r in rows}
    assert len(documented) == len(rows)
    found = set()
    for path in (ROOT / "crates").glob("*/src/**/*.rs"):
        text = path.read_text(encoding="utf-8")
        file = str(path.relative_to(ROOT))
        found |= {(file, m) for m in re.findall(r"pub static (\w+): &\[&\w+\] =", text)}
        # The registries of types (one statically dispatched type per name) are lists in
        # `qoslab_engine::type_registry!`, named by the function that lists their names.
        found |= {(file, m) for m in re.findall(TYPE_REGISTRY.format(names=r"(\w+)"), text)}
    assert found - documented == set(), "registries without a row in docs/architecture.md"
    assert documented - found == set(), "rows of docs/architecture.md naming no registry"


def test_each_row_names_its_registry_line_and_types():
    for row in registry_rows():
        text = (ROOT / row["file"]).read_text(encoding="utf-8")
        name, ops = row["registry"], row["types"][0]
        if name.endswith("_names"):
            assert re.search(TYPE_REGISTRY.format(names=name), text), row
        else:
            assert re.search(rf"pub static {name}: &\[&{ops}\] =", text), row
        for t in row["types"]:
            assert re.search(rf"\b{t}\b", text), (t, row)


def test_each_row_lists_exactly_the_names_its_key_accepts():
    rows = registry_rows()
    with ThreadPoolExecutor(4) as pool:
        accepted = list(pool.map(accepted_names, [probe(r) for r in rows]))
    # A plug-in added to (or taken from) a registry is added to (or taken from) its row.
    assert {r["set_by"]: r["names"] for r in rows} == {
        r["set_by"]: names for r, names in zip(rows, accepted, strict=True)
    }


def test_every_plugin_table_is_the_one_its_row_names():
    # The device file's tables of a plug-in are the ones shown as "SECTION (KEY = "NAME")".
    headings = {section for section, *_ in tunables()}
    sections = {h.split(" (")[0] for h in headings}
    plugin_tables = {h.split(" (")[0] for h in headings if " (" in h}
    file_systems = {f"fs.{name}" for name, _help, table in _core.fs.FILE_SYSTEMS if table}
    assert plugin_tables and file_systems
    named = set()
    for row in registry_rows():
        for table in row["tables"]:
            tables = {table.replace("NAME", n) for n in row["names"]}
            real = tables & (sections | file_systems)
            assert real, f"{row['set_by']}: no plug-in has a table [{table}]"
            named |= real
    assert (plugin_tables | file_systems) - named == set()  # tables no row names
