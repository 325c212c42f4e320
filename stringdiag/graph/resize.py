"""A diagram at other sizes: named dimensions replaced by others, everywhere they appear.

A diagram over fixed dimensions denotes a family of architectures, one for every choice of
sizes; making two dimensions one (``dim g := d`` in a derivation: the decoder's state as
wide as the source embedding) picks a sub-family. The replacement reaches every place a
dimension is written: wire types, SIMD and summed indices, the generic arguments of
prelude boxes, repeat counts, symbolic constants (``sqrt(k)``), the declarations of
learnable and fixed boxes (their types) and the bodies of definitions used as boxes.

>>> from stringdiag import loads
>>> from stringdiag.graph.types import Dim
>>> p = loads('''dim s : seq
... dim d, g : fixed
... learn F : [d] -> [g]
... diagram D(x: [s, d]) -> [s, g] {
...   y[i] = F(x[i])
...   return y
... }''')
>>> resized(p["D"], {"g": Dim.var("d")}).signature()
'D : [s, d] -> [s, d]'
"""
from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..syntax.records import replace
from .box import Box, Repeat
from .constants import Const, substitute
from .decls import BoxDecl
from .hypergraph import HG, Hypergraph
from .types import Dim, substitute_type


def resized(d: HG, sub: Mapping[str, Dim]) -> HG:
    """``d`` with the dimensions named in ``sub`` replaced; definitions used as boxes are
    resized too (each once), except where a generic parameter of theirs has the name."""
    return _Resizer(dict(sub)).diagram(d)


class _Resizer:
    def __init__(self, sub: dict[str, Dim]):
        self.sub = sub
        self.done: dict[int, Any] = {}  # id of a definition or declaration -> its resized copy

    def diagram(self, d: HG) -> HG:
        if set(d.generics) & self.sub.keys():  # the name is the definition's own parameter
            return d
        if id(d) in self.done:
            return self.done[id(d)]
        out = d.copy()
        self.done[id(d)] = out
        for n in list(out.graph):
            if out.is_box(n):
                out.reset(n, self.box(out.record(n)))
            else:
                out.update(n, type=substitute_type(out.wire_type(n), self.sub))
        return out

    def pairs(self, pairs: tuple) -> tuple:
        """(label, Dim) pairs at the new sizes."""
        return tuple((lab, self.dim(dim)) for lab, dim in pairs)

    def box(self, box: Box) -> Box:
        """The box at the new sizes."""
        box = box._replace(simd=self.pairs(box.simd), summed=self.pairs(box.summed), generics=self.pairs(box.generics),
                           clusters=tuple(c.with_(dim=self.dim(c.dim)) if c.is_simd and isinstance(c.dim, Dim) else c
                                          for c in box.clusters))
        if box.repeat is not None:
            box = box._replace(loop=Repeat(self.dim(box.repeat.count), box.repeat.shared))
        if isinstance(box.value, Const):
            box = box._replace(value=substitute(box.value, self.sub))
        if isinstance(box.ref, BoxDecl):
            box = box._replace(ref=self.decl(box.ref))
        elif isinstance(box.ref, Hypergraph):
            box = box._replace(ref=self.diagram(box.ref))
        return box

    def decl(self, decl: BoxDecl) -> BoxDecl:
        if set(decl.generics) & self.sub.keys():
            return decl
        if id(decl) not in self.done:
            self.done[id(decl)] = replace(
                decl, ins=tuple(substitute_type(t, self.sub) for t in decl.ins),
                outs=tuple(substitute_type(t, self.sub) for t in decl.outs))
        return self.done[id(decl)]

    def dim(self, dim: Dim) -> Dim:
        return dim.substitute(self.sub)


__all__ = ["resized"]
