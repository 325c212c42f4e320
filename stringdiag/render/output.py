"""Writing a picture in the format its name asks for: Graphviz's own (``draw.py``), an
interactive page (``html.py``) or TikZ (``tikz.py``). One function per kind of picture (a
diagram, a derivation's chain, a family tree, a grid), each returning the files it wrote."""
from __future__ import annotations

from contextlib import contextmanager
from pathlib import Path

from ..errors import DiagError
from ..graph.budget import MAX_EXPANDED, Build, refuse_above
from ..graph.diagram import Diagram
from ..syntax.source import write_atomic
from .dotrun import GraphvizFailed
from .draw import MAX_DRAWN, chain_svg, grid_svg, render, strip, write, write_text

# html.py (with importlib.resources and xml.etree), tikz.py and tree.py are imported by the
# functions that write those pictures: a third of drawing one SVG's start-up otherwise

STY = "stringdiag.sty"


def _suffix(out: str | Path) -> str:
    return Path(out).suffix.lower()


def _tikz(pictures: list[str], out: Path, body: bool) -> list[Path]:
    """A document of its own, or (``body``) the pictures alone with ``stringdiag.sty`` beside."""
    from . import tikz

    if not body:
        return [write_atomic(out, tikz.document(pictures))]
    return [write_atomic(out, tikz.body(pictures)), write_atomic(out.parent / STY, tikz.package())]


def _page(title: str, fragment: str, out: Path) -> list[Path]:
    from . import html

    return [write_atomic(out, html.page(title, fragment))]


# the most boxes of all the steps of one derivation's chain together
MAX_CHAIN = 10_000


def drawn_boxes(d: Diagram, expand: bool) -> int:
    """The boxes a picture of ``d`` lays out: its own, or those of its expansion (refused as
    ``expand`` refuses it past its own limit)."""
    if not expand:
        return len(d)
    return refuse_above(d, Build.EXPANDED, MAX_EXPANDED, "the limit of expand(..., limit=N) and of render --expand", {})


def refuse_to_draw(name: str, n: int, limit: int = MAX_DRAWN, what: str = "boxes") -> None:
    """Refused before Graphviz runs, with the figure."""
    if n > limit:
        raise DiagError(f"refusing to draw '{name}': it has {n:,} {what}, over {limit:,} (the most a picture "
                        "is laid out with); draw a part of it (a definition it uses), or write .dot")


@contextmanager
def graphviz_errors(name: str):
    """Graphviz failing (out of memory, a layout it cannot make) as one line, not a traceback."""
    try:
        yield
    except GraphvizFailed as e:
        err = e.stderr.decode(errors="replace")
        first = next((ln.strip() for ln in err.splitlines() if ln.strip()), "")
        raise DiagError(f"Graphviz's dot failed drawing '{name}' (exit status {e.returncode})"
                        + (f": {first[:200]}" if first else "")) from None
    except MemoryError:
        raise DiagError(f"drawing '{name}' ran out of memory") from None


def diagram_page(d: Diagram, expand: bool = False) -> str:
    """The interactive page of ``d`` (what ``X.html`` holds), as text: ``serve`` sends it without a file."""
    from . import html

    refuse_to_draw(d.name, drawn_boxes(d, expand))
    with graphviz_errors(d.name):
        return html.page(d.name, html.diagram_view(d.expand(unroll={}, limit=MAX_EXPANDED) if expand else d))


def save_diagram(d: Diagram, out: str | Path, expand: bool = False, tikz_body: bool = False) -> list[Path]:
    out = Path(out)
    if _suffix(out) == ".html":
        return [write_atomic(out, diagram_page(d, expand))]
    if _suffix(out) != ".dot":  # .dot is Graphviz's source, written without laying it out
        refuse_to_draw(d.name, drawn_boxes(d, expand))
    with graphviz_errors(d.name):
        if _suffix(out) == ".tex":
            from . import tikz

            return _tikz([tikz.diagram(d, expand)], out, tikz_body)
        return [render(d, out, expand)]


def _refuse_chain(heading: str, frames: list[tuple[str, str, Diagram]]) -> None:
    for _, _, d in frames:
        refuse_to_draw(d.name, len(d))
    refuse_to_draw(heading.partition(":")[0], sum(len(d) for _, _, d in frames), MAX_CHAIN, "boxes in its steps")


def chain_page(heading: str, frames: list[tuple[str, str, Diagram]], rows: list[tuple[str, ...]],
               changes: list | None = None) -> str:
    """A derivation's interactive page (what ``X.html`` holds), as text; arguments as :func:`save_chain`'s."""
    from . import html

    _refuse_chain(heading, frames)
    with graphviz_errors(heading.partition(":")[0]):
        return html.page(heading, html.derivation_view(heading, frames, rows, changes))


def save_chain(heading: str, frames: list[tuple[str, str, Diagram]], rows: list[tuple[str, ...]],
               out: str | Path, tikz_body: bool = False, changes: list | None = None) -> list[Path]:
    """A derivation: its steps (``frames``: caption, relation, diagram) and table (``rows``);
    ``changes`` (per step, what it replaced, put in and kept) highlights the rewrites (SVG, HTML)."""
    out = Path(out)
    if _suffix(out) == ".html":
        return [write_atomic(out, chain_page(heading, frames, rows, changes))]
    _refuse_chain(heading, frames)
    with graphviz_errors(heading.partition(":")[0]):
        if _suffix(out) == ".tex":
            from . import tikz

            return _tikz([tikz.chain(frames)], out, tikz_body)
        # an SVG chain reads top to bottom; other formats are one Graphviz strip, left to right
        return [write_text(chain_svg(frames, changes), out) if _suffix(out) == ".svg" else write(strip(frames), out)]


def save_tree(title: str, nodes: list, edges: list, out: str | Path, tikz_body: bool = False) -> list[Path]:
    """A family tree (``tree.py``'s members and edges)."""
    from . import html, tikz
    from .tree import tree, tree_svg

    out = Path(out)
    with graphviz_errors(title):
        if _suffix(out) == ".html":
            return _page(title, html.members_view(title, html.taxonomy_members(nodes, edges)), out)
        if _suffix(out) == ".tex":
            return _tikz([tikz.graph(tree(nodes, edges))], out, tikz_body)
        # SVG: wires through frames become stubs
        return [write_text(tree_svg(nodes, edges), out) if _suffix(out) == ".svg" else write(tree(nodes, edges), out)]


def save_grid(title: str, frames: list[tuple[str, Diagram]], out: str | Path, progress=None) -> list[Path]:
    """Many diagrams (captioned): a grid in SVG, or a page opening one at a time."""
    from . import html

    out = Path(out)
    if _suffix(out) == ".html":
        members = [html.Member(str(k), caption, d) for k, (caption, d) in enumerate(frames)]
        return _page(title, html.members_view(title, members, progress), out)
    return [write_text(grid_svg(frames, progress=progress), out)]
