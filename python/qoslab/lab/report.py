"""`report.html`: one self-contained page (figures inlined as PNG data) per lab command."""

from __future__ import annotations

import base64
import html
import json
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd

_STYLE = """
body { font-family: system-ui, sans-serif; max-width: 1100px; margin: 2em auto; color: #222;
       line-height: 1.45; padding: 0 1em; }
h1 { border-bottom: 2px solid #444; } h2 { margin-top: 2em; border-bottom: 1px solid #ccc; }
table { border-collapse: collapse; font-size: 0.85em; margin: 0.8em 0; }
th, td { border: 1px solid #ccc; padding: 0.2em 0.5em; text-align: right; }
th { background: #f0f0f0; } td:first-child, th:first-child { text-align: left; }
figure { margin: 1em 0; } figcaption { font-size: 0.9em; color: #555; }
img { max-width: 100%; } pre { background: #f6f6f6; padding: 0.6em; overflow-x: auto;
font-size: 0.8em; } .note { background: #fff7e0; padding: 0.5em 0.8em; }
"""


@dataclass
class Section:
    title: str
    text: list[str] = field(default_factory=list)  # paragraphs of trusted HTML
    figures: list[tuple[Path, str]] = field(default_factory=list)  # (png, caption)
    tables: list[tuple[str, pd.DataFrame]] = field(default_factory=list)  # (caption, table)


def _table_html(frame: pd.DataFrame) -> str:
    return frame.to_html(index=False, float_format=lambda v: f"{v:,.4g}", na_rep="–", border=0)


def _figure_html(png: Path, caption: str) -> str:
    data = base64.b64encode(png.read_bytes()).decode("ascii")
    return (
        f'<figure><img src="data:image/png;base64,{data}" alt="{html.escape(caption)}">'
        f"<figcaption>{html.escape(caption)}</figcaption></figure>"
    )


def write_report(
    path: Path, title: str, intro: list[str], sections: list[Section], metadata: dict
) -> Path:
    parts = [
        "<!doctype html><html><head><meta charset='utf-8'>",
        f"<title>{html.escape(title)}</title><style>{_STYLE}</style></head><body>",
        f"<h1>{html.escape(title)}</h1>",
        *[f"<p>{p}</p>" for p in intro],
    ]
    for s in sections:
        parts.append(f"<h2>{html.escape(s.title)}</h2>")
        parts += [f"<p>{p}</p>" for p in s.text]
        parts += [_figure_html(png, caption) for png, caption in s.figures]
        for caption, frame in s.tables:
            parts.append(f"<p><b>{html.escape(caption)}</b></p>{_table_html(frame)}")
    parts.append("<h2>Run environment</h2>")
    parts.append(f"<pre>{html.escape(json.dumps(metadata, indent=1, default=str))}</pre>")
    parts.append("</body></html>")
    path.write_text("\n".join(parts) + "\n", encoding="utf-8")
    return path
