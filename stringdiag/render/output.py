"""Writing a picture in the format its name asks for: Graphviz's own (``draw.py``), an
interactive page (``html.py``) or TikZ (``tikz.py``). One function per kind of picture (a
diagram, a derivation's chain, a family tree, a grid), each returning the files it wrote."""
from __future__ import annotations

from pathlib import Path

from ..graph.budget import MAX_EXPANDED
from ..graph.diagram import Diagram
from ..syntax.source import write_atomic
from . import html, tikz
from .draw import chain_svg, grid_svg, render, strip, write, write_text
from .tree import tree, tree_svg

STY = "stringdiag.sty"


def _suffix(out: str | Path) -> str:
    return Path(out).suffix.lower()


def _tikz(pictures: list[str], out: Path, body: bool) -> list[Path]:
    """A document of its own, or (``body``) the pictures alone with ``stringdiag.sty`` beside."""
    if not body:
        return [write_atomic(out, tikz.document(pictures))]
    return [write_atomic(out, tikz.body(pictures)), write_atomic(out.parent / STY, tikz.package())]


def _page(title: str, fragment: str, out: Path) -> list[Path]:
    return [write_atomic(out, html.page(title, fragment))]


def save_diagram(d: Diagram, out: str | Path, expand: bool = False, tikz_body: bool = False) -> list[Path]:
    out = Path(out)
    if _suffix(out) == ".html":
        return _page(d.name, html.diagram_view(d.expand(unroll={}, limit=MAX_EXPANDED) if expand else d), out)
    if _suffix(out) == ".tex":
        return _tikz([tikz.diagram(d, expand)], out, tikz_body)
    return [render(d, out, expand)]


def save_chain(heading: str, frames: list[tuple[str, str, Diagram]], rows: list[tuple[str, ...]],
               out: str | Path, tikz_body: bool = False, changes: list | None = None) -> list[Path]:
    """A derivation: its steps (``frames``: caption, relation, diagram) and table (``rows``);
    ``changes`` (per step, what it replaced, put in and kept) highlights the rewrites (SVG, HTML)."""
    out = Path(out)
    if _suffix(out) == ".html":
        return _page(heading, html.derivation_view(heading, frames, rows, changes), out)
    if _suffix(out) == ".tex":
        return _tikz([tikz.chain(frames)], out, tikz_body)
    # an SVG chain reads top to bottom; other formats are one Graphviz strip, left to right
    return [write_text(chain_svg(frames, changes), out) if _suffix(out) == ".svg" else write(strip(frames), out)]


def save_tree(title: str, nodes: list, edges: list, out: str | Path, tikz_body: bool = False) -> list[Path]:
    """A family tree (``tree.py``'s members and edges)."""
    out = Path(out)
    if _suffix(out) == ".html":
        return _page(title, html.members_view(title, html.taxonomy_members(nodes, edges)), out)
    if _suffix(out) == ".tex":
        return _tikz([tikz.graph(tree(nodes, edges))], out, tikz_body)
    # SVG: wires through frames become stubs
    return [write_text(tree_svg(nodes, edges), out) if _suffix(out) == ".svg" else write(tree(nodes, edges), out)]


def save_grid(title: str, frames: list[tuple[str, Diagram]], out: str | Path, progress=None) -> list[Path]:
    """Many diagrams (captioned): a grid in SVG, or a page opening one at a time."""
    out = Path(out)
    if _suffix(out) == ".html":
        members = [html.Member(str(k), caption, d) for k, (caption, d) in enumerate(frames)]
        return _page(title, html.members_view(title, members, progress), out)
    return [write_text(grid_svg(frames, progress=progress), out)]
