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
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Iterator

from ..graph.box import Kind
from ..errors import Pos
from ..graph.constants import dims_in
from ..graph.decls import Definition
from ..graph.hypergraph import Hypergraph


@dataclass(frozen=True)
class Obstacle:
    message: str
    pos: Pos | None
    defect: bool  # True: an error in the file; False: the diagram is not compilable as it stands


def obstacles(d: Hypergraph, implemented: frozenset[str]) -> list[Obstacle]:
    """Why ``d`` cannot be compiled: every reason, in source order of the boxes. ``implemented``
    names the fixed processes the compiler has code for (the prelude's)."""
    e = d.expand()
    found = list(_box_obstacles(e, implemented, set())) + list(_unsized(d, e))
    unique = {(o.message, o.pos): o for o in found}
    return list(unique.values())


def _box_obstacles(d: Hypergraph, implemented: frozenset[str], seen: set[int]) -> Iterator[Obstacle]:
    for b in d.boxes():
        node = d.record(b)
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
        elif kind is Kind.LEARN and _unbounded_seq(d, b):
            yield Obstacle(f"learnable box '{op}' has a sequence dimension in its own type: its size "
                           "would be known only at run time", pos, False)
        if node.scan:
            yield from _scan_obstacles(d, b, implemented, seen)


def _scan_obstacles(d: Hypergraph, b: int, implemented: frozenset[str], seen: set[int]) -> Iterator[Obstacle]:
    node = d.record(b)
    if node.kind not in (Kind.LEARN, Kind.DIAGRAM):
        yield Obstacle(f"'{node.op}' cannot be scanned by the compiler: scan a learnable box or a "
                       "diagram", node.pos, True)
    ref = node.ref
    if node.kind is Kind.DIAGRAM and ref is not None and id(ref) not in seen:
        seen.add(id(ref))
        body = ref.diagram if isinstance(ref, Definition) else ref
        yield from _box_obstacles(body.expand(), implemented, seen)


def _unbounded_seq(d: Hypergraph, b: int) -> bool:
    """A seq dimension in the box's own type, other than an axis declared with a largest
    length (``learn E : -> [r, s] where s <= 512``, held at 512 and sliced)."""
    ref = d.record(b).ref
    bounds = ref.axis_bounds() if hasattr(ref, "axis_bounds") else ()
    if bounds and not d.box_inputs(b):
        free = [dim for dim, m in zip(d.local_out_type(b, 0), bounds) if m is None]
        return bool(_seq_names(d, free))
    return any(_seq_names(d, t) for t in _local_types(d, b))


def _local_types(d: Hypergraph, b: int):
    yield from (d.local_in_type(b, p) for p in range(len(d.box_inputs(b))))
    yield from (d.local_out_type(b, p) for p in range(len(d.box_outputs(b))))


def _seq_names(d: Hypergraph, t) -> set[str]:
    prog = d.program
    names = {n for dim in t for n in dim.names()}
    return {n for n in names if prog is not None and (decl := prog.lookup_dim(n)) is not None
            and decl.kind == "seq"}


def _unsized(d: Hypergraph, e: Hypergraph) -> Iterator[Obstacle]:
    """A sequence length is read off an input that has it as an axis; one no input carries
    has no size at run time."""
    carried = {dim.name for w in d.inputs for dim in d.wire_type(w) if dim.name}
    used = set().union(*(_seq_names(d, e.wire_type(w)) for w in e.wires()),
                       *(_seq_names(d, dims_in(e.record(b).value)) for b in e.boxes()
                         if e.record(b).kind is Kind.CONST))
    for n in sorted(used - carried):
        yield Obstacle(f"the length of '{n}' is unknown when '{d.name}' runs: it is a sequence dimension "
                       "that no input has as an axis of its own", d.pos, False)
