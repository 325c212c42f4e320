"""What stops a diagram from compiling, found without compiling it (and without torch).

``stringdiag check`` reports these, so that ``compile`` refuses nothing for a reason visible
in the source that ``check`` did not name first. Sizes of fixed dimensions are not in the
source (``--dims`` gives them) and are not asked about here.

Two kinds of obstacle:

- a *defect*, which no use of the diagram can get past (a fixed process with no
  implementation, a scan over something that is not a cell): ``check`` fails;
- a diagram *not compilable as it stands*, which is often the point of it (an abstract
  family, the start of a derivation; a value over a sequence length that no input carries, a
  step in one): ``check`` warns.

``tests/test_check_compile.py`` holds this to what the compiler does on the whole gallery.

The report is made per definition and combined, never on the expansion (which has ``2^n``
boxes for ``n`` definitions each using the next twice): each definition's body is read once,
its callees' findings placed into it with their generics bound, so ``check`` is linear in the
source like ``info`` (``analysis/combine.py``; ``benchmarks/bench_depth.py`` measures it). The
bodies of ``repeat`` boxes are read as the compiler lowers them (once, as if inlined), and the
bodies of ``scan`` boxes in their own names.
"""
from __future__ import annotations

from typing import Iterable, Mapping

from ..errors import Pos
from ..graph.box import Box, Kind
from ..graph.constants import dims_in
from ..graph.dimuse import bound_names
from ..graph.hypergraph import Hypergraph
from ..graph.types import Dim, DimKind
from ..syntax.records import Record
from .fold import post_order


class Obstacle(Record):
    message: str
    pos: Pos | None
    defect: bool  # True: an error in the file; False: the diagram is not compilable as it stands


class _Learnable(Record):
    """A learnable box whose own type names ``names`` (in the names of the definition being
    read): an obstacle once one of them is a sequence dimension, known only where the
    generics are bound."""

    names: frozenset
    op: str
    pos: Pos | None

    def bound(self, sub: Mapping[str, Dim]) -> "_Learnable":
        return _Learnable(bound_names(self.names, sub), self.op, self.pos)

    def obstacle(self, d: Hypergraph) -> Obstacle | None:
        """The obstacle, read in the names of ``d`` (whose program says which are sequences)."""
        if not _seq(d, self.names):
            return None
        return Obstacle(f"learnable box '{self.op}' has a sequence dimension in its own type: its size "
                        "would be known only at run time", self.pos, False)


class _Found(Record):
    """What one use of a definition contributes, in its own names: obstacles and pending
    learnable boxes in the order of the expansion, and the dimension names its wires and
    constants mention."""

    items: tuple  # Obstacle | _Learnable, without repeats
    used: frozenset

    def bound(self, sub: Mapping[str, Dim]) -> "_Found":
        if not sub:
            return self
        return _Found(tuple(i.bound(sub) if isinstance(i, _Learnable) else i for i in self.items),
                      bound_names(self.used, sub))


def obstacles(d: Hypergraph, implemented: frozenset[str], memo: dict | None = None) -> list[Obstacle]:
    """Why ``d`` cannot be compiled: every reason, in the order of the expanded boxes.
    ``implemented`` names the fixed processes the compiler has code for (the prelude's);
    ``memo`` (a dict) shares the definitions read between calls on one program as it stands
    (``check`` reads each definition once for all the diagrams of a file)."""
    found = _found(d, implemented, {} if memo is None else memo)
    out = [o for i in found.items if (o := _settled(i, d)) is not None] + list(_unsized(d, found.used))
    return list({(o.message, o.pos): o for o in out}.values())


def _settled(item, d: Hypergraph) -> Obstacle | None:
    return item.obstacle(d) if isinstance(item, _Learnable) else item


def _found(d: Hypergraph, implemented: frozenset[str], memo: dict) -> _Found:
    """Each definition reachable from ``d`` read once, callees first."""
    for x, version, body in post_order(d, lambda node: True):
        key = id(x.graph)
        if key not in memo or memo[key][0] != version:
            memo[key] = (version, _read(x, body, implemented, memo))
    return memo[id(d.graph)][1]


def _read(x: Hypergraph, body: list, implemented: frozenset[str], memo: dict) -> _Found:
    items: dict = {}
    used = {n for w in x.wires() for dim in x.wire_type(w) for n in dim.names()}
    for b, node, *_ in body:
        for item in _own(x, b, node, implemented):
            items.setdefault(item, None)
        if node.kind is not Kind.DIAGRAM or node.ref is None:
            continue
        callee = memo[id(node.ref.graph)][1]
        if node.scan:  # a cell's body, in its own names; its lengths are the loop's
            for item in callee.items:
                if (o := _settled(item, node.ref)) is not None:
                    items.setdefault(o, None)
            continue
        placed = callee.bound({g: dim for g, dim in node.generics})
        items.update(dict.fromkeys(placed.items))
        used |= placed.used
    used |= {n for b, node, *_ in body if node.kind is Kind.CONST for dim in dims_in(node.value)
             for n in dim.names()}
    return _Found(tuple(items), frozenset(used))


def _own(d: Hypergraph, b: int, node: Box, implemented: frozenset[str]) -> Iterable:
    """What one box says of itself, whatever it is inside of."""
    op, kind, pos = node.op, node.kind, node.pos
    if kind is Kind.ABSTRACT:
        yield Obstacle(f"'{op}' is an abstract family: specialise it (in a derivation) or replace it "
                       "by a definition to compile", pos, False)
    elif kind is Kind.FIXED and op not in implemented:
        yield Obstacle(f"fixed process '{op}' has no implementation to compile; define it as a diagram",
                       pos, True)
    elif kind is Kind.LEARN and not d.box_inputs(b) and len(d.box_outputs(b)) > 1:
        yield Obstacle(f"learnable box '{op}' has no inputs and several outputs; declare one learnable "
                       "tensor per output", pos, True)
    elif kind is Kind.LEARN and (names := _own_type_names(d, b)):
        yield _Learnable(names, op, pos)
    if node.scan and kind not in (Kind.LEARN, Kind.DIAGRAM):
        yield Obstacle(f"'{op}' cannot be scanned by the compiler: scan a learnable box or a "
                       "diagram", pos, True)


def _own_type_names(d: Hypergraph, b: int) -> frozenset:
    """The names in a learnable box's own type, but for an axis declared with a largest
    length (``learn E : -> [r, s] where s <= 512``, held at 512 and sliced)."""
    ref = d.record(b).ref
    bounds = ref.axis_bounds() if hasattr(ref, "axis_bounds") else ()
    types: list[tuple]
    if bounds and not d.box_inputs(b):
        types = [tuple(dim for dim, m in zip(d.local_out_type(b, 0), bounds) if m is None)]
    else:
        types = [d.local_in_type(b, p) for p in range(len(d.box_inputs(b)))] + \
                [d.local_out_type(b, p) for p in range(len(d.box_outputs(b)))]
    return frozenset(n for t in types for dim in t for n in dim.names())


def _seq(d: Hypergraph, names: Iterable[str]) -> set[str]:
    prog = d.program
    return {n for n in names if prog is not None and (decl := prog.lookup_dim(n)) is not None
            and decl.kind is DimKind.SEQ}


def _unsized(d: Hypergraph, used: frozenset):
    """A sequence length is read off an input that has it as an axis; one no input carries
    has no size at run time."""
    carried = {dim.name for w in d.inputs for dim in d.wire_type(w) if dim.name}
    for n in sorted(_seq(d, used) - carried):
        yield Obstacle(f"the length of '{n}' is unknown when '{d.name}' runs: it is a sequence dimension "
                       "that no input has as an axis of its own", d.pos, False)
