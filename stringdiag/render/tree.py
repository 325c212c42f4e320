"""A family tree of diagrams in one picture (``stringdiag taxonomy -o``).

Each member is its diagram drawn as usual (``draw.py``), framed and captioned, as one
Graphviz cluster; a grey ``⇒`` arrow runs from each parent's frame to each child's, labelled
by the derivation; on a child the boxes it changes of its parent (computed by the caller,
``graph/diff.py``) have a dashed red border. The tree reads left to right, root first.
"""
from __future__ import annotations

from dataclasses import dataclass

from ..graph.diagram import Diagram
from .dotrun import laid_out
from .dotsource import Dot
from .draw import FONT, Cuts, _box_style, to_graphviz, untangled

CHANGED = "#d62728"
ARROW = "#999999"


@dataclass(frozen=True)
class TreeNode:
    key: str                      # a name for the member, unique in the tree
    title: str                    # its caption
    diagram: Diagram
    changed: frozenset[int] = frozenset()  # boxes drawn dashed: what differs from the parent


@dataclass(frozen=True)
class TreeEdge:
    parent: str
    child: str
    label: str  # the derivation


def tree_svg(nodes: list[TreeNode], edges: list[TreeEdge]) -> str:
    """The tree as SVG, a wire Graphviz routes through a frame it does not enter drawn as a
    pair of numbered stubs (as ``draw.to_svg`` does for one diagram)."""
    return untangled(lambda cut, heavy: laid_out(tree(nodes, edges, Cuts(cut, heavy=heavy)).source, quiet=False)[0],
                     keep=lambda e: e[0].split("_")[0] == e[1].split("_")[0])  # wires, not the ⇒ arrows


def tree(nodes: list[TreeNode], edges: list[TreeEdge], cuts: Cuts | None = None) -> Dot:
    """The members as framed clusters, joined parent to child by grey ⇒ arrows."""
    g = Dot(name="taxonomy")
    g.attr(rankdir="LR", fontname=FONT, newrank="true", compound="true", nodesep="0.3", ranksep="0.6")
    g.attr("node", fontname=FONT, fontsize="11")
    g.attr("edge", fontname=FONT, fontsize="10", arrowsize="0.5")
    anchor = {}
    for k, n in enumerate(nodes):
        prefix = f"m{k}_"
        sub = to_graphviz(n.diagram, prefix=prefix, cluster=f"cluster_{prefix}", cuts=cuts)
        caption = n.title + (f"  [{len(n.changed)} changed]" if n.changed else "")
        sub.attr(label=caption, labelloc="t", style="rounded", color="#bbbbbb", fontsize="13")
        for b in n.changed:
            style = _box_style(n.diagram.record(b))
            sub.node(f"{prefix}{b}", style=f"{style['style']},dashed".lstrip(","), color=CHANGED, penwidth="2")
        g.subgraph(sub)
        ports = ("in", n.diagram.inputs) if n.diagram.inputs else ("out", n.diagram.outputs)
        anchor[n.key] = (f"{prefix}{ports[0]}0", f"{prefix}out0" if n.diagram.outputs else f"{prefix}{ports[0]}0",
                         f"cluster_{prefix}")
    for e in edges:
        (_, tail, ltail), (head, _, lhead) = anchor[e.parent], anchor[e.child]
        g.edge(tail, head, ltail=ltail, lhead=lhead, color=ARROW, fontcolor=ARROW, penwidth="2.5",
               arrowhead="normal", arrowsize="1.2", label=f"⇒ {e.label}", fontsize="12")
    return g
