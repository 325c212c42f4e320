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

import weakref
from typing import Any, Hashable, Iterable, Mapping

WeightKey = tuple  # ("learn", local, param) or ("diagram", instance)

_has_weights: "weakref.WeakKeyDictionary[Any, tuple]" = weakref.WeakKeyDictionary()  # graph -> (version, bool)


def has_local_weights(defn) -> bool:
    """Whether a definition owns weights of its own (local learnables, at any depth): only then
    do two uses of it differ. Cached per definition; linear in the program."""
    version = (defn.last_id, defn.graph.number_of_nodes())  # node ids only grow: any edit shows
    hit = _has_weights.get(defn.graph)
    if hit is not None and hit[0] == version:
        return hit[1]
    _has_weights[defn.graph] = (version, False)  # a definition cannot call itself; guard anyway
    found = False
    for b in defn.boxes():
        node = defn.box(b)
        if node["box"] == "learn" and node.get("local"):
            found = True
        elif node["box"] == "diagram" and has_local_weights(node["ref"]):
            found = True
        if found:
            break
    _has_weights[defn.graph] = (version, found)
    return found


def weight_key(node: Mapping) -> WeightKey | None:
    """The weight set a box computes with, or ``None`` for a box without weights of its own."""
    kind = node["box"]
    if kind == "learn":
        return ("learn", bool(node.get("local")), node.get("param", node["op"]))
    if kind == "diagram" and has_local_weights(node["ref"]):
        return ("diagram", node.get("instance", node["op"]))
    return None


def weight_sets(d) -> set[WeightKey]:
    """Every weight set a diagram's boxes use."""
    return {k for b in d.boxes() if (k := weight_key(d.box(b))) is not None}


def boxes_by_weights(d) -> dict[WeightKey, list[int]]:
    out: dict[WeightKey, list[int]] = {}
    for b in d.boxes():
        k = weight_key(d.box(b))
        if k is not None:
            out.setdefault(k, []).append(b)
    return out


def set_weight_key(node: dict, key: WeightKey) -> None:
    """Give a box the weight set ``key`` (of its own kind)."""
    if key[0] == "learn":
        node["local"], node["param"] = key[1], key[2]
    else:
        node["instance"] = key[1]


def tie(d, groups: Iterable[Iterable[WeightKey]]) -> dict[WeightKey, WeightKey]:
    """Make each group of weight sets one set (in place): every box of the group takes the
    first key, in sorted order. Returns the renaming. This is an expressivity reduction
    (⇒), never an equation."""
    rename: dict[WeightKey, WeightKey] = {}
    for group in groups:
        keys = sorted(set(group), key=repr)
        for k in keys[1:]:
            rename[k] = keys[0]
    if rename:
        for b in d.boxes():
            node = d.box(b)
            k = weight_key(node)
            if k in rename:
                set_weight_key(node, rename[k])
    return rename


def fresh_instance(op: str, taken: set[Hashable]) -> str:
    """``op#k`` with the least ``k`` not in ``taken`` (which it joins)."""
    k = 1
    while f"{op}#{k}" in taken:
        k += 1
    taken.add(f"{op}#{k}")
    return f"{op}#{k}"


def instances(d) -> set[str]:
    return {d.box(b)["instance"] for b in d.boxes() if d.box(b)["box"] == "diagram" and "instance" in d.box(b)}


__all__ = ["weight_key", "weight_sets", "boxes_by_weights", "has_local_weights", "set_weight_key", "tie",
           "fresh_instance", "instances", "WeightKey"]
