"""Which products Theorem 3.8's encoder forms, level by level (Lai, Lim and Liu 2024, Sec. 3.3).

The proof composes quadratic Veronese maps until every monomial of the spline's polynomials is
there (degree <= 2^t after t product layers). Forming all of them grows as (np)^(2^t); here only
the monomials the polynomials use are formed, each as the product of two of the level below
(a monomial of low enough degree is carried up as itself times 1). The full quadratic Veronese map
of Lemma 3.6 is :func:`veronese_pairs`.
"""
from __future__ import annotations

import math
from itertools import combinations_with_replacement

Mono = tuple[int, ...]


def unit(k: int, size: int) -> Mono:
    return tuple(int(i == k) for i in range(size))


def first_level(size: int) -> list[Mono]:
    """Lemma 3.6's v_1(X): the constant, then every entry of X."""
    return [(0,) * size] + [unit(k, size) for k in range(size)]


def veronese_pairs(size: int) -> tuple[list[tuple[int, int]], list[Mono]]:
    """v_2(X) as pairs of v_1's features (feature 0 the constant) and their exponent vectors."""
    base = first_level(size)
    pairs = [(nu, mu) for mu, nu in combinations_with_replacement(range(size + 1), 2)]  # the constant last
    return pairs, [tuple(x + y for x, y in zip(base[a], base[b])) for a, b in pairs]


def split(m: Mono, half: int) -> tuple[Mono, Mono]:
    """m as a product of two monomials of degree <= half each (m itself times 1 when it fits)."""
    zero = (0,) * len(m)
    if sum(m) <= half:
        return m, zero
    left, need = [0] * len(m), sum(m) - half
    for k, e in enumerate(m):
        take = min(e, need)
        left[k], need = take, need - take
    right = tuple(e - a for e, a in zip(m, left))
    return tuple(left), right


def levels(wanted: set[Mono], size: int) -> list[tuple[list[Mono], list[tuple[int, int]]]]:
    """Per product layer: the monomials it outputs (the constant first) and, for each, the pair of
    the previous level's features whose product it is. Empty when every monomial has degree <= 1."""
    top = max((sum(m) for m in wanted), default=0)
    t = math.ceil(math.log2(top)) if top > 1 else 0
    need: list[set[Mono]] = [set() for _ in range(t + 1)]
    need[t] = {m for m in wanted if sum(m)}
    for level in range(t, 0, -1):
        for m in need[level]:
            need[level - 1].update(x for x in split(m, 2 ** (level - 1)) if sum(x))
    previous = first_level(size)
    out = []
    for level in range(1, t + 1):
        monos = [(0,) * size] + sorted(need[level], reverse=True)
        at = {m: k for k, m in enumerate(previous)}
        pairs = [(0, 0)] + [(at[lo], at[hi]) for lo, hi in (split(m, 2 ** (level - 1)) for m in monos[1:])]
        out.append((monos, pairs))
        previous = monos
    return out
