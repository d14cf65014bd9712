"""Regenerates the tunables reference in docs/sim.md from the tables in the code.

python -m qoslab.sim.docs docs/sim.md
"""

from __future__ import annotations

import sys
from pathlib import Path

from qoslab.sim.api import tunables_markdown, write_atomically

BEGIN = "<!-- tunables:begin -->"
END = "<!-- tunables:end -->"


def update(path: Path) -> bool:
    """Rewrites the part of `path` between the markers; returns whether it changed."""
    text = path.read_text()
    head, rest = text.split(BEGIN, 1)
    _, tail = rest.split(END, 1)
    new = f"{head}{BEGIN}\n{tunables_markdown()}{END}{tail}"
    if new != text:
        write_atomically(path, new)
    return new != text


if __name__ == "__main__":
    changed = update(Path(sys.argv[1]))
    print(f"{sys.argv[1]}: {'updated' if changed else 'up to date'}")
