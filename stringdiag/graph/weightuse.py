"""Every use of one weight set, wherever it sits: at the top level of a diagram, or inside the
definition boxes, scanned cells and ``repeat`` stacks it uses (read only: nothing is edited).

Weight sharing is semantics (``weights.py``): every box computing with one set is one
function. A step that keeps or ties weights (absorb, fold, copy, a rule that ties) must see
every such box, not only the top-level ones, or it splits one set silently: a global
learnable used inside a definition box is the same set as at the top level. The sets are
named as ``expand`` and lowering name them (``H#1/F``: ``F`` inside the instance ``H#1``;
``B#1/k/F`` in copy ``k`` of a stack, ``B#1/F`` when it is shared), so a set is found
inside a box by its path rather than by opening the box: the query is linear in the depth
of the definitions, not in the size of their expansion.

>>> from stringdiag import loads
>>> p = loads('''dim d : fixed
... learn R : [d] -> [d]
... diagram H(x: [d]) -> [d] {
...   return R(x)
... }
... diagram D(x: [d]) -> [d] {
...   return R(x) + H(x)
... }''')
>>> [u.where() for u in uses(p["D"], ("learn", False, "R"))]
['', "inside 'H' (a definition box)"]
"""

from enum import Enum
from typing import NamedTuple

from .box import Box, Global, Kind, Local
from .hypergraph import count_value, per_graph_cache
from .weights import SetKind, WeightKey, WeightSet, weight_key


class Holder(str, Enum):
    """How a use inside a box is reached: the kind of box around it."""

    DEFINITION = "a definition box"
    SCAN = "a scanned cell"
    STACK = "a repeat stack"


class WeightUse(NamedTuple):
    """One top-level box that computes with the set: itself (``within`` empty), or through the
    boxes ``within`` (outermost first: each a name and how it holds the next)."""

    box: int
    within: tuple[tuple[str, Holder], ...] = ()

    @property
    def nested(self) -> bool:
        return bool(self.within)

    def where(self) -> str:
        """``inside 'H' (a definition box)``, or ``''`` for a use at the top level."""
        return ", ".join(f"inside '{op}' ({via.value})" for op, via in self.within)


def uses(d, key: WeightKey) -> list[WeightUse]:
    """Every top-level box of ``d`` that computes with the weight set ``key`` (a key of
    ``d``'s own level, as ``weights.weight_key`` gives it), with where inside it the set is
    used. One entry per top-level box: the first path found inside it names it."""
    key = WeightSet.of(key)
    found = []
    for b in d.boxes():
        box = d.record(b)
        if weight_key(box) == key:
            found.append(WeightUse(b))
            continue
        within = _inside(box, key)
        if within is not None:
            found.append(WeightUse(b, within))
    return found


def nested_uses(d, key: WeightKey) -> list[WeightUse]:
    """The uses of ``key`` inside a definition box, a scanned cell or a stack of ``d``."""
    return [u for u in uses(d, key) if u.nested]


def used(d, key: WeightKey) -> bool:
    """Whether any box of ``d``, at any depth, computes with the set ``key``."""
    return bool(uses(d, key))


def learner_key(name: str, local: bool = False) -> WeightKey:
    """The weight set of a learnable box declared as ``name`` (global, or ``local``)."""
    return WeightSet(SetKind.LEARN, name, local)


def _inside(box: Box, key: WeightKey) -> tuple | None:
    """The path to a use of ``key`` inside the body of the diagram box ``box``, or None."""
    if box.kind is not Kind.DIAGRAM or box.ref is None:
        return None
    inner = _inner_key(box, key)
    if inner is None:
        return None
    here = ((box.op, via(box)),)
    for b in box.ref.boxes():
        node = box.ref.record(b)
        if weight_key(node) == inner:
            return here
        deeper = _inside(node, inner)
        if deeper is not None:
            return here + deeper
    return None


def _inner_key(box: Box, key: WeightKey) -> WeightKey | None:
    """``key`` as the body of ``box`` names it, or None where no box of the body can use it:
    a global set keeps its name (and is looked for only where the body holds it); a set of an
    instance is inside only under the box's own instance path (and, in an unshared stack,
    under one copy's number)."""
    if key.is_global:
        return key if key.name in globals_in(box.ref) else None
    path, inst = key.name, box.instance if box.instance is not None else box.op
    if not path.startswith(inst + "/"):
        return None
    rest = path[len(inst) + 1:]
    if box.repeat is not None and not box.shared:
        copy, _, rest = rest.partition("/")
        count = count_value(box.repeat.count, box.ref.program, {})  # None: sized only when compiled
        if not copy.isdigit() or not rest or count is not None and int(copy) >= count:
            return None
    return key.renamed(rest)


def via(box: Box) -> Holder:
    """How a diagram box holds its body: a definition box, a scanned cell or a stack."""
    return Holder.SCAN if box.scan else Holder.STACK if box.repeat is not None else Holder.DEFINITION


@per_graph_cache(reentry=frozenset())  # a definition cannot use itself; guard anyway
def globals_in(defn) -> frozenset[str]:
    """The global learnables a definition computes with, at any depth (cached per definition:
    linear in the program)."""
    names: set[str] = set()
    for b in defn.boxes():
        box = defn.record(b)
        if isinstance(box.weights, Global):
            names.add(box.weights.param)
        elif box.kind is Kind.DIAGRAM and box.ref is not None:
            names |= globals_in(box.ref)
    return frozenset(names)


__all__ = ["Holder", "WeightUse", "uses", "nested_uses", "used", "learner_key", "via", "globals_in"]
