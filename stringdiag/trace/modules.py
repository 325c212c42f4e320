"""Submodules the language has a box for (``nn.Linear`` and Hugging Face's ``Conv1D`` as
``learn ... via linear``, ``nn.LayerNorm`` as the prelude's ``layernorm_eps``, activations,
dropout); every other submodule becomes a definition of its own, traced in turn."""
from __future__ import annotations

from typing import Any

from torch import fx, nn
from torch.utils import _pytree as pytree

from .body import Body, Use, ident
from .capture import Capture
from .dims import classify
from .ops import SCALAR, scalar
from .values import Val, aligned, letters_for, lookup, number, out_axes

ACTIVATIONS = {  # class name -> the scalar template
    "ReLU": "relu({0})", "Tanh": "tanh({0})", "Sigmoid": "sigmoid({0})", "SiLU": "{0} * sigmoid({0})",
    "NewGELUActivation": "gelu_tanh({0})", "GELUTanh": "gelu_tanh({0})", "PytorchGELUTanh": "gelu_tanh({0})",
    "GELUActivation": "gelu({0})", "SiLUActivation": SCALAR["silu"], "ELU": "elu({0})", "Softplus": "softplus({0})",
}


def _linear(body: Body, attr: str, x: Val, n_in: int, n_out: int, bias: bool, transposed: bool,
            node: fx.Node, cap: Capture) -> Val:
    S = body.em.sizes.expr
    weights = [("weight", f"{attr}.weight", transposed)] + ([("bias", f"{attr}.bias", False)] if bias else [])
    box = body.learn(ident(attr), f"[{S(n_in)}] -> [{S(n_out)}] via linear(bias = {str(bias).lower()})", weights)
    wire = body.fresh(f"{ident(attr)}_out")
    body.say(f"{wire} = {box}({body.whole(x)})")
    return Val.whole(wire, out_axes(cap, node))


def emit_module(em, body: Body, cap: Capture, node: fx.Node, env: dict) -> Any:
    attr = node.target.removeprefix("inner").lstrip(".")
    m = cap.submodule(node)
    cls = type(m).__name__
    args, kwargs = lookup(env, node.args), lookup(env, dict(node.kwargs))
    x = args[0] if args else next(iter(kwargs.values()), None)
    if isinstance(m, nn.Linear):
        return _linear(body, attr, x, m.in_features, m.out_features, m.bias is not None, False, node, cap)
    if cls == "Conv1D" and hasattr(m, "nf"):  # Hugging Face's: a linear map stored [in, out]
        return _linear(body, attr, x, m.weight.shape[0], m.nf, True, True, node, cap)
    if isinstance(m, nn.LayerNorm) and len(m.normalized_shape) == 1 and m.elementwise_affine and m.bias is not None:
        wire = body.fresh(attr, claim=True)
        body.weights += [(f"{wire}.weight", f"{attr}.weight", False), (f"{wire}.bias", f"{attr}.bias", False)]
        body.say(f"{wire} = layernorm_eps({body.whole(x)}, {number(m.eps)})")
        return Val.whole(wire, out_axes(cap, node))
    if isinstance(m, nn.Embedding) and m.padding_idx is None and m.max_norm is None:
        S = body.em.sizes.expr
        box = body.learn(ident(attr), f"-> [{S(m.num_embeddings)}, {S(m.embedding_dim)}]", [("weight", f"{attr}.weight",
                                                                                             False)])
        axes = out_axes(cap, node)
        rows = {t: c for t, c in letters_for(axes).items() if t < len(axes) - 1}  # the ids' axes; a row each
        return body.assign_lead(attr, axes, rows, f"embed({x.index(aligned(len(x.axes), rows, len(axes) - 1))}, "
                                                  f"{box}())")
    if cls in ACTIVATIONS or isinstance(m, nn.GELU):
        t = ACTIVATIONS.get(cls) or ("gelu_tanh({0})" if m.approximate == "tanh" else "gelu({0})")
        return scalar(t)(em, body, cap, node, (x,), {})
    if isinstance(m, (nn.Dropout, nn.Identity)):
        p = getattr(m, "p", 0.0)
        if p == 0 or not m.training:
            return x
        return body.assign(attr, out_axes(cap, node), lambda L: f"dropout({x.index(L)}, {number(p)})")
    return _definition(em, body, cap, node, m, attr, args, kwargs)


def _definition(em, body: Body, cap: Capture, node: fx.Node, m: nn.Module, attr: str, args, kwargs) -> Any:
    """A use of the submodule's own definition: ``out = Name(inputs)``."""
    d = em.define(m, cap.calls[node])
    vals = [v for v in pytree.tree_leaves((args, kwargs)) if isinstance(v, Val)]
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
        outs.append(Val.whole(wire, axes))
    body.lines.append(Use(d.name, wires, ins, attr, d.weights))
    return pytree.tree_unflatten(outs, spec)
