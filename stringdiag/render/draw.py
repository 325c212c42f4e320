"""Pictures of diagrams in the paper's conventions, drawn by Graphviz.

Left to right. Learnable boxes are filled, fixed boxes unfilled, abstract families
highlighted, fixed random tensors hatched grey with their seed; definitions used as boxes have a double border (or are opened with
``expand``, drawn inside a solid frame named after them). SIMD boxes are dashed
containers labelled by their index and its range, nested as written; a scanned index
(finite iteration with a carried state) has a bold border. Wires are labelled with
their indices, seq dimensions and fixed dimensions in two colours. A wire read by
several boxes splits at a copy point; a wire read by none ends in a deletion dot.
"""
from __future__ import annotations

import html
from pathlib import Path

import graphviz

from ..errors import DiagError
from ..graph.diagram import Diagram
from ..graph.types import Dim
from ..syntax.source import write_atomic
from .frames import frames, rows

SEQ_COLOUR = "#c0392b"
FIXED_COLOUR = "#1f5f9e"
OTHER_COLOUR = "#555555"
LEARN_FILL = "#4f6d9a"
ABSTRACT_FILL = "#ffd54f"
RANDOM_FILL = "#d5d8dc"  # a fixed random tensor: drawn, not trained
FONT = "Helvetica"
FORMATS = {".svg": "svg", ".png": "png", ".pdf": "pdf", ".dot": "dot", ".gv": "dot"}


def _dim_colour(d: Dim, diagram: Diagram) -> str:
    prog = diagram.program
    kinds = set()
    for n in d.names():
        decl = prog.lookup_dim(n) if prog is not None else None
        kinds.add(decl.kind if decl else "generic")
    if kinds == {"seq"} or "seq" in kinds:
        return SEQ_COLOUR
    if kinds <= {"fixed"}:
        return FIXED_COLOUR
    return OTHER_COLOUR


def type_label(t, diagram: Diagram, name: str | None = None) -> str:
    """An HTML label: the wire's name, then one coloured tick per index."""
    ticks = ", ".join(f'<font color="{_dim_colour(d, diagram)}">{html.escape(str(d))}</font>' for d in t)
    head = f"{html.escape(name)} " if name and not name.startswith("_") else ""
    # brackets as entities: Graphviz's HTML lexer trips over a literal ']'
    return f"<{head}<font point-size='10'>&#91;{ticks}&#93;</font>>"


def _box_style(node: dict) -> dict:
    box = node["box"]
    label = node["op"]
    shown = [str(d) for g, d in node.get("generics", ()) if str(d) != g]  # s := s says nothing
    if shown:
        label += "<" + ", ".join(shown) + ">"
    style = {"label": label, "fontname": FONT, "shape": "box", "style": "rounded", "margin": "0.08,0.04",
             "height": "0.3"}
    if box == "learn":
        style.update(style="rounded,filled", fillcolor=LEARN_FILL, fontcolor="white", color="#2c3e50")
    elif box == "abstract":
        style.update(style="rounded,filled,bold", fillcolor=ABSTRACT_FILL, color="#b7791f")
    elif box == "random":
        style.update(style="rounded,filled,dashed", fillcolor=RANDOM_FILL, color="#566573",
                     label=f"<{html.escape(label)}<font point-size='9'> seed {node['seed']}</font>>")
    elif box == "diagram":
        style.update(peripheries="2", style="rounded,bold")
    elif box == "contract":
        summed = ",".join(node.get("display", {}).get(lab, lab) for lab, _ in node.get("summed", ()))
        style.update(shape="circle", style="filled", fillcolor="black", fontcolor="white", width="0.3",
                     label="Σ" + (f"<sub>{summed}</sub>" if summed else ""), fixedsize="false")
        style["label"] = f"<Σ<font point-size='9'>{html.escape(summed)}</font>>" if summed else "Σ"
    elif box == "reindex":
        style.update(label="⤨", shape="box", style="rounded", fontsize="10")
    elif box == "const":
        style.update(shape="plaintext", style="", label=node["op"])
    return style


def to_graphviz(d: Diagram, expand: bool = False, prefix: str = "", cluster: str | None = None) -> graphviz.Digraph:
    """The diagram as a Graphviz graph (open definitions with ``expand``).

    With ``cluster`` the graph is a cluster of that name, node names start with ``prefix``,
    and it can be placed in a larger picture (a derivation's chain of steps).
    """
    if expand:
        d = d.expand()
    g = graphviz.Digraph(name=cluster or d.name)
    g.attr(rankdir="LR", fontname=FONT, nodesep="0.25", ranksep="0.35", label=d.signature(),
           labelloc="t", fontsize="12", newrank="true")
    g.attr("node", fontname=FONT, fontsize="11")
    g.attr("edge", fontname=FONT, fontsize="10", arrowsize="0.5")
    frames = _Frames(d, prefix)
    frames.emit(g, ())
    _boundary(g, d, prefix, ranked=not cluster)
    row = rows(d, frames.drawn) or {}
    for w in d.wires():
        _wire(g, d, w, prefix, row)
    return g


def _cluster_attrs(key: tuple) -> dict:
    """A frame's look: an opened definition (rounded, named) or a SIMD box (dashed; bold when scanned)."""
    if key[0] == "def":
        return {"label": key[2], "style": "rounded", "color": "#777777", "fontname": FONT}
    _, _frame, label, dim, scan = key
    text = f"{'scan ' if scan else ''}{label} : {dim}" if label != str(dim) else f"{'scan ' if scan else ''}{dim}"
    return {"label": text, "style": "dashed,bold" if scan else "dashed", "color": "#555555",
            "fontname": FONT, "fontsize": "10", "labeljust": "l"}


class _Frames:
    """The frames of the picture (``frames.py``: SIMD boxes a box iterates, split into
    connected parts, and opened definitions), each identified by its full path and drawn
    as nested Graphviz clusters with the boxes inside."""

    def __init__(self, d: Diagram, prefix: str):
        self.d, self.prefix, self.count = d, prefix, 0
        self.tree: dict[tuple, list] = {(): []}
        self.drawn = frames(d)
        for b, path in self.drawn.items():
            for k in range(1, len(path) + 1):
                self.tree.setdefault(path[:k], [])
            self.tree[path].append(b)
        self.children: dict[tuple, list[tuple]] = {}
        for path in self.tree:
            if path:
                self.children.setdefault(path[:-1], []).append(path)

    def emit(self, graph, path: tuple) -> None:
        for b in self.tree[path]:
            graph.node(f"{self.prefix}{b}", **_box_style(self.d.box(b)))
        for child in self.children.get(path, []):
            self.count += 1
            with graph.subgraph(name=f"cluster_{self.prefix}{self.count}") as sub:
                frame, _part = child[-1]
                sub.attr(**_cluster_attrs(frame))
                self.emit(sub, child)


def _boundary(g: graphviz.Digraph, d: Diagram, P: str, ranked: bool) -> None:
    """The input names on the left, the outputs on the right (ranked, unless a cluster)."""
    with g.subgraph(name=f"{P}inputs") as src:
        if ranked:
            src.attr(rank="source")
        for k, _ in enumerate(d.inputs):
            src.node(f"{P}in{k}", label=d.input_names[k] if k < len(d.input_names) else f"in{k}",
                     shape="plaintext", fontname=FONT)
    with g.subgraph(name=f"{P}outputs") as snk:
        if ranked:
            snk.attr(rank="sink")
        for k, _ in enumerate(d.outputs):
            snk.node(f"{P}out{k}", label=f"out{k + 1}" if len(d.outputs) > 1 else "out", shape="plaintext")


def _wire(g: graphviz.Digraph, d: Diagram, w: int, P: str, row: dict) -> None:
    """A wire from its producer (or input) to its readers: a copy point when several read
    it, a deletion dot when none does. A wire between two rows of a wrapped picture
    (``frames.rows``) does not constrain their ranks."""
    a = d.graph.nodes[w]
    producer = d.producer(w)
    if producer is not None:
        src_node = f"{P}{producer}"
    elif w in d.inputs:
        src_node = f"{P}in{d.inputs.index(w)}"
    else:  # pragma: no cover - every wire has a producer or is an input
        return
    readers = [(f"{P}{b}", row.get(b)) for b, _ in d.consumers(w)]
    readers += [(f"{P}out{k}", None) for k, o in enumerate(d.outputs) if o == w]
    here = row.get(producer)

    def rank(other) -> dict:
        return {"constraint": "false"} if row and other != here else {}

    label = type_label(a["type"], d, a.get("name"))
    if a["type"] == () and producer is not None and d.graph.nodes[producer]["box"] == "const":
        label = ""  # a constant's wire: the number says it all
    if not readers:
        g.node(f"{P}del{w}", label="", shape="point", width="0.08", color="#333333")
        g.edge(src_node, f"{P}del{w}", label=label, arrowhead="none")
    elif len(readers) == 1:
        g.edge(src_node, readers[0][0], label=label, **rank(readers[0][1]))
    else:
        g.node(f"{P}copy{w}", label="", shape="point", width="0.09")
        g.edge(src_node, f"{P}copy{w}", label=label, arrowhead="none")
        for node, other in readers:
            g.edge(f"{P}copy{w}", node, **rank(other))


def strip(frames: list[tuple[str, str, Diagram]]) -> graphviz.Digraph:
    """Several diagrams left to right, each framed and captioned, joined by a relation
    (``≡``, ``⇒``): the chain of pictures of a derivation. ``frames`` are (caption,
    relation to the previous frame, diagram)."""
    g = graphviz.Digraph(name="derivation")
    g.attr(rankdir="LR", fontname=FONT, newrank="true", nodesep="0.25", ranksep="0.35")
    g.attr("node", fontname=FONT, fontsize="11")
    g.attr("edge", fontname=FONT, fontsize="10", arrowsize="0.5")
    previous = None
    for k, (caption, relation, d) in enumerate(frames):
        sub = to_graphviz(d, prefix=f"s{k}_", cluster=f"cluster_step{k}")
        sub.attr(label=caption, labelloc="t", style="rounded", color="#bbbbbb", fontsize="13")
        g.subgraph(sub)
        if previous is not None:
            g.node(f"rel{k}", label=relation or "→", shape="plaintext", fontsize="28")
            g.edge(previous, f"rel{k}", style="invis")
            g.edge(f"rel{k}", f"s{k}_in0" if d.inputs else f"s{k}_out0", style="invis")
        previous = f"s{k}_out0"
    return g


def chain_svg(frames: list[tuple[str, str, Diagram]]) -> str:
    """The chain of a derivation as one SVG, top to bottom: each step's picture under its
    caption, the relation to the previous one (``≡``, ``⇒``) between them."""
    import re

    parts, y, width = [], 0.0, 0.0
    for k, (caption, relation, d) in enumerate(frames):
        svg = to_svg(d)
        m = re.search(r'<svg width="([\d.]+)pt" height="([\d.]+)pt"', svg)
        w, h = (float(m.group(1)), float(m.group(2))) if m else (400.0, 200.0)
        # sizes in the outer picture's units (points): drop the unit, keep the number
        body = re.sub(r'<svg width="([\d.]+)pt" height="([\d.]+)pt"', r'<svg width="\1" height="\2"',
                      svg[svg.index("<svg"):], count=1)
        if k:
            parts.append(f'<text x="20" y="{y + 26:.0f}" font-family="{FONT}" font-size="26">{html.escape(relation)}</text>')
            y += 36
        parts.append(f'<text x="4" y="{y + 16:.0f}" font-family="{FONT}" font-size="14" font-weight="bold">'
                     f"{html.escape(caption)}</text>")
        y += 22
        parts.append(body.replace("<svg ", f'<svg x="0" y="{y:.0f}" ', 1))
        y += h
        width = max(width, w)
    return (f'<?xml version="1.0" encoding="UTF-8"?>\n<svg xmlns="http://www.w3.org/2000/svg" '
            f'xmlns:xlink="http://www.w3.org/1999/xlink" width="{width:.0f}pt" height="{y:.0f}pt" '
            f'viewBox="0 0 {width:.0f} {y:.0f}">\n' + "\n".join(parts) + "\n</svg>\n")


def grid_svg(frames: list[tuple[str, Diagram]], columns: int = 6, progress=None) -> str:
    """Several diagrams in a grid, each under its caption (Figure 3 of Khatri et al. (2024) is such a
    grid): rows as high as their tallest picture, columns as wide as their widest."""
    import re

    cells = []
    for caption, d in (progress(frames) if progress else frames):
        svg = to_svg(d)
        m = re.search(r'<svg width="([\d.]+)pt" height="([\d.]+)pt"', svg)
        w, h = (float(m.group(1)), float(m.group(2))) if m else (200.0, 200.0)
        body = re.sub(r'<svg width="([\d.]+)pt" height="([\d.]+)pt"', r'<svg width="\1" height="\2"',
                      svg[svg.index("<svg"):], count=1)
        cells.append((caption, body, w, h))
    columns = max(1, min(columns, len(cells)))
    widths = [max((c[2] for c in cells[k::columns]), default=0.0) + 16 for k in range(columns)]
    parts, y = [], 0.0
    for r in range(0, len(cells), columns):
        row = cells[r:r + columns]
        x = 0.0
        for k, (caption, body, _, _) in enumerate(row):
            parts.append(f'<text x="{x + 4:.0f}" y="{y + 16:.0f}" font-family="{FONT}" font-size="14" '
                         f'font-weight="bold">{html.escape(caption)}</text>')
            parts.append(body.replace("<svg ", f'<svg x="{x:.0f}" y="{y + 22:.0f}" ', 1))
            x += widths[k]
        y += 22 + max(c[3] for c in row) + 12
    width = sum(widths)
    return (f'<?xml version="1.0" encoding="UTF-8"?>\n<svg xmlns="http://www.w3.org/2000/svg" '
            f'xmlns:xlink="http://www.w3.org/1999/xlink" width="{width:.0f}pt" height="{y:.0f}pt" '
            f'viewBox="0 0 {width:.0f} {y:.0f}">\n' + "\n".join(parts) + "\n</svg>\n")


def write_text(text: str, out: str | Path) -> Path:
    return write_atomic(out, text)


def write(g: graphviz.Digraph, out: str | Path) -> Path:
    """Write a Graphviz graph in the format the extension names, atomically."""
    out = Path(out)
    fmt = FORMATS.get(out.suffix.lower())
    if fmt is None:
        raise DiagError(f"cannot tell the picture format from '{out.name}': use one of "
                        + ", ".join(sorted(FORMATS)))
    try:
        data = g.source.encode() if fmt == "dot" else g.pipe(format=fmt)
    except graphviz.ExecutableNotFound:
        raise DiagError("Graphviz's 'dot' is not installed: apt-get install -y graphviz "
                        "(or your platform's graphviz package)") from None
    return write_atomic(out, data)


def to_svg(d: Diagram, expand: bool = False) -> str:
    return to_graphviz(d, expand).pipe(format="svg", encoding="utf-8")


def render(d: Diagram, out: str | Path, expand: bool = False) -> Path:
    """Write the picture; the format follows the extension (.svg, .png, .pdf, .dot)."""
    return write(to_graphviz(d, expand), out)
