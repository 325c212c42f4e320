"""Pictures of derivations show what each step changed, and few stubs stand in for wires.

Read off the committed gallery pictures (``tests/test_pictures.py`` fails when one is stale):
each step's picture highlights the boxes the next step replaces (class ``matched``) and the
boxes its own step put in (class ``added``), exactly those; over every step of every
derivation, the untouched boxes keep the order they had in the picture before (left and right,
and top and bottom within a column), in every step; the match a rule
step records is one the matcher finds; the stub pairs over the gallery are at most half of what
they were.
"""
from __future__ import annotations

import re
import shlex
import subprocess
import xml.etree.ElementTree as ET
from pathlib import Path

import networkx as nx
import pytest

from stringdiag.derive.derivation import load_derivation, standard_library
from stringdiag.render.crossings import crossings
from stringdiag.render.draw import stubs
from stringdiag.rewrite.match import find_matches

ROOT = Path(__file__).resolve().parent.parent
GALLERY = ROOT / "gallery"
SVG = "{http://www.w3.org/2000/svg}"
EPS = 1.0  # points: one column of Graphviz's layout has one x


def derivation_pictures() -> list[tuple[Path, Path]]:
    """(derivation, its chain picture), as gallery/PICTURES makes them."""
    out = []
    for line in (GALLERY / "PICTURES").read_text().splitlines():
        args = shlex.split(line) if line.strip() and not line.startswith("#") else []
        if args[:1] == ["derive"] and args[-1].endswith(".svg"):
            out.append((ROOT / args[1], ROOT / args[-1]))
    return out


def drawings(svg: str) -> list[tuple[bool, dict[str, tuple[tuple[float, float], set[str]]]]]:
    """Each step's drawing in the chain: whether it was laid out with the order of the picture
    before (class ``ordered``), and node name -> (centre, classes)."""
    out = []
    for e in ET.fromstring(svg).iter(SVG + "svg"):
        graph = e.find(SVG + "g")
        if graph is None or "graph" not in (graph.get("class") or "").split():
            continue
        nodes = {}
        for g in graph.iter(SVG + "g"):
            classes = set((g.get("class") or "").split())
            if "node" not in classes:
                continue
            nums = [float(n) for n in re.findall(r"-?\d+(?:\.\d+)?", " ".join(
                s.get("points") or s.get("d") or f"{s.get('cx')},{s.get('cy')}" for s in g
                if s.tag in (SVG + "polygon", SVG + "path", SVG + "ellipse", SVG + "text")
                and s.tag != SVG + "text"))]
            if not nums:  # a plaintext node (a constant, a stub): its text's anchor
                t = g.find(SVG + "text")
                nums = [float(t.get("x")), float(t.get("y"))]
            xs, ys = nums[0::2], nums[1::2]
            nodes[g.findtext(SVG + "title")] = (((min(xs) + max(xs)) / 2, (min(ys) + max(ys)) / 2), classes)
        out.append(("ordered" in graph.get("class").split(), nodes))
    return out


@pytest.fixture(scope="module")
def chains():
    return [(deriv.name, load_derivation(str(deriv)).steps, drawings(pic.read_text()))
            for deriv, pic in derivation_pictures()]


def test_every_derivation_of_the_gallery_is_drawn(chains):
    assert len(chains) >= 20
    for name, steps, drawn in chains:
        assert len(drawn) == len(steps), name


def test_each_picture_highlights_exactly_the_next_match_and_the_replacement(chains):
    highlighted = 0
    for name, steps, drawn in chains:
        for k, (_, nodes) in enumerate(drawn):
            matched = {n for n, (_, c) in nodes.items() if "matched" in c}
            added = {n for n, (_, c) in nodes.items() if "added" in c}
            want_matched = {str(b) for b in steps[k + 1].changes.matched} if k + 1 < len(steps) else set()
            want_added = {str(b) for b in steps[k].changes.added} if k else set()
            assert matched == want_matched, f"{name} step {k}: highlighted {matched}, replaced next {want_matched}"
            assert added == want_added, f"{name} step {k}: highlighted {added}, put in {want_added}"
            assert all(int(n) in steps[k].diagram.boxes() for n in matched | added)
            highlighted += len(matched) + len(added)
    assert highlighted > 100  # the pictures do highlight


def out_of_order(steps, drawn) -> dict[int, list[str]]:
    """For each step, the pairs of its untouched boxes drawn out of the order they had in the
    picture before: left and right swapped, or, in one column in both pictures, top and bottom.
    A pair that a path of wires in the new diagram now runs the other way is left out (left to
    right, a wire decides: the rewrite turned that pair round)."""
    out: dict[int, list[str]] = {}
    for k in range(1, len(steps)):
        before, after = drawn[k - 1][1], drawn[k][1]
        kept = {a: b for a, b in steps[k].changes.kept.items() if str(a) in before and str(b) in after}
        reach = {b: nx.descendants(steps[k].diagram.graph, b) for b in kept.values()}
        for a in kept:
            for c in kept:
                (x0, y0), (x1, y1) = before[str(a)][0], before[str(c)][0]
                (u0, v0), (u1, v1) = after[str(kept[a])][0], after[str(kept[c])][0]
                if x1 - x0 > EPS and u0 - u1 > EPS and kept[a] not in reach[kept[c]]:
                    out.setdefault(k, []).append(f"{a}, {c} swap left and right")
                if a < c and abs(x1 - x0) <= EPS and abs(u1 - u0) <= EPS and (y1 - y0) * (v1 - v0) < 0 \
                        and min(abs(y1 - y0), abs(v1 - v0)) > EPS:
                    out.setdefault(k, []).append(f"{a}, {c} swap top and bottom")
    return out


def test_untouched_boxes_keep_their_order_between_consecutive_pictures(chains):
    steps_ = pairs = 0
    wrong: dict[tuple[str, int], list[str]] = {}
    for name, steps, drawn in chains:
        for k in range(1, len(steps)):
            n = sum(1 for a in steps[k].changes.kept if str(a) in drawn[k - 1][1])
            steps_ += n > 1
            pairs += n * (n - 1) // 2
        wrong.update(((name, k), v) for k, v in out_of_order(steps, drawn).items())
    assert steps_ > 140 and pairs > 14000  # what is compared: every step of every derivation
    report = "\n".join(f"{name} step {k}: {len(v)} pairs, {v[0]}" for (name, k), v in sorted(wrong.items()))
    # every step: where dot's layouts (hinted, strict, repaired) still turn boxes round, a step is
    # stacked by render/stacked.py in the order before and its wires routed by render/route.py
    assert not wrong, report


def test_a_rule_steps_recorded_match_is_a_match_the_rule_finds(chains):
    # an independent reference: the matcher run again on the diagram before the step
    rules = standard_library()
    checked = 0
    for name, steps, _ in chains:
        for k in range(1, len(steps)):
            m = re.fullmatch(r"apply (\w+)( reversed)?", steps[k].text)
            if not m or m.group(1) not in rules:
                continue
            found = [set(x.boxes.values()) for x in find_matches(steps[k - 1].diagram, rules[m.group(1)],
                                                                 bool(m.group(2)), ties=True)]
            assert set(steps[k].changes.matched) in found, f"{name} step {k}"
            checked += 1
    assert checked >= 5


# Stub pairs (`→ (n)` … `(n) →`) over every gallery picture before this work, measured at commit
# 62229a0 with: for f in gallery/*.svg; do grep -oE '→ \([0-9]+\)' "$f"; done | wc -l
STUBS_BEFORE = 72


def test_stub_pairs_over_the_gallery_are_at_most_half_of_before():
    # every svg in gallery/ is made by a line of gallery/PICTURES (tests/test_pictures.py: no orphans)
    pictures = sorted(GALLERY.glob("*.svg"))
    assert len(pictures) >= 100
    tails = sum(len(re.findall(r"→ \(\d+\)", p.read_text())) for p in pictures)
    heads = sum(len(re.findall(r"\(\d+\) →", p.read_text())) for p in pictures)
    assert heads >= tails  # each pair has its head stub (a tail may feed several)
    assert tails <= STUBS_BEFORE // 2, tails


# -- a step stacked by us (render/stacked.py) ------------------------------------------------------
# boxes are named by number, as a diagram's are: 1, 2 in frame A, 3 in B, 4, 5 in C

TWO_FRAMES = """digraph G { rankdir=LR;
  subgraph cluster_a { label="A"; 1 [shape=box]; 2 [shape=box]; 1 -> 2 }
  subgraph cluster_b { label="B"; 3 [shape=box] }
  x -> 1; x -> 3; 2 -> y; 3 -> y }"""
THREE_FRAMES = """digraph G { rankdir=LR;
  subgraph cluster_a { label="A"; 1 [shape=box]; 2 [shape=box]; 1 -> 2 }
  subgraph cluster_b { label="B"; 3 [shape=box] }
  subgraph cluster_c { label="C"; 4 [shape=box]; 5 [shape=box]; 4 -> 5 }
  x -> 1; x -> 3; x -> 4; 2 -> y; 3 -> y; 5 -> y }"""
FRAME_OF = {"1": "cluster_a", "2": "cluster_a", "3": "cluster_b", "4": "cluster_c", "5": "cluster_c"}


def _boxes(svg: str, cls: str) -> dict[str, tuple[float, float, float, float]]:
    """Title -> (x0, x1, y0, y1) of each node or cluster of an SVG, read here apart from the renderer."""
    out = {}
    for g in ET.fromstring(svg).iter(SVG + "g"):
        shape = next((s for s in g if s.tag in (SVG + "polygon", SVG + "ellipse")), None)
        if (g.get("class") or "").split()[:1] != [cls] or shape is None:
            continue
        if shape.tag == SVG + "ellipse":
            cx, cy, rx, ry = (float(shape.get(k)) for k in ("cx", "cy", "rx", "ry"))
            out[g.findtext(SVG + "title")] = (cx - rx, cx + rx, cy - ry, cy + ry)
            continue
        nums = [float(n) for n in re.findall(r"-?\d+(?:\.\d+)?", shape.get("points"))]
        out[g.findtext(SVG + "title")] = (min(nums[0::2]), max(nums[0::2]), min(nums[1::2]), max(nums[1::2]))
    return out


def _centres(svg: str) -> dict[str, tuple[float, float]]:
    return {n: ((x0 + x1) / 2, (y0 + y1) / 2) for n, (x0, x1, y0, y1) in _boxes(svg, "node").items()}


def _turned(now, before) -> int:
    """Pairs of one column top and bottom the other way round from ``before``."""
    return sum(1 for a in before for b in before if before[a][1] < before[b][1] and now[str(a)][1] > now[str(b)][1])


def _stacked_in_order(source: str, column: list[str], want: list[str]) -> str:
    """Stack ``source`` with ``column`` (dot's order, top to bottom) wanted in the order ``want``."""
    from stringdiag.render.stacked import stacked

    first = _centres(subprocess.run(["dot", "-Tsvg"], input=source, capture_output=True, text=True, check=True).stdout)
    assert len({first[n][0] for n in column}) == 1  # one column
    ys = sorted(first[n][1] for n in column)
    before = {int(n): (first[n][0], ys[k]) for k, n in enumerate(want)}
    assert _turned(first, before) > 0  # dot's own order is not the one wanted
    svg = stacked(source, before)
    assert _turned(_centres(svg), before) == 0
    assert sorted(want, key=lambda n: _centres(svg)[n][1]) == want
    frames_ = _boxes(svg, "cluster")
    for n, (x0, x1, y0, y1) in _boxes(svg, "node").items():  # every box inside its own frame only, none on another
        inside = [name for name, f in frames_.items() if f[0] <= x0 and x1 <= f[1] and f[2] <= y0 and y1 <= f[3]]
        assert inside == ([FRAME_OF[n]] if n in FRAME_OF else []), n
        for m, other in _boxes(svg, "node").items():
            assert m == n or not (x0 < other[1] and other[0] < x1 and y0 < other[3] and other[2] < y1)
    for f, g in ((f, g) for f in frames_.values() for g in frames_.values() if f != g):
        assert not (f[0] < g[1] and g[0] < f[1] and f[2] < g[3] and g[2] < f[3])
    assert len(re.findall(r'class="edge"', svg)) == source.count("->")  # every wire drawn
    assert stubs(svg) == 0 and not crossings(svg)
    assert "stacked" in re.search(r'<g id="graph0" class="([^"]*)"', svg).group(1)
    return svg


def test_stacking_puts_two_frames_of_one_column_in_the_order_before():
    centre = _centres(subprocess.run(["dot", "-Tsvg"], input=TWO_FRAMES, capture_output=True, text=True,
                                     check=True).stdout)
    column = sorted(["2", "3"], key=lambda n: centre[n][1])
    _stacked_in_order(TWO_FRAMES, column, column[::-1])


def test_stacking_lifts_a_frame_over_two_others_to_the_order_before():
    # three frames in one column, the order before a rotation of dot's: the bottom frame goes on top
    centre = _centres(subprocess.run(["dot", "-Tsvg"], input=THREE_FRAMES, capture_output=True, text=True,
                                     check=True).stdout)
    column = sorted(["2", "3", "5"], key=lambda n: centre[n][1])
    _stacked_in_order(THREE_FRAMES, column, [column[-1], *column[:-1]])


def test_the_interactive_pages_steps_keep_the_order_too():
    # derive -o X.html draws its panes as the strip does (draw.chain_pictures, no colours)
    from stringdiag.render.html import derivation_view

    d = load_derivation(str(GALLERY / "tax_performer.deriv"))  # dot's free layouts turn boxes in 2 steps
    page = derivation_view(d.heading(), d.frames(), d.text_rows(), [s.changes for s in d.steps])
    panes = [ET.fromstring(p) for p in re.findall(r"<svg\b.*?</svg>", page, flags=re.S)]
    for g in (g for p in panes for g in p.iter(SVG + "g") if g.get("data-box")):
        g.find(SVG + "title").text = g.get("data-box")  # the page's titles are the hover texts
    drawn = [drawings(ET.tostring(p, encoding="unicode"))[0] for p in panes]
    assert len(drawn) == len(d.steps)
    assert not out_of_order(d.steps, drawn)
    assert not any("matched" in c or "added" in c for _, nodes in drawn for _, c in nodes.values())
