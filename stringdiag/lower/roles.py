"""Which positions each wire of an incremental form holds: the new ones (N) or every one so far (A).

In the incremental form (``incremental.py``) the sequence axis of a wire holds the new positions.
Attention whose causal mask is not one fused process (ALiBi's bias added to the scores, a decay
matrix, ReLU attention) reads a wire of two sequence axes, queries by keys: the queries are the
new positions, the keys every position so far. This pass finds, from the outputs back, the roles
each wire is read in (a tuple, per axis of its type: N, A, or None for an axis that is not the
sequence's), and which wires are kept in a cache: a per-position wire computed from the inputs
(one sequence axis) that is read in role A is computed for the new positions and appended to
what the earlier ones left. Values made from positions alone (``causal<s>``, ``positions<s>``,
a learned table) are made in any role directly. What the keys then sum is checked causal by
``incremental.py`` (a mask), never assumed.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum
from typing import Callable

from ..graph.box import Kind
from ..graph.diagram import Diagram
from ..graph.types import Dim
from .table import ROW_WISE


class Role(str, Enum):
    """What a sequence axis of a wire holds in the incremental form."""

    NEW = "N"  # the new positions
    ALL = "A"  # every position so far, the new ones included


N, A = Role.NEW, Role.ALL
Roles = tuple  # per axis of a wire's type: a Role, or None (not a sequence axis)


@dataclass
class RolePlan:
    """The roles each live wire is read in, and the wires kept in a cache."""

    demand: dict[int, set[Roles]] = field(default_factory=dict)
    cached: set[int] = field(default_factory=set)

    def roles(self, w: int) -> set[Roles]:
        return self.demand.get(w, set())

    def keys(self) -> bool:
        """Whether any wire is read over every position so far."""
        return bool(self.cached) or any(A in r for rs in self.demand.values() for r in rs)


def plan(d: Diagram, live: set[int], stream: Callable[[Dim], bool]) -> RolePlan:
    """The roles of ``d``'s wires (outputs: the new positions), from the outputs back."""
    out = RolePlan()
    axes = {w: [stream(x) and x.name is not None for x in d.wire_type(w)] for w in d.wires()}
    dep = set(d.inputs)  # wires computed from the inputs
    order = d.topological_boxes()
    for b in order:
        if any(w in dep for w, _ in d.box_inputs(b)):
            dep.update(d.box_outputs(b))

    def want(w: int, roles: Roles) -> None:
        if A in roles and w in dep and sum(axes[w]) == 1:  # per position, from the inputs: a cache
            out.cached.add(w)
            roles = tuple(N if s else None for s in axes[w])
        out.demand.setdefault(w, set()).add(roles)

    for w in d.outputs:
        want(w, tuple(N if s else None for s in axes[w]))
    for b in reversed(order):
        if b not in live:
            continue
        for labels, local in versions(d, b, out, axes):
            for w, ins in zip([w for w, _ in d.box_inputs(b)], input_roles(d, b, labels, local, axes)):
                want(w, ins)
    return out


def versions(d: Diagram, b: int, p: RolePlan, axes: dict) -> list[tuple[dict, tuple]]:
    """Each way box ``b``'s outputs are read: the roles of its SIMD labels, and of its first
    output's local axes. A box of several outputs is read in one way (its first's roles)."""
    node = d.record(b)
    outs = d.box_outputs(b)
    seen, found = set(), []
    for k, w in enumerate(outs):
        for roles in sorted(p.roles(w), key=str):
            n = len(node.simd) - (1 if node.scan and k == 0 else 0)
            labels = {lab: roles[i] for i, (lab, _) in enumerate(node.simd[:n]) if roles[i] is not None}
            local = tuple(roles[n:]) if k == 0 else ()
            key = (tuple(sorted(labels.items())), local)
            if key not in seen:
                seen.add(key)
                found.append((labels, local))
    if not found:  # read by nothing live (an output of several read elsewhere): the new positions
        found.append(({}, ()))
    return found


def input_roles(d: Diagram, b: int, labels: dict, local: tuple, axes: dict) -> list[Roles]:
    """The roles box ``b`` reads its inputs in, when its outputs are read as ``labels``/``local``
    say: a SIMD label's role; a summed label over the sequence every position so far (A); a local
    axis its output's (a product, a reindex, a row softmax) or the new positions."""
    node = d.record(b)
    summed = {lab for lab, dim in node.summed}
    keeps_local = node.kind in (Kind.CONTRACT, Kind.REINDEX) or node.op in ROW_WISE
    out = []
    for w, ax in d.box_inputs(b):
        roles = []
        for i, a in enumerate(ax):
            if not axes[w][i]:
                roles.append(None)
            elif isinstance(a, str):
                roles.append(A if a in summed else labels.get(a, N))
            else:
                roles.append(local[a] if keeps_local and a < len(local) and local[a] is not None else N)
        out.append(tuple(roles))
    return out


__all__ = ["A", "N", "Role", "RolePlan", "plan", "versions", "input_roles"]
