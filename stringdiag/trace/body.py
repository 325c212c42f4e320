"""One definition being written: its statements, its local declarations, the weights they
hold, and fresh names for its wires."""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from .dims import Axis
from .values import TracedValue, letters_for

RESERVED = {"dim", "fixed", "seq", "learn", "abstract", "random", "diagram", "return", "scan", "repeat", "shared",
            "import", "as", "via", "where", "seed", "sqrt", "s"}


def ident(text: str) -> str:
    s = re.sub(r"\W+", "_", str(text)).strip("_") or "v"
    s = s if not s[0].isdigit() else "v" + s
    return s + "_" if len(s) == 1 or s in RESERVED or s.startswith("sum_") else s


def prefixed(prefix: str, ours):
    """A weight's name (or names, for a tensor cut into several) under a use's name."""
    return f"{prefix}.{ours}" if isinstance(ours, str) else tuple(f"{prefix}.{o}" for o in ours)


@dataclass
class TracedDefinition:
    name: str
    inputs: list[int]  # which tensors of the call it takes
    weights: list


@dataclass
class TracedUse:
    """A use of a definition, kept structured so that uses in sequence can become a ``repeat``."""

    name: str  # the definition
    outs: list[str]
    ins: list[str]
    attr: str  # the submodule's path in torch
    weights: list  # (ours relative to the use, theirs relative to the submodule, transposed)

    def text(self) -> str:
        return f"{', '.join(self.outs)} = {self.name}({', '.join(self.ins)})"


@dataclass
class TracedBody:
    em: "Emitter"  # noqa: F821 (emit.Emitter, which imports this module)
    module: object = None  # the torch module this definition is of (its constants are kept by it)
    taken: set = field(default_factory=set)
    attrs: set = field(default_factory=set)  # the submodules' names: kept for their boxes and uses
    decls: list = field(default_factory=list)
    lines: list = field(default_factory=list)  # str or TracedUse
    weights: list = field(default_factory=list)  # (ours, theirs, transposed)

    def fresh(self, base: str, claim: bool = False) -> str:
        """A new wire or box name from ``base``; a submodule's own name only when ``claim``ed."""
        name, k = ident(base), 1
        while name in self.taken or name in self.em.reserved or (name in self.attrs and not claim):
            k += 1
            name = f"{ident(base)}_{k}"
        self.taken.add(name)
        return name

    def say(self, line: str) -> None:
        self.lines.append(line)

    def assign(self, base: str, axes, expr_of) -> TracedValue:
        """``wire[letters] = expr`` for a value with torch ``axes``; ``expr_of(letters)`` writes the right side."""
        letters = letters_for(axes)
        wire = self.fresh(base)
        lhs = f"{wire}[{', '.join(letters[t] for t in sorted(letters))}]" if letters else wire
        self.say(f"{lhs} = {expr_of(letters)}")
        return TracedValue.whole(wire, axes)

    def assign_lead(self, base: str, axes, keep: dict, rhs: str) -> TracedValue:
        """``wire[keep] = rhs``, where ``rhs`` leaves the axes not in ``keep`` free (at the end, in order)."""
        wire = self.fresh(base)
        lhs = ", ".join(keep[t] for t in sorted(keep))
        self.say(f"{wire}{f'[{lhs}]' if lhs else ''} = {rhs}")
        return TracedValue.whole(wire, axes)

    def whole(self, v: TracedValue, base: str | None = None) -> str:
        """The wire of ``v`` holding its axes in torch's order (a transposing statement if they are not:
        ``query_states_t``, the wire's name and ``_t``)."""
        if v.in_order:
            return v.wire
        return self.assign(base or f"{ident(v.wire)}_t", v.axes, lambda L: v.index(L)).wire

    def ordered(self, v: TracedValue, base: str | None = None) -> TracedValue:
        return TracedValue.whole(self.whole(v, base), v.axes)

    def learn(self, name: str, sig: str, theirs: list[tuple[str, str, bool]]) -> str:
        """A learnable box declared here (fresh for every use of this definition)."""
        box = self.fresh(name, claim=True)
        self.decls.append(f"learn {box} : {sig}")
        self.weights += [(f"{box}.{suffix}", their, t) for suffix, their, t in theirs]
        return box

    def type_of(self, axes: tuple[Axis, ...]) -> str:
        return "[" + ", ".join(self.em.sizes.axis(a) for a in axes if a.kept) + "]"
