"""Constant expressions: ``1/sqrt(k)`` as a small tree, with one operator table.

A constant is a :class:`ConstNum` (a number), a :class:`ConstDim` (a dimension's size) or a
:class:`ConstOp` (an operator of :data:`OPERATORS` applied to constants). The elaborator folds
scalar primitives applied to constants into such trees; the compiler evaluates them once sizes
are known (or emits them into the graph when a size is only known at run time); the matcher
unifies them; rewriting substitutes generic dimensions in them. All of those read the one table
below, so a new operator is one line here.

Each node is a tuple underneath, led by its tag — ``("num", 1.0)``, ``("dim", Dim)``,
``("div", a, b)`` — so that a constant compares, hashes and prints as it always has: a const
box's value is part of its identity, and isomorphism's labels (hence the canonical hashes that
name enumerated mechanisms) are made from its ``repr``. Code reads the classes and fields.

>>> from stringdiag.graph.types import Dim
>>> c = ConstOp("div", ConstNum(1.0), ConstOp("sqrt", ConstDim(Dim.var("k"))))
>>> show(c)
'(1/sqrt(k))'
>>> c
('div', ('num', 1.0), ('sqrt', ('dim', Dim('k'))))
>>> evaluate(c, lambda d: d.evaluate({"k": 4}))
0.5
>>> show(substitute(c, {"k": Dim.var("d")}))
'(1/sqrt(d))'
"""

from __future__ import annotations

import math
import operator
from operator import itemgetter
from typing import Any, Callable

from ..syntax.records import Record
from .types import Dim

_make = tuple.__new__


class ConstNum(tuple):
    """A number, ``("num", value)`` underneath."""

    __slots__ = ()
    value: float = property(itemgetter(1))  # type: ignore[assignment]

    def __new__(cls, value: float) -> ConstNum:
        return _make(cls, ("num", value))

    def __getnewargs__(self) -> tuple:  # type: ignore[override]  # (pickle: made from its fields)
        return (self[1],)


class ConstDim(tuple):
    """A dimension's size, ``("dim", dim)`` underneath."""

    __slots__ = ()
    dim: Dim = property(itemgetter(1))  # type: ignore[assignment]

    def __new__(cls, dim: Dim) -> ConstDim:
        return _make(cls, ("dim", dim))

    def __getnewargs__(self) -> tuple:  # type: ignore[override]
        return (self[1],)


class ConstOp(tuple):
    """An operator of :data:`OPERATORS` applied to constants, ``(op, *args)`` underneath."""

    __slots__ = ()
    op: str = property(itemgetter(0))  # type: ignore[assignment]

    def __new__(cls, op: str, *args: Const) -> ConstOp:
        return _make(cls, (op, *args))

    def __getnewargs__(self) -> tuple:  # type: ignore[override]
        return tuple(self)

    @property
    def args(self) -> tuple[Const, ...]:
        return self[1:]


Const = ConstNum | ConstDim | ConstOp


class Operator(Record):
    """A scalar operator a constant may use: how it computes and how it is written."""

    fn: Callable
    symbol: str  # infix symbol for binary operators, function name otherwise
    infix: bool


def _ieee(fn: Callable, outside: Callable) -> Callable:
    """``fn`` with IEEE float results where Python raises (``log(0)`` is -inf, ``sqrt(-1)`` NaN,
    ``1/0`` inf, ``exp(1000)`` inf), as the compiled tensors compute them; other arguments
    (a size known only at run time, a torch node) go to ``fn`` as they are."""
    def safe(*args):
        try:
            return fn(*args)
        except (ValueError, ZeroDivisionError, OverflowError):
            return outside(*args)
    return safe


def _div_by_zero(a: float, b: float) -> float:
    return math.nan if a == 0 or math.isnan(a) else math.copysign(math.inf, a) * math.copysign(1.0, b)


OPERATORS: dict[str, Operator] = {
    "add": Operator(operator.add, "+", True),
    "sub": Operator(operator.sub, "-", True),
    "mul": Operator(operator.mul, "*", True),
    "div": Operator(_ieee(operator.truediv, _div_by_zero), "/", True),
    "neg": Operator(operator.neg, "-", False),
    "sqrt": Operator(_ieee(math.sqrt, lambda a: math.nan), "sqrt", False),
    "exp": Operator(_ieee(math.exp, lambda a: math.inf), "exp", False),
    "log": Operator(_ieee(math.log, lambda a: -math.inf if a == 0 else math.nan), "log", False),
}


def evaluate(c: Const, size: Callable[[Any], Any], apply: Callable | None = None) -> Any:
    """The value of constant ``c``; ``size(dim)`` gives a dimension's value.

    ``apply(fn, args)`` is called for an operator whose arguments are not all plain numbers (a
    size known only at run time); by default the operator is applied directly.
    """
    match c:
        case ConstNum():
            return float(c.value)
        case ConstDim():
            v = size(c.dim)
            return float(v) if isinstance(v, int) else v
    fn = OPERATORS[c.op].fn
    args = [evaluate(x, size, apply) for x in c[1:]]
    if apply is not None and not all(isinstance(a, (int, float)) for a in args):
        return apply(fn, args)
    return fn(*args)


def dims_in(c: Const) -> list[Dim]:
    """The dimensions constant ``c`` mentions, left to right (``s * total / r``: s, total and r)."""
    match c:
        case ConstNum():
            return []
        case ConstDim():
            return [c.dim]
    return [x for arg in c[1:] for x in dims_in(arg)]


def show(c: Const) -> str:
    """A constant expression as text: ``(1/sqrt(k))``."""
    match c:
        case ConstNum():
            return str(int(c.value)) if float(c.value).is_integer() else repr(c.value)
        case ConstDim():
            return str(c.dim)
    op = OPERATORS[c.op]
    if not op.infix:
        return f"-{show(c[1])}" if c.op == "neg" else f"{op.symbol}({show(c[1])})"
    return f"({show(c[1])}{op.symbol}{show(c[2])})"


def as_dim(c: Const) -> Dim | None:
    """The constant as a dimension, when it is an integer polynomial of dimensions
    (``1 + d + e + e``, written out, is the dimension ``d + 2*e + 1``); else ``None``."""
    match c:
        case ConstDim():
            return c.dim
        case ConstNum():
            return Dim.const(int(c.value)) if float(c.value).is_integer() else None
    if c.op not in ("add", "mul"):
        return None
    a, b = as_dim(c[1]), as_dim(c[2])
    if a is None or b is None:
        return None
    return a + b if c.op == "add" else a * b


def substitute(c: Const, sub) -> Const:
    """The constant with generic dimensions replaced (when a definition is instantiated)."""
    if not sub:  # nothing to replace: the same constant
        return c
    match c:
        case ConstNum():
            return c
        case ConstDim():
            return _make(ConstDim, ("dim", c.dim.substitute(sub)))
    return _make(ConstOp, (c.op, *[substitute(x, sub) for x in c[1:]]))
