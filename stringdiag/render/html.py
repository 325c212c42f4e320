"""Interactive views: one self-contained HTML page (``render/derive/taxonomy -o X.html``,
``enumerate --grid X.html``) or a notebook cell, with no network.

A view is the pictures ``draw.py`` draws, inlined as SVG and annotated from the graph: every
box and wire carries what it is (``data-info``: a wire's name, type and the kind of each
index; a box's operation, kind, SIMD indices and types), shown under the picture on hover; a
definition used as a box can be clicked open (the picture of the diagram expanded) and its
frame clicked shut. Pictures are panes shown one at a time: a diagram collapsed or expanded, a
derivation's steps on a slider beside its cost table (each step's boxes changed from the step
before, and those the next step rewrites, outlined), or the members of a family opened one at
a time. A small hand-written script (``assets/view.js``) pans, zooms and switches panes.
"""
from __future__ import annotations

import html
import xml.etree.ElementTree as ET
from dataclasses import dataclass
from importlib.resources import files

from ..graph.box import Kind
from ..graph.budget import MAX_EXPANDED, Build, boxes
from ..graph.diagram import Diagram
from ..graph.diff import changed_boxes
from ..graph.types import show_type
from .draw import MAX_DRAWN, FIXED_COLOUR, SEQ_COLOUR, _dim_colour, _ends, chain_pictures, to_svg

SVG_NS, XLINK_NS = "http://www.w3.org/2000/svg", "http://www.w3.org/1999/xlink"
S = "{%s}" % SVG_NS
DEF_FRAME = "#777777"  # the stroke draw.py gives an opened definition's frame
KIND = {SEQ_COLOUR: "seq", FIXED_COLOUR: "fixed"}
ET.register_namespace("", SVG_NS)
ET.register_namespace("xlink", XLINK_NS)


def asset(name: str) -> str:
    return (files(__package__) / "assets" / name).read_text(encoding="utf-8")


@dataclass(frozen=True)
class Pane:
    """One picture of a view: its key (what opens it), caption and annotated SVG."""

    key: str
    caption: str
    svg: str


@dataclass(frozen=True)
class Member:
    """A member of a family shown one at a time (a taxonomy's, an enumeration's)."""

    key: str
    title: str
    diagram: Diagram
    changed: frozenset[int] = frozenset()  # boxes outlined: what differs from its parent
    about: str = ""                        # a line under the picture's caption


# -- annotating a picture from its graph -----------------------------------------------------

def wire_info(d: Diagram, w: int) -> str:
    """``q [s, k]: s seq, k fixed``: a wire's name, type and the kind of each index."""
    a = d.wire(w)
    name = a.name
    head = f"{name} " if name and not name.startswith("_") else ""
    kinds = ", ".join(f"{dim} {KIND.get(_dim_colour(dim, d), 'other')}" for dim in a.type)
    return f"wire {head}{show_type(a.type)}" + (f": {kinds}" if kinds else "")


def box_info(d: Diagram, b: int) -> str:
    """``softmax (fixed) over i : s; [s, s] -> [s, s]``: what a box is and its types."""
    node = d.record(b)
    over = ", ".join(f"{(node.display or {}).get(lab, lab)} : {dim}" for lab, dim in node.simd)
    ins = ", ".join(show_type(d.wire_type(w)) for w, _ in d.box_inputs(b))
    outs = ", ".join(show_type(d.wire_type(w)) for w in d.box_outputs(b))
    return f"{node.op} ({node.kind})" + (f" over {over}" if over else "") + f"; {ins or '()'} -> {outs or '()'}"


def _edge_wires(d: Diagram, prefix: str) -> dict[tuple[str, str], int]:
    """Each Graphviz edge (tail, head) ``draw.py`` makes for a wire, by node names."""
    out: dict[tuple[str, str], int] = {}
    for w in d.wires():
        _producer, src, readers = _ends(d, w, prefix)
        heads = [node for node, _ in readers] + [f"{prefix}copy{w}", f"{prefix}del{w}", f"to{w}"]
        for a in (src, f"{prefix}copy{w}", f"from{w}"):  # from, to: a wire between rows (draw.stacked_rows)
            out.update(((a, b), w) for b in heads if b != a)
    return out


def _wire_of(edges: dict, tail: str, head: str) -> int | None:
    if "__" in head:        # a stub at the tail: a__b stands for the edge a -> b
        tail, head = head.split("__", 1)
    elif "__" in tail:      # a stub at the head: b__a stands for the edge a -> b
        head, tail = tail.split("__", 1)
    return edges.get((tail, head))


def annotate(svg: str, d: Diagram, prefix: str = "", changed=frozenset(), matched=frozenset()) -> str:
    """The SVG ``draw.py`` drew of ``d``, as an element for a page: boxes and wires carry
    ``data-info`` (their title too), definition boxes and frames are clickable, ``changed``
    and ``matched`` boxes are outlined; ids are dropped (a page holds many pictures)."""
    root = ET.fromstring(svg)
    edges = _edge_wires(d, prefix)
    boxes = set(d.boxes())
    for g in root.iter(S + "g"):
        g.attrib.pop("id", None)
        title = g.find(S + "title")
        kind, name = g.get("class"), title.text if title is not None and title.text else ""
        classes, info = [kind or ""], None
        if kind == "node" and name.startswith(prefix) and name[len(prefix):].isdigit() \
                and int(name[len(prefix):]) in boxes:
            b = int(name[len(prefix):])
            info = box_info(d, b)
            classes += ["sd-def"] * (d.record(b).kind is Kind.DIAGRAM)
            classes += ["sd-changed"] * (b in changed) + ["sd-matched"] * (b in matched)
            g.set("data-box", str(b))
        elif kind == "edge" and "->" in name:
            w = _wire_of(edges, *name.split("->", 1))
            info = wire_info(d, w) if w is not None else None
        elif kind == "cluster" and any(s.get("stroke") == DEF_FRAME for s in g if s.tag != S + "title"):
            classes.append("sd-def-frame")
            info = f"definition {g.findtext(S + 'text') or ''} (click to close)"
        if info is not None:
            g.set("data-info", info)
            title.text = info
        if kind:
            g.set("class", " ".join(c for c in classes if c))
    return ET.tostring(root, encoding="unicode")


# -- views -----------------------------------------------------------------------------------

def _pane(p: Pane, hidden: bool) -> str:
    return (f'<div class="sd-pane" data-key="{html.escape(p.key)}" data-caption="{html.escape(p.caption)}"'
            f'{" hidden" if hidden else ""}>{p.svg}</div>')


def view(kind: str, title: str, panes: list[Pane], side: str = "", controls: str = "") -> str:
    """A view as an HTML fragment (its style and script inside): the title and controls, the
    panes in a pan-and-zoom canvas, ``side`` beside it, the caption and hover line under it."""
    first = panes[0].key if panes else ""
    buttons = "".join(f'<button type="button" data-act="{a}" title="{t}">{s}</button>'
                      for a, s, t in (("zoom-in", "+", "zoom in"), ("zoom-out", "−", "zoom out"),
                                      ("fit", "fit", "fit the width")))
    body = "".join(_pane(p, k > 0) for k, p in enumerate(panes))
    side_html = f'<div class="sd-side">{side}</div>' if side else ""
    return (f'<div class="sd-view" data-kind="{kind}" data-first="{html.escape(first)}">'
            f"<style>{asset('view.css')}</style>"
            f'<div class="sd-head"><span class="sd-title">{html.escape(title)}</span>{buttons}{controls}</div>'
            f'<div class="sd-caption"></div>'
            f'<div class="sd-body"><div class="sd-canvas"><div class="sd-stage">{body}</div></div>{side_html}</div>'
            f'<div class="sd-hover"></div>'
            f"<script>{asset('view.js')}</script></div>")


def page(title: str, fragment: str) -> str:
    """A whole HTML document around one view."""
    return (f'<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8"><title>{html.escape(title)}</title>'
            f'<meta name="generator" content="stringdiag"></head>\n<body>\n{fragment}\n</body></html>\n')


def diagram_view(d: Diagram) -> str:
    """A diagram; when it uses definitions, also expanded (click a definition to open it,
    its frame to close it). An expansion over the most a picture is laid out with (a stack's
    count, definitions nested many times over) is left out, and the page says so: the
    diagram as written is still drawn."""
    panes = [Pane("collapsed", d.signature(), annotate(to_svg(d), d))]
    controls = ""
    if any(d.record(b).kind is Kind.DIAGRAM for b in d.boxes()):
        n = boxes(d, Build.EXPANDED, {})
        if n > MAX_DRAWN:
            controls = (f'<span class="sd-note">no expanded view: it would make about {n:,} boxes, over '
                        f'{MAX_DRAWN:,} (the most a picture is laid out with)</span>')
        else:
            e = d.expand(unroll={}, limit=MAX_EXPANDED)
            panes.append(Pane("expanded", f"{d.signature()} (definitions opened)", annotate(to_svg(e), e)))
            controls = ('<button type="button" data-opens="collapsed">collapsed</button>'
                        '<button type="button" data-opens="expanded">expanded</button>')
    return view("diagram", d.name, panes, controls=controls)


def derivation_view(heading: str, frames: list[tuple[str, str, Diagram]], rows: list[tuple[str, ...]],
                    changes: list | None = None) -> str:
    """A derivation's steps on a slider, its table beside (a row opens its step): on each
    step's picture the boxes its step put in, and those the next step replaces, are outlined;
    with ``changes`` the untouched boxes keep their places from one picture to the next, as
    in the SVG strip (``draw.chain_pictures``).
    ``changes`` (per step, ``derive/steps.Changes``: the DPO match replaced, the boxes put in)
    says which; without it, boxes with no counterpart across the step (``graph/diff.py``)."""
    ds = [d for _, _, d in frames]
    pictures = chain_pictures(frames, changes, highlight=False) if changes is not None else [to_svg(d) for d in ds]
    panes = []
    for k, (caption, relation, d) in enumerate(frames):
        if changes is not None:
            changed = changes[k].added if k else frozenset()
            matched = changes[k + 1].matched if k + 1 < len(changes) else frozenset()
        else:
            changed = changed_boxes(ds[k - 1], d) if k else frozenset()
            matched = changed_boxes(ds[k + 1], d) if k + 1 < len(ds) else frozenset()
        label = f"{relation} {caption}" if k else caption
        panes.append(Pane(str(k), label, annotate(pictures[k], d, changed=changed, matched=matched)))
    header, *body = rows
    head = "".join(f"<th>{html.escape(h)}</th>" for h in header)
    trs = "".join(f'<tr data-opens="{k}">' + "".join(f"<td>{html.escape(c)}</td>" for c in r) + "</tr>"
                  for k, r in enumerate(body))
    legend = ('<p class="sd-legend"><span class="sd-changed">■</span> changed by this step '
              '<span class="sd-matched">■</span> rewritten by the next</p>')
    side = f"{legend}<table><thead><tr>{head}</tr></thead><tbody>{trs}</tbody></table>"
    slider = (f'<label>step <input class="sd-slider" type="range" min="0" max="{len(frames) - 1}" '
              f'step="1" value="0"></label>')
    return view("derivation", heading, panes, side, slider)


def members_view(title: str, members: list[Member], progress=None) -> str:
    """A family, one member at a time: a list to open each (and filter), its picture with
    the boxes it changes of its parent outlined. ``progress`` wraps the drawing loop (a bar)."""
    panes = [Pane(m.key, f"{m.title}" + (f" — {m.about}" if m.about else ""),
                  annotate(to_svg(m.diagram), m.diagram, changed=m.changed))
             for m in (progress(members) if progress else members)]
    items = "".join(f'<button type="button" data-opens="{html.escape(m.key)}">{html.escape(m.title)}</button>'
                    for m in members)
    side = (f'<input class="sd-filter" type="search" placeholder="filter {len(members)} members">'
            f'<div class="sd-members">{items}</div>')
    return view("members", title, panes, side)


def taxonomy_members(nodes, edges) -> list[Member]:
    """The members of a taxonomy (``tree.py``'s nodes and edges): each with where it comes
    from and what it leads to."""
    parent = {e.child: e for e in edges}
    titles = {n.key: n.title for n in nodes}
    out = []
    for n in nodes:
        about = [f"from {titles[parent[n.key].parent]} by {parent[n.key].label}, "
                 f"{len(n.changed)} boxes changed"] if n.key in parent else ["the root"]
        children = [titles[e.child] for e in edges if e.parent == n.key]
        about += [f"leads to {', '.join(children)}"] if children else []
        out.append(Member(n.key, n.title, n.diagram, n.changed, "; ".join(about)))
    return out


__all__ = ["Pane", "Member", "annotate", "view", "page", "diagram_view", "derivation_view", "members_view",
           "taxonomy_members", "wire_info", "box_info"]
