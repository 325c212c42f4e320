"""Our DOT writer (render/dotsource.py) against the ``graphviz`` package it replaced, which stays a
test dependency as the reference: the same IDs quoted the same way, and the same text for every
picture the drawing code builds (the package's ``Digraph`` put in place of ours)."""
from __future__ import annotations

import html
import warnings
from pathlib import Path

import graphviz
import pytest
from graphviz.quoting import quote as their_quote
from graphviz.quoting import quote_edge as their_edge
from hypothesis import given, settings
from hypothesis import strategies as st

import stringdiag
from stringdiag.derive.derivation import load_derivation
from stringdiag.render import draw, tree
from stringdiag.render.dotsource import Dot, endpoint, escape, quote
from stringdiag.render.draw import Cuts, Marks, stacked_rows, strip, to_graphviz
from stringdiag.render.tree import TreeEdge, TreeNode

ROOT = Path(__file__).resolve().parents[1]
GALLERY = ROOT / "gallery"

# text that meets every rule of the grammar: names, numerals, keywords, HTML, quotes, backslashes, colons
PIECES = st.sampled_from(["a", "Z", "_", "0", "9", ".", "-", " ", '"', "\\", "<", ">", ":", "é", "Σ", "\n",
                          "node", "Graph", "STRICT", "[", "]", "&#91;", "=", ";", "{", "}"])
TEXT = st.lists(PIECES, max_size=8).map("".join) | st.text(max_size=12)


@settings(max_examples=600, deadline=None)
@given(TEXT)
def test_an_id_is_quoted_as_the_package_quotes_it(text):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the package warns of a final odd backslash (and quotes it the same)
        assert quote(text) == their_quote(text)
        assert endpoint(text) == their_edge(text)


@settings(max_examples=300, deadline=None)
@given(TEXT | st.text(alphabet="&<>\"'a;#x", max_size=12))
def test_label_text_is_escaped_as_html_escape_does(text):
    assert escape(text) == html.escape(text)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(["node", "edge", "attr", "sub"]), TEXT, TEXT,
                          st.dictionaries(st.sampled_from(["label", "color", "class", "x y", "shape"]),
                                          TEXT | st.none(), max_size=3)), max_size=8))
def test_any_sequence_of_calls_writes_the_packages_text(calls):
    ours, theirs = Dot(name="g"), graphviz.Digraph(name="g")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for g in (ours, theirs):
            for kind, a, b, attrs in calls:
                if kind == "node":
                    g.node(a, **attrs)
                elif kind == "edge":
                    g.edge(a, b, **attrs)
                elif kind == "attr":
                    g.attr(**attrs)
                    g.attr("node", **{k: v for k, v in attrs.items() if k != "label"})
                else:
                    with g.subgraph(name=a or None) as sub:
                        sub.attr(label=b)
                        sub.node(b, **attrs)
    assert ours.source == theirs.source


def reference(monkeypatch):
    """The drawing code with the package's graph in place of ours."""
    monkeypatch.setattr(draw, "Dot", graphviz.Digraph)
    monkeypatch.setattr(tree, "Dot", graphviz.Digraph)


def both(monkeypatch, build):
    """``build()``'s DOT text from our writer and from the package's."""
    ours = build()
    with monkeypatch.context() as m:
        reference(m)
        theirs = build()
    return ours, theirs


def pictures(d):
    """Every graph drawing ``d`` builds: plain, expanded, wrapped in rows, with a derivation
    step's marks (the untouched boxes' places, a strict ordering) and with stubs cut."""
    boxes = sorted(d.boxes())
    before = {b: (float(k % 3) * 50, float(k) * 20) for k, b in enumerate(boxes)}
    marks = Marks(frozenset(boxes[:2]), frozenset(boxes[-1:]), before)
    cut = {(f"{a}", f"{b}") for a, b in zip(boxes, boxes[1:3])}
    yield to_graphviz(d)
    yield to_graphviz(d, marks=marks)
    yield to_graphviz(d, marks=Marks(marks.matched, marks.added, before, strict="0.01"))
    yield to_graphviz(d, cuts=Cuts(cut, heavy=set(list(cut)[:1])))
    yield from stacked_rows(d, cut) or ()


def test_a_gallery_file_and_a_derivation_write_the_packages_text(monkeypatch):
    prog = stringdiag.load(str(GALLERY / "attention.diag"))
    deriv = load_derivation(str(GALLERY / "linearize.deriv"))
    members = [TreeNode(f"m{k}", f"member {k}", s.diagram, frozenset(sorted(s.diagram.boxes())[:1]))
               for k, s in enumerate(deriv.steps[:3])]

    def build():
        graphs = [g for name in prog.diagrams for g in pictures(prog[name])]
        graphs += [to_graphviz(prog["SelfAttention"], expand=True), strip(deriv.frames())]
        graphs.append(tree.tree(members, [TreeEdge("m0", "m1", "specialise"), TreeEdge("m1", "m2", "apply")]))
        return [g.source for g in graphs]

    ours, theirs = both(monkeypatch, build)
    assert len(ours) == len(theirs) > 10 and ours == theirs


@pytest.mark.slow
def test_every_gallery_diagram_and_derivation_step_writes_the_packages_text(monkeypatch):
    programs = [stringdiag.load(str(f)) for f in sorted(GALLERY.glob("*.diag"))]
    steps = [s.diagram for f in sorted(GALLERY.glob("*.deriv")) for s in load_derivation(str(f)).steps]

    def build():
        out = []
        for prog in programs:
            for name in prog.diagrams:
                out += [g.source for g in pictures(prog[name])] + [to_graphviz(prog[name], expand=True).source]
        return out + [g.source for d in steps for g in pictures(d)]

    ours, theirs = both(monkeypatch, build)
    assert len(ours) == len(theirs) > 500
    wrong = [k for k, (a, b) in enumerate(zip(ours, theirs)) if a != b]
    assert not wrong, (len(wrong), ours[wrong[0]][:2000], theirs[wrong[0]][:2000])


@pytest.mark.parametrize("suffix", ["svg", "png", "tex"])
def test_a_missing_dot_is_one_line_saying_how_to_install_it(tmp_path, suffix):
    import subprocess
    import sys

    out = tmp_path / f"a.{suffix}"
    r = subprocess.run([sys.executable, "-m", "stringdiag.cli.main", "render", str(GALLERY / "attention.diag"),
                        "-d", "SelfAttention", "-o", str(out)], cwd=ROOT, capture_output=True, text=True,
                       env={"PATH": str(tmp_path), "XDG_CACHE_HOME": str(tmp_path)})
    assert (r.returncode, r.stderr) == (1, "error: Graphviz's 'dot' is not installed: apt-get install -y graphviz "
                                           "(or your platform's graphviz package)\n") and not out.exists()
