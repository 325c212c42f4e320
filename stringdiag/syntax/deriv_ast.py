"""``.deriv`` files as a typed syntax tree (``grammars/deriv.lark``): declarations and steps.

Every step keeps its text as written (blanks collapsed), which is how a derivation's table
and its messages name it.
"""
from __future__ import annotations

from typing import Union


from ..errors import Pos
from .ast import Name, Reader, Str
from .records import Record
from .parser import parse
from .parsetree import Token


class Ref(Record):
    """A diagram: ``FILE.diag:NAME``, or ``NAME`` in a file already in use (``file`` None)."""

    file: str | None
    name: str
    pos: Pos


class Where(Record):
    """What follows ``at``: wire names as matches list them (``ConcatFF#1/y, x``)."""

    text: str  # as written, the blank after 'at' included
    pos: Pos


class Body(Record):
    """An inline diagram body ``{ ... }``; its text keeps its line and column."""

    text: str
    pos: Pos


class Params(Record):
    names: tuple[Name, ...]
    pos: Pos


class StartDecl(Record):
    ref: Ref
    pos: Pos


class TargetDecl(Record):
    ref: Ref
    pos: Pos


class UseDecl(Record):
    path: Str
    pos: Pos
    alias: Name | None = None  # use "f.diag" as o: its diagrams are o.NAME


class Apply(Record):
    rule: Name
    reversed: bool
    everywhere: bool
    at: Where | None
    text: str
    pos: Pos


class Specialise(Record):
    box: Name
    params: Params | None
    value: Ref | Body
    at: Where | None
    text: str
    pos: Pos


class Unfold(Record):
    name: Name
    text: str
    pos: Pos


class Fold(Record):
    name: Name
    at: Where | None
    text: str
    pos: Pos


class Copy(Record):
    name: Name
    text: str
    pos: Pos


class Prune(Record):
    text: str
    pos: Pos


class Rewire(Record):
    ref: Ref
    why: Str | None
    text: str
    pos: Pos


class Resize(Record):
    """``dim g := d``: the fixed dimension ``g`` made ``d``."""

    name: Name
    to: Name
    text: str
    pos: Pos


class Absorb(Record):
    """``absorb enc into R as L``: the map making ``enc``, read by ``R``, absorbed into ``L``."""

    wire: Name
    into: Name
    learner: Ref
    text: str
    pos: Pos


class Plug(Record):
    """``plug x into st``: row i of the input ``x`` where every step read the state ``st``."""

    input: Name
    into: Name
    text: str
    pos: Pos


Step = Union[Apply, Specialise, Unfold, Fold, Copy, Rewire, Prune, Resize, Absorb, Plug]
Item = Union[StartDecl, TargetDecl, UseDecl, Step]


class DerivTree(Reader):
    """Parse tree of deriv.lark to nodes."""

    def __init__(self, file: str, text: str):
        super().__init__(file)
        self.text = text

    def _written(self, meta) -> str:
        return " ".join(self.text[meta.start_pos:meta.end_pos].split())

    def FILEREF(self, tok: Token) -> Ref:
        file, name = str(tok).rsplit(":", 1)
        return Ref(file, name, self._tok(tok))

    def QREF(self, tok: Token) -> Ref:  # o.NAME: a diagram of the file used as o
        return Ref(None, str(tok), self._tok(tok))

    def WHERE(self, tok: Token) -> Where:
        return Where(str(tok), self._tok(tok))

    def BODY(self, tok: Token) -> Body:
        return Body(str(tok), self._tok(tok))

    def start(self, meta, *items) -> tuple:
        return items

    def ref(self, meta, r):
        return r if isinstance(r, Ref) else Ref(None, r.text, r.pos)

    def start_decl(self, meta, ref):
        return StartDecl(ref, self._at(meta))

    def target_decl(self, meta, ref):
        return TargetDecl(ref, self._at(meta))

    def use_decl(self, meta, path, alias=None):
        return UseDecl(path, self._at(meta), alias)

    def at(self, meta, where):
        return where

    def params(self, meta, *names):
        return Params(tuple(n for n in names if n is not None), self._at(meta))

    def apply(self, meta, rule, back, everywhere, at):
        return Apply(rule, back is not None, everywhere is not None, at, self._written(meta), self._at(meta))

    def specialise(self, meta, box, params, value, at):
        return Specialise(box, params, value, at, self._written(meta), self._at(meta))

    def unfold(self, meta, name):
        return Unfold(name, self._written(meta), self._at(meta))

    def fold(self, meta, name, at):
        return Fold(name, at, self._written(meta), self._at(meta))

    def copy(self, meta, name):
        return Copy(name, self._written(meta), self._at(meta))

    def prune(self, meta):
        return Prune(self._written(meta), self._at(meta))

    def rewire(self, meta, ref, why):
        return Rewire(ref, why, self._written(meta), self._at(meta))

    def resize(self, meta, name, to):
        return Resize(name, to, self._written(meta), self._at(meta))

    def absorb(self, meta, wire, into, learner):
        return Absorb(wire, into, learner, self._written(meta), self._at(meta))

    def plug(self, meta, input_, into):
        return Plug(input_, into, self._written(meta), self._at(meta))


def read_deriv(text: str, file: str = "<string>") -> tuple[Item, ...]:
    """The items of a ``.deriv`` source; a syntax error is a positioned DiagError."""
    return DerivTree(file, text).transform(parse(text, file, grammar="deriv.lark"))
