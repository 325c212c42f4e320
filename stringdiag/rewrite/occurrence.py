"""What matching finds: an occurrence of a pattern in a target (:class:`Match`)."""
from __future__ import annotations

from ..syntax.records import Mutable, field
from typing import Any

from ..graph.box import Box
from ..graph.diagram import Diagram
from ..graph.types import Dim
from .view import Perm


class Match(Mutable, frozen=False):
    """An occurrence of a pattern in a target.

    ``boundary`` gives, for each input and output wire of the pattern, its target wire, the
    permutation of axes (pattern axis ``p`` is target axis ``perm[p]``) and the target
    wire's context axes as ``(axis, slot)``; ``slots`` are the context indices, with their
    dimensions and a name to show them by.
    """

    pattern: Diagram
    boxes: dict[int, int]                            # pattern box -> target box
    wires: dict[int, tuple[int, Perm]]               # pattern wire -> (target wire, perm)
    boundary: dict[int, tuple[int, Perm, tuple]]     # pattern in/out wire -> (wire, perm, ctx axes)
    dims: dict[str, Dim]                             # the rule's dimension variables
    idents: dict[str, int]                           # process name (or box variable) -> target box
    slots: list[tuple[str, Dim]]                     # context: (name, dimension)
    box_slots: dict[int, tuple[int, ...]]            # target box -> its slots, in its SIMD order
    where: str = ""                                  # the names of the output wires
    names: frozenset[str] = frozenset()              # names of every matched (non-input) wire
    rule: Any = None
    reverse: bool = False
    seed: tuple = ()                                 # (anchor pattern box, its target box)
    ties: tuple[frozenset, ...] = ()                 # weight sets one pattern name would merge (⇒)
    inner: dict[str, Box] = field(default_factory=dict)  # box variables bound inside scanned cells
    order: str = ""  # where a scanned cell was matched with its inputs in another order, which

    def __repr__(self) -> str:
        ctx = f" inside {', '.join(f'{n} : {d}' for n, d in self.slots)}" if self.slots else ""
        return f"<Match {self.where}{ctx}: {len(self.boxes)} boxes>"

    @property
    def targets(self) -> frozenset[int]:
        return frozenset(self.boxes.values())


__all__ = ["Match"]
