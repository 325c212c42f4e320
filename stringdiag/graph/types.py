"""Dimensions and tensor types.

A tensor type is the paper's tick notation: an ordered list of dimensions, one per index.
A dimension is a polynomial in named dimensions with integer coefficients, so that
concatenation (``[d] , [e] -> [d + e]``) and flattening (``[h * k]``) type-check
symbolically.

>>> d, k = Dim.var("d"), Dim.var("k")
>>> str(d + d), str(k * d + 2), (d + k) == (k + d)
('2*d', 'd*k + 2', True)
>>> (d * 3).evaluate({"d": 4})
12
>>> str(Dim.var("n").substitute({"n": d + k}))
'd + k'
"""
from __future__ import annotations

from enum import StrEnum
from typing import Iterable, Mapping

Monomial = tuple[str, ...]  # sorted names, repeated for powers; () is the constant term


class DimKind(StrEnum):
    """Who gives a dimension its size: the modeller (``fixed``), the inputs at run time
    (``seq``), or a definition's caller (``generic``, ``softmax<n>``). Tracing a module reads
    each axis of a value as one of these too, or as the batch or a broadcast axis of size one.
    A ``StrEnum``: it compares equal to, and prints as, the word the file writes."""

    FIXED = "fixed"
    SEQ = "seq"
    GENERIC = "generic"
    BATCH = "batch"  # tracing only: the leading axis a module is called over
    ONE = "one"      # tracing only: an axis of size one that broadcasts


class Dim:
    """A dimension: an integer polynomial over named dimensions (immutable, hashable)."""

    __slots__ = ("terms", "_hash")

    def __init__(self, terms: Mapping[Monomial, int]):
        self.terms: tuple[tuple[Monomial, int], ...] = tuple(
            sorted((m, c) for m, c in terms.items() if c != 0)
        )
        self._hash = hash(self.terms)

    @staticmethod
    def var(name: str) -> "Dim":
        return Dim({(name,): 1})

    @staticmethod
    def const(n: int) -> "Dim":
        return Dim({(): n})

    def __add__(self, other: "Dim | int") -> "Dim":
        other = _dim(other)
        acc = dict(self.terms)
        for m, c in other.terms:
            acc[m] = acc.get(m, 0) + c
        return Dim(acc)

    __radd__ = __add__

    def __sub__(self, other: "Dim | int") -> "Dim":
        return self + _dim(other) * -1

    def __mul__(self, other: "Dim | int") -> "Dim":
        other = _dim(other)
        acc: dict[Monomial, int] = {}
        for m1, c1 in self.terms:
            for m2, c2 in other.terms:
                m = tuple(sorted(m1 + m2))
                acc[m] = acc.get(m, 0) + c1 * c2
        return Dim(acc)

    __rmul__ = __mul__

    def __eq__(self, other: object) -> bool:
        if isinstance(other, int):
            other = Dim.const(other)
        return isinstance(other, Dim) and self.terms == other.terms

    def __hash__(self) -> int:
        return self._hash

    def names(self) -> set[str]:
        return {n for m, _ in self.terms for n in m}

    @property
    def name(self) -> str | None:
        """The name if this dimension is a single named dimension, else None."""
        if len(self.terms) == 1 and self.terms[0][1] == 1 and len(self.terms[0][0]) == 1:
            return self.terms[0][0][0]
        return None

    def is_const(self) -> bool:
        return all(m == () for m, _ in self.terms)

    def evaluate(self, sizes: Mapping[str, int]) -> int:
        total = 0
        for m, c in self.terms:
            p = c
            for n in m:
                p *= sizes[n]
            total += p
        return total

    def substitute(self, sub: Mapping[str, "Dim"]) -> "Dim":
        if not sub or not (self.names() & sub.keys()):
            return self
        total = Dim({})
        for m, c in self.terms:
            p = Dim.const(c)
            for n in m:
                p = p * (sub[n] if n in sub else Dim.var(n))
            total = total + p
        return total

    def __str__(self) -> str:
        if not self.terms:
            return "0"
        parts = []
        # named terms first, constant last, as people write d + 1
        for m, c in sorted(self.terms, key=lambda t: (t[0] == (), t[0])):
            body = "*".join(m)
            if not body:
                parts.append(str(c))
            elif c == 1:
                parts.append(body)
            else:
                parts.append(f"{c}*{body}")
        return " + ".join(parts)

    def __repr__(self) -> str:
        return f"Dim({str(self)!r})"


def _dim(x: "Dim | int") -> Dim:
    return x if isinstance(x, Dim) else Dim.const(int(x))


TensorType = tuple[Dim, ...]


def show_type(t: Iterable[Dim], of: "Dim | None" = None) -> str:
    """The type as written in source: ``[s, d]``, or ``[s] of v`` for token ids."""
    return "[" + ", ".join(str(d) for d in t) + "]" + ("" if of is None else f" of {of}")


def substitute_type(t: TensorType, sub: Mapping[str, Dim]) -> TensorType:
    return tuple(d.substitute(sub) for d in t) if sub else t
