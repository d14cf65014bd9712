"""The self-contained HTML report: text, code spans and the footer naming what made it."""

from qoslab.report import Figure, Section, Table, Text, render_html


def test_code_spans_are_code_and_everything_else_is_escaped():
    page = render_html(
        "t",
        [
            Section(
                "s",
                [
                    Text("replay it with `qoslab nvmelite replay W <F>` & compare"),
                    Table(["a"], [[1]], caption="from `runs.csv`"),
                    Figure(title="f", svg="<svg></svg>", caption="see `x<y`"),
                ],
            )
        ],
    )
    assert (
        "<p>replay it with <code>qoslab nvmelite replay W &lt;F&gt;</code> &amp; compare</p>"
        in page
    )
    assert '<p class="caption">from <code>runs.csv</code></p>' in page
    assert "<figcaption>see <code>x&lt;y</code></figcaption>" in page
    assert "`" not in page


def test_the_footer_names_version_commit_and_command():
    page = render_html(
        "t",
        [],
        footer={"version": "0.1.0", "commit": "", "command": "qoslab nvmelite matrix c.yaml"},
    )
    footer = page[page.index("<footer>") : page.index("</footer>")]
    assert "version <code>0.1.0</code>" in footer
    assert "command <code>qoslab nvmelite matrix c.yaml</code>" in footer
    assert "commit" not in footer  # an unknown commit is left out, not shown empty
