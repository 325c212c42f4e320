"""The primitive table: every process the compiler implements, by name, one entry each.

The lowering dispatches a ``fixed`` box, or a prelude definition kept whole, by its name
here, as torch.fx's ``Interpreter`` dispatches ``call_function`` by target. An entry is a
function of a :class:`~stringdiag.lower.lower.PrimitiveCall` (the box's inputs aligned as [batch,
SIMD axes, local axes], its dimension parameters, the fx graph) that emits the box's array
code and returns the node of its result. The array code itself is torch's or lives in
``primitives.py``. The table has two sections:

- :data:`FIXED`: the prelude's ``fixed`` primitives, which have no body;
- :data:`NATIVE`: prelude definitions lowered whole (a stable softmax, a fused layer norm,
  the fused attentions that ``rules/fastpath.rules`` puts in place of their bodies), so
  that ``compile(..., native=False)`` can open them instead and tests/test_primitives.py
  can check that both agree.
"""
from __future__ import annotations

import operator
from typing import Callable, Mapping

import torch
import torch.nn.functional as F
from torch import fx, nn

from ..errors import DiagError
from ..graph.box import Box
from ..graph.constants import ConstDim, ConstNum, ConstOp
from ..graph.iso import definition_key
from ..elaborate.loader import prelude
from . import chunked
from . import caches as S
from . import primitives as P

Entry = Callable[["PrimitiveCall"], fx.Node]  # stringdiag.lower.lower.PrimitiveCall (which imports this table)


def elementwise(fn: Callable) -> Entry:
    """A scalar primitive: applied to the aligned inputs, broadcasting does the SIMD."""
    return lambda c: c.spread(c.g.call_function(fn, tuple(c.xs), name=c.name))


def sdpa(causal: bool) -> Entry:
    """Softmax attention scaled by 1/sqrt(c) as one ``F.scaled_dot_product_attention``;
    heads are leading axes, and keys and values without a head axis broadcast (MQA, GQA)."""
    return lambda c: c.call(F.scaled_dot_product_attention, *c.xs, is_causal=causal, scale=_score_scale(c))


def _score_scale(c: "Call") -> object:
    """1/sqrt(c), the scale of a fused attention's scores (its dimension parameter c)."""
    return c.constant(ConstOp("div", ConstNum(1.0), ConstOp("sqrt", ConstDim(c.generics["c"]))))


def _layernorm(c: "PrimitiveCall") -> fx.Node:
    n = c.static("n")
    return c.module(lambda: nn.LayerNorm(n), c.x)


def _layernorm_eps(c: "PrimitiveCall") -> fx.Node:
    """Layer norm with eps an input: torch's fused one when eps is a constant, else eps read
    per position (``P.LayerNormEps``); parameters named as torch's (weight, bias) either way."""
    n, eps = c.static("n"), c.literal(1)
    if eps is not None:
        return c.module(lambda: nn.LayerNorm(n, eps=eps), c.x)
    return c.module(lambda: P.LayerNormEps(n), c.x, c.xs[1])


def _dropout(c: "PrimitiveCall") -> fx.Node:
    """One rate-free module for every dropout, so that ``module.train()``/``eval()`` reach it;
    a rate given as a number is torch's own ``F.dropout``."""
    p = c.literal(1)
    mod = c.low.register(("dropout",), P.Dropout)
    return c.spread(c.g.call_module(mod, (c.x, c.xs[1] if p is None else p)))


def _within(c: "PrimitiveCall", *names: str) -> list:
    """The sizes of a pick's or a range's parts (start, length, what follows), refused where
    one is negative when compiling: the range does not lie within the axis."""
    sizes = [c.size(n) for n in names]
    if any(isinstance(v, int) and v < 0 for v in sizes):
        shown = ", ".join(f"{n} = {v}" for n, v in zip(names, sizes))
        raise DiagError(f"this index or range does not lie within its axis at these sizes ({shown}); "
                        "an axis of n entries has entries 0 to n - 1", c.node.pos)
    return sizes


def _chooses(c: "Call") -> object:
    """topk's k, refused when compiling where it exceeds the n entries it chooses from."""
    k, n = c.size("k"), c.size("n")
    if isinstance(k, int) and isinstance(n, int) and not 0 <= k <= n:
        raise DiagError(f"topk<{k}> chooses {k} entries from an axis of {n} at these sizes; give k <= n",
                        c.node.pos)
    return k


FIXED: dict[str, Entry] = {
    "add": elementwise(torch.add),
    "sub": elementwise(torch.sub),
    "mul": elementwise(torch.mul),
    "div": elementwise(torch.div),
    "neg": elementwise(torch.neg),
    "exp": elementwise(torch.exp),
    "log": elementwise(torch.log),
    "sqrt": elementwise(torch.sqrt),
    "sin": elementwise(torch.sin),
    "cos": elementwise(torch.cos),
    "pow": elementwise(torch.pow),
    "floor": elementwise(torch.floor),
    "relu": elementwise(torch.relu),
    "elu": elementwise(F.elu),
    "sigmoid": elementwise(torch.sigmoid),
    "tanh": elementwise(torch.tanh),
    "softplus": elementwise(F.softplus),
    "erf": elementwise(torch.erf),
    "gelu": elementwise(F.gelu),
    "gelu_tanh": elementwise(P.gelu_tanh),
    "max": elementwise(torch.maximum),
    "min": elementwise(torch.minimum),
    "clamp": elementwise(P.clamp),
    "detach": elementwise(torch.detach),
    "dropout": _dropout,
    "where": elementwise(P.where),
    "lt": elementwise(P.less),
    "hardmax": lambda c: c.call(P.hardmax, c.x),
    "amax": lambda c: c.call(P.amax, c.x),
    "cumsum": lambda c: c.call(torch.cumsum, c.x, -1),
    "cumprod": lambda c: c.call(torch.cumprod, c.x, -1),
    "ones": lambda c: c.call(P.filled, (c.size("n"),), 1.0, c.ref),
    "zeros": lambda c: c.call(P.filled, (c.size("n"),), 0.0, c.ref),
    "cat": lambda c: c.call(torch.cat, c.call(P.broadcast_lead, c.xs, [1, 1]), -1),
    "split": lambda c: c.call(P.split, c.x, c.size("n")),
    "pick": lambda c: c.call(P.pick, c.x, *_within(c, "a", "r")),
    "narrow": lambda c: c.call(P.narrow, c.x, *_within(c, "a", "m", "r")),
    "shift": lambda c: c.call(P.shift, c.x, *_within(c, "k")),
    "causal_conv": lambda c: c.call(P.causal_conv, *c.xs),
    "embed": lambda c: c.spread(c.call(P.embed, *c.xs)),
    "bucket": lambda c: c.call(P.bucket, c.x, c.size("n")),
    "topk": lambda c: c.call(P.topk, c.x, _chooses(c)),
    "rev": lambda c: c.method("flip", c.x, -1),
    "flatten": lambda c: c.method("flatten", c.x, -2),
    "unflatten": lambda c: c.method("unflatten", c.x, -1, (c.size("n"), c.size("m"))),
    "positions": lambda c: c.call(P.positions, c.size("n"), c.ref),
    "posenc": lambda c: c.call(P.posenc, c.size("n"), c.size("m"), c.ref),
    "causal": lambda c: c.call(P.causal, c.size("n"), c.ref),
    "window": lambda c: c.call(P.window, c.size("n"), c.size("w"), c.ref),
    "strided": lambda c: c.call(P.strided, c.size("n"), c.size("w"), c.ref),
    "global": lambda c: c.call(P.global_tokens, c.size("n"), c.size("g"), c.ref),
    "gauss": lambda c: c.call(P.gauss, *c.xs, c.size("n")),
}

NATIVE_ENTRIES: dict[str, Entry] = {
    "softmax": lambda c: c.call(torch.softmax, c.x, -1),
    "ssoftmax": lambda c: c.call(torch.softmax, c.call(operator.truediv, c.x, c.sqrt("k")), -1),
    "scale": lambda c: c.call(operator.truediv, c.x, c.sqrt("k")),
    "mean": lambda c: c.method("mean", c.x, -1),
    "sum": lambda c: c.method("sum", c.x, -1),
    "elu1": lambda c: c.call(operator.add, c.call(F.elu, c.x), 1.0),
    "layernorm": _layernorm,
    "layernorm_eps": _layernorm_eps,
    "sdpa": sdpa(causal=False),
    "causal_sdpa": sdpa(causal=True),
    "causal_linear_attention": lambda c: c.call(P.causal_linear, *c.xs),
    "causal_linear_sum": lambda c: c.call(P.causal_linear, *c.xs, None),
    "causal_decay_attention": lambda c: c.call(chunked.causal_decay_linear, *c.xs[:3],
                                               c.call(operator.neg, c.xs[3])),  # the kernel takes log gates
    "moe_swiglu": lambda c: c.spread(c.call(P.moe_swiglu, *c.xs)),
    "window_sdpa": lambda c: c.call(P.window_attention, *c.xs, c.size("w"), _score_scale(c)),
    "causal_window_sdpa": lambda c: c.call(P.causal_window_attention, *c.xs, c.size("w"), _score_scale(c)),
    "window_global_sdpa": lambda c: c.call(P.window_global_attention, *c.xs, c.size("w"), c.size("g"),
                                           _score_scale(c)),
}

PRIMITIVES: dict[str, Entry] = {**FIXED, **NATIVE_ENTRIES}
NATIVE = frozenset(NATIVE_ENTRIES)  # what expansion keeps whole when lowering natively


def native(node: Box) -> bool:
    """Whether expansion keeps this box whole, to lower it by its entry: a use of the
    prelude's own definition of a native process. A definition of one's own that shares the
    name (a ``softmax`` that computes something else) is opened like any other."""
    return node.op in NATIVE and definition_key(node.ref) == definition_key(prelude()[node.op])

# -- the incremental form (incremental.py): what each box that reads across positions becomes -----
def _slot(c: "PrimitiveCall", make: Callable[[], CacheSlot], *args) -> fx.Node:
    return c.g.call_module(c.low.slot(make), args)


def _at(c: "PrimitiveCall") -> fx.Node:
    return c.g.call_module(c.low.clock_attr(), ())


STEPS: dict[str, Entry] = {
    "causal_sdpa": lambda c: _slot(c, S.KVCache, *c.xs, _score_scale(c)),
    "causal_window_sdpa": lambda c: _slot(c, lambda: S.WindowCache(c.static("w")), *c.xs, _score_scale(c)),
    "causal_linear_attention": lambda c: _slot(c, S.LinearState, *c.xs),
    "causal_linear_sum": lambda c: _slot(c, S.LinearState, *c.xs),
    "causal_decay_attention": lambda c: _slot(c, S.DecayState, *c.xs),
    "cumsum": lambda c: _slot(c, lambda: S.Running(False), c.x),
    "cumprod": lambda c: _slot(c, lambda: S.Running(True), c.x),
    "causal_conv": lambda c: _slot(c, lambda: S.Recent(None), *c.xs),
    "shift": lambda c: _slot(c, lambda: S.Recent(c.static("k")), c.x),
    "ones": lambda c: c.call(P.filled, (c.size("n"),), 1.0, c.ref),  # the same at every position
    "zeros": lambda c: c.call(P.filled, (c.size("n"),), 0.0, c.ref),
    "positions": lambda c: c.call(S.positions_at, _at(c), c.size("n"), c.ref),
    "posenc": lambda c: c.call(S.posenc_at, _at(c), c.size("n"), c.static("m"), c.ref),
}
# the port of each entry's input that runs along the sequence in its last local axis but one
# (attention: [s, f]) rather than its last ([s]); the others have no sequence axis (a kernel)
STEP_AXES = {"causal_sdpa": (-2, -2, -2), "causal_window_sdpa": (-2, -2, -2),
             "causal_linear_attention": (-2, -2, -2), "causal_linear_sum": (-2, -2),
             "causal_decay_attention": (-2, -2, -2, -1), "cumsum": (-1,), "cumprod": (-1,),
             "causal_conv": (-1, None), "shift": (-1,), "ones": (), "zeros": (), "positions": (), "posenc": ()}
# processes whose local sequence axis keeps its role in the incremental form (a row softmax over the
# keys so far, checked masked there)
ROW_WISE = frozenset({"softmax", "hardmax"})

__all__ = ["PRIMITIVES", "FIXED", "NATIVE", "STEPS", "STEP_AXES", "ROW_WISE", "Entry", "elementwise", "native"]
