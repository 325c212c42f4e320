"""The ``.diag`` language as a typed syntax tree: small frozen nodes, each with its position.

:class:`DiagTree` reads the parse tree (``grammars/diag.lark``) into these nodes, so that
the elaborator and the loaders dispatch on node classes, never on rule names or child
positions. A node's ``pos`` is where the parser puts the rule or token it is read from, so every
message points where it always has. The reading only rebuilds: nothing is checked here, so
errors keep the order in which the elaborator finds them.
"""
from __future__ import annotations

from typing import Union

from ..errors import Pos
from .parser import parse
from .parsetree import Token, Walker
from .records import Record


# -- leaves ------------------------------------------------------------------------------
class Name(Record):
    """An identifier as written (in a summation, an index name, not yet checked)."""

    text: str
    pos: Pos


class Int(Record):
    """An integer as written: a too-long one is reported by its reader, not converted here."""

    text: str
    pos: Pos


class Str(Record):
    """A quoted string (a path)."""

    text: str  # with its quotes
    pos: Pos

    @property
    def value(self) -> str:
        return self.text[1:-1]


# -- dimensions and types -------------------------------------------------------------------
class DimProduct(Record):
    factors: tuple["Name | Int | DimSum", ...]  # a DimSum is a parenthesised sum: g * (k + k)
    pos: Pos


class DimSum(Record):
    """``a * b + c``: a sum of products of dimension names and integers."""

    terms: tuple[DimProduct, ...]
    pos: Pos


class OfRange(Record):
    """``of v``: the values are token ids, integers in 0, ..., v - 1."""

    dim: DimSum
    pos: Pos


class TypeExpr(Record):
    """``[s, d]``: one dimension expression per axis; ``[s] of v`` (``of`` set): token ids."""

    dims: tuple[DimSum, ...]
    pos: Pos
    of: OfRange | None = None


class Generics(Record):
    """``<n, m>``: the dimension parameters of a declaration."""

    names: tuple[Name, ...]
    pos: Pos


# -- declarations ---------------------------------------------------------------------------
class Import(Record):
    path: Str
    pos: Pos
    alias: "Name | None" = None  # import "f.diag" as o: its boxes and diagrams are o.NAME


class DimDecl(Record):
    names: tuple[Name, ...]
    kind: str  # "fixed" | "seq"
    default: Int | None
    pos: Pos


class DeclName(Record):
    name: Name
    generics: Generics | None
    pos: Pos


class ViaOption(Record):
    """``bias = false`` in ``via linear(bias = false)``: a value as written (a name or a number)."""

    name: Name
    value: Name | Number
    pos: Pos


class Via(Record):
    """``via linear(bias = false)``: the approximator of a learnable box, chosen in the file."""

    policy: Name
    options: tuple[ViaOption, ...]
    pos: Pos


class Bound(Record):
    """``s <= 512``: the largest length a learnable tensor over a seq dimension holds."""

    dim: Name
    limit: Int
    pos: Pos


class BoxDecl(Record):
    """``learn Q, K : [d] -> [k]``; ``kind`` is the keyword (learn, abstract, fixed, random);
    ``seed`` is a random box's ``seed 7``."""

    kind: Name
    names: tuple[DeclName, ...]
    ins: tuple[TypeExpr, ...]
    outs: tuple[TypeExpr, ...]
    pos: Pos
    via: Via | None = None
    bounds: tuple[Bound, ...] = ()
    seed: "Int | None" = None


class Param(Record):
    name: Name
    type: TypeExpr
    pos: Pos


class DiagramDecl(Record):
    name: Name
    generics: Generics | None
    params: tuple[Param, ...]
    outs: tuple[TypeExpr, ...]
    body: tuple[Stmt, ...]
    pos: Pos


# -- statements -----------------------------------------------------------------------------
class Target(Record):
    """``y[i, j]`` on the left of an assignment."""

    name: Name
    indices: tuple[Name, ...]
    pos: Pos


class Assign(Record):
    targets: tuple[Target, ...]
    value: Expr
    pos: Pos


class Scan(Record):
    """``h, y[t] = scan Cell(h0, x[t])``."""

    targets: tuple[Target, ...]
    call: Call
    pos: Pos


class Repeat(Record):
    """``y = repeat 6 Block(x)``: the definition applied 6 times in sequence, each copy with
    weights of its own (one set for all with ``shared``)."""

    targets: tuple[Target, ...]
    count: Int | Name
    shared: bool
    call: Call
    pos: Pos


class Return(Record):
    values: tuple[Expr, ...]
    pos: Pos


# -- expressions ----------------------------------------------------------------------------
class Number(Record):
    text: str  # as written: messages quote it
    pos: Pos

    @property
    def value(self) -> float:
        return float(self.text)


class Var(Record):
    """A name used as a value: a wire or a dimension."""

    name: Name
    pos: Pos


class Indexed(Record):
    """``x[i, :]``: indices name the value's free axes in order; ``None`` is ``:``, a
    :class:`Pick` or :class:`Slice` a fixed position or range of the axis."""

    base: Expr
    indices: "tuple[Name | Pick | Slice | None, ...]"
    pos: Pos


class Pick(Record):
    """``0`` in ``x[i, 0]``: one entry of the axis (which then disappears)."""

    at: Int
    pos: Pos


class Slice(Record):
    """``a:b`` in ``x[:, a:b]``: the entries a, ..., b - 1 (an axis of b - a entries)."""

    start: DimSum
    stop: DimSum
    pos: Pos


class Call(Record):
    """``F<n>(x, y)``: a box applied to its inputs, with explicit dimension arguments."""

    box: Name
    dim_args: tuple[DimSum, ...]
    args: tuple[Expr, ...]
    pos: Pos


class BinOp(Record):
    """Arithmetic; ``op`` is the prelude box it applies (add, sub, mul, div)."""

    op: str
    left: Expr
    right: Expr
    pos: Pos


class Neg(Record):
    operand: Expr
    pos: Pos


class Sum(Record):
    """``sum_{j, f} body``; every index carries the position of the ``sum_`` token."""

    indices: tuple[Name, ...]
    body: Expr
    pos: Pos


Expr = Union[Number, Var, Indexed, Call, BinOp, Neg, Sum]
Stmt = Union[BoxDecl, Assign, Scan, Repeat, Return]
Item = Union[Import, DimDecl, BoxDecl, DiagramDecl]


def _present(xs) -> tuple:
    """Children without the placeholders for absent optional parts."""
    return tuple(x for x in xs if x is not None)


class Reader(Walker):
    """What every grammar's reader shares: positions in one file, names and quoted strings.
    Non-recursive (``Walker``): expressions may nest tens of thousands deep (the elaborator reports
    those at their statement). A rule's method takes ``(meta, *children)``, a terminal's the token."""

    def __init__(self, file: str):
        self.file = file

    def _at(self, meta) -> Pos:
        return Pos(self.file, getattr(meta, "line", 1), getattr(meta, "column", 1))

    def _tok(self, tok: Token) -> Pos:
        return Pos(self.file, tok.line or 1, tok.column or 1)

    def NAME(self, tok: Token) -> Name:
        return Name(str(tok), self._tok(tok))

    def QNAME(self, tok: Token) -> Name:  # o.Name: a name of a file imported as o
        return Name(str(tok), self._tok(tok))

    def STRING(self, tok: Token) -> Str:
        return Str(str(tok), self._tok(tok))


class DiagTree(Reader):
    """Parse tree of diag.lark to nodes."""

    def INT(self, tok: Token) -> Int:
        return Int(str(tok), self._tok(tok))

    # declarations
    def start(self, meta, *items) -> tuple:
        return items

    def import_decl(self, meta, path, alias=None):
        return Import(path, self._at(meta), alias)

    def dim_decl(self, meta, *children):
        *names, kind, default = children
        return DimDecl(tuple(names), kind, default, self._at(meta))

    def dim_kind(self, meta, tok):
        return str(tok)

    def box_decl(self, meta, kind, *children):
        *names, ins, outs, via, bounds, seed = children
        return BoxDecl(kind, tuple(names), ins, outs, self._at(meta), via, bounds or (), seed)

    def via(self, meta, policy, *options):
        return Via(policy, _present(options), self._at(meta))

    def via_option(self, meta, name, value):
        return ViaOption(name, Number(str(value), self._tok(value)) if isinstance(value, Token) else value,
                         self._at(meta))

    def bounds(self, meta, *bounds) -> tuple:
        return bounds

    def bound(self, meta, dim, limit):
        return Bound(dim, limit, self._at(meta))

    def seed(self, meta, value):
        return value

    def box_kind(self, meta, tok):
        return Name(str(tok), self._at(meta))

    def decl_name(self, meta, name, generics):
        return DeclName(name, generics, self._at(meta))

    def generics(self, meta, *names):
        return Generics(names, self._at(meta))

    def type_list(self, meta, *types) -> tuple:
        return _present(types)

    def type(self, meta, *dims):
        of = dims[-1] if dims and isinstance(dims[-1], OfRange) else None
        return TypeExpr(_present(dims[:-1] if of else dims), self._at(meta), of)

    def of_range(self, meta, dim):
        return OfRange(dim, self._at(meta))

    def dim_expr(self, meta, *terms):
        return DimSum(terms, self._at(meta))

    def dim_term(self, meta, *factors):
        return DimProduct(factors, self._at(meta))

    def param(self, meta, name, ty):
        return Param(name, ty, self._at(meta))

    def diagram(self, meta, name, generics, *rest):
        params, outs, body = split_header(rest)
        return DiagramDecl(name, generics, params, outs, body, self._at(meta))

    # statements
    def assign(self, meta, targets, value):
        return Assign(targets, value, self._at(meta))

    def scan_assign(self, meta, targets, call):
        return Scan(targets, call, self._at(meta))

    def repeat_assign(self, meta, targets, count, shared, call):
        return Repeat(targets, count, shared is not None, call, self._at(meta))

    def targets(self, meta, *targets) -> tuple:
        return targets

    def target(self, meta, name, *indices):
        return Target(name, _present(indices), self._at(meta))

    def return_stmt(self, meta, *values):
        return Return(values, self._at(meta))

    # expressions
    def number(self, meta, tok):
        return Number(str(tok), self._at(meta))

    def name(self, meta, name):
        return Var(name, self._at(meta))

    def indexed(self, meta, base, *indices):
        return Indexed(base, indices, self._at(meta))

    def index(self, meta, it):
        return it if isinstance(it, Name) else None  # ':' keeps the axis

    def pick(self, meta, at):
        return Pick(at, self._at(meta))

    def slice(self, meta, start, _colon, stop):
        return Slice(start, stop, self._at(meta))

    def call(self, meta, box, dim_args, *args):
        return Call(box, dim_args or (), _present(args), self._at(meta))

    def generic_args(self, meta, *dims) -> tuple:
        return dims

    def add(self, meta, left, right):
        return BinOp("add", left, right, self._at(meta))

    def sub(self, meta, left, right):
        return BinOp("sub", left, right, self._at(meta))

    def mul(self, meta, left, right):
        return BinOp("mul", left, right, self._at(meta))

    def div(self, meta, left, right):
        return BinOp("div", left, right, self._at(meta))

    def neg(self, meta, operand):
        return Neg(operand, self._at(meta))

    def summation(self, meta, tok, body):
        text = str(tok)[4:]
        parts = text[1:-1].split(",") if text.startswith("{") else [text]
        at = self._tok(tok)
        return Sum(tuple(Name(p.strip(), at) for p in parts), body, self._at(meta))


def split_header(rest: tuple) -> tuple[tuple, tuple, tuple]:
    """``(params..., outs, more...)`` of a diagram or rule header as parsed: the parameters
    (a placeholder when there are none), the output types (the one tuple), what follows."""
    k = next(i for i, c in enumerate(rest) if isinstance(c, tuple))
    return _present(rest[:k]), rest[k], tuple(rest[k + 1:])


def read(text: str, file: str = "<string>") -> tuple[Item, ...]:
    """The items of a ``.diag`` source; a syntax error is a positioned DiagError."""
    return DiagTree(file).transform(parse(text, file))
