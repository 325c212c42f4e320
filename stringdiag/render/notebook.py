"""What a notebook shows for the tool's results: HTML tables around the pictures ``draw.py``
draws, for the ``_repr_html_`` of programs, derivations and ``info`` summaries.

A picture goes into the page as an inline ``<svg>`` element (its XML prologue dropped), so a
notebook saved as ``.ipynb`` or HTML keeps it; every text cell is escaped.
"""
from __future__ import annotations

import html
from dataclasses import dataclass

from ..errors import shown
from ..graph.decls import Program

STYLE = "border-collapse:collapse;text-align:left;vertical-align:top"
CELL = "padding:2px 10px;text-align:left;vertical-align:top;border-bottom:1px solid #ddd"


@dataclass(frozen=True)
class Markup:
    """A table cell that is HTML already (a picture), not text to escape."""

    html: str


def inline(svg: str) -> Markup:
    """An SVG document as an element of an HTML page."""
    return Markup(svg[svg.index("<svg"):])


def table(header: list[str], rows: list[list[object]], caption: str = "") -> str:
    """An HTML table; cells are text (escaped) or :class:`Markup`."""
    def cell(c: object, tag: str) -> str:
        body = c.html if isinstance(c, Markup) else html.escape(str(c))
        return f'<{tag} style="{CELL}">{body}</{tag}>'

    head = "".join(cell(h, "th") for h in header)
    body = "".join("<tr>" + "".join(cell(c, "td") for c in row) + "</tr>" for row in rows)
    cap = f'<caption style="text-align:left;font-weight:bold">{html.escape(caption)}</caption>' if caption else ""
    return f'<table style="{STYLE}">{cap}<thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>'


def program_html(prog: Program, pictures: bool = True) -> str:
    """The diagrams a file defines, one row each: name, type, boxes, where, and its picture."""
    from .draw import to_svg

    rows = []
    for name, d in prog.diagrams.items():
        types = d.signature().split(" : ", 1)[1]
        where = f"line {d.pos.line}" if d.pos else ""
        rows.append([name, types, len(d), where] + ([inline(to_svg(d))] if pictures else []))
    header = ["diagram", "type", "boxes", "where"] + (["picture"] if pictures else [])
    return table(header, rows, f"{shown(prog.path)}: {len(rows)} diagram{'s' if len(rows) != 1 else ''}")
