"""Self-contained HTML reports and figure helpers shared by every study.

A report is a title, optional key/value facts and a list of `Section`s; a section holds
paragraphs (`Text`), `Table`s (from rows, a CSV file or a pandas DataFrame) and `Figure`s
(inline SVG and/or PNG embedded as base64). `write_report` writes one HTML file with no
external references except relative links the caller adds on purpose (e.g. to data files).

Nothing heavy is imported here: matplotlib lives in `qoslab.report.figures`; charts that
must be fast (no matplotlib) in `qoslab.report.charts`.
"""

from qoslab.report.html import Figure, Link, Section, Table, Text, render_html, write_report

__all__ = ["Figure", "Link", "Section", "Table", "Text", "render_html", "write_report"]
