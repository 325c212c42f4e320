"""Monomials in the dimensions (``s^2·d``): the currency of the cost analyses.

A monomial is a sorted tuple of ``(name, power)``; constants are dropped (they are O(1)).
A sum of monomials is kept only where no other term *covers* it (has every name at least
to the same power), so costs read like the paper's ``O(s^2·d + s·d^2)``.

>>> from stringdiag.graph.types import Dim
>>> s, d = Dim.var("s"), Dim.var("d")
>>> show(dominant(monomials([s, s, d]) | monomials([s, d])), {"s"})
's^2·d'
"""
from __future__ import annotations

from collections import Counter
from typing import Iterable

from ..graph.types import Dim

Monomial = tuple[tuple[str, int], ...]  # sorted (name, power)


def monomials(dims: Iterable[Dim]) -> set[Monomial]:
    """Monomials of a product of dimensions (constants dropped: they are O(1))."""
    terms: list[Counter] = [Counter()]
    for d in dims:
        nxt = []
        for m, _ in d.terms:
            for t in terms:
                nxt.append(t + Counter(m))
        terms = nxt or terms
    return {tuple(sorted(t.items())) for t in terms}


def covers(a: Monomial, b: Monomial) -> bool:
    """``a`` grows at least as fast as ``b`` in every name."""
    da = dict(a)
    return all(da.get(n, 0) >= p for n, p in b)


def prune(ms: Iterable[Monomial]) -> frozenset:
    """The monomials no other one covers."""
    ms = set(ms)
    if len(ms) < 2:
        return frozenset(ms)
    return frozenset(m for m in ms if not any(o != m and covers(o, m) for o in ms))


def dominant(ms: set[Monomial]) -> list[Monomial]:
    """:func:`prune`, highest degree first."""
    return sorted(prune(ms), key=lambda m: (-sum(p for _, p in m), m))


def multiply(a: Monomial, b: Monomial) -> Monomial:
    if not a:
        return b
    if not b:
        return a
    acc = dict(a)
    for n, p in b:
        acc[n] = acc.get(n, 0) + p
    return tuple(sorted(acc.items()))


def show(ms: list[Monomial], seq: set[str], then: frozenset[str] = frozenset()) -> str:
    """``s^2·d``: sequence lengths first, as the paper writes them, then the names in ``then``
    (a mask's support: ``s·w·d``)."""
    if not ms:
        return "1"

    def rank(n: str) -> int:
        return 0 if n in seq else 1 if n in then else 2

    ordered = [sorted(m, key=lambda np: (rank(np[0]), np[0])) for m in ms]
    ordered.sort(key=lambda m: (-sum(p for _, p in m), [(rank(n), -p, n) for n, p in m]))
    return " + ".join("·".join(n if p == 1 else f"{n}^{p}" for n, p in m) or "1" for m in ordered)


def only(m: Monomial, names: set[str]) -> Monomial:
    """The part of ``m`` in ``names`` (the sequence lengths, for ``seq_time``)."""
    return tuple((n, p) for n, p in m if n in names)
