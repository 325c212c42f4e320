"""Submodules the language has a box for (``nn.Linear`` and Hugging Face's ``Conv1D`` as
``learn ... via linear``, ``nn.LayerNorm`` as the prelude's ``layernorm_eps``, activations,
dropout); every other submodule becomes a definition of its own, traced in turn."""
from __future__ import annotations

from typing import Any

from torch import fx, nn
from torch.utils import _pytree as pytree

from .body import TracedBody, TracedUse, ident
from .capture import Capture
from .dims import classify
from .ops import SCALAR, rows, scalar
from .values import TracedValue, aligned, number, out_axes

ACTIVATIONS = {  # class name -> the scalar template
    "ReLU": "relu({0})", "Tanh": "tanh({0})", "Sigmoid": "sigmoid({0})", "SiLU": "{0} * sigmoid({0})",
    "NewGELUActivation": "gelu_tanh({0})", "GELUTanh": "gelu_tanh({0})", "PytorchGELUTanh": "gelu_tanh({0})",
    "GELUActivation": "gelu({0})", "SiLUActivation": SCALAR["silu"], "ELU": "elu({0})", "Softplus": "softplus({0})",
}


def _linear(body: TracedBody, attr: str, x: TracedValue, n_in: int, n_out: int, bias: bool, transposed: bool,
            node: fx.Node, cap: Capture) -> TracedValue:
    S = body.em.sizes.expr
    weights = [("weight", f"{attr}.weight", transposed)] + ([("bias", f"{attr}.bias", False)] if bias else [])
    box = body.learn(ident(attr), f"[{S(n_in)}] -> [{S(n_out)}] via linear(bias = {str(bias).lower()})", weights)
    wire = body.fresh(f"{ident(attr)}_out")
    body.say(f"{wire} = {box}({body.whole(x)})")
    return TracedValue.whole(wire, out_axes(cap, node))


def _tied_linear(body: TracedBody, attr: str, x: TracedValue, table: str, m: nn.Linear, node: fx.Node, cap: Capture) -> TracedValue:
    """A linear map whose weight is another submodule's too (a head tied to the embedding): a
    contraction with that one tensor, ``y[.., v] = sum_z x[.., z] * E()[v, z]`` (+ its own bias)."""
    axes = out_axes(cap, node)
    n = len(axes)
    bias = None
    if m.bias is not None:
        bias = body.learn(f"{ident(attr)}_bias", f"-> [{body.em.sizes.expr(m.out_features)}]",
                          [("weight", f"{attr}.bias", False)])

    def expr(L):
        lx = aligned(len(x.axes) - 1, L, n - 1)
        lx[len(x.axes) - 1] = "z"
        out = f"sum_z {x.index(lx)} * {table}[{L[n - 1]}, z]"
        return out if bias is None else f"{out} + {bias}()[{L[n - 1]}]"
    return body.assign(f"{ident(attr)}_out", axes, expr)


def emit_module(em, body: TracedBody, cap: Capture, node: fx.Node, env: dict, free: set, said) -> Any:
    """A submodule's call: a box the language has, or a use of the submodule's own definition
    (the arguments its caller made from sizes alone are made again inside it)."""
    attr = node.target.removeprefix("inner").lstrip(".")
    m = cap.submodule(node)
    cls = type(m).__name__
    if not _is_box(m):
        args, kwargs = (fx.node.map_aggregate(a, lambda n: FreeRef() if n in free else env[n] if isinstance(n, fx.Node)
                                              else n) for a in (node.args, dict(node.kwargs)))
        return _definition(em, body, cap, node, m, attr, args, kwargs)
    args, kwargs = (fx.node.map_aggregate(a, lambda n: said(n) if n in free else env[n] if isinstance(n, fx.Node)
                                          else n) for a in (node.args, dict(node.kwargs)))
    x = args[0] if args else next(iter(kwargs.values()), None)
    if isinstance(m, nn.Linear) and id(m.weight) in em.tied:
        return _tied_linear(body, attr, x, em.tied[id(m.weight)].read(em), m, node, cap)
    if isinstance(m, nn.Linear):
        return _linear(body, attr, x, m.in_features, m.out_features, m.bias is not None, False, node, cap)
    if cls == "Conv1D" and hasattr(m, "nf"):  # Hugging Face's: a linear map stored [in, out]
        return _linear(body, attr, x, m.weight.shape[0], m.nf, True, True, node, cap)
    if isinstance(m, nn.LayerNorm) and len(m.normalized_shape) == 1 and m.elementwise_affine and m.bias is not None:
        wire = body.fresh(attr, claim=True)
        body.weights += [(f"{wire}.weight", f"{attr}.weight", False), (f"{wire}.bias", f"{attr}.bias", False)]
        body.say(f"{wire} = layernorm_eps({body.whole(x)}, {number(m.eps)})")
        return TracedValue.whole(wire, out_axes(cap, node))
    if isinstance(m, nn.Embedding):  # the padding row (padding_idx) changes the gradient only
        S = body.em.sizes.expr
        if id(m.weight) in em.tied:
            return rows(body, attr, em.tied[id(m.weight)].read(em), m.num_embeddings, x, out_axes(cap, node))
        box = body.learn(ident(attr), f"-> [{S(m.num_embeddings)}, {S(m.embedding_dim)}]", [("weight", f"{attr}.weight",
                                                                                             False)])
        return rows(body, attr, f"{box}()", m.num_embeddings, x, out_axes(cap, node))
    if cls in ACTIVATIONS or isinstance(m, nn.GELU):
        t = ACTIVATIONS.get(cls) or ("gelu_tanh({0})" if m.approximate == "tanh" else "gelu({0})")
        return scalar(t)(em, body, cap, node, (x,), {})
    if isinstance(m, (nn.Dropout, nn.Identity)):
        p = getattr(m, "p", 0.0)
        if p == 0 or not m.training:
            return x
        return body.assign(attr, out_axes(cap, node), lambda L: f"dropout({x.index(L)}, {number(p)})")
    return _definition(em, body, cap, node, m, attr, args, kwargs)


class FreeRef:
    """An argument its caller made from sizes alone: made again inside the callee."""


def _is_box(m: nn.Module) -> bool:
    """A submodule the language has a box for (else it is a definition of its own)."""
    cls = type(m).__name__
    if isinstance(m, nn.Embedding):
        return m.max_norm is None and type(m).forward is nn.Embedding.forward
    if isinstance(m, nn.LayerNorm):
        return len(m.normalized_shape) == 1 and m.elementwise_affine and m.bias is not None
    return isinstance(m, (nn.Linear, nn.GELU, nn.Dropout, nn.Identity)) or cls in ACTIVATIONS or (
        cls == "Conv1D" and hasattr(m, "nf"))


def _definition(em, body: TracedBody, cap: Capture, node: fx.Node, m: nn.Module, attr: str, args, kwargs) -> Any:
    """A use of the submodule's own definition: ``out = Name(inputs)``."""
    vals = [v for v in pytree.tree_leaves((args, kwargs)) if isinstance(v, (TracedValue, FreeRef))]
    d = em.define(m, cap.calls[node], frozenset(k for k, v in enumerate(vals) if isinstance(v, FreeRef)))
    ins = [body.whole(vals[k]) for k in d.inputs]
    value = cap.values[0][node]
    leaves, spec = pytree.tree_flatten(value)
    outs, wires = [], []
    first = ident(attr)
    for k, leaf in enumerate(leaves):
        if not hasattr(leaf, "shape"):
            outs.append(leaf)
            continue
        axes = classify([pytree.tree_leaves(run[node])[k].shape for run in cap.values], attr)
        wire = body.fresh(attr, claim=True) if not wires else body.fresh(f"{first}_{len(wires)}")
        wires.append(wire)
        outs.append(TracedValue.whole(wire, axes))
    body.lines.append(TracedUse(d.name, wires, ins, attr, d.weights))
    return pytree.tree_unflatten(outs, spec)
