"""Inline definitions: a diagram whose every box is primitive (the picture's ``--expand``).

A definition used inside SIMD boxes is inlined with those SIMD indices prepended to
each of its boxes: SIMD boxes nest. Learnable boxes declared inside a definition get a
weight set qualified by the instance of the box they were opened from (``H#2/F``), so two
uses have two sets of weights and a copy of one use shares its set; top-level learnable
boxes keep their name, so every use shares one set (``weights.py``). The top level has an
empty path, so expanding twice changes nothing. A definition
iterated by ``scan`` stays a box: a sequential loop cannot be flattened into SIMD
boxes, so its body runs once per step. A ``repeat`` box stays a box too unless ``unroll`` is
given and its count known: then it becomes that many copies of its definition in sequence,
copy ``k`` of an instance ``B#1`` at the path ``B#1/k/`` (weights of its own), or every copy
at ``B#1/`` when shared (one set). One pass, linear in the size of the result.
"""
from __future__ import annotations

from typing import Callable, Mapping, Union

from ..errors import DiagError
from ..syntax.records import Record
from .box import Box, Instance, Kind, Local, Repeat
from .budget import MAX_LOWERED, Build, refuse_above
from .clusters import Cluster, DefFrame
from .hypergraph import HG, Hypergraph, count_value, per_graph_cache, repeated
from .gcpause import gc_paused
from .constants import show as show_const, substitute as substitute_const
from .types import Dim, substitute_type

# How a source wire appears in the target: (target wire, view), where the view has one
# entry per axis of the target wire: a context SIMD label, or an int (axis of the source).
Placed = tuple[int, tuple]
Keep = Union[frozenset, Callable[[Box], bool]]  # definitions not to open: names, or a test on the box


def _kept(node: Box, keep: Keep) -> bool:
    return keep(node) if callable(keep) else node.op in keep


def expand(d: HG, keep: Keep = frozenset(), path: str = "",
           unroll: Mapping[str, int] | None = None, trace: dict[int, list[int]] | None = None,
           limit: int = MAX_LOWERED) -> HG:
    """Inline definitions, except those named in ``keep`` or, when ``keep`` is a predicate on
    a box, those it accepts (a backend's native processes: the prelude's own definitions).

    A kept definition stays one box and records its instance path in ``instance``, so
    that parameters inside it (layernorm's gain and bias) get their own names. ``path``
    places the whole diagram inside an instance (the body of a scanned box, ``Cell#1/``).
    ``unroll`` (sizes of the fixed dimensions a count may name; declared defaults fill in)
    opens ``repeat`` boxes into their copies; without it, or where a count names a size it
    does not give, they stay boxes. ``trace``, if given, receives each box of ``d`` and the
    boxes it became (one box kept as it was; an opened definition's body): a picture of a
    derivation step keeps the untouched boxes in place with it.

    Unrolling is refused, before any work, when it would make more than ``limit`` boxes
    (``graph/budget.py``): ``repeat 1000000000 B(x)`` is one box until then.
    """
    if unroll is not None:
        refuse_above(d, Build.EXPANDED, limit, "the limit of expand(..., limit=N) and of render --expand", unroll)
    with gc_paused():
        return _expand(d, keep, path, unroll, trace=trace)


def untouched(before: Hypergraph, after: Hypergraph, trace: Mapping[int, list[int]]) -> dict[int, int]:
    """The boxes an expansion left as they were: each box of ``before`` that ``trace`` says was
    copied as one box of the same kind and op, with that box's id in ``after``."""
    return {b: made[0] for b, made in trace.items()
            if len(made) == 1 and before.record(b).same_process(after.record(made[0]))}


def substituted(d: HG, sub: Mapping[str, Dim]) -> HG:
    """A generic diagram at given sizes (its parameters ``sub``), every definition kept a box:
    the body of a generic cell placed at the dimensions of the loop that scans it."""
    with gc_paused():
        out = _expand(d, lambda node: True, "", sub=sub)
    out.generics = tuple(g for g in d.generics if g not in sub)
    return out


def _expand(d: HG, keep: Keep = frozenset(), path: str = "",
            unroll: Mapping[str, int] | None = None, sub: Mapping[str, Dim] | None = None,
            trace: dict[int, list[int]] | None = None) -> HG:
    out = type(d)(name=d.name, generics=d.generics, pos=d.pos, source=d.source, program=d.program,
                  input_names=list(d.input_names))
    env: dict[int, Placed] = {}
    sub = sub or {}
    for w in d.inputs:
        t = substitute_type(d.wire_type(w), sub)
        nw = out.add_wire(t, name=d.wire_label(w), pos=d.wire(w).pos, of=d.id_range(w))
        out.inputs.append(nw)
        env[w] = (nw, tuple(range(len(t))))
    _inline(out, d, env, context=(), sub=dict(sub or {}), path=path, keep=keep, unroll=unroll, trace=trace)
    for w in d.outputs:
        placed = _settle(out, env[w], substitute_type(d.wire_type(w), sub), (), d.wire(w).pos,
                         canonical=True)
        out.outputs.append(placed[0])
    return out


def _fresh_label(label: str, taken: set[str]) -> str:
    while label in taken:
        label += "'"
    return label


class _Scope(Record):
    """Where one definition's boxes are being copied to: its wires' places in the target
    (``env``), the SIMD ``context`` around it, its generics' values (``sub``), its instance
    path, and ``outer``, the lexical nesting (SIMD boxes and definitions) drawn around it."""

    src: Hypergraph
    env: dict
    context: tuple
    sub: Mapping[str, Dim]
    path: str
    outer: tuple = ()
    keep: Keep = frozenset()
    unroll: Mapping[str, int] | None = None


def _inline(out: Hypergraph, src: Hypergraph, env: dict[int, Placed], context: tuple, sub: Mapping[str, Dim],
            path: str, outer: tuple = (), keep: Keep = frozenset(), unroll: Mapping[str, int] | None = None,
            trace: dict[int, list[int]] | None = None) -> None:
    """Copy ``src``'s boxes into ``out`` inside the SIMD ``context``, opening every
    definition used as a box except those in ``keep`` (and scans, and repeats unless unrolled)."""
    scope = _Scope(src, env, context, sub, path, outer, keep, unroll)
    ctx_labels = [lab for lab, _ in context]
    seen: dict[str, int] = {}
    for b, node, box_ins, box_outs, out_locals in _plan(src):
        first = out._next  # ids only grow: the boxes made for b are those after this one
        rename = _rename_indices(node, ctx_labels)
        inputs = [_place_input(env[w], axes, rename) for w, axes in box_ins]
        instance = instance_segment(node, seen) if node.kind is Kind.DIAGRAM else ""  # (only a definition's use has one)
        copies = _count(node, scope) if repeated(node) and unroll is not None and not _kept(node, keep) else None
        if copies is not None:
            _unroll(out, scope, node, rename, inputs, box_outs, instance, copies)
        elif node.kind is Kind.DIAGRAM and not node.scan and not repeated(node) and not _kept(node, keep):
            _open(out, scope, node, rename, inputs, box_outs, instance)
        else:
            _copy(out, scope, node, rename, inputs, box_outs, out_locals, instance)
        if trace is not None:
            trace[b] = [n for n in range(first + 1, out._next + 1) if out.is_box(n)]


def instance_segment(node: Box, seen: dict[str, int]) -> str:
    """The segment a diagram box adds to the instance path (``H#2``): its own ``instance``, else
    its definition numbered by use in the body so far (``seen``, updated). ``analysis/`` names
    weight sets by the same paths."""
    seen[node.op] = seen.get(node.op, 0) + 1
    return node.instance or f"{node.op}#{seen[node.op]}"


def copy_path(instance: str, k: int, shared: bool) -> str:
    """The instance path of copy ``k`` of a repeat box: ``B#1/k`` (weights of its own), or ``B#1``
    for every copy when they share one set."""
    return instance if shared else f"{instance}/{k}"


def _place_input(placed: Placed, axes: tuple, rename: dict) -> Placed:
    """An input wire as the box sees it: the source's axes labels read through the view."""
    tw, view = placed
    return tw, tuple(rename.get(axes[v], axes[v]) if isinstance(v, int) else v for v in view)


def _rename_indices(node: Box, taken_labels: list[str]) -> dict[str, str]:
    """The box's own SIMD and summed labels, primed where the context already uses them."""
    taken, rename = set(taken_labels), {}
    for lab, _ in tuple(node.simd) + tuple(node.summed):
        rename[lab] = _fresh_label(lab, taken)
        taken.add(rename[lab])
    return rename


def _count(node: Box, scope: _Scope) -> int | None:
    """A repeat box's number of copies, from the sizes given to unroll (or declared); None
    when its count names a size neither gives (the box stays one box)."""
    assert node.repeat is not None  # (a repeat box)
    dim = node.repeat.count.substitute(scope.sub)
    t = count_value(dim, scope.src.program, scope.unroll or {})
    if t is not None and t < 1:
        raise DiagError(f"repeat needs at least one copy; '{dim}' is {t}", node.pos)
    return t


def _unroll(out: Hypergraph, scope: _Scope, node: Box, rename: dict, inputs: list, box_outs: list,
            instance: str, t: int) -> None:
    """A repeat box as its ``t`` copies in sequence: the first input carried, the others shared."""
    (ow,) = box_outs
    n_local = len(scope.src.wire_type(ow)) - len(node.simd)
    carried = tuple(lab for lab, _ in node.simd) + tuple(range(n_local))
    for k in range(t):
        copy = copy_path(instance, k, node.shared)
        _open(out, scope, node, rename, inputs, box_outs, copy, named=k == t - 1)
        inputs = [_place_input(scope.env[ow], carried, rename)] + inputs[1:]


def _open(out: Hypergraph, scope: _Scope, node: Box, rename: dict, inputs: list, box_outs: list,
          instance: str, named: bool = True) -> None:
    """Inline a definition used as a box: its body, inside the box's own SIMD boxes."""
    callee: Hypergraph = node.ref
    sub, context = scope.sub, scope.context
    simd = tuple((rename[lab], dim.substitute(sub)) for lab, dim in node.simd)
    # the callee's input axes are the port's local axes, numbered from 0
    cenv: dict[int, Placed] = dict(zip(callee.inputs, inputs))
    here = f"{scope.path}{instance}/"
    frame = scope.outer + _subst_clusters(node.clusters, sub) + (DefFrame(here, node.op),)
    _inline(out, callee, cenv, context + simd, {g: dim.substitute(sub) for g, dim in node.generics},
            here, frame, scope.keep, scope.unroll)
    ctx_labels = {lab for lab, _ in context}
    for ow, cw in zip(box_outs, callee.outputs):
        tw, view = cenv[cw]
        lifted = tuple(v if isinstance(v, str) and v in ctx_labels else
                       (simd_index(v, simd) if isinstance(v, str) else len(simd) + v) for v in view)
        placed = scope.env[ow] = _settle(out, (tw, lifted), substitute_type(scope.src.wire_type(ow), sub), context,
                                         node.pos)
        outer_name = scope.src.wire_label(ow)
        if named and outer_name and placed[0] not in out.inputs:  # the caller's name for it wins
            out.update(placed[0], name=outer_name, scope=scope.path)  # ... named in the caller's scope


def _copy(out: Hypergraph, scope: _Scope, node: Box, rename: dict, inputs: list, box_outs: list,
          out_locals: list, instance: str | None) -> None:
    """Copy one box as it is, tightened to the context SIMD boxes its inputs depend on."""
    own = tuple((rename[lab], dim.substitute(scope.sub)) for lab, dim in node.simd)
    used = {a for _, axes in inputs for a in axes if isinstance(a, str)}
    ctx = tuple((lab, dim) for lab, dim in scope.context if lab in used)
    display = {rename.get(k, k): v for k, v in (node.display or {}).items()}
    box = _placed(node, rename, scope, instance, simd=ctx + own, display={**{lab: lab for lab, _ in ctx}, **display})
    _, wires = out.emit(box, inputs, [substitute_type(t, scope.sub) for t in out_locals],
                        [scope.src.wire_label(w) for w in box_outs])
    for ow, nw in zip(box_outs, wires):
        r = len(scope.src.wire_type(ow))
        scope.env[ow] = (nw, tuple(lab for lab, _ in ctx) + tuple(range(r)))


def _placed(node: Box, rename: dict, scope: _Scope, instance: str | None, **new) -> Box:
    """A copied box (with the fields ``new``), generics substituted and weights placed at the path."""
    sub, path = scope.sub, scope.path
    new["clusters"] = scope.outer + _subst_clusters(node.clusters, sub)
    if node.summed:
        new["summed"] = tuple((rename[lab], dim.substitute(sub)) for lab, dim in node.summed)
    if node.generics:
        new["generics"] = tuple((g, dim.substitute(sub)) for g, dim in node.generics)
    if node.value is not None:
        value = substitute_const(node.value, sub)
        if value is not node.value:  # (the same constant when nothing is substituted: its text stands)
            new["value"], new["op"] = value, show_const(value)
    if node.kind is Kind.DIAGRAM:
        new["weights"] = Instance(f"{path}{instance}")
    elif isinstance(node.weights, Local):
        new["weights"] = Local(f"{path}{node.weights.param}")
    if node.repeat is not None:
        new["loop"] = Repeat(node.repeat.count.substitute(sub), node.repeat.shared)
    return node._replace(**new)


@per_graph_cache
def _plan(src: Hypergraph) -> list:
    """The boxes of a definition in order with their ports, computed once per definition."""
    plan = []
    for b in src.topological_boxes():
        outs = src.box_outputs(b)
        plan.append((b, src.record(b), src.box_inputs(b), outs, [src.local_out_type(b, p) for p in range(len(outs))]))
    return plan


def simd_index(label: str, simd: tuple) -> int:
    for k, (lab, _) in enumerate(simd):
        if lab == label:
            return k
    raise KeyError(label)  # pragma: no cover - views only hold labels of their context


def _settle(out: Hypergraph, placed: Placed, src_type, context: tuple, pos, canonical: bool = False) -> Placed:
    """Make every axis of the source wire present in the target (broadcast when missing),
    and, for a diagram's outputs, in order."""
    tw, view = placed
    r = len(src_type)
    present = {v for v in view if isinstance(v, int)}
    if len(present) == r and (not canonical or view == tuple(range(r))):
        return placed
    # a definition's output that ignores some SIMD index: copy it across that index
    ctx_labels = {lab for lab, _ in context}
    taken = set(ctx_labels)
    labels = [_fresh_label(f"a{k}", taken | {f"a{j}" for j in range(r)}) for k in range(r)]
    simd = context + tuple((labels[k], src_type[k]) for k in range(r))
    axes = tuple(v if isinstance(v, str) else labels[v] for v in view)
    _, (nw,) = out.emit(Box(Kind.REINDEX, "reindex", simd, pos=pos, display={lab: lab for lab, _ in simd}),
                        [(tw, axes)], [()])
    return nw, tuple(lab for lab, _ in context) + tuple(range(r))


def _subst_clusters(clusters: tuple[Cluster, ...], sub) -> tuple[Cluster, ...]:
    """The frames with their ranges at ``sub`` (a frame whose range does not change is kept)."""
    if not sub:
        return clusters
    return tuple(c if not c.is_simd or (dim := c.dim.substitute(sub)) is c.dim else c.with_(dim=dim) for c in clusters)
