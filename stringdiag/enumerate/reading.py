"""A reading of Sec. 5 of Khatri et al. (2024) as data: the choices the text leaves open.

The text fixes the generators, the bound ("at most five generators"), the input copies
("arbitrarily many copies of the input sequence") and the two reductions; it leaves open
whether a generator's ports are ordered, whether a member must contain attention, and
whether anything but the input may be copied. A :class:`Reading` names each choice, so the
count can be given under each (``sensitivity.py``) and the written file can say which
reading it holds.
"""
from __future__ import annotations

from dataclasses import dataclass, field, replace
from enum import Enum


class Copy(Enum):
    """What may be copied: only the input (the text's reading), also every value of the
    stream type (``streams``), or every wire (``all``)."""

    INPUT = "input"
    STREAMS = "streams"
    ALL = "all"


@dataclass(frozen=True)
class Reading:
    """The choices that make the space (``max``: at most this many occurrences).

    ``symmetric``: generators whose inputs may be permuted (the member is the same).
    ``interchangeable``: generators whose outputs may be permuted.
    ``paired``: generators whose ``k``-th output is a learnable map of their ``k``-th input
    alone (``LinAttPrepQK(a, b)`` makes φ(Q a) and φ(K b)): inputs and outputs may be
    permuted together, and an output may stand in for any other of that generator on the
    same source.
    ``require``: a member contains at least one of these generators (none: no requirement).
    ``once``: each generator occurs at most once (a reading that breaks "at most five").
    """

    max: int
    copy: Copy = Copy.INPUT
    symmetric: frozenset[str] = field(default_factory=frozenset)
    interchangeable: frozenset[str] = field(default_factory=frozenset)
    require: tuple[str, ...] = ()
    once: bool = False
    paired: frozenset[str] = field(default_factory=frozenset)

    def but(self, **changes) -> "Reading":
        return replace(self, **changes)

    def options(self) -> str:
        """The reading as ``stringdiag enumerate`` options."""
        parts = [f"--max {self.max}"]
        parts += [f"--{o} {','.join(sorted(v))}" for o, v in (("symmetric", self.symmetric),
                                                            ("interchangeable", self.interchangeable),
                                                            ("paired", self.paired)) if v]
        parts += [f"--require {','.join(self.require)}"] if self.require else []
        parts += [f"--copy {self.copy.value}"] if self.copy is not Copy.INPUT else []
        parts += ["--once"] if self.once else []
        return " ".join(parts)

    def describe(self) -> str:
        """The reading in words (the text output and the written file begin with it)."""
        copies = {Copy.INPUT: "only the input is copied", Copy.STREAMS: "the input and every stream value may be copied",
                  Copy.ALL: "every value may be copied"}[self.copy]
        sym = (f"{', '.join(sorted(self.symmetric))} symmetric in {'its' if len(self.symmetric) == 1 else 'their'} "
               "inputs" if self.symmetric else "")
        inter = (f"{', '.join(sorted(self.interchangeable))} with interchangeable outputs"
                 if self.interchangeable else "")
        pair = (f"{', '.join(sorted(self.paired))} with each output a map of its own input"
                if self.paired else "")
        ports = "; ".join(x for x in (sym, inter, pair) if x) or "every port ordered"
        need = (f"a member contains at least one of {', '.join(self.require)}" if self.require
                else "no generator is required")
        once = "; each generator at most once" if self.once else ""
        return (f"a member maps the stream (the first generator's first input type) to itself with at most "
                f"{self.max} generator occurrences, each with weights of its own{once}; {copies}; {ports}; {need}.")


__all__ = ["Copy", "Reading"]
