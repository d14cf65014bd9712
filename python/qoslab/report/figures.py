"""matplotlib helpers: a headless backend, a house style, PNG + SVG output in one call."""

from __future__ import annotations

import io
from pathlib import Path
from typing import Any

from qoslab.report.html import Figure, saved_figure

# Colour-blind-safe qualitative palette (Okabe & Ito).
PALETTE = ["#0072B2", "#E69F00", "#009E73", "#D55E00", "#CC79A7", "#56B4E9", "#F0E442", "#000"]


def pyplot():
    """matplotlib.pyplot on the non-interactive Agg backend (no display needed)."""
    import matplotlib

    matplotlib.use("Agg", force=True)
    import matplotlib.pyplot as plt

    plt.rcParams.update(
        {
            "figure.dpi": 100,
            "savefig.dpi": 110,
            "axes.grid": True,
            "grid.alpha": 0.3,
            "axes.spines.top": False,
            "axes.spines.right": False,
            "axes.prop_cycle": matplotlib.cycler(color=PALETTE),
            "svg.fonttype": "none",
            "svg.hashsalt": "qoslab",
        }
    )
    return plt


def save_figure(
    fig: Any,
    directory: str | Path,
    stem: str,
    title: str | None = None,
    caption: str = "",
    link_prefix: str = "",
) -> Figure:
    """Writes `stem.png` and `stem.svg` into `directory`, closes `fig` and returns a report
    `Figure` carrying the SVG inline and links (`link_prefix` + file name) to both files."""
    plt = pyplot()
    svg = io.StringIO()
    # A fixed date keeps the SVG byte-stable from run to run.
    fig.savefig(svg, format="svg", bbox_inches="tight", metadata={"Date": None})
    png = io.BytesIO()
    fig.savefig(png, format="png", bbox_inches="tight")
    plt.close(fig)
    return saved_figure(
        Path(directory), stem, svg.getvalue(), png.getvalue(), title, caption, link_prefix
    )
