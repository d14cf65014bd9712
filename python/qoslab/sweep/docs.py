"""The studies' tables as text (`qoslab sweep --list-studies`) and as the Markdown reference
of docs/sweep.md, both from the registry:

    python -m qoslab.sweep.docs docs/sweep.md
"""

from __future__ import annotations

import sys
from pathlib import Path

from qoslab.outputs import splice_generated


def _default(p) -> str:
    if p.required:
        return "(required)"
    if p.default is None:
        return "(none)"
    if isinstance(p.default, bool):
        return "true" if p.default else "false"
    return '""' if p.default == "" else str(p.default)


def studies_text() -> str:
    from qoslab.sweep.studies import STUDIES

    out = []
    for study in STUDIES.values():
        seeds = f"seeds: {study.seed_help}" if study.seeded else "no seeds (its inputs hold them)"
        out.append(f"{study.name}: {study.help}\n  {seeds}\n  parameters:")
        for p in study.params:
            unit = f" [{p.unit}]" if p.unit else ""
            out.append(f"    {p.name:<20} {p.kind.expected}{unit}, {_default(p)}: {p.help}")
        for p in study.param_patterns:
            out.append(f"    {p.name:<20} {p.kind.expected}, (none): {p.help}")
        out.append("  metrics:")
        for m in study.metrics:
            unit = f" [{m.unit}]" if m.unit else ""
            out.append(f"    {m.name:<20} {m.dtype}{unit}: {m.help}")
        if study.details:
            out.append("  details:")
            for d in study.details:
                on = " (stored by default)" if d.default else ""
                out.append(f"    {d.name:<20} {d.help}{on}")
        out.append("")
    return "\n".join(out)


def studies_markdown() -> str:
    from qoslab.sweep.studies import STUDIES

    out = []
    for study in STUDIES.values():
        seeds = f"A seed is {study.seed_help}." if study.seeded else "It takes no `seeds`."
        out += [f"### `{study.name}`", "", f"{study.help} {seeds}", ""]
        out += ["| parameter | values | unit | default | meaning |", "|---|---|---|---|---|"]
        for p in study.params:
            out.append(f"| `{p.name}` | {p.kind.expected} | {p.unit} | {_default(p)} | {p.help} |")
        for p in study.param_patterns:
            out.append(f"| `{p.name}` | {p.kind.expected} | | (none) | {p.help} |")
        out += ["", "| metric | type | unit | meaning |", "|---|---|---|---|"]
        for m in study.metrics:
            out.append(f"| `{m.name}` | {m.dtype} | {m.unit} | {m.help} |")
        if study.details:
            out += ["", "| detail table | stored by default | content |", "|---|---|---|"]
            for d in study.details:
                out.append(
                    f"| `{study.table}__{d.name}` | {'yes' if d.default else 'no'} | {d.help} |"
                )
        out.append("")
    return "\n".join(out)


def update(path: Path) -> bool:
    return splice_generated(path, {"studies": studies_markdown()})


if __name__ == "__main__":
    changed = update(Path(sys.argv[1]))
    print(f"{sys.argv[1]}: {'updated' if changed else 'up to date'}")
