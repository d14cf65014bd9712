"""The lab's pieces for the shared `qoslab.report` pages: tidy tables and the run environment."""

from __future__ import annotations

import math

import pandas as pd

from qoslab.report import Section, Table


def _number(v: object) -> str:
    if isinstance(v, float):
        if math.isnan(v):
            return "–"
        return f"{v:,.4g}" if abs(v) < 1e4 else f"{v:,.0f}"
    return f"{v:,}" if isinstance(v, int) else str(v)


def frame_table(frame: pd.DataFrame, title: str, caption: str | None = None) -> Table:
    """A DataFrame as a report table: 4 significant digits, missing values as a dash."""
    clean = frame.astype(object).where(frame.notna(), None).reset_index(drop=True)
    return Table.from_dataframe(
        clean, title=title, caption=caption, formats={c: _number for c in clean.columns}
    )


def environment_section(meta: dict, environment: dict) -> Section:
    """Everything a reader needs to reproduce the runs: versions, target, queue settings."""
    facts = [
        ("command", " ".join(str(a) for a in meta.get("command", []))),
        ("qoslab", meta.get("qoslab_version", "")),
        ("fio", meta.get("fio_version", "")),
        ("kernel", environment.get("uname", environment.get("kernel", ""))),
        *((f"target {k}", v) for k, v in meta.get("target", {}).items()),
        ("scheduler", environment.get("scheduler", "")),
        *((f"scheduler {k}", v) for k, v in environment.get("scheduler_tunables", {}).items()),
        ("started", meta.get("started_at", "")),
        ("finished", meta.get("finished_at", "")),
    ]
    items = [frame_table(pd.DataFrame(facts, columns=["what", "value"]), "Run")]
    if "queue" in environment:
        queue = pd.DataFrame(sorted(environment["queue"].items()), columns=["attribute", "value"])
        items.append(frame_table(queue, f"/sys/block/{environment['disk']}/queue"))
    lower = environment.get("backing_disk")
    if lower:
        rows = [("scheduler", lower["scheduler"]), *sorted(lower["queue"].items())]
        items.append(
            frame_table(
                pd.DataFrame(rows, columns=["attribute", "value"]),
                f"Disk under the loop device's backing file: /sys/block/{lower['disk']}/queue",
            )
        )
    return Section("Run environment", items)
