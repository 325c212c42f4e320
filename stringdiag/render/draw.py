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

import math
import re
from pathlib import Path

from ..graph.box import Box, Kind
from ..graph.clusters import Cluster
from ..graph.budget import MAX_EXPANDED
from ..errors import DiagError
from ..graph.diagram import Diagram
from ..graph.hypergraph import repeated
from ..graph.multigraph import topological_sort
from ..graph.types import Dim
from ..syntax.records import Record, field, replace
from ..syntax.source import write_atomic
from .crossings import centres, crossings
from .dag import Dag
from .dotrun import GraphvizFailed, laid_out
from .dotsource import Dot, escape
from .formats import FORMATS
from .frames import copy_points, frames, placed, rows

# the most boxes one picture is laid out with (Graphviz's time and memory grow much faster than
# the boxes: a flat picture of 2,000 boxes with long skip wires ran past five minutes, 4,900 ran
# out of memory; the gallery's largest picture, expanded, has 324)
MAX_DRAWN = 1_000

SEQ_COLOUR = "#c0392b"
FIXED_COLOUR = "#1f5f9e"
OTHER_COLOUR = "#555555"
LEARN_FILL = "#4f6d9a"
ABSTRACT_FILL = "#ffd54f"
RANDOM_FILL = "#d5d8dc"  # a fixed random tensor: drawn, not trained
FONT = "Helvetica"
COPY_POINT = {"label": "", "shape": "point", "width": "0.09"}


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
    ticks = ", ".join(f'<font color="{_dim_colour(d, diagram)}">{escape(str(d))}</font>' for d in t)
    head = f"{escape(name)} " if name and not name.startswith("_") else ""
    # brackets as entities: Graphviz's HTML lexer trips over a literal ']'
    return f"<{head}<font point-size='10'>&#91;{ticks}&#93;</font>>"


def _box_style(node: Box) -> dict:
    box = node.kind
    label = node.op
    generics = node.generics
    # every parameter as written (window<s, w>, not window<s>), none where each is its own name
    shown = [str(d) for g, d in generics] if any(str(d) != g for g, d in generics) else []
    if shown:
        label += "<" + ", ".join(shown) + ">"
    style = {"label": label, "fontname": FONT, "shape": "box", "style": "rounded", "margin": "0.08,0.04",
             "height": "0.3"}
    if box is Kind.LEARN:
        style.update(style="rounded,filled", fillcolor=LEARN_FILL, fontcolor="white", color="#2c3e50")
    elif box is Kind.ABSTRACT:
        style.update(style="rounded,filled,bold", fillcolor=ABSTRACT_FILL, color="#b7791f")
    elif box is Kind.DIAGRAM and repeated(node):  # t copies drawn as one box: "Block ×6"
        shared = " shared" if node.shared else ""
        style.update(peripheries="3", style="rounded,bold", label=f"{label} ×{node.repeat.count}{shared}")
    elif box is Kind.RANDOM:
        style.update(style="rounded,filled,dashed", fillcolor=RANDOM_FILL, color="#566573",
                     label=f"<{escape(label)}<font point-size='9'> seed {node.seed}</font>>")
    elif box is Kind.DIAGRAM:
        style.update(peripheries="2", style="rounded,bold")
    elif box is Kind.CONTRACT:
        summed = ",".join((node.display or {}).get(lab, lab) for lab, _ in node.summed)
        style.update(shape="circle", style="filled", fillcolor="black", fontcolor="white", width="0.3",
                     label="Σ" + (f"<sub>{summed}</sub>" if summed else ""), fixedsize="false")
        style["label"] = f"<Σ<font point-size='9'>{escape(summed)}</font>>" if summed else "Σ"
    elif box is Kind.REINDEX:
        style.update(label="⤨", shape="box", style="rounded", fontsize="10")
    elif box is Kind.CONST:
        style.update(shape="plaintext", style="", label=node.op)
    return style


MATCHED = "#d62728"  # a derivation's picture: the boxes the next step replaces (dashed)
ADDED = "#2ca02c"    # ... and the boxes this step put in


class Marks(Record):
    """One picture of a derivation: the boxes the next step replaces (``matched``), those
    this step put in (``added``), and where each untouched box was in the previous picture
    (``before``: its centre), so that it keeps its place relative to the others."""

    matched: frozenset[int] = frozenset()
    added: frozenset[int] = frozenset()
    before: dict[int, tuple[float, float]] = field(default_factory=dict)
    columns: bool = True  # also an invisible edge down each column (dot's router fails on a few)
    strict: str = ""  # dot's mclimit, to start its ordering from the order before ("": off)
    ranks: bool = True  # the edges from each column to the next (off: dot ranks the boxes freely)


def to_graphviz(d: Diagram, expand: bool = False, prefix: str = "", cluster: str | None = None,
                cuts: Cuts | None = None, marks: Marks | None = None) -> Dot:
    """The diagram as a Graphviz graph (open definitions with ``expand``).

    With ``cluster`` the graph is a cluster of that name, node names start with ``prefix``,
    and it can be placed in a larger picture (a derivation's chain of steps).
    """
    if expand:
        d = d.expand(unroll={}, limit=MAX_EXPANDED)  # stacks of known size drawn as their layers
    g = _digraph(cluster or d.name, label=d.signature())
    frames = _Frames(d, prefix, cuts=cuts, before=marks.before if marks else None, up=bool(marks and marks.strict))
    if marks is not None and marks.before:  # few passes of crossing reduction: the order given mostly stays
        g.attr(mclimit=marks.strict or MCLIMIT, **{"class": "ordered"})
        if marks.strict:  # dot's first ordering is a search from the first node: this one, reaching all
            # (and no crossing reduction again once the frames are filled in)
            g.attr(remincross="false")
            g.node(f"{prefix}{HUB}in", **HUB_NODE)
    frames.emit(g, ())
    _boundary(g, d, prefix, ranked=not cluster)
    row = rows(d, frames.drawn) or {}
    for w in d.wires():
        _wire(g, d, w, prefix, row, cuts)
    if marks is not None:
        _mark(g, d, prefix, marks)
    return g


def _mark(g: Dot, d: Diagram, P: str, marks: Marks) -> None:
    """Highlight what a derivation step changed, and keep the untouched boxes in the order
    they had in the previous picture: invisible edges of length 0 or more (``minlen=0``) from
    every box of one column there to every box of the next, and down each column (weighted:
    dot orders a rank by the edges within it only when they weigh something); a hint that
    would close a cycle with the wires of this diagram (and the hints before it) is left out.
    ``strict`` adds edges from a first node to every untouched box and from them to a last
    one: dot's first ordering, a search from there, meets them in their order (``_Frames``
    gives them bottom to top: dot turns its first ordering round in a left-to-right picture)."""
    for b in sorted(marks.matched | marks.added):
        style = _box_style(d.record(b))
        matched = b in marks.matched
        look = {"color": MATCHED if matched else ADDED, "penwidth": "2.5",
                "class": " ".join(c for c, on in (("matched", matched), ("added", b in marks.added)) if on)}
        if style.get("shape") == "plaintext":  # a constant: no border to colour
            look["fontcolor"] = look["color"]
        else:
            look["style"] = ",".join(x for x in (style.get("style", ""), "dashed" if matched else "") if x)
        g.node(f"{P}{b}", **look)
    columns: dict[int, list[int]] = {}
    for b, (x, y) in sorted(marks.before.items(), key=lambda item: (item[1][1], item[0])):
        columns.setdefault(round(x), []).append(b)  # each column top to bottom
    order = [columns[x] for x in sorted(columns)]
    hidden = {"style": "invis", "minlen": "0", "weight": "0"}
    if marks.strict:
        g.node(f"{P}{HUB}out", **HUB_NODE)
        for b in sorted(marks.before, key=lambda b: (-marks.before[b][1], marks.before[b][0])):
            g.edge(f"{P}{HUB}in", f"{P}{b}", **hidden)
            g.edge(f"{P}{b}", f"{P}{HUB}out", **hidden)
    held = Dag.of(d.graph.succ)  # the wires, and the hints so far: a hint closing a cycle is left out
    pairs = [(a, b, hidden) for left, right in zip(order, order[1:]) for a in left for b in right if marks.ranks]
    if marks.columns:  # where two stay in one column, dot (left to right) draws this edge's tail above its head
        pairs += [(a, b, hidden | {"weight": "1"}) for column in order for a, b in zip(column, column[1:])]
    for a, b, attrs in pairs:
        if not held.reaches(b, a):
            held.add_edge(a, b)
            g.edge(f"{P}{a}", f"{P}{b}", **attrs)


def disorder(svg: str, before: dict[int, tuple[float, float]]) -> int:
    """Pairs of boxes drawn in ``svg`` out of the order ``before`` (box -> centre) had: the
    columns swapped, or one above the other the other way round within one column."""
    return misplaced(centres(svg), before)


def misplaced(now: dict[str, tuple[float, float]], before: dict[int, tuple[float, float]]) -> int:
    """``disorder`` of the node centres ``now`` (by node name)."""
    at = [(before[b], now[str(b)]) for b in sorted(before) if str(b) in now]
    out = 0
    for k, ((x0, y0), (u0, v0)) in enumerate(at):
        for (x1, y1), (u1, v1) in at[k + 1:]:
            if abs(x1 - x0) > EPS:
                out += (x1 - x0) * (u1 - u0) < 0 and abs(u1 - u0) > EPS
            elif abs(u1 - u0) <= EPS:
                out += (y1 - y0) * (v1 - v0) < 0 and abs(y1 - y0) > EPS and abs(v1 - v0) > EPS
    return out


EPS = 1.0  # points: the boxes of one column of dot's layout share their x


def _digraph(name: str, label: str) -> Dot:
    g = Dot(name=name)
    g.attr(rankdir="LR", fontname=FONT, nodesep="0.25", ranksep="0.35", label=label,
           labelloc="t", fontsize="12", newrank="true")
    g.attr("node", fontname=FONT, fontsize="11")
    g.attr("edge", fontname=FONT, fontsize="10", arrowsize="0.5")
    return g


def _cluster_attrs(frame: Cluster) -> dict:
    """A frame's look: an opened definition (rounded, named) or a SIMD box (dashed; bold when scanned)."""
    if not frame.is_simd:
        return {"label": frame.name, "style": "rounded", "color": "#777777", "fontname": FONT}
    label, dim, scan = frame.label, frame.dim, frame.scan
    text = f"{'scan ' if scan else ''}{label} : {dim}" if label != str(dim) else f"{'scan ' if scan else ''}{dim}"
    return {"label": text, "style": "dashed,bold" if scan else "dashed", "color": "#555555",
            "fontname": FONT, "fontsize": "10", "labeljust": "l"}


class _Frames:
    """The frames of the picture (``frames.py``: SIMD boxes a box iterates, split into
    connected parts, and opened definitions), each identified by its full path and drawn
    as nested Graphviz clusters with the boxes inside."""

    def __init__(self, d: Diagram, prefix: str, only: set[int] | None = None, cuts: "Cuts | None" = None,
                 before: dict[int, tuple[float, float]] | None = None, up: bool = False):
        self.d, self.prefix, self.count = d, prefix, 0
        self.stubs: dict[str, list[str]] = {}  # a box's node -> the stubs drawn in its frame
        for a, b in sorted(cuts.edges if cuts else ()):  # sorted: the same picture in every run
            self.stubs.setdefault(b, []).append(f"{b}__{a}")
            self.stubs.setdefault(a, []).append(f"{a}__{b}")
        self.tree: dict[tuple, list] = {(): []}
        self.drawn = placed(d, frames(d))
        for b, path in self.drawn.items():
            if only is not None and b not in only:
                continue
            for k in range(1, len(path) + 1):
                self.tree.setdefault(path[:k], [])
            self.tree[path].append(b)
        self.points = copy_points(d, self.drawn, only)
        self.children: dict[tuple, list[tuple]] = {}
        for path in self.tree:
            if path:
                self.children.setdefault(path[:-1], []).append(path)
        if before:  # top to bottom as in the picture before: dot starts from the order given
            sign = -1 if up else 1  # up: bottom to top (a strict ordering, which dot turns round)
            self._sort(lambda b: sign * before[b][1] if b in before else math.inf)

    def _sort(self, key) -> None:
        top: dict[tuple, float] = {}
        for path in sorted(self.tree, key=len, reverse=True):
            top[path] = min([key(b) for b in self.tree[path]] + [top[c] for c in self.children.get(path, [])],
                            default=math.inf)
        for path in self.tree:
            self.tree[path].sort(key=key)
        for kids in self.children.values():
            kids.sort(key=lambda c: top[c])

    def emit(self, graph, path: tuple) -> None:
        for b in self.tree[path]:
            self.node(graph, f"{self.prefix}{b}", **_box_style(self.d.record(b)))
        for w in self.points.get(path, ()):  # a copy point in the frame its readers share
            self.node(graph, f"{self.prefix}copy{w}", **COPY_POINT)
        for child in self.children.get(path, []):
            self.count += 1
            with graph.subgraph(name=f"cluster_{self.prefix}{self.count}") as sub:
                frame, _part = child[-1]
                sub.attr(**_cluster_attrs(frame))
                self.emit(sub, child)

    def node(self, graph, name: str, **attrs) -> None:
        graph.node(name, **attrs)
        for stub in self.stubs.get(name, ()):  # beside its node, inside its frames
            graph.node(stub)


def _boundary(g: Dot, d: Diagram, P: str, ranked: bool) -> None:
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


def _wire(g: Dot, d: Diagram, w: int, P: str, row: dict, cuts: Cuts | None = None) -> None:
    """A wire from its producer (or input) to its readers: a copy point when several read
    it, a deletion dot when none does. A wire between two rows of a wrapped picture
    (``frames.rows``) does not constrain their ranks."""
    producer, src, readers = _ends(d, w, P)
    here = row.get(producer)
    free = {node: {"constraint": "false"} for node, b in readers if row and row.get(b) != here}
    _fan(g, P, w, src, [node for node, _ in readers], _wire_label(d, w, producer), free, cuts)


def _ends(d: Diagram, w: int, P: str) -> tuple[int | None, str, list[tuple[str, int | None]]]:
    """The wire's producer box (None for an input), its source node, and its readers as
    (node, box), an output of the diagram being a reader with no box."""
    producer = d.producer(w)
    src = f"{P}{producer}" if producer is not None else f"{P}in{d.inputs.index(w)}"
    readers = [(f"{P}{b}", b) for b, _ in d.consumers(w)]
    readers += [(f"{P}out{k}", None) for k, o in enumerate(d.outputs) if o == w]
    return producer, src, readers


def _wire_label(d: Diagram, w: int, producer: int | None) -> str:
    a = d.wire(w)
    if a.type == () and producer is not None and d.record(producer).kind is Kind.CONST:
        return ""  # a constant's wire: the number says it all
    return type_label(a.type, d, a.name)


def _fan(g: Dot, P: str, w: int, src: str, readers: list[str], label: str,
         attrs: dict[str, dict] | None = None, cuts: "Cuts | None" = None) -> None:
    """Edges from ``src`` to the readers: through a copy point when there are several, into a
    deletion dot when there are none."""
    attrs = attrs or {}
    if not readers:
        g.node(f"{P}del{w}", label="", shape="point", width="0.08", color="#333333")
        _edge(g, src, f"{P}del{w}", cuts, label=label, arrowhead="none")
    elif len(readers) == 1:
        _edge(g, src, readers[0], cuts, label=label, **attrs.get(readers[0], {}))
    else:
        g.node(f"{P}copy{w}", **COPY_POINT)
        _edge(g, src, f"{P}copy{w}", cuts, label=label, arrowhead="none")
        for node in readers:
            _edge(g, f"{P}copy{w}", node, cuts, **attrs.get(node, {}))


class Cuts:
    """Edges drawn as a pair of numbered stubs (``→ (n)`` at the tail, ``(n) →`` at the head)
    instead of a line: those Graphviz routed through a frame they do not enter
    (``crossings.py``) even when made ``heavy`` (pulled short and straight, which routes most
    such edges clear of the frames). Numbers start after the stubs between rows."""

    def __init__(self, edges: set[tuple[str, str]] | None = None, start: int = 0,
                 heavy: set[tuple[str, str]] | None = None):
        self.edges = set(edges or ())
        self.heavy = set(heavy or ())
        self.number = {e: start + k + 1 for k, e in enumerate(sorted(self.edges))}


MCLIMIT = "0.2"
STRICT = ("0.01",)  # mclimit of the strict layouts: no pass of crossing reduction (with "1", a full one,
# some steps keep their order and others lose it: over the gallery 354 pairs out of order against 306)
HUB = "order_"  # the first and last node of a strict ordering (invisible)
HUB_NODE = {"label": "", "shape": "point", "width": "0.01", "style": "invis"}
ROUNDS = 8  # of untangling: most pictures settle in two or three
HEAVY = "8"  # the weight of an edge that crossed a frame: dot keeps it short and straight


def _edge(g: Dot, a: str, b: str, cuts: Cuts | None, **attrs) -> None:
    if cuts is not None and (a, b) in cuts.heavy and "constraint" not in attrs:
        attrs["weight"] = HEAVY
    if cuts is None or (a, b) not in cuts.edges:
        g.edge(a, b, **attrs)
        return
    n = cuts.number[(a, b)]
    g.node(f"{a}__{b}", label=f"→ ({n})", shape="plaintext", fontcolor=OTHER_COLOUR)
    g.node(f"{b}__{a}", label=f"({n}) →", shape="plaintext", fontcolor=OTHER_COLOUR)
    g.edge(a, f"{a}__{b}", **attrs)
    g.edge(f"{b}__{a}", b, **attrs)


# -- a long stack, one row per layer ------------------------------------------------------------

def stacked_rows(d: Diagram, cut: set[tuple[str, str]] = frozenset(),
                 heavy: set[tuple[str, str]] = frozenset()) -> list[Dot] | None:
    """A long stack of layers (``frames.rows``) as one Graphviz graph per row, top to bottom;
    None when the picture is one row. A wire between rows leaves its row at a numbered stub
    and enters the other at the same number, so no edge runs through a frame of another row."""
    row = rows(d, placed(d, frames(d)))
    if not row:
        return None
    number = _row_numbers(d, row)
    tags: dict[int, int] = {}
    for w in d.wires():
        producer, _src, readers = _ends(d, w, "")
        home = _home(number, producer, readers)
        if any(number.get(b, home) != home for _, b in readers):
            tags[w] = len(tags) + 1
    graphs, cuts = [], Cuts(cut, start=len(tags), heavy=heavy)
    for r in range(max(number.values()) + 1):
        g = _digraph(f"{d.name}_row{r}", label=d.signature() if r == 0 else "")
        _Frames(d, "", only={b for b, k in number.items() if k == r}, cuts=cuts).emit(g, ())
        for w in d.wires():
            _row_wire(g, d, w, number, r, tags.get(w), cuts)
        graphs.append(g)
    return graphs


def _row_numbers(d: Diagram, row: dict) -> dict[int, int]:
    """Layers in the order of their depth in the graph (the first box of each that reads
    anything); a box outside every layer goes with the deepest layer it reads from, or, reading
    from none, with the first layer that reads it."""
    depth: dict[int, int] = {}
    order = topological_sort(d.graph)
    for n in order:
        depth[n] = max((depth[p] + 1 for p in d.graph.predecessors(n)), default=0)
    start: dict = {}
    for b, key in row.items():
        if key is not None:
            start[key] = min(start.get(key, math.inf), depth[b] if d.box_inputs(b) else math.inf)
    rank = {key: k for k, key in enumerate(sorted(start, key=lambda key: start[key]))}
    number = {b: rank[key] for b, key in row.items() if key is not None}
    boxes = [n for n in order if n in row]
    for b in boxes:  # outside: after what it reads
        if row[b] is None:
            before = [number[p] for w, _ in d.box_inputs(b) if (p := d.producer(w)) in number]
            if before:
                number[b] = max(before)
    for b in reversed(boxes):  # reading nothing placed: before what reads it
        if b not in number:
            number[b] = min((number[r] for w in d.box_outputs(b) for r, _ in d.consumers(w) if r in number),
                            default=0)
    return number


def _home(number: dict[int, int], producer: int | None, readers: list) -> int:
    """The row a wire starts in: its producer's, or for an input its first reader's."""
    if producer is not None:
        return number[producer]
    return min((number[b] for _, b in readers if b is not None), default=0)


def _row_wire(g: Dot, d: Diagram, w: int, number: dict, r: int, tag: int | None,
              cuts: Cuts) -> None:
    producer, src, readers = _ends(d, w, "")
    home = _home(number, producer, readers)
    here = [node for node, b in readers if number.get(b, home) == r]
    label = _wire_label(d, w, producer)
    if home == r:
        if producer is None:
            k = d.inputs.index(w)
            g.node(src, label=d.input_names[k] if k < len(d.input_names) else f"in{k}", shape="plaintext")
        for k, o in enumerate(d.outputs):
            if o == w:
                g.node(f"out{k}", label=f"out{k + 1}" if len(d.outputs) > 1 else "out", shape="plaintext")
        if tag is not None:
            g.node(f"to{w}", label=f"→ ({tag})", shape="plaintext", fontcolor=OTHER_COLOUR)
            here.append(f"to{w}")
        _fan(g, "", w, src, here, label, cuts=cuts)
    elif here:
        g.node(f"from{w}", label=f"({tag}) →", shape="plaintext", fontcolor=OTHER_COLOUR)
        _fan(g, "", w, f"from{w}", here, label, cuts=cuts)


def strip(frames: list[tuple[str, str, Diagram]]) -> Dot:
    """Several diagrams left to right, each framed and captioned, joined by a relation
    (``≡``, ``⇒``): the chain of pictures of a derivation. ``frames`` are (caption,
    relation to the previous frame, diagram)."""
    g = Dot(name="derivation")
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


def _embedded(svg: str) -> tuple[str, float, float]:
    """An SVG document as an element to place in a larger picture (sizes in the outer
    picture's units, points), with its width and height."""
    import re

    m = re.search(r'<svg width="([\d.]+)pt" height="([\d.]+)pt"', svg)
    w, h = (float(m.group(1)), float(m.group(2))) if m else (400.0, 200.0)
    body = re.sub(r'<svg width="([\d.]+)pt" height="([\d.]+)pt"', r'<svg width="\1" height="\2"',
                  svg[svg.index("<svg"):], count=1)
    return body, w, h


def _place(body: str, x: float, y: float) -> str:
    return body.replace("<svg ", f'<svg x="{x:.0f}" y="{y:.0f}" ', 1)


def _document(parts: list[str], width: float, height: float) -> str:
    return (f'<?xml version="1.0" encoding="UTF-8"?>\n<svg xmlns="http://www.w3.org/2000/svg" '
            f'xmlns:xlink="http://www.w3.org/1999/xlink" width="{width:.0f}pt" height="{height:.0f}pt" '
            f'viewBox="0 0 {width:.0f} {height:.0f}">\n' + "\n".join(parts) + "\n</svg>\n")


def chain_svg(frames: list[tuple[str, str, Diagram]], changes: list | None = None) -> str:
    """The chain of a derivation as one SVG, top to bottom: each step's picture under its
    caption, the relation to the previous one (``≡``, ``⇒``) between them. With ``changes``
    (per step: the boxes of the diagram before it that it replaced, the boxes it put in, and
    the untouched ones, before -> after), each picture highlights the boxes the next step
    replaces and those this step put in, and keeps the untouched boxes in the order they had
    in the picture before (``chain_pictures``)."""
    parts, y, width = [], 0.0, 0.0
    for k, ((caption, relation, _), svg) in enumerate(zip(frames, chain_pictures(frames, changes))):
        body, w, h = _embedded(svg)
        if k:
            parts.append(f'<text x="20" y="{y + 26:.0f}" font-family="{FONT}" font-size="26">{escape(relation)}</text>')
            y += 36
        parts.append(f'<text x="4" y="{y + 16:.0f}" font-family="{FONT}" font-size="14" font-weight="bold">'
                     f"{escape(caption)}</text>")
        y += 22
        parts.append(_place(body, 0, y))
        y += h
        width = max(width, w)
    return _document(parts, width, y)


def chain_pictures(frames: list[tuple[str, str, Diagram]], changes: list | None = None,
                   highlight: bool = True) -> list[str]:
    """Each step's picture (SVG), laid out with the places of its untouched boxes in the
    picture before (``changes``: per step, what it replaced, put in and kept); with
    ``highlight`` the boxes the next step replaces and those this step put in are coloured."""
    out: list[str] = []
    where: dict[str, tuple[float, float]] = {}
    for k, (_, _, d) in enumerate(frames):
        marks = None
        if changes is not None:
            nxt = changes[k + 1].matched if k + 1 < len(changes) and highlight else frozenset()
            kept = changes[k].kept if k else {}
            marks = Marks(nxt, changes[k].added if k and highlight else frozenset(),
                          {b: where[str(a)] for a, b in kept.items() if str(a) in where})
        out.append(_marked_svg(d, marks))
        where = centres(out[-1])
    return out


def stubs(svg: str) -> int:
    """How many stub pairs a picture has (one ``→ (n)`` tail each)."""
    return len(STUB.findall(svg))


STUB = re.compile(r"→ \(\d+\)")


def _marked_svg(d: Diagram, marks: Marks | None) -> str:
    """``to_svg`` with the marks, the untouched boxes in their order before. Dot lays out the
    hinted graph first; where that turns untouched boxes round (its first run, then again once
    untangled), the step is stacked by us in the order before (``_routed``) and kept when that
    leaves no stub and no pair out of order: three Graphviz runs a step where the untangling
    rounds and the full search below take a dozen. Else dot's other
    layouts are tried in turn (``_ordered_svg``): the hints with a strict first ordering
    (``STRICT``), the hints but none down the columns, none but the boxes given to dot in their
    order before; kept is the one with the fewest stubs, then the fewest pairs out of order
    (``disorder``), and a layout needing more stubs than the free one (a frame stretched by the
    hints lets an edge run through another) is not taken; where every one still turns a pair
    round, the stacked layout is taken if it does better. A picture drawn with hints says so
    (its graph has the class ``ordered``; a stacked one also ``stacked``); dot's edge router
    gives up on a few hinted layouts ("triangulation failed")."""
    if marks is None or not marks.before:
        return to_svg(d, marks=marks)
    tried: dict[tuple, str | None] = {}
    raw = _raw(d, marks, tried)  # dot's first hinted run, before any untangling: often already out of order
    if raw is not None and disorder(raw, marks.before):
        again = _routed(d, marks, raw, tried)
        if again is not raw and not stubs(again) and not disorder(again, marks.before):
            return again  # the untangling rounds of a layout not taken are skipped
    first = _hinted(d, marks, raw)
    if first is not None and disorder(first, marks.before):
        again = _routed(d, marks, first, tried)
        if again is not first and not stubs(again) and not disorder(again, marks.before):
            return again
    svg = _ordered_svg(d, marks, first)
    return _routed(d, marks, svg, tried) if disorder(svg, marks.before) else svg


def _hinted(d: Diagram, marks: Marks, raw: str | None = None) -> str | None:
    """Dot's layout with these hints, untangled (``raw``: its first run, made already); None
    where its edge router gives up."""
    try:
        return to_svg(d, marks=marks, first=raw)
    except GraphvizFailed:
        return None


def _raw(d: Diagram, marks: Marks, tried: dict) -> str | None:
    """Dot's layout with these hints, as drawn before any edge is made heavy or cut (its DOT
    source kept in ``tried`` for ``_stacked``)."""
    try:
        return _drawn(d, marks, set(), set(), tried)
    except GraphvizFailed:
        return None


SOURCE = "source"  # a step's ``tried``: the marks and DOT source of its first hinted run (``_raw``)


def _stacked(d: Diagram, m: Marks, tried: dict) -> str | None:
    """``stacked.stacked`` of the graph with the marks ``m``, each made once a step."""
    from .stacked import stacked  # (networkx, numpy: only a derivation's pictures are stacked)

    key = (m.columns, m.ranks, m.strict)
    if key not in tried:
        try:
            source = tried[SOURCE][1] if tried.get(SOURCE, (None,))[0] is m else to_graphviz(d, marks=m).source
            tried[key] = stacked(source, m.before)
        except (GraphvizFailed, ValueError, IndexError, KeyError):
            tried[key] = None
    return tried[key]


def _routed(d: Diagram, marks: Marks, svg: str, tried: dict) -> str:
    """``svg``, or where it still turns untouched boxes round, the layout with every order hint
    (no stub cut), its columns stacked in the order before and every wire dot ran through a
    frame routed around it by ``route.py`` (``stacked.stacked``): kept with no wire through a
    frame, no more stubs and fewer pairs out of order."""
    wrong = disorder(svg, marks.before)
    for m in (marks, replace(marks, columns=False)):
        again = _stacked(d, m, tried)
        if again is None:
            continue
        if not crossings(again) and stubs(again) <= stubs(svg) and disorder(again, marks.before) < wrong:
            svg, wrong = again, disorder(again, marks.before)
        if not wrong:
            break
    return svg


def _ordered_svg(d: Diagram, marks: Marks, first: str | None) -> str:
    """The best of dot's layouts with the order hints (``_marked_svg``); ``first``: the layout
    with ``marks`` as given, made already (None: dot failed on it)."""
    free: list[str] = []  # drawn only when needed

    def unhinted() -> str:
        if not free:
            free.append(to_svg(d, marks=replace(marks, before={})))
        return free[0]

    best: tuple[int, int, str] | None = None  # (stubs, pairs out of order, svg)
    for k, m in enumerate((marks, *(replace(marks, strict=c) for c in STRICT), replace(marks, columns=False),
                           replace(marks, columns=False, ranks=False))):
        svg = first if k == 0 else _hinted(d, m)
        if svg is None:
            continue
        if stubs(svg) and stubs(svg) > stubs(unhinted()):
            continue
        mine = (stubs(svg), disorder(svg, marks.before), svg)
        best = mine if best is None or mine[:2] < best[:2] else best
        if best[:2] == (0, 0):
            break
    if best is None or (best[1] and (stubs(unhinted()), disorder(unhinted(), marks.before)) < best[:2]):
        return unhinted()
    return best[2]


def grid_svg(frames: list[tuple[str, Diagram]], columns: int = 6, progress=None) -> str:
    """Several diagrams in a grid, each under its caption (Figure 3 of Khatri et al. (2024) is such a
    grid): rows as high as their tallest picture, columns as wide as their widest."""
    cells = [(caption, *_embedded(to_svg(d))) for caption, d in (progress(frames) if progress else frames)]
    columns = max(1, min(columns, len(cells)))
    widths = [max((c[2] for c in cells[k::columns]), default=0.0) + 16 for k in range(columns)]
    parts, y = [], 0.0
    for r in range(0, len(cells), columns):
        row = cells[r:r + columns]
        x = 0.0
        for k, (caption, body, _, _) in enumerate(row):
            parts.append(f'<text x="{x + 4:.0f}" y="{y + 16:.0f}" font-family="{FONT}" font-size="14" '
                         f'font-weight="bold">{escape(caption)}</text>')
            parts.append(_place(body, x, y + 22))
            x += widths[k]
        y += 22 + max(c[3] for c in row) + 12
    return _document(parts, sum(widths), y)


def _stack(graphs: list[Dot]) -> str:
    """Row pictures one under another, as one SVG."""
    parts, y, width = [], 0.0, 0.0
    for g in graphs:
        body, w, h = _embedded(laid_out(g.source, quiet=False)[0])
        parts.append(_place(body, 0, y))
        y, width = y + h + 8, max(width, w)
    return _document(parts, width, y)


def write_text(text: str, out: str | Path) -> Path:
    return write_atomic(out, text)


def write(g: Dot, out: str | Path) -> Path:
    """Write a Graphviz graph in the format the extension names, atomically."""
    out = Path(out)
    fmt = FORMATS.get(out.suffix.lower())
    if fmt is None:
        raise DiagError(f"cannot tell the picture format from '{out.name}': use one of "
                        + ", ".join(sorted(FORMATS)))
    data = g.source.encode() if fmt == "dot" else g.pipe(format=fmt)  # DotNotFound says how to install it
    return write_atomic(out, data)


def to_svg(d: Diagram, expand: bool = False, marks: Marks | None = None, first: str | None = None) -> str:
    """The picture as SVG; a long stack of layers as rows one under another. An edge Graphviz
    routes through a frame it does not enter is drawn again as a pair of numbered stubs.
    ``first``: the first round's picture (nothing cut or heavy), where it was drawn already."""
    d = d.expand(unroll={}, limit=MAX_EXPANDED) if expand else d  # stacks of known size drawn as their layers

    def draw(cut: set[tuple[str, str]], heavy: set[tuple[str, str]]) -> str:
        if first is not None and not cut and not heavy:
            return first
        return _drawn(d, marks, cut, heavy)

    return untangled(draw)


def _drawn(d: Diagram, marks: Marks | None, cut: set[tuple[str, str]], heavy: set[tuple[str, str]],
           keep: dict | None = None) -> str:
    """One round of ``to_svg``: the picture with the edges ``cut`` drawn as stubs and ``heavy``
    (its DOT source put in ``keep``, with the marks, where given)."""
    graphs = stacked_rows(d, cut, heavy)
    if graphs:
        return _stack(graphs)
    quiet = marks is not None and bool(marks.before)  # a hinted layout dot fails on is not taken: no warning
    source = to_graphviz(d, cuts=Cuts(cut, heavy=heavy), marks=marks).source
    if keep is not None:
        keep[SOURCE] = (marks, source)
    return laid_out(source, "placed" if quiet else "dot", quiet=quiet)[0]  # a step's: kept to be stacked


def untangled(draw, keep=lambda edge: True) -> str:
    """``draw(cut, heavy)``'s SVG once no edge it accepts (``keep``) crosses a frame. An edge
    that crosses one is first made heavy (``HEAVY``: dot draws it short and straight, clear of
    the frames, in most cases); one that still crosses joins ``cut`` and is drawn as stubs. A
    stub's own short edge may cross a frame too, so a few rounds settle it. In a crowded
    picture the heavy edges can push others through frames round after round (RetentionChunkwise):
    then every crossing edge is cut at once, which settles."""
    svg, left = _settle(draw, keep, weigh=True)
    if left:
        again, still = _settle(draw, keep, weigh=False)
        if len(still) < len(left):
            return again
    return svg


def _settle(draw, keep, weigh: bool) -> tuple[str, set[tuple[str, str]]]:
    """The last SVG of the rounds and the edges that still cross in it."""
    cut: set[tuple[str, str]] = set()
    heavy: set[tuple[str, str]] = set()
    for _ in range(ROUNDS):
        svg = draw(cut, heavy)
        bad = {e for e in crossings(svg) - cut if keep(e)}
        if not bad:
            break
        fresh = bad - heavy if weigh else set()
        heavy |= fresh
        cut |= bad - fresh
    return svg, bad


def render(d: Diagram, out: str | Path, expand: bool = False) -> Path:
    """Write the picture; the format follows the extension (.svg, .png, .pdf, .dot). In SVG a
    long stack of layers is drawn row by row (``stacked_rows``); the other formats are one
    Graphviz graph, its rows held apart by unconstrained edges."""
    if Path(out).suffix.lower() == ".svg":
        return write_text(to_svg(d, expand), out)
    return write(to_graphviz(d, expand), out)
