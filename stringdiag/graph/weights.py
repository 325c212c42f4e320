"""Weight identity: which boxes compute one function with one set of weights.

Weight sharing is semantics (Khatri et al. (2024), App. A.2): two uses of one learnable box are one
function, two learnable boxes are two. The graph says which is which with two attributes,
never with names alone:

- a ``learn`` box has ``param`` (its weight set) and ``local``. A global learnable (declared
  at the top of a file) is one set wherever it is used: ``param`` is its name. A local one
  (declared inside a definition) is fresh for every *instance* of that definition.
- a ``diagram`` box has ``instance``, the identity of the weights inside it. The elaborator
  numbers the uses of a definition in a body (``H#1``, ``H#2``); copying a box copies its
  instance, so the copies share their weights.

Expanding a box of instance ``I`` at instance path ``P`` gives its local weights the
identity ``P I/param``; at the top level the path is empty, so ``expand`` is idempotent.

>>> from stringdiag import loads
>>> p = loads('''dim d : fixed
... diagram H(x: [d]) -> [d] {
...   learn F : [d] -> [d]
...   return F(x)
... }
... diagram D(x: [d]) -> [d] {
...   return H(x) + H(x)
... }''')
>>> sorted(weight_sets(p["D"].expand()))
[('learn', True, 'H#1/F'), ('learn', True, 'H#2/F')]
>>> weight_sets(p["D"].expand().expand()) == weight_sets(p["D"].expand())
True
"""
from __future__ import annotations

from enum import Enum
from operator import itemgetter
from typing import Container, Hashable, Iterable, Mapping

from .box import Box, Global, Instance, Kind, Local
from .hypergraph import per_graph_cache


class SetKind(str, Enum):
    """What holds a weight set: a learnable box, a definition box's instance, a scanned cell."""

    LEARN = "learn"
    DIAGRAM = "diagram"
    CELL = "cell"


class WeightSet(tuple):
    """One set of weights: its ``kind``, its ``name`` (the path that names it, ``H#1/F``) and,
    for a learnable, whether it is ``local`` to an instance. It is the tuple the public keys of
    ``compiled.weight_sets`` have always been — ``("learn", local, name)``, ``("diagram", name)``,
    ``("cell", name)`` — so it compares, hashes, sorts and prints as they do (a plain tuple
    finds it in a dict); code reads its fields, and :meth:`of` reads a plain tuple."""

    __slots__ = ()

    def __new__(cls, kind: SetKind, name: str, local: bool = False) -> WeightSet:
        parts = (_TAG[kind], local, name) if kind is SetKind.LEARN else (_TAG[kind], name)
        return _make(cls, parts)

    def __getnewargs__(self) -> tuple:  # type: ignore[override]  # (pickle: made from its fields)
        return self.kind, self.name, self.local

    @classmethod
    def of(cls, key: tuple) -> WeightSet:
        """The record of a key given as a plain tuple (a user's, a test's); itself if it is one."""
        if isinstance(key, WeightSet):
            return key
        kind = SetKind(key[0])
        return cls(kind, key[-1], bool(key[1]) if kind is SetKind.LEARN else False)

    @property
    def kind(self) -> SetKind:
        return SetKind(self[0])

    name: str = property(itemgetter(-1))  # type: ignore[assignment]  # (read in C: the hot path)

    @property
    def local(self) -> bool:
        return self[0] == SetKind.LEARN and bool(self[1])

    @property
    def is_global(self) -> bool:
        """A global learnable's set: one set wherever its name appears."""
        return self[0] == SetKind.LEARN and not self[1]

    def renamed(self, name: str) -> WeightSet:
        """The set of the same kind named ``name``."""
        return WeightSet(self.kind, name, self.local)


WeightKey = WeightSet  # the name the annotations have used
_TAG = {kind: kind.value for kind in SetKind}
_make = tuple.__new__  # a record from its tuple, with no Python call (``weight_key`` is hot)


@per_graph_cache(reentry=False)  # a definition cannot call itself; guard anyway
def has_local_weights(defn) -> bool:
    """Whether a definition owns weights of its own (local learnables, at any depth): only then
    do two uses of it differ. Cached per definition; linear in the program."""
    for b in defn.boxes():
        box = defn.record(b)
        if box.local or box.kind is Kind.DIAGRAM and has_local_weights(box.ref):
            return True
    return False


def weight_key(box: Box) -> WeightKey | None:
    """The weight set a box computes with, or ``None`` for a box without weights of its own."""
    w = box.weights
    if isinstance(w, (Global, Local)):
        return _make(WeightSet, ("learn", isinstance(w, Local), w.param))
    if box.kind is Kind.DIAGRAM and has_local_weights(box.ref):
        return _make(WeightSet, ("diagram", w.path if isinstance(w, Instance) else box.op))
    return None


def weight_sets(d) -> set[WeightKey]:
    """Every weight set a diagram's boxes use."""
    return {k for b in d.boxes() if (k := weight_key(d.record(b))) is not None}


def boxes_by_weights(d) -> dict[WeightKey, list[int]]:
    out: dict[WeightKey, list[int]] = {}
    for b in d.boxes():
        k = weight_key(d.record(b))
        if k is not None:
            out.setdefault(k, []).append(b)
    return out


def weights_of_key(key: WeightKey):
    """The :mod:`~stringdiag.graph.box` weights record a weight key names."""
    if key.kind is SetKind.LEARN:
        return Local(key.name) if key.local else Global(key.name)
    return Instance(key.name)


def renaming(groups: Iterable[Iterable[WeightKey]]) -> dict[WeightKey, WeightKey]:
    """What a tie of ``groups`` renames: each key of a group to the group's first, in sorted order."""
    rename: dict[WeightKey, WeightKey] = {}
    for group in groups:
        keys = sorted(set(group), key=repr)
        for k in keys[1:]:
            rename[k] = keys[0]
    return rename


def renamed(box: Box, rename: Mapping[WeightKey, WeightKey]) -> Box:
    """``box`` as a tie of ``rename`` leaves it."""
    key = weight_key(box) if rename else None
    return box if key is None or key not in rename else box._replace(weights=weights_of_key(rename[key]))


def tie(d, groups: Iterable[Iterable[WeightKey]], skip: Container[int] = ()) -> dict[WeightKey, WeightKey]:
    """Make each group of weight sets one set (in place): every box of the group (but those of
    ``skip``) takes the first key, in sorted order. Returns the renaming. This is an
    expressivity reduction (⇒), never an equation."""
    rename = renaming(groups)
    if rename:
        for b in d.boxes():
            key = weight_key(d.record(b))
            if key in rename and b not in skip:
                d.update(b, weights=weights_of_key(rename[key]))
    return rename


def fresh_instance(op: str, taken: set) -> str:
    """``op#k`` with the least ``k`` not in ``taken`` (which it joins)."""
    k = 1
    while f"{op}#{k}" in taken:
        k += 1
    taken.add(f"{op}#{k}")
    return f"{op}#{k}"


def instances(d, rename: Mapping[WeightKey, WeightKey] | None = None) -> set[str]:
    """The instance paths of ``d``'s definition boxes (as a tie of ``rename`` would leave them)."""
    if rename:
        return {w.path for b in d.boxes() if isinstance(w := renamed(d.record(b), rename).weights, Instance)}
    return {w.path for b in d.boxes() if isinstance(w := d.record(b).weights, Instance)}


__all__ = ["SetKind", "WeightSet", "weight_key", "weight_sets", "boxes_by_weights", "has_local_weights", "weights_of_key",
           "renaming", "renamed", "tie", "fresh_instance", "instances", "WeightKey"]
