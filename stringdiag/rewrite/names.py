"""Wire names: how a match spells the wires it covers, and fresh names for new wires.

A derivation script selects a match by its wires' names, so a name must say which copy of
an expanded definition it is in (``Layer#3/Head#2/y``); a wire a rewrite adds gets the rule's
name, made unique in the target (``bc``, ``bc'``) so that later steps can name it.
"""
from __future__ import annotations

from ..graph.box import Box
from ..graph.diagram import Diagram


def instance_path(box: Box) -> str:
    """``Layer#3/Head#2/`` for a box inlined from definitions by ``expand``; else empty."""
    for c in reversed(box.clusters):
        if not c.is_simd:
            return c.path
    return ""


def wire_name(d: Diagram, w: int) -> str:
    """A wire's name as matches spell it: its own name, qualified by the instance of the
    definition it was opened from (``Layer#3/Head#2/y``) unless the diagram that used the
    definition named it; an unnamed wire by the box making it (``F@3:7``)."""
    wire = d.wire(w)
    pr = d.producer(w)
    path = instance_path(d.record(pr)) if pr is not None else ""
    if wire.scope is not None:  # named by the definition that used the one making it
        path = wire.scope
    if wire.name:
        return path + wire.name
    if pr is not None:
        pos = d.record(pr).pos
        op = d.record(pr).op
        return path + (f"{op}@{pos.line}:{pos.col}" if pos else f"{op}#{pr}")
    return f"#{w}"


class WireNames:
    """The wire names of a diagram, read once, so that new wires get names not used yet."""

    def __init__(self, d: Diagram):
        self._names = {name for w in d.wires() if (name := d.wire_label(w))}

    def fresh_name(self, name: str | None) -> str | None:
        """``name``, or ``name'``, ``name''``, ... if the diagram has it already."""
        if not name:
            return name
        while name in self._names:
            name += "'"
        self._names.add(name)
        return name


__all__ = ["instance_path", "wire_name", "WireNames"]
