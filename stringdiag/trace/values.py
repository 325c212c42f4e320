"""A traced tensor as the diagram holds it: a wire, and where each torch axis lies on it.

The batch axis and broadcast axes of size one have no place on the wire; a transpose or a
permute only moves the places (it is folded into the index names of whatever reads the
value), so it costs no statement."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

from torch import fx

import numpy as np

from ..graph.types import DimKind
from .dims import Axis, classify

SEQ_LETTERS, FIXED_LETTERS = "ijl", "abcefgmnpqrtuvw"


@dataclass(frozen=True)
class Slot:
    """Where the k-th input of an opaque box goes among the operation's arguments."""

    k: int


@dataclass(frozen=True)
class TracedValue:
    wire: str  # a wire name, or a learnable tensor's use `W()`
    axes: tuple[Axis, ...]  # torch's axes, in torch's order
    pos: tuple[int | None, ...]  # each torch axis's place on the wire (None: not on it)
    ids: bool = False  # token ids (typed ``of V``), not real numbers
    mask: tuple | None = None  # a mask the trace recognised: ("causal",) or ("window", w), to pick a fused attention

    @classmethod
    def whole(cls, wire: str, axes, ids: bool = False) -> "TracedValue":
        """A value whose wire holds its kept axes in torch's order."""
        k, pos = 0, []
        for a in axes:
            pos.append(k if a.kept else None)
            k += a.kept
        return cls(wire, tuple(axes), tuple(pos), ids)

    @property
    def kept(self) -> list[int]:
        return [t for t, p in enumerate(self.pos) if p is not None]

    @property
    def in_order(self) -> bool:
        return [self.pos[t] for t in self.kept] == list(range(len(self.kept)))

    def index(self, letters: dict[int, str | None]) -> str:
        """The wire read at ``letters`` (torch axis -> index name, or None for ``:``)."""
        slots = [":"] * len(self.kept)
        for t in self.kept:
            slots[self.pos[t]] = letters.get(t) or ":"
        while slots and slots[-1] == ":":
            slots.pop()
        return f"{self.wire}[{', '.join(slots)}]" if slots else self.wire

    def relabel(self, axes) -> "TracedValue":
        """The same wire under other torch axes whose kept ones are these, in order."""
        places = iter(self.pos[t] for t in self.kept)
        return TracedValue(self.wire, tuple(axes), tuple(next(places) if a.kept else None for a in axes), self.ids, self.mask)


@dataclass(frozen=True)
class Empty:
    """A slice with nothing in it (the pass-through part of a rotary embedding over every feature):
    no wire; ``cat`` drops it."""

    axes: tuple


def letters_for(axes) -> dict[int, str]:
    """Index names for the kept axes of a value: i, j for sequences, a, b, c, ... for the rest."""
    seq, fixed, out = iter(SEQ_LETTERS), iter(FIXED_LETTERS), {}
    for t, a in enumerate(axes):
        if a.kept:
            out[t] = next(seq) if a.kind is DimKind.SEQ else next(fixed)
    return out


def aligned(src_ndim: int, out_letters: dict[int, str], out_ndim: int) -> dict[int, str]:
    """Torch's right-aligned broadcasting: the index names of an operand's axes."""
    shift = out_ndim - src_ndim
    return {t: out_letters[t + shift] for t in range(src_ndim) if t + shift in out_letters}


def number(v) -> str:
    """A Python number as the language writes it (positional, exact in float64)."""
    if isinstance(v, bool):
        v = int(v)
    if isinstance(v, int):
        return str(v) if v >= 0 else f"(0 - {-v})"
    if not np.isfinite(v):
        raise ValueError(f"{v} is not a finite number")
    text = np.format_float_positional(abs(float(v)), unique=True, trim="0")
    return text if v >= 0 else f"(0 - {text})"


@dataclass
class Opaque:
    """An operation the language cannot say, kept as a ``fixed`` box run by torch when compiled."""

    name: str
    label: str  # the torch operation
    fn: Callable
    args: tuple  # with ('val', k) where the k-th input goes
    kwargs: dict
    ins: list  # each input's torch axes
    out: tuple  # the output's torch axes



def where_(node: fx.Node) -> str:
    """``FILE:LINE`` of the source line that made a node (recorded as it was traced)."""
    return node.meta.get("where", f"<{node.name}>")


def lookup(env: dict, arg: Any) -> Any:
    """An fx argument with its nodes replaced by what they stand for."""
    return fx.node.map_aggregate(arg, lambda a: env[a] if isinstance(a, fx.Node) else a)


def out_axes(cap, node: fx.Node):
    return tuple(classify([run[node].shape for run in cap.values], f"'{node.name}'"))


def op_name(node: fx.Node) -> str:
    t = node.target
    return t if isinstance(t, str) else getattr(t, "__name__", str(t))
