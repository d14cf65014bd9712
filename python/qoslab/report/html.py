"""The report's building blocks and their HTML rendering (standard library only)."""

from __future__ import annotations

import base64
import csv
import html
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from qoslab.outputs import write_file

Cell = Any  # str, int, float, Link or None
Format = str | Callable[[Any], str]


@dataclass(frozen=True)
class Link:
    """A table cell or text that links to `href` (e.g. a file beside the report)."""

    text: str
    href: str


@dataclass
class Text:
    """A paragraph of plain text (escaped; blank lines separate paragraphs; `code` in
    backquotes is shown as code)."""

    text: str


@dataclass
class Table:
    """A titled table. `formats` maps a column name to a format spec (`"{:.2f}"`) or a
    callable; numbers without a format are printed as they are."""

    columns: list[str]
    rows: list[list[Cell]]
    title: str | None = None
    caption: str | None = None
    formats: Mapping[str, Format] = field(default_factory=dict)

    @classmethod
    def from_csv(cls, path: str | Path, **kw: Any) -> Table:
        """Reads a CSV with a header row; numeric-looking cells become numbers."""
        with open(path, newline="") as f:
            reader = csv.reader(f)
            columns = next(reader, [])
            rows = [[_number(c) for c in row] for row in reader]
        return cls(columns=columns, rows=rows, **kw)

    @classmethod
    def from_dataframe(cls, frame: Any, **kw: Any) -> Table:
        """From a pandas DataFrame (its index is dropped; reset it first to keep it)."""
        return cls(
            columns=[str(c) for c in frame.columns],
            rows=frame.to_numpy(dtype=object).tolist(),
            **kw,
        )

    def where(self, **equals: Any) -> Table:
        """The rows whose named columns equal the given values."""
        idx = {c: i for i, c in enumerate(self.columns)}
        rows = [r for r in self.rows if all(r[idx[k]] == v for k, v in equals.items())]
        return Table(self.columns, rows, self.title, self.caption, self.formats)

    def column(self, name: str) -> list[Cell]:
        i = self.columns.index(name)
        return [r[i] for r in self.rows]


@dataclass
class Figure:
    """A figure: inline SVG markup and/or PNG bytes (embedded as base64)."""

    title: str | None = None
    svg: str | None = None
    png: bytes | None = None
    caption: str | None = None
    links: list[Link] = field(default_factory=list)


def saved_figure(
    directory: Path, stem: str, svg: str, png: bytes, title: str | None, caption: str, prefix: str
) -> Figure:
    """Writes `stem.svg` and `stem.png` into `directory` and returns the report `Figure` with the
    SVG inline and links (`prefix` + file name) to both files."""
    (directory / f"{stem}.svg").write_text(svg)
    (directory / f"{stem}.png").write_bytes(png)
    links = [Link("PNG", f"{prefix}{stem}.png"), Link("SVG", f"{prefix}{stem}.svg")]
    return Figure(title=title, svg=svg, caption=caption, links=links)


@dataclass
class Section:
    title: str
    items: list[Text | Table | Figure] = field(default_factory=list)


_NUMBER = re.compile(r"^-?(\d+(\.\d*)?|\.\d+)([eE][-+]?\d+)?$")


def _number(text: str) -> Cell:
    if not _NUMBER.match(text):
        return text
    return int(text) if text.lstrip("-").isdigit() else float(text)


def _cell(value: Cell, fmt: Format | None) -> str:
    if isinstance(value, Link):
        return f'<a href="{html.escape(value.href)}">{html.escape(value.text)}</a>'
    if value is None:
        return ""
    if fmt is not None and not isinstance(value, str):
        text = fmt(value) if callable(fmt) else fmt.format(value)
    else:
        text = str(value)
    return html.escape(text)


def _table(t: Table) -> str:
    out = []
    if t.title:
        out.append(f"<h3>{html.escape(t.title)}</h3>")
    numeric = [
        bool(t.rows) and all(isinstance(r[i], int | float) for r in t.rows if r[i] is not None)
        for i in range(len(t.columns))
    ]
    out.append('<div class="scroll"><table>')
    out.append(
        "<thead><tr>"
        + "".join(f"<th>{html.escape(c)}</th>" for c in t.columns)
        + "</tr></thead><tbody>"
    )
    for row in t.rows:
        cells = []
        for i, value in enumerate(row):
            cls = ' class="num"' if numeric[i] else ""
            cells.append(f"<td{cls}>{_cell(value, t.formats.get(t.columns[i]))}</td>")
        out.append("<tr>" + "".join(cells) + "</tr>")
    if not t.rows:
        out.append(f'<tr><td colspan="{max(1, len(t.columns))}"><em>no rows</em></td></tr>')
    out.append("</tbody></table></div>")
    if t.caption:
        out.append(f'<p class="caption">{_inline(t.caption)}</p>')
    return "\n".join(out)


def _strip_xml_prolog(svg: str) -> str:
    start = svg.find("<svg")
    return svg[start:] if start >= 0 else svg


def _figure(f: Figure) -> str:
    out = ["<figure>"]
    if f.title:
        out.append(f"<h3>{html.escape(f.title)}</h3>")
    if f.svg:
        out.append(f'<div class="svg">{_strip_xml_prolog(f.svg)}</div>')
    elif f.png:
        data = base64.b64encode(f.png).decode("ascii")
        alt = html.escape(f.title or "figure")
        out.append(f'<img alt="{alt}" src="data:image/png;base64,{data}">')
    caption = _inline(f.caption or "")
    if f.links:
        caption += " " + " · ".join(_cell(link, None) for link in f.links)
    if caption.strip():
        out.append(f"<figcaption>{caption}</figcaption>")
    out.append("</figure>")
    return "\n".join(out)


_CODE_SPAN = re.compile(r"`([^`]+)`")


def _inline(text: str) -> str:
    """Escaped text whose `backquoted` spans become <code> elements."""
    return _CODE_SPAN.sub(r"<code>\1</code>", html.escape(text))


def _text(t: Text) -> str:
    paragraphs = [p.strip() for p in t.text.split("\n\n") if p.strip()]
    return "\n".join(f"<p>{_inline(p)}</p>" for p in paragraphs)


_CSS = """
body{font-family:system-ui,-apple-system,Segoe UI,Roboto,sans-serif;margin:2em auto;
max-width:72em;padding:0 1em;color:#1b1b1b;line-height:1.45}
h1{margin-bottom:.2em} h2{border-bottom:1px solid #ccc;padding-bottom:.2em;margin-top:2em}
table{border-collapse:collapse;font-size:.88em;margin:.5em 0}
th,td{border:1px solid #d0d0d0;padding:.25em .6em;text-align:left}
th{background:#f3f3f3} td.num{text-align:right;font-variant-numeric:tabular-nums}
.scroll{overflow-x:auto} .caption,figcaption{color:#555;font-size:.9em}
figure{margin:1em 0} .svg svg{max-width:100%;height:auto}
dl.facts{display:grid;grid-template-columns:max-content auto;gap:.15em 1em}
dl.facts dt{font-weight:600} dl.facts dd{margin:0;font-family:ui-monospace,monospace}
nav ul{columns:2} footer{margin-top:3em;color:#777;font-size:.85em}
code{font-family:ui-monospace,monospace;font-size:.92em;background:#f3f3f3;padding:0 .2em;
border-radius:3px}
"""


def _anchor(title: str, i: int) -> str:
    slug = re.sub(r"[^a-z0-9]+", "-", title.lower()).strip("-")
    return f"s{i}-{slug}"


def render_html(
    title: str,
    sections: Sequence[Section],
    facts: Mapping[str, Any] | Iterable[tuple[str, Any]] = (),
    generator: str = "qoslab",
    footer: Mapping[str, str] | None = None,
) -> str:
    """The whole report as one HTML document; `footer` adds what made it (e.g. the version,
    the commit and the command) to the closing line."""
    items = facts.items() if isinstance(facts, Mapping) else facts
    out = [
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8">',
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        f"<title>{html.escape(title)}</title><style>{_CSS}</style></head><body>",
        f"<h1>{html.escape(title)}</h1>",
    ]
    facts_html = "".join(
        f"<dt>{html.escape(str(k))}</dt><dd>{_cell(v, None)}</dd>" for k, v in items
    )
    if facts_html:
        out.append(f'<dl class="facts">{facts_html}</dl>')
    if len(sections) > 1:
        out.append("<nav><ul>")
        for i, s in enumerate(sections):
            out.append(f'<li><a href="#{_anchor(s.title, i)}">{html.escape(s.title)}</a></li>')
        out.append("</ul></nav>")
    for i, s in enumerate(sections):
        out.append(f'<section id="{_anchor(s.title, i)}"><h2>{html.escape(s.title)}</h2>')
        for item in s.items:
            if isinstance(item, Table):
                out.append(_table(item))
            elif isinstance(item, Figure):
                out.append(_figure(item))
            else:
                out.append(_text(item))
        out.append("</section>")
    # No clock time: the same store or study gives the same bytes, whenever it is rendered.
    made = "".join(
        f" · {html.escape(k)} <code>{html.escape(v)}</code>" for k, v in (footer or {}).items() if v
    )
    out.append(f"<footer>Generated by {html.escape(generator)}{made}.</footer>")
    out.append("</body></html>")
    return "\n".join(out) + "\n"


def write_report(path: str | Path, title: str, sections: Sequence[Section], **kw: Any) -> Path:
    """Renders and writes the report atomically (temporary file, then rename)."""
    path = Path(path)
    text = render_html(title, sections, **kw)
    write_file(path, text)
    return path
