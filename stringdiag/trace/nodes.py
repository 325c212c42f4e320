"""One node of a captured graph: its statement, or its place in another value, or (for
sizes, dtypes and flags) the Python value it held."""
from __future__ import annotations

from typing import Any

import torch
from torch import fx
from torch.utils import _pytree as pytree

from ..errors import DiagError
from .attention import sdpa
from .body import TracedBody, ident
from .capture import Capture
from .ops import OPS, constant, opaque
from .values import TracedValue, lookup, op_name, out_axes


HANDLERS = {**OPS, "scaled_dot_product_attention": sdpa}
MADE = {"arange", "create_causal_mask"}
IGNORES_ARGS = {"create_causal_mask"}  # recognised by its value  # what makes a tensor from sizes alone and still has a box


def is_tensorish(value: Any) -> bool:
    return any(isinstance(v, torch.Tensor) for v in pytree.tree_leaves(value))


def emit_node(em, body: TracedBody, cap: Capture, node: fx.Node, env: dict) -> Any:
    value = cap.values[0][node]
    if node.op == "get_attr":
        return _attribute(em, body, cap, node)
    if not is_tensorish(value):
        return value  # a size, a dtype, a flag: known in every run
    if op_name(node) in IGNORES_ARGS:  # its arguments are not written (made from sizes, they may be unsaid)
        env = {**{a: None for a in node.all_input_nodes}, **env}
    args, kwargs = lookup(env, node.args), lookup(env, dict(node.kwargs))
    handler = HANDLERS.get(op_name(node))
    if not any(isinstance(v, TracedValue) for v in pytree.tree_leaves((args, kwargs))) and op_name(node) not in MADE:
        return opaque(em, body, cap, node, args, kwargs, "it makes a tensor from nothing")
    if handler is None:
        return opaque(em, body, cap, node, args, kwargs, "the language has no box for it")
    try:
        result = handler(em, body, cap, node, args, kwargs)
    except DiagError as e:
        return opaque(em, body, cap, node, args, kwargs, e.message)
    return result


def _attribute(em, body: TracedBody, cap: Capture, node: fx.Node) -> Any:
    """A parameter read in the forward: a learnable tensor of this definition."""
    path = node.target.removeprefix("inner").lstrip(".")
    value = cap.values[0][node]
    if not any(is_tensorish(cap.values[0][u]) for u in node.users):
        return value  # read only by Python (``self.bias is None``, ``w.dtype``), never computed with
    if not isinstance(value, torch.nn.Parameter):
        return constant(em, body, cap, node, value, path) if isinstance(value, torch.Tensor) else value
    axes = out_axes(cap, node)
    if id(value) in em.tied:
        return TracedValue.whole(em.tied[id(value)].read(em), axes)
    squeezed = "squeeze" if any(not a.kept for a in axes) else False  # a class token [1, 1, d]: stored [d]
    box = body.learn(ident(path), f"-> {body.type_of(axes)}", [("weight", path, squeezed)])
    return TracedValue.whole(f"{box}()", axes)
