"""A Graphviz SVG document read into a small element tree: what ``crossings.py`` asks of
``xml.etree.ElementTree`` (``fromstring``; an element's ``tag`` with its namespace in braces,
``get``, ``find``, ``findtext``, ``iter`` and its children), built by the same parser as
``xml.etree`` builds it with (expat, namespaces split at ``}``), without importing
``xml.etree`` (2.5 ms of every framed picture's start-up). Comments and processing instructions
are left out, as ``xml.etree``'s default tree builder leaves them. A document that is not well
formed raises ``ValueError``.
"""
from __future__ import annotations

from collections.abc import Iterator

import pyexpat


class Element:
    """One element: ``tag`` (``{namespace}name``), ``attrib``, ``text`` (before its first
    child) and its children, in order."""

    __slots__ = ("tag", "attrib", "text", "children")

    def __init__(self, tag: str, attrib: dict[str, str]):
        self.tag, self.attrib = tag, attrib
        self.text: str | None = None
        self.children: list[Element] = []

    def __iter__(self) -> Iterator[Element]:
        return iter(self.children)

    def __len__(self) -> int:
        return len(self.children)

    def get(self, key: str, default=None):
        return self.attrib.get(key, default)

    def find(self, tag: str) -> Element | None:
        """The first child with this tag."""
        return next((e for e in self.children if e.tag == tag), None)

    def findtext(self, tag: str) -> str | None:
        """The text of the first child with this tag ("" where it has none); None without one."""
        e = self.find(tag)
        return None if e is None else e.text or ""

    def iter(self, tag: str | None = None) -> Iterator[Element]:
        """This element and every one below it, in document order (those with ``tag``)."""
        if tag is None or self.tag == tag:
            yield self
        for e in self.children:
            yield from e.iter(tag)


def _name(name: str) -> str:
    """expat's ``uri}local`` as ``{uri}local`` (``xml.etree``'s spelling)."""
    return "{" + name if "}" in name else name


class _Builder:
    """expat's callbacks building the tree."""

    def __init__(self) -> None:
        self.open: list[Element] = []
        self.root: Element | None = None

    def start(self, tag: str, attrib: dict[str, str]) -> None:
        e = Element(_name(tag), {_name(k): v for k, v in attrib.items()})
        if self.open:
            self.open[-1].children.append(e)
        else:
            self.root = e
        self.open.append(e)

    def end(self, tag: str) -> None:
        self.open.pop()

    def data(self, text: str) -> None:
        e = self.open[-1] if self.open else None
        if e is not None and not e.children:
            e.text = (e.text or "") + text


def fromstring(text: str) -> Element:
    """The document's root element."""
    build = _Builder()
    parser = pyexpat.ParserCreate(None, "}")
    parser.buffer_text = True
    parser.StartElementHandler = build.start
    parser.EndElementHandler = build.end
    parser.CharacterDataHandler = build.data
    try:
        parser.Parse(text, True)
    except pyexpat.ExpatError as e:
        raise ValueError(f"not a well-formed SVG document: {e}") from None
    assert build.root is not None  # expat refuses a document without a root element
    return build.root
