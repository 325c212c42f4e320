"""Dimensions of a traced module: which axis of each value is the batch, the sequence, a
broadcast axis of size one or a fixed size, and how each fixed size is written.

An axis is read from the value it belongs to in three runs of the module: the examples as
given, the same with one more row of batch, and (when a second example is given) another
sequence length. Sizes are written as the types of the language: an atom per size (``d12``),
except where the module itself cuts a size into parts: a reshape of 12 into 3 × 4 makes every
12 ``d3 * d4``, a cut of 4 into halves makes every 4 ``d2 + d2``, so that the checker sees the
parts it needs (the first cut recorded for a size wins)."""
from __future__ import annotations

import math
from dataclasses import dataclass, field

from ..errors import DiagError
from ..graph.types import DimKind


@dataclass(frozen=True)
class Axis:
    kind: DimKind
    size: int  # in the first run

    @property
    def kept(self) -> bool:
        """Whether the diagram's type has this axis (batch and broadcast axes it has not)."""
        return self.kind in (DimKind.SEQ, DimKind.FIXED)


def classify(shapes: list[tuple[int, ...]], what: str) -> list[Axis]:
    """The axes of one value from its shapes in the runs (first, batch + 1, [other length])."""
    base, batch = shapes[0], shapes[1]
    seq = shapes[2] if len(shapes) > 2 else base
    if not len(base) == len(batch) == len(seq):
        raise DiagError(f"{what}: its number of axes changes with the input's shape; cannot trace it")
    axes = []
    for b, bb, ss in zip(base, batch, seq):
        if bb != b and ss != b:
            if _tokens(b, bb, ss) and sum(x != y for x, y in zip(base, batch)) == 1:
                axes.append(Axis(DimKind.SEQ, bb - b))  # every token of the batch in one axis: per row, the sequence
                continue
            raise DiagError(f"{what}: an axis mixes the batch and the sequence other than as batch × length; "
                            "cannot trace it")
        kind = DimKind.BATCH if bb != b else DimKind.SEQ if ss != b else DimKind.ONE if b == 1 else DimKind.FIXED
        axes.append(Axis(kind, b))
    return axes


def _tokens(b: int, bb: int, ss: int) -> bool:
    """Whether an axis of b, bb, ss in the three runs is batch × length (``x.reshape(-1, d)``): the
    run with one more row adds one length, and the other length divides by the same batch."""
    length = bb - b
    return length > 0 and b % length == 0 and ss % (b // length) == 0 and ss // (b // length) != length


@dataclass
class SizeSpelling:
    """How each fixed size is written: an atom, or the product or sum of smaller ones.

    Filled in a first pass over the module (``frozen`` False), read in the second."""

    cuts: dict[int, tuple[str, tuple[int, ...]]] = field(default_factory=dict)
    frozen: bool = False
    used: set = field(default_factory=set)  # sizes written (their atoms are declared)
    used_kinds: set = field(default_factory=set)  # "s" once a sequence axis is written
    conflict: int | None = None  # a size the module cuts two ways (8 * 8 and 4 * 16, say)
    literal: bool = False  # every fixed size written as its number (when one is cut two ways)

    def product(self, n: int, parts: list[int]) -> None:
        self._cut(n, "*", tuple(p for p in parts if p != 1))

    def total(self, n: int, parts: list[int]) -> None:
        self._cut(n, "+", tuple(p for p in parts if p != 0))

    def _cut(self, n: int, op: str, parts: tuple[int, ...]) -> None:
        if not self.frozen and len(parts) > 1 and n not in parts:
            if (math.prod(parts) if op == "*" else sum(parts)) == n:
                if n in self.cuts and op == self.cuts[n][0] == "*" and sorted(self.cuts[n][1]) != sorted(parts):
                    self.conflict = n
                self.cuts.setdefault(n, (op, parts))

    def expr(self, n: int) -> str:
        """The type expression of a fixed size ``n``."""
        self.used.add(n)
        if n == 1 or self.literal:
            return str(n)
        if n not in self.cuts:
            return f"d{n}"
        op, parts = self.cuts[n]
        inner = [self.expr(p) for p in parts]
        return f" {op} ".join(f"({e})" if op == "*" and "+" in e else e for e in inner)

    def atoms(self) -> list[int]:
        """Every size written as an atom somewhere (the ``dim`` declarations)."""
        seen: set[int] = set()
        if self.literal:
            return []

        def walk(n: int) -> None:
            if n in self.cuts:
                for p in self.cuts[n][1]:
                    walk(p)
            elif n != 1:
                seen.add(n)
        for n in list(self.used):
            walk(n)
        return sorted(seen)

    def axis(self, a: Axis) -> str:
        if a.kind is DimKind.SEQ:
            self.used_kinds.add("s")
            return "s"
        self.used.add(a.size)
        return self.expr(a.size)
