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


from ..graph.diagram import Diagram
from .shape import cost_monomials
from .monomials import dominant, only, show
from .support import sparse_cost
from ..graph.types import DimKind
from ..syntax.records import Record

class Complexity(Record):
    time: str
    memory: str
    seq_time: str
    seq_memory: str


def analyse(d: Diagram) -> Complexity:
    """Time and memory of the diagram with every definition opened.

    The cost is that of ``d.expand()``, but computed per definition and combined
    (``combine.py``): linear in the source however often definitions nest. A masked attention
    whose mask has a small support (a sliding window) is counted on it (``support.py``), and
    the sequence-length figures keep the support's parameter (``O(s·w)``, not ``O(s)``)."""
    sparse = sparse_cost(d)
    time, memory, params = sparse if sparse is not None else (*cost_monomials(d), set())
    seq = seq_names(d)
    kept, then = seq | params, frozenset(params)
    return Complexity(show(dominant(set(time)), seq, then), show(dominant(set(memory)), seq, then),
                      show(dominant({only(m, kept) for m in time}), seq, then),
                      show(dominant({only(m, kept) for m in memory}), seq, then))


def seq_names(d: Diagram) -> set[str]:
    prog = d.program
    names = set()
    for w in d.wires():
        for dim in d.wire_type(w):
            for n in dim.names():
                decl = prog.lookup_dim(n) if prog is not None else None
                if decl is not None and decl.kind is DimKind.SEQ:
                    names.add(n)
    return names
