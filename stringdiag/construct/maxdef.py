"""Max-definable functions as Theorem 3.8 of Lai, Lim and Liu (2024) takes them: an entry of f(X) is
max_i min_j xi_ij(X) (16) with polynomials xi_ij in the entries of X.

Polynomials are dicts from exponent vectors (one exponent per entry of X, position-major: entry
x[i,j] is variable (j - 1) n + (i - 1)) to coefficients; the text form is grammars/maxdef.lark's,
read with lark and never evaluated as Python.
"""
from __future__ import annotations

from dataclasses import dataclass
from functools import cache

import numpy as np
from lark import Lark, Transformer, v_args
from lark.exceptions import LarkError, UnexpectedInput, VisitError

from ..errors import DiagError
from ..resources import shipped

Poly = dict[tuple[int, ...], float]
MAX_POWER = 64
MAX_WORK = 2_000_000  # term products while expanding one text, refused past this


@dataclass(frozen=True)
class MaxMin:
    """max over ``terms`` of (min over each inner tuple) of polynomials."""

    terms: tuple[tuple[tuple[tuple[tuple[int, ...], float], ...], ...], ...]

    def polys(self) -> list[list[Poly]]:
        return [[dict(p) for p in inner] for inner in self.terms]

    def degree(self) -> int:
        return max((sum(e) for inner in self.terms for p in inner for e, _ in p), default=0)


@cache
def _parser() -> Lark:
    return Lark(shipped("grammars/maxdef.lark").read_text(encoding="utf-8"), parser="lalr")


def _mul(a: Poly, b: Poly) -> Poly:
    out: Poly = {}
    for ea, ca in a.items():
        for eb, cb in b.items():
            e = tuple(x + y for x, y in zip(ea, eb))
            out[e] = out.get(e, 0.0) + ca * cb
    return out


def _add(a: Poly, b: Poly, sign: float = 1.0) -> Poly:
    out = dict(a)
    for e, c in b.items():
        out[e] = out.get(e, 0.0) + sign * c
    return out


@v_args(inline=True)
class _Build(Transformer):
    def __init__(self, n: int, p: int, m: int = 0):
        super().__init__()
        self.n, self.m, self.p, self.zero, self.work = n, m, p, (0,) * ((n + m) * p), 0

    def _times(self, a: Poly, b: Poly) -> Poly:
        """a b, counting the term products: expanding is refused once they pass MAX_WORK in all."""
        self.work += len(a) * len(b)
        if self.work > MAX_WORK:
            raise DiagError(f"expanding the polynomials takes over {MAX_WORK:,} term products: write them with "
                            "fewer terms or lower powers")
        return _mul(a, b)

    def number(self, tok):
        return {self.zero: float(tok)}

    def var(self, i, j):
        i, j = int(i), int(j)
        if not (1 <= i <= self.n and 1 <= j <= self.p):
            raise DiagError(f"x[{i},{j}] is outside X (features 1..{self.n}, positions 1..{self.p})")
        return self._unit(i - 1, j)

    def yvar(self, i, j):
        i, j = int(i), int(j)
        if not self.m:
            raise DiagError(f"y[{i},{j}]: there is no decoder input Y here (spline-encoder-decoder takes one)")
        if not (1 <= i <= self.m and 1 <= j <= self.p):
            raise DiagError(f"y[{i},{j}] is outside Y (features 1..{self.m}, positions 1..{self.p})")
        return self._unit(self.n + i - 1, j)

    def _unit(self, feature: int, j: int) -> Poly:
        """The variable of ``feature`` at position j of the token [x_j, y_j] (n + m wide)."""
        e = [0] * len(self.zero)
        e[(j - 1) * (self.n + self.m) + feature] = 1
        return {tuple(e): 1.0}

    def power(self, base, k):
        if int(k) > MAX_POWER:
            raise DiagError(f"a power above {MAX_POWER} ({k})")
        out = {self.zero: 1.0}
        for _ in range(int(k)):
            out = self._times(out, base)
        return out

    def neg(self, a):
        return {e: -c for e, c in a.items()}

    def add(self, a, b):
        return _add(a, b)

    def sub(self, a, b):
        return _add(a, b, -1.0)

    def mul(self, a, b):
        return self._times(a, b)

    def minof(self, *polys):
        return ("min", polys)

    def maxof(self, *inners):
        return ("max", inners)


def _freeze(p: Poly) -> tuple:
    return tuple(sorted((e, c) for e, c in p.items() if c != 0.0))


def parse(text: str, n: int, p: int, what: str = "the function", m: int = 0) -> MaxMin:
    """``max(min(...), ...)``, ``min(...)`` or a polynomial, in the entries x[i,j] of an n x p X (and
    y[i,j] of an m x p Y: variables of the tokens [x_j, y_j])."""
    try:
        tree = _parser().parse(text)
        built = _Build(n, p, m).transform(tree)
    except VisitError as e:
        inner = e.orig_exc.message if isinstance(e.orig_exc, DiagError) else str(e.orig_exc)
        raise DiagError(f"{what}: {inner}") from None
    except UnexpectedInput as e:
        raise DiagError(f"{what}: cannot read {text!r} at column {e.column}: write max(min(P, ...), ...) of "
                        "polynomials in x[i,j] with + - * ^ and numbers")
    except LarkError as e:
        raise DiagError(f"{what}: cannot read {text!r} ({e})")
    if isinstance(built, dict):
        built = ("min", (built,))
    if built[0] == "min":
        built = ("max", (built,))
    inners = tuple(tuple(_freeze(q) for q in (i[1] if isinstance(i, tuple) else (i,))) for i in built[1])
    return MaxMin(inners)


def evaluate(f: MaxMin, x: np.ndarray) -> float:
    """f at X given as (p, n) tokens (rows are positions): the polynomials summed term by term."""
    v = x.reshape(-1)
    val = lambda poly: sum(c * float(np.prod(v ** np.array(e))) for e, c in poly)  # noqa: E731
    return max(min(val(q) for q in inner) for inner in f.terms)
