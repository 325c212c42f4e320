"""``.rules`` files as a typed syntax tree: :class:`RuleDecl` nodes among the ``.diag`` items.

rules.lark imports diag.lark's statements, which come back namespaced (``diag__assign``); the
reader (a :class:`~.ast.DiagTree`) reads those with its own methods (``parsetree.Walker``).
"""
from __future__ import annotations

import re

from ..errors import DiagError, Pos
from .ast import DeclName, DiagramDecl, DiagTree, Generics, Item, Name, Param, Stmt, Str, TypeExpr, split_header
from .records import Record
from .parser import parse


class Side(Record):
    """One side of a rule: a diagram body between braces."""

    body: tuple[Stmt, ...]
    pos: Pos


class Given(Record):
    """``given f, g : [a] -> [b]``: box variables."""

    names: tuple[DeclName, ...]
    ins: tuple[TypeExpr, ...]
    outs: tuple[TypeExpr, ...]
    pos: Pos


class RuleDecl(Record):
    """``rule NAME<DIMS>(INPUTS) -> OUTPUTS given* { LEFT } REL { RIGHT } [by "FILE.deriv"]``."""

    name: Name
    generics: Generics | None
    params: tuple[Param, ...]
    outs: tuple[TypeExpr, ...]
    given: tuple[Given, ...]
    left: Side
    relation: str  # as written: ==, ≡, => or ⇒
    right: Side
    proof: Str | None
    pos: Pos
    cells: tuple[DiagramDecl, ...] = ()  # ``where diagram ...``: cell patterns local to the rule
    nonzero: tuple[Name, ...] = ()  # ``assuming z != 0``: inputs the rule holds only away from zero


class NonZero(Record):
    """``assuming z != 0``."""

    name: Name
    pos: Pos


class RulesTree(DiagTree):
    """Parse tree of rules.lark to nodes; the rules it shares with diag.lark are DiagTree's."""

    def rule(self, meta, name, generics, *rest):
        params, outs, more = split_header(rest)
        *given, left, relation, right, proof = more
        cells = tuple(g for g in given if isinstance(g, DiagramDecl))
        nonzero = tuple(g.name for g in given if isinstance(g, NonZero))
        given = [g for g in given if not isinstance(g, (DiagramDecl, NonZero))]
        return RuleDecl(name, generics, params, outs, tuple(given), left, str(relation), right, proof,
                    self._at(meta), cells, nonzero)

    def nonzero_decl(self, meta, name):
        return NonZero(name, self._at(meta))

    def cell_decl(self, meta, diagram):
        return diagram

    def given_decl(self, meta, *children):
        *names, ins, outs = children
        return Given(tuple(names), ins, outs, self._at(meta))

    def side(self, meta, *stmts):
        return Side(stmts, self._at(meta))

    def proof(self, meta, path):
        return path


def read_rules(text: str, file: str = "<string>") -> tuple[Item | RuleDecl, ...]:
    """The items of a ``.rules`` source; a syntax error is a positioned DiagError."""
    try:
        tree = parse(text, file, grammar="rules.lark")
    except DiagError as err:
        msg = re.sub(r"\brelation\b", "'==' (≡) or '=>' (⇒)", err.message)
        raise DiagError(msg, err.pos, text) from None
    return RulesTree(file).transform(tree)
