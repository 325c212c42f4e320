"""A compiled head rewritten to run h heads at once on a leading head axis, for ``torch.compile``.

``torch.vmap`` over ``functional_call`` runs any head with stacked weights, but ``torch.compile``
then traces functorch's machinery with it: the study's M1 language model took about twice the
compile time of the same heads written by hand (``benchmarks/bench_compile.py``). For the few
operations a head usually lowers to (linear layers, elementwise activations, scaled dot-product
attention, layer norm, the batch-axis helpers) the head axis is written into the graph instead:
the head's submodules are opened (:func:`opened`: every parameter an input) and each node is
replaced by its form on a leading head axis (:data:`RULES`). A head with any other operation gets
None from :func:`head_axis`, and its caller keeps ``vmap``.
"""
from __future__ import annotations

import math
import operator
from typing import Any, Callable

import torch
import torch.nn.functional as F
from torch import fx, nn

from . import primitives as P
from .lower import _flatten_batch


class _Open(fx.Tracer):
    """Traces a submodule down to functions: a ``Linear`` becomes ``linear(x, weight, bias)``."""

    def is_leaf_module(self, m: nn.Module, qualname: str) -> bool:
        return False


def opened(gm: fx.GraphModule) -> tuple[fx.Graph, list[str]] | None:
    """The graph of ``gm`` with every submodule call inlined and every attribute it reads (a
    parameter or buffer, by its dotted name) an input after the module's own; None when a
    submodule cannot be traced to functions."""
    nodes = list(gm.graph.nodes)
    try:
        subs = {n: _Open().trace(gm.get_submodule(n.target)) for n in nodes if n.op == "call_module"}
    except Exception:  # noqa: BLE001 - fx raises many kinds for code it cannot trace: vmap runs it
        return None
    names: list[str] = []
    for n in nodes:
        names += [n.target] if n.op == "get_attr" else \
            [f"{n.target}.{s.target}" for s in subs[n].nodes if s.op == "get_attr"] if n in subs else []
    names = list(dict.fromkeys(names))
    g = fx.Graph()
    env: dict[fx.Node, Any] = {}
    for n in nodes:
        if n.op == "placeholder":
            env[n] = g.node_copy(n, env.__getitem__)
    attrs = {t: g.placeholder("p_" + t.replace(".", "_")) for t in names}
    for n in nodes:
        if n.op == "get_attr":
            env[n] = attrs[n.target]
        elif n in subs:
            env[n] = _inline(g, subs[n], n, env, attrs)
        elif n.op != "placeholder":
            env[n] = g.node_copy(n, env.__getitem__)
    return g, names


def _inline(g: fx.Graph, sub: fx.Graph, call: fx.Node, env: dict, attrs: dict) -> Any:
    """Copy a submodule's traced graph into ``g`` in place of the node calling it; its value."""
    vm: dict[fx.Node, Any] = {}
    args = iter(call.args)
    for s in sub.nodes:
        if s.op == "placeholder":
            a = next(args)
            vm[s] = env[a] if isinstance(a, fx.Node) else a
        elif s.op == "get_attr":
            vm[s] = attrs[f"{call.target}.{s.target}"]
        elif s.op == "output":
            return fx.node.map_arg(s.args[0], vm.__getitem__)
        else:
            vm[s] = g.node_copy(s, vm.__getitem__)
    raise AssertionError("an fx graph ends in its output")  # pragma: no cover


# -- the operations on a leading head axis ----------------------------------------------------------
def flatten_batch(x: torch.Tensor, rank: int):
    """``_flatten_batch`` under the head axis: [h, *B, ...] -> [h, N, ...]."""
    if x.dim() == rank + 2:
        return x, (x.shape[1],), x.shape[1]
    batch = tuple(x.shape[1: x.dim() - rank])
    n = math.prod(batch)
    return x.reshape(x.shape[0], n, *x.shape[x.dim() - rank:]), batch, n


def unflatten_batch(y: torch.Tensor, batch: tuple[int, ...], n: int) -> torch.Tensor:
    """``primitives.unflatten_batch`` under the head axis."""
    if len(batch) == 1 and y.shape[1] == n:
        return y
    if y.shape[1] != n:
        y = y.expand(y.shape[0], n, *y.shape[2:])
    return y.reshape((y.shape[0], *batch, *y.shape[2:]))


def linear(x: torch.Tensor, w: torch.Tensor, b: torch.Tensor | None = None) -> torch.Tensor:
    """h linear layers at once: x [h, ..., i], w [h, o, i], b [h, o] -> [h, ..., o]."""
    x3 = x.reshape(x.shape[0], -1, x.shape[-1])
    y = torch.bmm(x3, w.transpose(1, 2)) if b is None else torch.baddbmm(b.unsqueeze(1), x3, w.transpose(1, 2))
    return y.view(*x.shape[:-1], w.shape[1])


def layer_norm(x: torch.Tensor, shape, weight: torch.Tensor | None = None, bias: torch.Tensor | None = None,
               eps: float = 1e-5) -> torch.Tensor:
    """h layer norms at once, each with its own gain and bias ([h, *shape])."""
    y = F.layer_norm(x, shape, None, None, eps)
    lift = (lambda t: t.view(t.shape[0], *[1] * (x.dim() - t.dim()), *t.shape[1:]))
    if weight is not None:
        y = y * lift(weight)
    return y if bias is None else y + lift(bias)


def _same(fn: Callable) -> Callable[[fx.Node], Callable | None]:
    """An operation whose meaning does not change with a leading axis more."""
    return lambda n: fn


def _attention(n: fx.Node) -> Callable | None:
    """Scaled dot-product attention treats leading axes as batch axes: no mask or dropout."""
    free = n.kwargs.get("attn_mask") is None and len(n.args) <= 3 and not n.kwargs.get("dropout_p")
    return F.scaled_dot_product_attention if free else None


def _getitem(n: fx.Node) -> Callable | None:
    """Only the parts of ``flatten_batch``'s answer (the tensor, the batch shape, its size)."""
    src = n.args[0]
    ok = isinstance(src, fx.Node) and src.target in (_flatten_batch, flatten_batch)
    return operator.getitem if ok else None


RULES: dict[Any, Callable[[fx.Node], Callable | None]] = {
    _flatten_batch: _same(flatten_batch), P.unflatten_batch: _same(unflatten_batch), operator.getitem: _getitem,
    torch._C._nn.linear: _same(linear), F.linear: _same(linear), F.layer_norm: _same(layer_norm),
    F.scaled_dot_product_attention: _attention, torch._C._nn.scaled_dot_product_attention: _attention,
    **{fn: _same(fn) for fn in (F.relu, torch.relu, F.gelu, torch.tanh, torch.sigmoid, F.silu, torch.exp)},
}


def head_axis(gm: fx.GraphModule) -> tuple[fx.GraphModule, list[str]] | None:
    """``gm``'s code on a leading head axis: a module taking the inputs, each ``[h, ...]``, then
    the stacked tensors of the returned names (``gm``'s parameters and buffers, in order), and
    returning ``[h, ...]`` outputs. None when some operation has no rule here (vmap runs it)."""
    got = opened(gm)
    if got is None:
        return None
    g, names = got
    for n in g.nodes:
        if n.op in ("placeholder", "output"):
            continue
        rule = RULES.get(n.target) if n.op == "call_function" else None
        fn = rule(n) if rule is not None else None
        if fn is None:
            return None
        n.target = fn
    g.lint()
    return fx.GraphModule(nn.Module(), g, class_name="Heads"), names
