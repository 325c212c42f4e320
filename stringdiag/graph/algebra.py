"""Composition of diagrams: ``then`` (``f ; g``), ``tensor`` (``f ⊗ g``) and ``fresh``.

These work on any :class:`~stringdiag.graph.hypergraph.Hypergraph` and build their result
with ``type(f)``, so :class:`~stringdiag.graph.diagram.Diagram` can offer them as methods
(``f.then(g)``) without an import cycle. The generators (``identity``, ``copy``, ``use``, ...)
and the whole story, with examples, are in ``compose.py``.
"""
from __future__ import annotations

import itertools
import re
from typing import Any, Iterable

from .box import Box, Global, Instance, Kind, Local, Wire
from ..errors import DiagError
from .clusters import Cluster, DefFrame
from .hypergraph import HG, Hypergraph
from .iso import definition_key
from .types import TensorType, show_type
from .weights import WeightKey, weight_key, weight_sets

_ids = itertools.count(1)  # fresh weight identities: op@n
_frames = itertools.count(1)  # picture frames of pasted copies


# -- composition ----------------------------------------------------------------------
def then(f: HG, g: Hypergraph) -> HG:
    """Sequential composition ``f ; g``: the outputs of ``f`` are the inputs of ``g``, whose
    types must agree exactly. Weight identities are kept (``then(f, f)`` shares ``f``'s).

    >>> from stringdiag.graph.compose import identity
    >>> then(identity("[d]"), identity("[k]"))  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    stringdiag.errors.DiagError: cannot compose id ; id: the outputs of id have types [d] but ... types [k]
    """
    if f.output_types != g.input_types:
        raise DiagError(f"cannot compose {f.name} ; {g.name}: the outputs of {f.name} have types "
                        f"{_show(f.output_types)} but the inputs of {g.name} have types {_show(g.input_types)}")
    out = _empty(f"{f.name} ; {g.name}", f, g)
    fmap = _paste(out, f, {})
    gmap = _paste(out, g, {w: fmap[v] for w, v in zip(g.inputs, f.outputs)})
    out.inputs = [fmap[w] for w in f.inputs]
    out.outputs = [gmap[w] for w in g.outputs]
    out.input_names = _input_names(out)
    return out


def tensor(f: HG, g: Hypergraph) -> HG:
    """Parallel composition ``f ⊗ g``: the inputs of ``f`` then those of ``g``, and the
    outputs likewise. Weight identities are kept (``tensor(f, f)`` shares ``f``'s).

    >>> from stringdiag.graph.compose import copy, identity
    >>> tensor(identity("[d]"), copy("[k]")).signature()
    'id @ copy : [d], [k] -> [d], [k], [k]'
    """
    out = _empty(f"{f.name} @ {g.name}", f, g)
    fmap, gmap = _paste(out, f, {}), _paste(out, g, {})
    out.inputs = [fmap[w] for w in f.inputs] + [gmap[w] for w in g.inputs]
    out.outputs = [fmap[w] for w in f.outputs] + [gmap[w] for w in g.outputs]
    out.input_names = _input_names(out)
    return out


def fresh(d: HG, globals_too: bool = False) -> HG:
    """The same diagram with every weight set of its own renamed to a fresh identity: the
    instances of its definition boxes and the params of its local learnables (boxes that
    shared a set still share the new one; global learnables keep theirs). In an expanded
    diagram the instance a path starts with is renamed (``H#1/F`` becomes ``H@7/F``), so
    that ``fresh`` and ``expand`` commute up to names. ``globals_too`` renames the global
    learnables' sets as well (the second of two layers asked to have weights of its own).

    >>> from stringdiag import loads
    >>> h = loads('''dim d : fixed
    ... diagram H(x: [d]) -> [d] {
    ...   learn F : [d] -> [d]
    ...   return F(x)
    ... }''')["H"]
    >>> [h.record(b).param for b in h.boxes()] != [fresh(h).record(b).param for b in fresh(h).boxes()]
    True
    """
    out = _empty(d.name, d, d)
    nodes = _paste(out, d, {})
    out.inputs, out.outputs = [nodes[w] for w in d.inputs], [nodes[w] for w in d.outputs]
    out.input_names = list(d.input_names)
    new: dict[str, str] = {}
    for n in list(out.graph):
        if out.is_box(n):
            out.reset(n, _refreshed(out.record(n), new, globals_too))
        elif scope := out.wire(n).scope:
            out.update(n, scope=_fresh_path(new, scope))
    return out


# -- helpers --------------------------------------------------------------------------
def fresh_id(op: str) -> str:
    """A weight identity no other use has: ``op@n`` (never the elaborator's ``op#k``)."""
    return f"{op}@{next(_ids)}"


def _fresh_path(new: dict[str, str], path: str) -> str:
    """``path`` with its first instance renamed, the same way wherever it occurs."""
    head, sep, rest = path.partition("/")
    if head not in new:
        new[head] = fresh_id(re.split(r"[#@]", head)[0] or head)
    return new[head] + sep + rest


def _refreshed(box: Box, new: dict[str, str], globals_too: bool = False) -> Box:
    """A box with its weight identities renamed, and the instance paths that name them (``weights.py``)."""
    w = box.weights
    if box.kind is Kind.DIAGRAM:  # a box without an instance is its own (as expand numbers it)
        box = box._replace(weights=Instance(_fresh_path(new, w.path) if isinstance(w, Instance) else fresh_id(box.op)))
    elif isinstance(w, Local) or globals_too and isinstance(w, Global):
        box = box._replace(weights=type(w)(_fresh_path(new, w.param)))
    return box._replace(clusters=tuple(c if c.is_simd else DefFrame(_fresh_path(new, c.path), c.name, c.copy)
                                       for c in box.clusters))


def _show(types: Iterable[TensorType]) -> str:
    return ", ".join(show_type(t) for t in types) or "nothing"


def _empty(name: str, f: HG, g: Hypergraph) -> HG:
    _check_shared(f, g)
    generics = tuple(dict.fromkeys(f.generics + g.generics))
    return type(f)(name=name, program=f.program or g.program, source=f.source or g.source, generics=generics)


def _paste(out: Hypergraph, d: Hypergraph, glue: dict[int, int]) -> dict[int, int]:
    """Copy ``d``'s nodes and edges into ``out`` under new ids, except the wires of ``d`` in
    ``glue``, which are the given wires of ``out``. Returns the map from ``d``'s nodes.
    Wire names are kept unique; the picture's SIMD frames get new identities."""
    names = {out.wire_label(w) for w in out.wires()}
    frames: dict[Any, tuple] = {}
    return out.paste(d, glue, lambda rec: _pasted(rec, names, frames))


def _pasted(rec: Box | Wire, names: set, frames: dict) -> Box | Wire:
    if isinstance(rec, Wire):
        return rec._replace(name=_unique(rec.name, names))
    return rec._replace(display=None if rec.display is None else dict(rec.display),
                        clusters=tuple(_frame(c, frames) for c in rec.clusters))


def _frame(c: Cluster, frames: dict) -> Cluster:
    """A frame of the picture around a pasted box, told apart from the same frame pasted
    elsewhere: a SIMD frame gets a new statement, a definition's frame a copy number."""
    key = c.statement if c.is_simd else c
    if key not in frames:
        frames[key] = ("compose", next(_frames))
    return c.with_(statement=frames[key]) if c.is_simd else DefFrame(c.path, c.name, frames[key])


def _unique(name: str | None, taken: set) -> str | None:
    return None if name is None else _unique_name(name, taken)


def _unique_name(name: str, taken: set) -> str:
    base, k = name, 1
    while name in taken:
        k += 1
        name = f"{base}_{k}"
    taken.add(name)
    return name


def _input_names(d: Hypergraph) -> list[str]:
    """The names of the input wires (distinct: they are the compiled module's arguments)."""
    taken = {d.wire_label(w) for w in d.inputs}
    return [d.wire_label(w) or _unique_name(f"x{k + 1}", taken) for k, w in enumerate(d.inputs)]


def _owners(d: Hypergraph, keys: set | None = None) -> dict[WeightKey, Any]:
    """Each weight set of ``d`` (of ``keys``, if given), with what computes with it: a
    declaration, or a definition told by its content (``iso.definition_key``)."""
    out = {}
    for b in d.boxes():
        node = d.record(b)
        key = weight_key(node)
        if key is not None and (keys is None or key in keys):
            owner = node.ref if node.ref is not None else node.op
            out[key] = definition_key(node.ref) if node.kind is Kind.DIAGRAM else owner
    return out


def _check_shared(f: Hypergraph, g: Hypergraph) -> None:
    """Refuse one weight identity on two different processes (two bodies' local ``F``)."""
    if f is g:
        return
    both = weight_sets(f) & weight_sets(g)
    if not both:
        return
    mine, theirs = _owners(f, both), _owners(g, both)
    for key in both:
        if mine[key] != theirs[key]:
            raise DiagError(f"{f.name} and {g.name} both use the weight set '{key.name}' but for different "
                            "boxes; give one of them its own weights with fresh()")


__all__ = ["then", "tensor", "fresh", "fresh_id"]
