"""Asymptotic time and memory of a diagram, from its SIMD boxes, contractions and wires.

Every box costs the product of its SIMD ranges times the work of one iteration: a
contraction multiplies out every index it touches (summed ones included, the order the
diagram states), a learnable box is a dense map from its input to its output features,
anything else touches each element of its inputs and outputs once. Memory is the
largest set of wires: their sizes summed. Sums of monomials are kept only where no other
term dominates them, so the answer reads like the paper's: softmax attention is
``O(s^2·d + s^2·k + s·d^2 + s·d·k)`` in time, ``O(s^2)`` in the sequence length alone; linear
attention is ``O(s)``.

>>> from stringdiag import loads
>>> p = loads('''dim s : seq
... dim d : fixed
... diagram Gram(x: [s, d]) -> [s, s] {
...   e[i, j] = sum_f x[i, f] * x[j, f]
...   return e
... }''')
>>> c = analyse(p["Gram"])
>>> c.time, c.memory, c.seq_time, c.seq_memory
('s^2·d', 's^2 + s·d', 's^2', 's^2')
"""
from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from typing import Iterable

from ..graph.diagram import Diagram
from ..graph.types import Dim

Monomial = tuple[tuple[str, int], ...]  # sorted (name, power)


def _monomials(dims: Iterable[Dim]) -> set[Monomial]:
    """Monomials of a product of dimensions (constants dropped: they are O(1))."""
    terms: list[Counter] = [Counter()]
    for d in dims:
        nxt = []
        for m, _ in d.terms:
            for t in terms:
                nxt.append(t + Counter(m))
        terms = nxt or terms
    return {tuple(sorted(t.items())) for t in terms}


def _dominant(ms: set[Monomial]) -> list[Monomial]:
    def covers(a: Monomial, b: Monomial) -> bool:
        da = dict(a)
        return all(da.get(n, 0) >= p for n, p in b)

    keep = [m for m in ms if not any(o != m and covers(o, m) for o in ms)]
    return sorted(keep, key=lambda m: (-sum(p for _, p in m), m))


def _show(ms: list[Monomial], seq: set[str]) -> str:
    """``s^2·d``: sequence lengths first, as the paper writes them."""
    if not ms:
        return "1"
    ordered = [sorted(m, key=lambda np: (np[0] not in seq, np[0])) for m in ms]
    ordered.sort(key=lambda m: (-sum(p for _, p in m), [(n not in seq, -p, n) for n, p in m]))
    return " + ".join("·".join(n if p == 1 else f"{n}^{p}" for n, p in m) or "1" for m in ordered)


@dataclass(frozen=True)
class Complexity:
    time: str
    memory: str
    seq_time: str
    seq_memory: str


def analyse(d: Diagram) -> Complexity:
    """Time and memory of the diagram with every definition opened.

    The cost is that of ``d.expand()``, but computed per definition and combined
    (``combine.py``): linear in the source however often definitions nest."""
    from .combine import cost_monomials

    time, memory = cost_monomials(d)
    seq = _seq_names(d)
    return Complexity(_show(_dominant(set(time)), seq), _show(_dominant(set(memory)), seq),
                      _show(_dominant({_only(m, seq) for m in time}), seq),
                      _show(_dominant({_only(m, seq) for m in memory}), seq))


def _seq_names(d: Diagram) -> set[str]:
    prog = d.program
    names = set()
    for w in d.wires():
        for dim in d.wire_type(w):
            for n in dim.names():
                decl = prog.lookup_dim(n) if prog is not None else None
                if decl is not None and decl.kind == "seq":
                    names.add(n)
    return names


def _only(m: Monomial, names: set[str]) -> Monomial:
    return tuple((n, p) for n, p in m if n in names)
