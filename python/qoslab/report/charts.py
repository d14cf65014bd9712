"""Line, bar and heatmap charts drawn directly: one list of shapes, rendered as SVG text and as
a PNG.

Why not matplotlib here: importing it and saving three figures as SVG and PNG takes 1.2-1.8 s,
four times the whole reference run-matrix that `qoslab nvmelite matrix` is measured against,
while these charts need only rectangles, lines, dots and text. The SVG is written as text (the
report inlines it); the PNG is drawn from the same shapes with Pillow, supersampled for smooth
edges, in Pillow's built-in font, so both files depend on pinned versions only, never on the
machine's fonts. Each shape may carry a tooltip (an SVG `<title>`: the exact value under the
pointer) and a class, which also lets a test read a chart back.
"""

from __future__ import annotations

import html
import io
import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from qoslab.report.html import Figure, saved_figure

# Colour-blind-safe qualitative palette (Okabe & Ito), as in qoslab.report.figures.
PALETTE = ["#0072B2", "#E69F00", "#009E73", "#D55E00", "#CC79A7", "#56B4E9", "#F0E442", "#000000"]
# viridis sampled at nine equal steps (viridisLite::viridis(9)); colours between are linear.
VIRIDIS = ["#440154", "#472D7B", "#3B528B", "#2C728E", "#21908C", "#27AD81", "#5DC863",
           "#AADC32", "#FDE725"]  # fmt: skip
GRID = "#E6E6E6"
INK = "#1B1B1B"
FONT = "DejaVu Sans, Verdana, Arial, sans-serif"
# Average advance of a character in em, to size margins and legends without a font engine.
CHAR_EM = 0.68


@dataclass(frozen=True)
class Rect:
    x: float
    y: float
    w: float
    h: float
    fill: str | None = None
    stroke: str | None = None
    stroke_width: float = 1.0
    cls: str | None = None
    tip: str | None = None


@dataclass(frozen=True)
class Line:
    points: tuple[tuple[float, float], ...]
    stroke: str = INK
    width: float = 1.0
    cls: str | None = None
    tip: str | None = None


@dataclass(frozen=True)
class Dot:
    x: float
    y: float
    r: float
    fill: str
    cls: str | None = None
    tip: str | None = None


@dataclass(frozen=True)
class Text:
    x: float
    y: float  # the middle of the text line
    text: str
    size: float = 11.0
    anchor: str = "middle"  # start | middle | end
    fill: str = INK
    vertical: bool = False  # read bottom to top (a y-axis title)
    cls: str | None = None


Shape = Rect | Line | Dot | Text


@dataclass
class Canvas:
    """A chart: its size in pixels (SVG user units) and its shapes, painted in order."""

    width: float
    height: float
    shapes: list[Shape] = field(default_factory=list)

    def add(self, *shapes: Shape) -> None:
        self.shapes.extend(shapes)

    def svg(self) -> str:
        w, h = _n(self.width), _n(self.height)
        out = [
            f'<svg xmlns="http://www.w3.org/2000/svg" width="{w}" height="{h}" '
            f'viewBox="0 0 {w} {h}" font-family="{FONT}">',
            f'<rect width="{w}" height="{h}" fill="#FFFFFF"/>',
        ]
        out.extend(_svg_shape(s) for s in self.shapes)
        out.append("</svg>")
        return "\n".join(out) + "\n"

    def png(self, scale: int = 2) -> bytes:
        """The chart as PNG, drawn at `scale` times the size and reduced (anti-aliasing)."""
        from PIL import Image, ImageDraw

        size = (round(self.width * scale), round(self.height * scale))
        image = Image.new("RGB", size, "#FFFFFF")
        draw = ImageDraw.Draw(image)
        fonts: dict[float, object] = {}
        for s in self.shapes:
            _png_shape(image, draw, fonts, s, scale)
        buf = io.BytesIO()
        # zlib level 1: 40 % less time than the default level, files about 15 % larger.
        image.reduce(scale).save(buf, format="PNG", compress_level=1)
        return buf.getvalue()


def _n(x: float) -> str:
    """A coordinate with at most two decimals, without trailing zeros."""
    text = f"{x:.2f}".rstrip("0").rstrip(".")
    return "0" if text == "-0" else text


def _attrs(**kw: object) -> str:
    return "".join(
        f' {k.rstrip("_").replace("_", "-")}="{html.escape(str(v))}"'
        for k, v in kw.items()
        if v is not None
    )


def _with_tip(tag: str, attrs: str, tip: str | None) -> str:
    if tip is None:
        return f"<{tag}{attrs}/>"
    return f"<{tag}{attrs}><title>{html.escape(tip)}</title></{tag}>"


def _svg_shape(s: Shape) -> str:
    if isinstance(s, Rect):
        attrs = _attrs(
            class_=s.cls,
            x=_n(s.x),
            y=_n(s.y),
            width=_n(s.w),
            height=_n(s.h),
            fill=s.fill or "none",
            stroke=s.stroke,
            stroke_width=_n(s.stroke_width) if s.stroke else None,
        )
        return _with_tip("rect", attrs, s.tip)
    if isinstance(s, Line):
        points = " ".join(f"{_n(x)},{_n(y)}" for x, y in s.points)
        attrs = _attrs(
            class_=s.cls,
            points=points,
            fill="none",
            stroke=s.stroke,
            stroke_width=_n(s.width),
            stroke_linejoin="round",
        )
        return _with_tip("polyline", attrs, s.tip)
    if isinstance(s, Dot):
        attrs = _attrs(class_=s.cls, cx=_n(s.x), cy=_n(s.y), r=_n(s.r), fill=s.fill)
        return _with_tip("circle", attrs, s.tip)
    rotate = f"rotate(-90 {_n(s.x)} {_n(s.y)})" if s.vertical else None
    attrs = _attrs(
        class_=s.cls,
        x=_n(s.x),
        y=_n(s.y),
        dy="0.35em",  # centres the line on y in every SVG renderer
        font_size=_n(s.size),
        text_anchor=s.anchor,
        fill=s.fill,
        transform=rotate,
    )
    return f"<text{attrs}>{html.escape(s.text)}</text>"


_PIL_ANCHOR = {"start": "lm", "middle": "mm", "end": "rm"}


def _png_shape(image, draw, fonts: dict, s: Shape, k: int) -> None:
    if isinstance(s, Rect):
        box = [s.x * k, s.y * k, (s.x + s.w) * k - 1, (s.y + s.h) * k - 1]
        width = max(1, round(s.stroke_width * k)) if s.stroke else 0
        draw.rectangle(box, fill=s.fill, outline=s.stroke, width=width)
    elif isinstance(s, Line):
        points = [(x * k, y * k) for x, y in s.points]
        draw.line(points, fill=s.stroke, width=max(1, round(s.width * k)), joint="curve")
    elif isinstance(s, Dot):
        draw.ellipse([(s.x - s.r) * k, (s.y - s.r) * k, (s.x + s.r) * k, (s.y + s.r) * k], s.fill)
    else:
        from PIL import Image, ImageDraw, ImageFont

        size = s.size * k
        if size not in fonts:
            fonts[size] = ImageFont.load_default(size=size)
        font = fonts[size]
        if not s.vertical:
            draw.text(
                (s.x * k, s.y * k), s.text, fill=s.fill, font=font, anchor=_PIL_ANCHOR[s.anchor]
            )
            return
        left, top, right, bottom = font.getbbox(s.text, anchor="lm")
        label = Image.new("L", (math.ceil(right - left) + 2, math.ceil(bottom - top) + 2), 0)
        ImageDraw.Draw(label).text((1 - left, 1 - top), s.text, fill=255, font=font, anchor="lm")
        label = label.rotate(90, expand=True)
        x = round(s.x * k - label.width / 2)
        y = round(s.y * k - label.height / 2)
        image.paste(Image.new("RGB", label.size, s.fill), (x, y), label)


def text_width(text: str, size: float) -> float:
    return len(text) * size * CHAR_EM


def nice_ticks(lo: float, hi: float, count: int = 5) -> list[float]:
    """Round tick values covering [lo, hi]: steps of 1, 2 or 5 times a power of ten."""
    if hi <= lo:
        hi = lo + 1.0
    raw = (hi - lo) / max(1, count)
    power = 10.0 ** math.floor(math.log10(raw))
    step = next(m * power for m in (1, 2, 5, 10) if m * power >= raw)
    first = math.floor(lo / step + 1e-9)
    last = math.ceil(hi / step - 1e-9)
    return [round(i * step, 12) for i in range(first, last + 1)]


def _tick_text(ticks: Sequence[float]) -> list[str]:
    decimals = 0
    while decimals < 6 and any(
        abs(t * 10**decimals - round(t * 10**decimals)) > 1e-9 for t in ticks
    ):
        decimals += 1
    return [f"{t:.{decimals}f}" for t in ticks]


def viridis(t: float) -> str:
    """The colour at `t` in [0, 1] of the viridis scale (dark purple to yellow)."""
    t = min(1.0, max(0.0, t)) * (len(VIRIDIS) - 1)
    i = min(int(t), len(VIRIDIS) - 2)
    a, b = _rgb(VIRIDIS[i]), _rgb(VIRIDIS[i + 1])
    f = t - i
    return "#" + "".join(f"{round(x + (y - x) * f):02X}" for x, y in zip(a, b, strict=True))


def _rgb(colour: str) -> tuple[int, int, int]:
    return int(colour[1:3], 16), int(colour[3:5], 16), int(colour[5:7], 16)


@dataclass
class _Axes:
    """A plot area and its linear y scale."""

    left: float
    top: float
    width: float
    height: float
    y_lo: float
    y_hi: float

    def y(self, value: float) -> float:
        return self.top + self.height * (self.y_hi - value) / (self.y_hi - self.y_lo)

    @property
    def bottom(self) -> float:
        return self.top + self.height


def _frame(c: Canvas, title: str, y_label: str, ticks: list[float], x_label: str | None) -> _Axes:
    """Title, y-axis title, tick labels and grid lines; returns the plot area."""
    labels = _tick_text(ticks)
    left = 30 + max(text_width(t, 10) for t in labels) + 8
    bottom_margin = 48 if x_label else 30
    a = _Axes(left, 34, c.width - left - 14, c.height - 34 - bottom_margin, ticks[0], ticks[-1])
    c.add(Text(c.width / 2, 16, title, size=13, cls="title"))
    c.add(Text(12, a.top + a.height / 2, y_label, vertical=True, cls="y-title"))
    for value, text in zip(ticks, labels, strict=True):
        y = a.y(value)
        c.add(Line(((a.left, y), (a.left + a.width, y)), stroke=GRID))
        c.add(Text(a.left - 6, y, text, size=10, anchor="end", cls="y-tick"))
    if x_label:
        c.add(Text(a.left + a.width / 2, c.height - 12, x_label, cls="x-title"))
    return a


def _axis_lines(c: Canvas, a: _Axes) -> None:
    c.add(Line(((a.left, a.top), (a.left, a.bottom), (a.left + a.width, a.bottom))))


def line_chart(
    x_labels: Sequence[str],
    series: Sequence[tuple[str, Sequence[float]]],
    *,
    title: str,
    x_label: str,
    y_label: str,
    width: float = 640,
    height: float = 380,
) -> Canvas:
    """One line with a dot per point for each named series over categorical x positions."""
    c = Canvas(width, height)
    values = [v for _, vs in series for v in vs]
    lo, hi = min([0.0, *values]), max([0.0, *values])
    a = _frame(c, title, y_label, nice_ticks(lo, hi), x_label)
    step = a.width / max(1, len(x_labels))
    xs = [a.left + step * (i + 0.5) for i in range(len(x_labels))]
    for x, text in zip(xs, x_labels, strict=True):
        c.add(Text(x, a.bottom + 12, text, size=10, cls="x-tick"))
    _axis_lines(c, a)
    for n, (name, vs) in enumerate(series):
        colour = PALETTE[n % len(PALETTE)]
        points = tuple((x, a.y(v)) for x, v in zip(xs, vs, strict=True))
        c.add(Line(points, stroke=colour, width=2, cls="series", tip=name))
        for (x, y), label, v in zip(points, x_labels, vs, strict=True):
            c.add(Dot(x, y, 4, colour, cls="point", tip=f"{name}, {label}: {v:.3f}"))
    _legend(c, a, [name for name, _ in series], dots=True)
    return c


def _legend(c: Canvas, a: _Axes, names: Sequence[str], dots: bool) -> None:
    if not names:
        return
    row, size = 16, 10
    w = 34 + max(text_width(n, size) for n in names)
    x, y = a.left + 10, a.top + 8
    c.add(Rect(x, y, w, row * len(names) + 8, fill="#FFFFFF", stroke="#CCCCCC", cls="legend"))
    for i, name in enumerate(names):
        colour = PALETTE[i % len(PALETTE)]
        cy = y + 4 + row * (i + 0.5)
        if dots:
            c.add(Line(((x + 6, cy), (x + 24, cy)), stroke=colour, width=2))
            c.add(Dot(x + 15, cy, 3.5, colour))
        else:
            c.add(Rect(x + 8, cy - 5, 14, 10, fill=colour))
        c.add(Text(x + 30, cy, name, size=size, anchor="start", cls="legend-name"))


def bar_chart(
    categories: Sequence[str],
    groups: Sequence[tuple[str, Sequence[float], Sequence[float]]],
    *,
    title: str,
    y_label: str,
    legend: bool,
    width: float = 640,
    height: float = 380,
) -> Canvas:
    """Grouped bars (one group per (name, means, errors)) with +-error bars and each bar's
    value written at its foot."""
    c = Canvas(width, height)
    tops = [m + e for _, means, errs in groups for m, e in zip(means, errs, strict=True)]
    a = _frame(c, title, y_label, nice_ticks(0.0, max([0.0, *tops])), None)
    step = a.width / max(1, len(categories))
    bar = step * 0.8 / max(1, len(groups))
    for i, name in enumerate(categories):
        c.add(Text(a.left + step * (i + 0.5), a.bottom + 12, name, size=10, cls="x-tick"))
    for j, (group, means, errs) in enumerate(groups):
        colour = PALETTE[j % len(PALETTE)]
        for i, (category, m, e) in enumerate(zip(categories, means, errs, strict=True)):
            x = a.left + step * (i + 0.5) + (j - (len(groups) - 1) / 2) * bar
            tip = f"{category}{f' ({group})' if len(groups) > 1 else ''}: {m:.2f}"
            tip += f" +- {e:.2f}" if e > 0 else ""
            c.add(
                Rect(x - bar / 2, a.y(m), bar, a.bottom - a.y(m), fill=colour, cls="bar", tip=tip)
            )
            if e > 0:
                y0, y1 = a.y(m - e), a.y(m + e)
                c.add(Line(((x, y0), (x, y1)), width=1.5, cls="error"))
                for y in (y0, y1):
                    c.add(Line(((x - 5, y), (x + 5, y)), width=1.5))
            c.add(Text(x, a.bottom - 10, f"{m:.2f}", size=10, fill="#FFFFFF", cls="bar-value"))
    _axis_lines(c, a)
    if legend:
        _legend(c, a, [g for g, _, _ in groups], dots=False)
    return c


@dataclass
class HeatPanel:
    """One heatmap: a grid of values, rows and columns named, some cells outlined. `name`
    starts each cell's tooltip."""

    name: str
    title: str
    rows: Sequence[str]
    columns: Sequence[str]
    grid: Sequence[Sequence[float]]
    outlined: set[tuple[int, int]] = field(default_factory=set)


def heatmap(
    panels: Sequence[HeatPanel],
    *,
    x_label: str,
    outline: str = "#E41A1C",
    cell_w: float = 70,
    cell_h: float = 30,
) -> Canvas:
    """Panels stacked vertically, each with its own viridis scale (a colour bar beside it)
    and its values written in the cells, dark text on light cells; outlined cells get a
    thick `outline` border."""
    size = 10
    label_w = max((text_width(r, 11) for p in panels for r in p.rows), default=0) + 16
    ncols = max((len(p.columns) for p in panels), default=1)
    width = math.ceil(label_w + cell_w * ncols + 90)
    heights = [34 + cell_h * max(1, len(p.rows)) + 44 for p in panels]
    c = Canvas(width, sum(heights))
    top = 0.0
    for p, h in zip(panels, heights, strict=True):
        values = [v for row in p.grid for v in row]
        lo, hi = min(values, default=0.0), max(values, default=0.0)
        span = hi - lo or 1.0
        y0 = top + 34
        c.add(Text(width / 2, top + 16, p.title, size=12, cls="title"))
        for r, (name, row) in enumerate(zip(p.rows, p.grid, strict=True)):
            y = y0 + r * cell_h
            c.add(Text(label_w - 8, y + cell_h / 2, name, anchor="end", cls="row"))
            for col, v in enumerate(row):
                x = label_w + col * cell_w
                tip = f"{p.name}, {name}, {x_label} {p.columns[col]}: {v:.2f}"
                c.add(
                    Rect(x, y, cell_w, cell_h, fill=viridis((v - lo) / span), cls="cell", tip=tip)
                )
                # viridis is light at the top of its range: dark text there.
                ink = INK if v > lo + 0.6 * (hi - lo) else "#FFFFFF"
                c.add(Text(x + cell_w / 2, y + cell_h / 2, f"{v:.2f}", size=size, fill=ink))
        for r, col in sorted(p.outlined):
            x, y = label_w + col * cell_w, y0 + r * cell_h
            tip = f"{p.name}, {p.rows[r]}, {x_label} {p.columns[col]}"
            c.add(Rect(x + 1.5, y + 1.5, cell_w - 3, cell_h - 3, stroke=outline, stroke_width=3,
                       cls="outlined", tip=tip))  # fmt: skip
        grid_bottom = y0 + cell_h * len(p.rows)
        for col, name in enumerate(p.columns):
            c.add(Text(label_w + (col + 0.5) * cell_w, grid_bottom + 12, name, cls="x-tick"))
        c.add(Text(label_w + cell_w * len(p.columns) / 2, grid_bottom + 32, x_label, cls="x-title"))
        _colour_bar(c, label_w + cell_w * ncols + 18, y0, cell_h * len(p.rows), lo, hi)
        top += h
    return c


def _colour_bar(c: Canvas, x: float, y: float, h: float, lo: float, hi: float) -> None:
    steps = 32
    for i in range(steps):
        t = (i + 0.5) / steps
        c.add(Rect(x, y + h * (1 - (i + 1) / steps), 14, h / steps + 0.5, fill=viridis(t)))
    ticks = [t for t in nice_ticks(lo, hi, 4) if lo <= t <= hi]
    span = hi - lo or 1.0
    for t, text in zip(ticks, _tick_text(ticks), strict=True):
        ty = y + h * (1 - (t - lo) / span)
        c.add(Line(((x + 14, ty), (x + 18, ty))))
        c.add(Text(x + 21, ty, text, size=10, anchor="start", cls="scale-tick"))


def save_chart(
    chart: Canvas,
    directory: str | Path,
    stem: str,
    title: str | None = None,
    caption: str = "",
    link_prefix: str = "",
) -> Figure:
    """Writes `stem.svg` and `stem.png` into `directory` and returns a report `Figure` with the
    SVG inline and links (`link_prefix` + file name) to both files."""
    png = chart.png()
    return saved_figure(Path(directory), stem, chart.svg(), png, title, caption, link_prefix)
