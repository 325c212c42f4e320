"""A picture's Graphviz source (DOT text), written by us rather than by the ``graphviz`` package.

Importing that package cost every drawing command about 20 ms of its start-up, only to join
strings; laying out is ``dot``'s work (``dotrun.py``). :class:`Dot` has the calls ``draw.py`` and
``tree.py`` make (``node``, ``edge``, ``attr``, ``subgraph``), and writes what the package wrote
for them, byte for byte (tests/test_dot_source.py compares the two on every gallery picture):
one statement a line, tab-indented, a subgraph's lines indented once more; an attribute list
with ``label`` first, then the others by name.

Quoting follows Graphviz's DOT grammar (https://graphviz.org/doc/info/lang.html): an ID is left
bare when it is a name (letters, digits, underscores, not starting with a digit) or a numeral,
and is not a keyword; text between ``<`` and ``>`` is an HTML string, kept as written; any other
text is double-quoted, a double quote in it written ``\\"`` (the one escape of a quoted ID).
Non-ASCII names, which the grammar allows bare, are quoted, as the package quoted them.
"""
from __future__ import annotations

import re

_BARE = re.compile(r"([a-zA-Z_][a-zA-Z0-9_]*|-?(\.[0-9]+|[0-9]+(\.[0-9]*)?))$")
_HTML = re.compile(r"<.*>$", re.DOTALL)
_KEYWORDS = frozenset({"node", "edge", "graph", "digraph", "subgraph", "strict"})  # any case
_QUOTE = re.compile(r'((?:\\\\)*)\\?"')  # a double quote (escaped already or not) after pairs of backslashes


def quote(text: str) -> str:
    """``text`` as a DOT ID: bare, an HTML string, or double-quoted."""
    if _HTML.match(text) or (_BARE.match(text) and text.lower() not in _KEYWORDS):
        return text
    return '"' + _QUOTE.sub(r'\1\\"', text) + '"'


def escape(text: str) -> str:
    """Text inside an HTML label (or an SVG element): ``&``, ``<``, ``>`` and both quotes as
    entities, as ``html.escape`` writes them (the html package brings html.entities, ~1 ms)."""
    return (text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;").replace('"', "&quot;")
            .replace("'", "&#x27;"))


def endpoint(name: str) -> str:
    """An edge's end, ``node[:port[:compass]]``, each part quoted as an ID (the compass as is)."""
    node, _, rest = name.partition(":")
    if not rest:
        return quote(node)
    port, _, compass = rest.partition(":")
    return ":".join([quote(node), quote(port)] + ([compass] if compass else []))


def _pairs(attrs: dict[str, str | None], label: str | None = None) -> str:
    """``label=… a=… b=…``: the label first, then the rest by name; a None value left out."""
    head = [f"label={quote(label)}"] if label is not None else []
    return " ".join(head + [f"{quote(k)}={quote(v)}" for k, v in sorted(attrs.items()) if v is not None])


def _listed(attrs: dict[str, str | None], label: str | None = None) -> str:
    pairs = _pairs(attrs, label)
    return f" [{pairs}]" if pairs else ""


class Dot:
    """A directed graph (or a subgraph of one: a cluster when its name starts ``cluster``)."""

    def __init__(self, name: str | None = None):
        self.name = name
        self.body: list[str] = []  # its statements, each a line ending in a newline

    def node(self, name: str, label: str | None = None, **attrs: str | None) -> None:
        self.body.append(f"\t{quote(name)}{_listed(attrs, label)}\n")

    def edge(self, tail: str, head: str, label: str | None = None, **attrs: str | None) -> None:
        self.body.append(f"\t{endpoint(tail)} -> {endpoint(head)}{_listed(attrs, label)}\n")

    def attr(self, kw: str | None = None, **attrs: str | None) -> None:
        """Attributes of the graph (``kw`` None), or the defaults of its ``node``s or ``edge``s."""
        if kw is not None and kw.lower() not in ("graph", "node", "edge"):
            raise ValueError(f"attributes are of a graph, node or edge, not {kw!r}")
        if attrs:
            self.body.append(f"\t{_pairs(attrs)}\n" if kw is None else f"\t{kw}{_listed(attrs)}\n")

    def subgraph(self, graph: Dot | None = None, name: str | None = None) -> _Inside | None:
        """Add ``graph`` as a subgraph; or, given a ``name``, a ``with`` block's new subgraph,
        added when the block ends."""
        if graph is None:
            return _Inside(self, Dot(name))
        self.body += [f"\t{line}" for line in graph.lines(subgraph=True)]
        return None

    def lines(self, subgraph: bool = False) -> list[str]:
        named = f"{quote(self.name)} " if self.name else ""
        head = (f"subgraph {named}" if self.name else "") if subgraph else f"digraph {named}"
        return [head + "{\n", *self.body, "}\n"]

    @property
    def source(self) -> str:
        return "".join(self.lines())

    def pipe(self, format: str, quiet: bool = False) -> bytes:
        """The picture in ``format`` (``dot -T``), laid out by Graphviz."""
        from .dotrun import piped

        return piped(self.source, format, quiet)


class _Inside:
    """``with g.subgraph(name=...) as sub:``: ``sub`` joins ``g`` when the block ends (not on an error)."""

    def __init__(self, parent: Dot, sub: Dot):
        self.parent, self.sub = parent, sub

    def __enter__(self) -> Dot:
        return self.sub

    def __exit__(self, kind, error, trace) -> None:
        if kind is None:
            self.parent.subgraph(self.sub)
