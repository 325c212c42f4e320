"""Lowering the boxes that run a body beyond SIMD: a ``scan`` (one step per position of its
last index, a state carried) and a ``repeat`` (t copies of a definition in sequence).

Each gets its body lowered into a module of its own, by a nested lowering of the same class
as the caller's (``type(low)``), so this module needs nothing of ``lower.py`` but the object
it is handed.
"""
from __future__ import annotations

import itertools
from typing import Any, Callable

from torch import fx, nn

from ..errors import DiagError
from ..graph.box import Kind
from ..graph.expand import substituted
from ..graph.weights import SetKind, WeightSet
from . import primitives as P
from .primitives import repeat as in_sequence


def _body(low: Any, body, path: str, key: tuple) -> fx.Node:
    """The module of a loop's body, lowered at ``path`` (where its weights are named) and
    registered under ``key``; its weight sets join the caller's."""
    sub = type(low)(body, low.dims, low.make, nn.Module(), low.registry, fast=low.fast, native=low.native_prelude,
                    path=path, sites=low.sites)
    attr = low.register(key, sub.module)
    low.chunked.extend(c for c in sub.chunked if c not in low.chunked)
    low.attrs.update({k: f"{attr}.{a}" for k, a in sub.attrs.items() if k not in low.attrs})
    return low.g.get_attr(attr)


def scan(low: Any, b: int) -> fx.Node:
    """A scanned learnable box or definition: its cell applied once per step."""
    node = low.d.record(b)
    xs = low.aligned(b)
    ins = [low.d.local_in_type(b, p) for p in range(len(xs))]
    outs = [low.d.local_out_type(b, p) for p in range(len(low.d.box_outputs(b)))]
    steps = low.size(node.simd[-1][1])
    if node.kind is Kind.LEARN:
        mod, in_s, out_s = low.approximator(b)
        cell = low.g.call_function(P.LearnableCell, (low.g.get_attr(mod), [len(s) for s in in_s], out_s))
    elif node.kind is Kind.DIAGRAM:
        key = node.instance if node.instance is not None else node.op
        # the body's local weights belong to this instance: Cell#1/W, not W
        # a generic cell at the sizes this loop uses it with (its own names for them may differ)
        body = substituted(node.ref, dict(node.generics)) if node.generics else node.ref
        cell = _body(low, body, f"{key}/", WeightSet(SetKind.CELL, key))
    else:
        raise DiagError(f"'{node.op}' cannot be scanned by the compiler", node.pos)
    return low.g.call_function(P.scan, (cell, xs[0], xs[1:], len(ins[0]), [len(t) for t in ins[1:]], steps,
                                        [len(t) for t in outs[1:]]))


def repeat(low: Any, b: int) -> fx.Node:
    """t copies of a definition in sequence: one module per copy, its weights at the path
    ``B#1/k/`` (as ``expand(unroll=...)`` names them), or, when shared, one module at ``B#1/``
    applied t times by a loop (no entry per copy: ``repeat 1000000000 shared B(x)`` lowers one
    body, and its graph holds the count)."""
    node = low.d.record(b)
    t = low.size(node.repeat.count)
    if not isinstance(t, int) or t < 1:
        raise DiagError(f"repeat needs a fixed number of copies, at least one; '{node.repeat.count}' is "
                        f"{t if isinstance(t, int) else 'known only at run time'}", node.pos)
    key = node.instance
    ranks = [len(low.d.local_in_type(b, p)) for p in range(len(low.d.box_inputs(b)))]
    if node.repeat.shared:
        cell = _body(low, node.ref, f"{key}/", ("layer", key))
        return low.g.call_function(shared_repeat, (cell, t, low.aligned(b), ranks))
    cells = [_body(low, node.ref, f"{key}/{k}/", ("layer", f"{key}/{k}")) for k in range(t)]
    return low.g.call_function(P.repeat, (cells, low.aligned(b), ranks))


def shared_repeat(cell: Callable, t: int, xs: list, ranks: list[int]):
    """One module applied ``t`` times in sequence (a shared stack): the first input carried,
    the others read by every application."""
    return in_sequence(itertools.repeat(cell, t), xs, ranks)


__all__ = ["scan", "repeat", "shared_repeat"]
