"""Constant expressions: ``1/sqrt(k)`` as a small tree, with one operator table.

A constant is ``("num", float)``, ``("dim", Dim)`` or ``(op, *args)`` for an op in :data:`OPERATORS`.
The elaborator folds scalar primitives applied to constants into such trees; the compiler evaluates
them once sizes are known (or emits them into the graph when a size is only known at run time); the
matcher unifies them; rewriting substitutes generic dimensions in them. All of those read the one
table below, so a new operator is one line here.

>>> from stringdiag.graph.types import Dim
>>> c = ("div", ("num", 1.0), ("sqrt", ("dim", Dim.var("k"))))
>>> show(c)
'(1/sqrt(k))'
>>> evaluate(c, lambda d: d.evaluate({"k": 4}))
0.5
>>> show(substitute(c, {"k": Dim.var("d")}))
'(1/sqrt(d))'
"""

from __future__ import annotations

import math
import operator
from typing import Any, Callable

from ..syntax.records import Record
from .types import Dim


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


def evaluate(c, size: Callable[[Any], Any], apply: Callable | None = None) -> Any:
    """The value of constant ``c``; ``size(dim)`` gives a dimension's value.

    ``apply(fn, args)`` is called for an operator whose arguments are not all plain numbers (a
    size known only at run time); by default the operator is applied directly.
    """
    tag = c[0]
    if tag == "num":
        return float(c[1])
    if tag == "dim":
        v = size(c[1])
        return float(v) if isinstance(v, int) else v
    fn = OPERATORS[tag].fn
    args = [evaluate(x, size, apply) for x in c[1:]]
    if apply is not None and not all(isinstance(a, (int, float)) for a in args):
        return apply(fn, args)
    return fn(*args)


def dims_in(c) -> list:
    """The dimensions constant ``c`` mentions (``s * total / r``: s and r)."""
    found: list = []

    def seen(dim):
        found.append(dim)
        return dim

    evaluate(c, seen, apply=lambda fn, args: 0)
    return found


def show(c) -> str:
    """A constant expression as text: ``(1/sqrt(k))``."""
    tag = c[0]
    if tag == "num":
        v = c[1]
        return str(int(v)) if float(v).is_integer() else repr(v)
    if tag == "dim":
        return str(c[1])
    op = OPERATORS[tag]
    if not op.infix:
        return f"-{show(c[1])}" if tag == "neg" else f"{op.symbol}({show(c[1])})"
    return f"({show(c[1])}{op.symbol}{show(c[2])})"


def as_dim(c):
    """The constant as a dimension, when it is an integer polynomial of dimensions
    (``1 + d + e + e``, written out, is the dimension ``d + 2*e + 1``); else ``None``."""
    tag = c[0]
    if tag == "dim":
        return c[1]
    if tag == "num":
        return Dim.const(int(c[1])) if float(c[1]).is_integer() else None
    if tag not in ("add", "mul"):
        return None
    a, b = as_dim(c[1]), as_dim(c[2])
    if a is None or b is None:
        return None
    return a + b if tag == "add" else a * b


def substitute(c, sub):
    """The constant with generic dimensions replaced (when a definition is instantiated)."""
    if c[0] == "num":
        return c
    if c[0] == "dim":
        return ("dim", c[1].substitute(sub))
    return (c[0], *[substitute(x, sub) for x in c[1:]])
