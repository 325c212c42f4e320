"""Unification: a rule's dimension variables with target dimensions, its box variables and
process names with the functions they match.

A rule is written once for every size (``assoc<n, m, p, q>``) and, with box variables, for
every process (``given f``); a match binds each variable once and then holds it to that.
"""
from __future__ import annotations

from ..graph.constants import ConstDim, ConstOp, as_dim
from ..graph.box import Box
from ..graph.iso import definition_key
from ..graph.types import Dim


class Unifier:
    """Bindings of a rule's dimension variables to target dimensions."""

    __slots__ = ("vars", "sub", "pending")

    def __init__(self, variables: frozenset[str], sub: dict | None = None, pending: tuple = ()):
        self.vars = variables
        self.sub: dict[str, Dim] = dict(sub or {})
        self.pending: tuple = pending

    def copy(self) -> "Unifier":
        return Unifier(self.vars, self.sub, self.pending)

    def unify(self, r: Dim, t: Dim) -> bool:
        """Bind or check one dimension; a sum of unbound variables waits for :meth:`settle`."""
        n = r.name
        if n is not None and n in self.vars:
            have = self.sub.get(n)
            if have is None:
                self.sub[n] = t
                return True
            return have == t
        free = r.names() & self.vars
        if not free:
            return r == t
        if free <= self.sub.keys():
            return r.substitute(self.sub) == t
        self.pending = self.pending + ((r, t),)  # a sum of variables: decided once they are bound
        return True

    def settle(self) -> bool:
        """Sums of variables (``n + m``) are decided once the match has bound every variable
        in them: a match whose sizes do not add up is no match. A sum left with one unbound
        variable, to the first power, binds it where that is a size (``m + 1`` against
        ``s + 1`` binds ``m`` to ``s``; against a bare ``s`` it would be ``s - 1``, which is
        no dimension, so no match): a variable the rule only ever names in a sum (``yank``'s
        ``m``) is bound by it."""
        todo = list(self.pending)
        while todo:
            steps = [(pair, self._decide(*pair)) for pair in todo]
            if any(done is False for _, done in steps):
                return False
            left = [pair for pair, done in steps if done is None]
            if len(left) == len(todo):
                return False  # none left can bind a variable: the sizes are not determined
            todo = left
        self.pending = ()
        return True

    def _decide(self, r: Dim, t: Dim) -> bool | None:
        """``r = t`` checked once ``r``'s variables are bound, or its one unbound variable
        bound to the size that makes it hold; ``None``: not decided yet."""
        free = (r.names() & self.vars) - self.sub.keys()
        if not free:
            return r.substitute(self.sub) == t
        if len(free) != 1:
            return None
        (v,) = free
        size = solve_for(r.substitute(self.sub), v, t)
        if size is None:
            return None
        self.sub[v] = size
        return True

    def unify_types(self, r, t) -> bool:
        return len(r) == len(t) and all(self.unify(a, b) for a, b in zip(r, t))

    def unify_value(self, r, t) -> bool:
        """Constant expressions (``sqrt(k)``) with dimensions in them; a dimension in the rule
        also matches a sum or product of dimensions written out (``sqrt(1 + d + e)``)."""
        match r, t:
            case ConstDim(), ConstOp() if t.op in ("add", "mul"):
                t_dim = as_dim(t)
                return t_dim is not None and self.unify(r.dim, t_dim)
            case ConstDim(), ConstDim():
                return self.unify(r.dim, t.dim)
            case ConstOp(), ConstOp() if r.op == t.op and len(r) == len(t):
                return all(self.unify_value(a, b) for a, b in zip(r[1:], t[1:]))
        return r == t  # numbers, and constants of different shapes


def solve_for(r: Dim, v: str, t: Dim) -> Dim | None:
    """The size ``v`` must be for ``r = t``, where ``v`` occurs in ``r`` only as ``c * v``:
    ``(t - rest) / c`` when that is a size (a non-zero polynomial with non-negative whole
    coefficients, so at least 1 for any sizes); otherwise ``None``."""
    coeff = dict(r.terms)
    c = coeff.pop((v,), 0)
    if c <= 0 or any(v in mono for mono in coeff):
        return None
    diff = dict((t + Dim(coeff) * -1).terms)
    if not diff or any(k < 0 or k % c for k in diff.values()):
        return None
    return Dim({mono: k // c for mono, k in diff.items()})


def identity(node: Box, with_generics: bool = False) -> tuple:
    """Which function a process box is, its weights aside: a name bound twice in a pattern
    must find one function twice; whether with one set of weights is :attr:`Match.ties`.
    A definition is told by its content, not its name alone."""
    i = node.identity()  # its name: a global learnable's weight set, a random tensor's seed
    ident = (i.kind, i.op, definition_key(i.ref) if i.ref is not None else None, i.name, i.loop)
    return ident + (i.generics,) if with_generics else ident


def bind_function(idents: dict, name: str, ident: tuple, tb: int | None) -> dict | None:
    """One name, one function: the first box a process name (or box variable) of the pattern
    matches binds it; every other box it names must be that same function, or ``f(f(x))``
    would match ``g(f(x))``. Returns the bindings, extended, or ``None``."""
    have = idents.get(name)
    if have is None:
        return {**idents, name: (ident, tb)}
    return idents if have[0] == ident else None


__all__ = ["Unifier", "identity", "bind_function"]
