"""``.tax`` files as a typed syntax tree (``grammars/tax.lark``): the members of a family tree
of architectures and the derivations that are its edges."""
from __future__ import annotations

from typing import Union


from ..errors import Pos
from .ast import Name, Reader, Str
from .records import Record
from .deriv_ast import Ref
from .parser import parse
from .parsetree import Token


class Member(Record):
    """``NAME = FILE.diag:DIAGRAM ["label"] [family "family"]``; ``root`` marks the root."""

    name: Name
    ref: Ref
    label: Str | None
    family: Str | None
    root: bool
    pos: Pos


class Edge(Record):
    """``edge PARENT -> CHILD by "FILE.deriv"``: the child derived from the parent."""

    parent: Name
    child: Name
    deriv: Str
    pos: Pos


Item = Union[Member, Edge]


class TaxTree(Reader):
    """Parse tree of tax.lark to nodes."""

    def FILEREF(self, tok: Token) -> Ref:
        file, name = str(tok).rsplit(":", 1)
        return Ref(file, name, self._tok(tok))

    def start(self, meta, *items) -> tuple:
        return items

    def member(self, meta, name, ref, label, family):
        return (name, ref, label, family, self._at(meta))

    def family(self, meta, text):
        return text

    def root_decl(self, meta, m):
        return Member(*m[:4], True, self._at(meta))

    def node_decl(self, meta, m):
        return Member(*m[:4], False, self._at(meta))

    def edge_decl(self, meta, parent, child, deriv):
        return Edge(parent, child, deriv, self._at(meta))


def read_tax(text: str, file: str = "<string>") -> tuple[Item, ...]:
    """The items of a ``.tax`` source; a syntax error is a positioned DiagError."""
    return TaxTree(file).transform(parse(text, file, grammar="tax.lark"))
