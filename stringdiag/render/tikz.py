"""TikZ pictures of diagrams and derivations (``render/derive/taxonomy -o X.tex``), for papers.

The layout is Graphviz's, the one ``draw.py`` already computes for every other format: its
JSON output gives each node's centre and size, each frame's box and each edge's Bézier
curve, which are written as TikZ paths in big points (``x=1bp``). The look is not written
into the picture but named: every node, frame and wire has an ``sd ...`` style (``sd learn``
for a learnable box, ``sd simd`` for a SIMD frame, ``sd seq``/``sd fixed`` colours for
indices ...), all defined in one preamble (:func:`styles`), so a paper restyles every
picture by redefining a style after loading them (``\\tikzset{sd learn/.style={fill=black}}``).

A file is a standalone document (styles inline, one page per picture) or, with ``body``,
only the pictures, to ``\\input`` in a paper that loads ``stringdiag.sty`` (:func:`package`).
"""
from __future__ import annotations

import html
import json
import re
import unicodedata

from ..graph.diagram import Diagram
from .dotsource import Dot
from .draw import (ABSTRACT_FILL, FIXED_COLOUR, LEARN_FILL, OTHER_COLOUR, RANDOM_FILL, SEQ_COLOUR,
                   to_graphviz)

COLOURS = {"sdseq": SEQ_COLOUR, "sdfixed": FIXED_COLOUR, "sdother": OTHER_COLOUR, "sdlearn": LEARN_FILL,
           "sdabstract": ABSTRACT_FILL, "sdrandom": RANDOM_FILL}
BY_HEX = {v.lower(): k for k, v in COLOURS.items()}
PLAIN = {"#2c3e50", "#b7791f", "#566573", "#333333", "#555555", "#777777", "#bbbbbb", "black"}  # styles' own

STYLES = r"""
\tikzset{
  sd picture/.style={x=1bp, y=1bp, font=\sffamily\small, line cap=round},
  sd node/.style={inner sep=1.5pt, outer sep=0pt},
  sd box/.style={sd node, draw, rounded corners=3pt, thin},
  sd learn/.style={sd box, fill=sdlearn, draw=sdlearn!60!black, text=white},
  sd fixed/.style={sd box},
  sd abstract/.style={sd box, fill=sdabstract, draw=sdabstract!60!black, very thick},
  sd random/.style={sd box, fill=sdrandom, dashed},
  sd definition/.style={sd box, thick, double, double distance=1pt},
  sd repeat/.style={sd box, very thick, double, double distance=1.5pt},
  sd sum/.style={sd node, circle, fill=black, text=white, inner sep=0.5pt},
  sd text/.style={sd node},
  sd dot/.style={circle, fill=black, inner sep=0pt},
  sd marked/.style={very thick, dashed},
  sd simd/.style={draw=sdother, dashed},
  sd scan/.style={sd simd, very thick},
  sd opened/.style={draw=black!55, rounded corners=6pt},
  sd member/.style={draw=black!25, rounded corners=6pt},
  sd wire/.style={draw=black, thin},
  sd arrow/.style={-stealth},
  sd derives/.style={draw=black!40, very thick},
  sd title/.style={font=\sffamily\small},
  sd caption/.style={font=\sffamily\bfseries, anchor=south west},
  sd relation/.style={font=\Large, anchor=west},
}
"""


# Labels of wires and frames are the most numerous texts: placed by \pgftext, not as TikZ nodes
# (a node costs pdflatex several times more); their fonts are macros a paper may redefine.
LABELS = r"""\providecommand\sdchar[1]{\texttt{[#1]}}% a character LaTeX has no glyph for
\providecommand\sdwirelabelfont{\sffamily\scriptsize}
\providecommand\sdframelabelfont{\sffamily\scriptsize}
\providecommand\sdwirelabel[3]{\pgftext[at=\pgfpointxy{#1}{#2}]{\sdwirelabelfont #3}}
\providecommand\sdframelabel[3]{\pgftext[at=\pgfpointxy{#1}{#2}]{\sdframelabelfont #3}}
"""


def styles() -> str:
    """The colours, styles and label macros every picture names (what a paper restyles)."""
    colours = "".join(f"\\definecolor{{{n}}}{{HTML}}{{{h.lstrip('#').upper()}}}\n" for n, h in COLOURS.items())
    return colours + LABELS + STYLES


def package() -> str:
    """``stringdiag.sty``: the styles, for a paper that ``\\input``\\ s the pictures alone."""
    return ("\\NeedsTeXFormat{LaTeX2e}\n\\ProvidesPackage{stringdiag}[stringdiag's TikZ styles]\n"
            "\\RequirePackage{tikz}\n" + styles())


# One page per picture, cropped to it (what the ``standalone`` class does, which is not in
# texlive-latex-base): each picture is boxed, the page sized to the box, the box shipped out.
PAGES = r"""\newsavebox\sdbox
\newlength\sdborder \setlength\sdborder{4bp}
\newenvironment{sdpage}{\begin{lrbox}{\sdbox}}{\end{lrbox}%
  \pdfpagewidth=\dimexpr\wd\sdbox+2\sdborder\relax \pdfpageheight=\dimexpr\ht\sdbox+\dp\sdbox+2\sdborder\relax
  \hoffset=-1in \voffset=-1in
  \shipout\vbox{\kern\sdborder\hbox{\kern\sdborder\usebox\sdbox}}}
"""


def document(pictures: list[str]) -> str:
    """A document of its own, the styles inline, one page per picture cropped to it."""
    pages = "".join(f"\\begin{{sdpage}}\n{p}\\end{{sdpage}}\n" for p in pictures)
    return ("\\documentclass{article}\n\\usepackage[utf8]{inputenc}\n\\usepackage{tikz}\n" + styles() + PAGES
            + "\\begin{document}\n" + pages + "\\end{document}\n")


def body(pictures: list[str]) -> str:
    """The pictures alone, for ``\\input`` after ``\\usepackage{stringdiag}``."""
    return "% TikZ by stringdiag; needs \\usepackage{stringdiag} (stringdiag.sty)\n" + "\n".join(pictures)


# -- text ------------------------------------------------------------------------------------

SYMBOLS = {"Σ": r"$\Sigma$", "∑": r"$\Sigma$", "⤨": r"$\leftrightarrow$", "×": r"$\times$", "→": r"$\to$",
           "≡": r"$\equiv$", "⇒": r"$\Rightarrow$", "⇔": r"$\Leftrightarrow$", "≠": r"$\neq$", "∘": r"$\circ$",
           "·": r"$\cdot$", "√": r"$\surd$", "✓": r"$\surd$", "−": "-", "–": "--", "—": "---", "…": r"\dots{}",
           "′": "'", "≈": r"$\approx$", "≤": r"$\leq$", "≥": r"$\geq$", "⊙": r"$\odot$", "⊗": r"$\otimes$"}
ESCAPES = {"\\": r"\textbackslash{}", "{": r"\{", "}": r"\}", "_": r"\_", "^": r"\^{}", "&": r"\&", "%": r"\%",
           "$": r"\$", "#": r"\#", "~": r"\textasciitilde{}", "<": r"$<$", ">": r"$>$", "|": r"$|$"}


def _char(c: str) -> str:
    if c in ESCAPES:
        return ESCAPES[c]
    if c.isascii():
        return c
    if c in SYMBOLS:
        return SYMBOLS[c]
    name = unicodedata.name(c, "")
    if name.startswith("GREEK ") and " LETTER " in name:  # α -> $\alpha$, Δ -> $\Delta$
        word = name.rsplit(" ", 1)[1].lower()
        return f"$\\{word.capitalize() if 'CAPITAL' in name else word}$"
    return f"\\sdchar{{U+{ord(c):04X}}}"


def latex(text: str) -> str:
    """Plain text as LaTeX (escaped; symbols in math mode)."""
    return "".join(_char(c) for c in text)


def label(text: str) -> str:
    """A Graphviz label as LaTeX: an HTML-like one's coloured indices (``<font color>``) become
    ``\\textcolor`` in the named index colours, its smaller type ``\\scriptsize``."""
    if "<font" not in text and "<sub" not in text and "&#" not in text:
        return latex(text)
    out = []
    closers: list[str] = []
    for token in re.split(r"(<[^<>]*>)", text):
        tag = re.fullmatch(r"<(/?)(\w+)([^>]*)>", token)
        if not tag:
            out.append(latex(html.unescape(token)))
        elif tag.group(1):
            out.append(closers.pop() if closers else "")
        elif tag.group(2) == "font" and (c := re.search(r'color="([^"]+)"', tag.group(3))):
            out.append(f"\\textcolor{{{_colour(c.group(1))}}}{{")
            closers.append("}")
        elif tag.group(2) == "sub":
            out.append("\\textsubscript{")
            closers.append("}")
        elif tag.group(2) == "br":
            out.append("\\\\")
        else:  # <font point-size>: a size, kept as a group
            out.append("{\\scriptsize ")
            closers.append("}")
    return "".join(out) + "".join(reversed(closers))


def _colour(value: str) -> str:
    name = BY_HEX.get(value.lower())
    if name:
        return name
    if value.startswith("#") and len(value) == 7:
        r, g, b = (int(value[k:k + 2], 16) for k in (1, 3, 5))
        return f"{{rgb,255:red,{r};green,{g};blue,{b}}}"
    return value


# -- a Graphviz layout as TikZ ---------------------------------------------------------------

def layout(g: Dot) -> dict:
    """Graphviz's layout of ``g`` (its JSON output)."""
    return json.loads(g.pipe(format="json"))


def _num(x: float) -> str:
    return f"{x:.2f}".rstrip("0").rstrip(".")


def _pt(x: float, y: float, dy: float = 0.0) -> str:
    return f"({_num(x)},{_num(y + dy)})"


def _node_style(o: dict) -> list[str]:
    shape, style = o.get("shape", "ellipse"), o.get("style", "")
    fill, peri = (o.get("fillcolor") or "").lower(), o.get("peripheries")
    if shape == "point":
        return ["sd dot"]
    if shape == "plaintext":
        return ["sd text"]
    kind = {"circle": "sd sum"}.get(shape) or {LEARN_FILL.lower(): "sd learn", ABSTRACT_FILL.lower(): "sd abstract",
                                                RANDOM_FILL.lower(): "sd random"}.get(fill)
    kind = kind or {"3": "sd repeat", "2": "sd definition"}.get(peri, "sd fixed")
    out = [kind]
    colour = (o.get("color") or "").lower()
    if colour and colour not in PLAIN:  # a mark of the caller's (a taxonomy's changed boxes)
        out += ["sd marked", f"draw={_colour(colour)}"]
    return out


def _node(o: dict, dy: float) -> str:
    x, y = (float(v) for v in o["pos"].split(","))
    text = o.get("label", "")
    text = o["name"] if text == "\\N" else text
    style = _node_style(o)
    w, h = float(o.get("width", 0.1)) * 72, float(o.get("height", 0.1)) * 72
    size = (f"minimum size={_num(w)}bp" if style == ["sd dot"]
            else f"minimum width={_num(w - 4)}bp, minimum height={_num(h - 4)}bp")
    return f"\\node[{', '.join(style)}, {size}] at {_pt(x, y, dy)} {{{label(text)}}};"


def _cluster(o: dict, dy: float) -> list[str]:
    x0, y0, x1, y1 = (float(v) for v in o["bb"].split(","))
    style = o.get("style", "")
    colour = (o.get("color") or "").lower()
    kind = ("sd scan" if "bold" in style else "sd simd") if "dashed" in style else (
        "sd opened" if colour == "#777777" else "sd member")
    out = [f"\\draw[{kind}] {_pt(x0, y0, dy)} rectangle {_pt(x1, y1, dy)};"]
    if o.get("label") and o.get("lp"):
        lx, ly = (float(v) for v in o["lp"].split(","))
        out.append(f"\\sdframelabel{{{_num(lx)}}}{{{_num(ly + dy)}}}{{{label(o['label'])}}}")
    return out


def _edge(e: dict, dy: float) -> list[str]:
    if "invis" in e.get("style", "") or "pos" not in e:
        return []
    end, points = None, []
    for item in e["pos"].split():
        if item.startswith("e,"):
            end = tuple(float(v) for v in item[2:].split(","))
        elif not item.startswith("s,"):
            points.append(tuple(float(v) for v in item.split(",")))
    path = _pt(*points[0], dy)
    for k in range(1, len(points) - 2, 3):
        (ax, ay), (bx, by), (cx, cy) = points[k:k + 3]
        path += f" .. controls {_pt(ax, ay, dy)} and {_pt(bx, by, dy)} .. {_pt(cx, cy, dy)}"
    style = ["sd derives" if (e.get("color") or "").lower() == "#999999" else "sd wire"]
    if end is not None:
        path += f" -- {_pt(*end, dy)}"
        style.append("sd arrow")
    out = [f"\\draw[{', '.join(style)}] {path};"]
    if e.get("label") and e.get("lp"):
        lx, ly = (float(v) for v in e["lp"].split(","))
        out.append(f"\\sdwirelabel{{{_num(lx)}}}{{{_num(ly + dy)}}}{{{label(e['label'])}}}")
    return out


def commands(lay: dict, dy: float = 0.0) -> list[str]:
    """A laid-out graph as TikZ commands, shifted down by ``dy``: frames first (behind), then
    wires, then boxes (over the wires' ends), then the title."""
    frames, nodes = [], []
    for o in lay.get("objects", ()):
        if "nodes" in o or "bb" in o:
            if str(o.get("name", "")).startswith("cluster"):
                frames += _cluster(o, dy)
        elif "pos" in o and "invis" not in o.get("style", ""):
            nodes.append(_node(o, dy))
    wires = [c for e in lay.get("edges", ()) for c in _edge(e, dy)]
    title = []
    if lay.get("label") and lay.get("lp"):
        lx, ly = (float(v) for v in lay["lp"].split(","))
        title.append(f"\\node[sd title] at {_pt(lx, ly, dy)} {{{label(lay['label'])}}};")
    return frames + wires + nodes + title


def picture(lines: list[str]) -> str:
    return "\\begin{tikzpicture}[sd picture]\n" + "\n".join(lines) + "\n\\end{tikzpicture}\n"


def diagram(d: Diagram, expand: bool = False) -> str:
    """A diagram as one ``tikzpicture``."""
    return picture(commands(layout(to_graphviz(d, expand))))


def graph(g: Dot) -> str:
    """Any picture ``draw.py`` or ``tree.py`` builds as one ``tikzpicture``."""
    return picture(commands(layout(g)))


def chain(frames: list[tuple[str, str, Diagram]]) -> str:
    """A derivation as one ``tikzpicture``, top to bottom as its SVG: each step's picture
    under its caption, the relation to the one before between them."""
    lines, top = [], 0.0
    for k, (caption, relation, d) in enumerate(frames):
        lay = layout(to_graphviz(d))
        _x0, _y0, _x1, height = (float(v) for v in lay["bb"].split(","))
        if k:
            lines.append(f"\\node[sd relation] at {_pt(0, top - 14)} {{{latex(relation)}}};")
            top -= 30
        lines.append(f"\\node[sd caption] at {_pt(0, top - 18)} {{{latex(caption)}}};")
        top -= 22
        lines += commands(lay, dy=top - height)
        top -= height
    return picture(lines)


__all__ = ["styles", "package", "document", "body", "diagram", "chain", "graph", "label", "latex"]
