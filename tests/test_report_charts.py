"""Charts drawn without matplotlib: one list of shapes, as SVG and as PNG."""

from __future__ import annotations

import io
from xml.etree import ElementTree

from PIL import Image

from qoslab.report.charts import Canvas, Line, Rect, Text, nice_ticks, viridis

SVG = "{http://www.w3.org/2000/svg}"


def test_ticks_are_round_numbers_covering_the_range():
    assert nice_ticks(0, 0.218) == [0, 0.05, 0.1, 0.15, 0.2, 0.25]
    assert nice_ticks(0, 46.1) == [0, 10, 20, 30, 40, 50]
    assert nice_ticks(5.87, 28.46, 4) == [0, 10, 20, 30]
    assert nice_ticks(3, 3) == [3, 3.2, 3.4, 3.6, 3.8, 4]


def test_viridis_runs_from_dark_purple_to_yellow():
    assert (viridis(0), viridis(0.5), viridis(1)) == ("#440154", "#21908C", "#FDE725")
    assert viridis(-1) == viridis(0) and viridis(2) == viridis(1)
    # Halfway between the first two of the nine published steps.
    assert viridis(1 / 16) == "#461768"


def test_svg_and_png_show_the_same_shapes():
    c = Canvas(40, 20)
    c.add(
        Rect(0, 0, 20, 20, fill="#0072B2", cls="bar", tip="a < b"),
        Line(((20, 10), (40, 10)), stroke="#E41A1C", width=2),
        Text(30, 5, 'x & "y"', size=6),
    )
    root = ElementTree.fromstring(c.svg())
    assert (root.get("width"), root.get("height")) == ("40", "20")
    bar = next(e for e in root.iter(f"{SVG}rect") if e.get("class") == "bar")
    assert (bar.get("fill"), bar.findtext(f"{SVG}title")) == ("#0072B2", "a < b")
    assert root.findtext(f"{SVG}text") == 'x & "y"'
    png = Image.open(io.BytesIO(c.png())).convert("RGB")
    assert png.size == (40, 20)
    assert png.getpixel((10, 10)) == (0x00, 0x72, 0xB2)
    assert png.getpixel((35, 10)) == (0xE4, 0x1A, 0x1C)
    assert png.getpixel((35, 18)) == (255, 255, 255)
    assert len(png.crop((20, 0, 40, 8)).getcolors()) > 2  # the text left ink


def test_output_is_byte_stable():
    def draw():
        c = Canvas(30, 30)
        c.add(Text(15, 15, "mean RD", vertical=True), Rect(2, 2, 5, 5, stroke="#000000"))
        return c.svg(), c.png()

    assert draw() == draw()
