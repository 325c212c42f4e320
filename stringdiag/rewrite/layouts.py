"""The entries of a layout in a splice (``dpo.py``): where each axis of a wire comes from.

A target wire the splice reads or replaces is laid out, axis by axis, as an axis of the rule's
wire (:class:`RuleAxis`) or a slot of the match's SIMD context (:class:`ContextSlot`). A box
the splice inserts iterates context slots and the rule box's own labels (:class:`BoxLabel`);
the trailing axes of its outputs are its own local axes (:class:`OwnAxis`).

Each entry is a tuple underneath, led by a tag nothing else reads, so that two kinds never
compare equal (a layout is compared with another, and its entries gathered in sets) and the
comparing and hashing stay in C; code reads ``is_slot`` and the named field. The tables
``RULE_AXIS[p]``, ``CONTEXT_SLOT[s]``, ... make each entry once and hand it out after.
"""
from __future__ import annotations

from operator import itemgetter
from typing import Callable, ClassVar, Generic, Literal, TypeVar

_make = tuple.__new__


class _Entry(tuple):
    __slots__ = ()
    is_slot: ClassVar[bool] = False  # a slot of the match's context (else the rule's or the box's own)


class RuleAxis(_Entry):
    """Axis ``pos`` of the rule's wire."""

    __slots__ = ()
    is_slot: ClassVar[Literal[False]] = False
    pos: int = property(itemgetter(1))  # type: ignore[assignment]

    def __new__(cls, pos: int) -> RuleAxis:
        return _make(cls, ("p", pos))


class ContextSlot(_Entry):
    """Slot ``slot`` of the match's SIMD context (``Match.slots``)."""

    __slots__ = ()
    is_slot: ClassVar[Literal[True]] = True
    slot: int = property(itemgetter(1))  # type: ignore[assignment]

    def __new__(cls, slot: int) -> ContextSlot:
        return _make(cls, ("s", slot))


class BoxLabel(_Entry):
    """A SIMD label of the rule's box, by its name there."""

    __slots__ = ()
    is_slot: ClassVar[Literal[False]] = False
    label: str = property(itemgetter(1))  # type: ignore[assignment]

    def __new__(cls, label: str) -> BoxLabel:
        return _make(cls, ("l", label))


class OwnAxis(_Entry):
    """Local axis ``pos`` of the box's own output (after its SIMD axes)."""

    __slots__ = ()
    pos: int = property(itemgetter(1))  # type: ignore[assignment]

    def __new__(cls, pos: int) -> OwnAxis:
        return _make(cls, ("i", pos))


K = TypeVar("K")
E = TypeVar("E")


class _Table(dict, Generic[K, E]):
    """Entries made on first asking and shared after: ``RULE_AXIS[2]``."""

    def __init__(self, make: Callable[[K], E]):
        super().__init__()
        self.make = make

    def __missing__(self, key: K) -> E:
        entry = self[key] = self.make(key)
        return entry


RULE_AXIS: _Table[int, RuleAxis] = _Table(RuleAxis)
CONTEXT_SLOT: _Table[int, ContextSlot] = _Table(ContextSlot)
BOX_LABEL: _Table[str, BoxLabel] = _Table(BoxLabel)
OWN_AXIS: _Table[int, OwnAxis] = _Table(OwnAxis)

Placed = RuleAxis | ContextSlot  # a target wire's axis, as the splice reads it
Layout = tuple[Placed, ...]

__all__ = ["RuleAxis", "ContextSlot", "BoxLabel", "OwnAxis", "RULE_AXIS", "CONTEXT_SLOT", "BOX_LABEL", "OWN_AXIS",
           "Placed", "Layout"]
