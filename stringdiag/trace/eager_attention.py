"""The eager attention of model code, ``softmax(q @ k.transpose(-1, -2) * c [+ mask]) @ v``,
recognised in a captured graph so that it is written as ``F.scaled_dot_product_attention`` is:
the prelude's ``sdpa`` per head when nothing is added and c = 1/sqrt(E), else written out."""
from __future__ import annotations

from dataclasses import dataclass, field

import torch
from torch import fx

from .values import op_name

MATMUL = {"matmul", "bmm"}
PASSING = {"dropout", "to", "type", "float", "double", "contiguous"}


@dataclass
class Plan:
    """The nodes folded into an attention (written nowhere), and each attention's arguments."""

    inner: set = field(default_factory=set)
    attentions: dict = field(default_factory=dict)  # the final matmul -> the sdpa arguments (nodes)


def _only_user(n, values) -> bool:
    return isinstance(n, fx.Node) and len(n.users) == 1 and isinstance(values[n], torch.Tensor)


def _unwrap(n: fx.Node, values, chain: list) -> fx.Node:
    """Past dropout that does nothing and casts to the same dtype, recording what was passed."""
    while op_name(n) in PASSING and _only_user(n, values) and values[n].dtype == values[n.args[0]].dtype:
        p = n.kwargs.get("p", n.args[1] if op_name(n) == "dropout" and len(n.args) > 1 else 0.0)
        if op_name(n) == "dropout" and p and n.kwargs.get("training", True):
            break
        chain.append(n)
        n = n.args[0]
    return n


def _scores(x: fx.Node, values, chain: list):
    """``s * c``, ``s / c`` or ``s`` with s = q @ kᵀ: (s, scale, mask) or None."""
    mask = None
    if op_name(x) in ("add", "iadd") and _only_user(x, values) and all(isinstance(a, fx.Node) for a in x.args):
        chain.append(x)
        x, mask = x.args
    scale = None
    if op_name(x) in ("mul", "truediv") and _only_user(x, values) and isinstance(x.args[1], (int, float)):
        chain.append(x)
        scale = x.args[1] if op_name(x) == "mul" else 1 / x.args[1]
        x = x.args[0]
    if op_name(x) not in MATMUL or not _only_user(x, values):
        return None
    kt = x.args[1]
    if op_name(kt) != "transpose" or sorted(a % values[kt].dim() for a in kt.args[1:]) != [
            values[kt].dim() - 2, values[kt].dim() - 1]:
        return None
    chain.append(x)
    return x.args[0], kt.args[0], scale if scale is not None else 1.0, mask


def plan(graph: fx.Graph, values) -> Plan:
    out = Plan()
    for n in graph.nodes:
        if op_name(n) not in MATMUL or n.op == "call_module":
            continue
        chain: list = []
        sm = _unwrap(n.args[0], values, chain)
        if op_name(sm) != "softmax" or not _only_user(sm, values) or sm.kwargs.get("dtype") is not None:
            continue
        dim = sm.kwargs.get("dim", sm.args[1] if len(sm.args) > 1 else None)
        if dim is None or dim % values[sm].dim() != values[sm].dim() - 1:
            continue
        found = _scores(sm.args[0], values, chain)
        if found is None:
            continue
        q, k, scale, mask = found
        out.inner |= {sm, *chain}
        out.attentions[n] = {"query": q, "key": k, "value": n.args[1], "attn_mask": mask, "scale": scale}
    return out

