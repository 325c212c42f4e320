"""Tensors a module makes from sizes and its buffers alone, not from its inputs: position ids
(``arange(s)``, a position buffer sliced by the length), masks (``torch.ones(b, s)``, a causal
triangle), a constant table (RoPE's ``inv_freq``, GPT-J's sines), a scale.

Torch makes them with shape-dependent Python; the trace reads each by its values in every run
(the examples, one more row of batch, another length) as what it is in the language:
``positions<s>()`` (scaled and shifted), ``causal<s>()`` or a sliding window (marked on the TracedValue,
so that attention under it is the prelude's fused one), a number, or (its shape fixed) a
constant stored in the weights file and read through ``detach`` (never trained). What is none
of these and changes with the length is written as computed from what made it (RoPE's angles
from its positions and frequencies); an input the caller made so that is none of these is
refused at trace time, at its source line."""
from __future__ import annotations

import dataclasses
from collections.abc import Mapping

import torch
from torch import fx

from ..errors import DiagError
from ..graph.types import DimKind
from .dims import classify
from .values import TracedValue, number, where_

CONSTANT = "@constant"  # the weight map's name for a constant: its buffer's (or node's) name and this


def input_free(cap, eager_inner: set, roots: set) -> set:
    """The nodes whose tensors depend on no input's values: buffers, factories, what is computed
    from them alone (sizes read from inputs are known numbers in every run); ``roots``: the
    inputs the caller made so."""
    free: set = set(roots)
    for n in cap.graph.nodes:
        v = cap.values[0][n]
        if not isinstance(v, torch.Tensor) or n in eager_inner:
            continue
        if n.op == "get_attr":
            if not isinstance(v, torch.nn.Parameter):
                free.add(n)
        elif n.op in ("call_function", "call_method"):
            tensors = [a for a in n.all_input_nodes if _tensorish(cap, a)]
            if all(a in free for a in tensors):
                free.add(n)
    return free


def _tensorish(cap, n: fx.Node) -> bool:
    return _holds_tensor(cap.values[0][n])


def _holds_tensor(v) -> bool:
    """A tensor, or a record of values that holds one (a tuple, a model's output)."""
    if isinstance(v, torch.Tensor):
        return True
    if isinstance(v, Mapping):
        return any(_holds_tensor(x) for x in v.values())
    return isinstance(v, (tuple, list)) and any(_holds_tensor(x) for x in v)


def _core(t: torch.Tensor, axes) -> torch.Tensor | None:
    """``t`` with its batch axes cut to one row (None when the rows differ) and its size-one axes gone."""
    for d, a in enumerate(axes):
        if a.kind is DimKind.BATCH:
            first = t.narrow(d, 0, 1)
            if not torch.equal(t, first.expand_as(t)):
                return None
            t = first
    return t.reshape([t.shape[d] for d, a in enumerate(axes) if a.kept])


def materialise(em, body, cap, node: fx.Node):
    """The value of an input-free node as the language says it (a TracedValue, or a Python number), or
    None when it changes with the length and is none of those (then it is written as computed)."""
    values = [run[node] for run in cap.values]
    axes = tuple(classify([v.shape for v in values], f"'{node.name}'"))
    cores = [_core(v, axes) for v in values]
    where = where_(node)
    if any(c is None for c in cores):
        raise DiagError(f"{where}: '{node.name}' differs between the rows of the batch, though no input's "
                        "values make it; cannot trace it")
    cores = [c.double() if c.dtype == torch.bool or not c.dtype.is_floating_point else c for c in cores]
    seq = [t for t, a in enumerate(axes) if a.kind is DimKind.SEQ]
    first = cores[0]
    if first.numel() == 1 and all(c.numel() == 1 and c.item() == first.item() for c in cores):
        if not seq and not any(a.kind is DimKind.FIXED for a in axes):
            return first.item() if values[0].dtype.is_floating_point else int(first.item())  # a scale, say
    if not seq:
        if not all(torch.equal(c, first) for c in cores):
            raise DiagError(f"{where}: '{node.name}' changes between runs; cannot trace it")
        return _stored(em, body, node, axes, first)
    constant = first.flatten()[0].item()
    constant = constant if values[0].dtype.is_floating_point else int(constant)
    if all(bool((c == constant).all()) for c in cores) and not any(a.kind is DimKind.FIXED for a in axes):
        return constant  # the same number at every position (token types 0, a mask of ones)
    if len(seq) == 1 and len(cores[0].shape) == 1:
        found = _affine(cores)
        if found is not None:
            return _positions(em, body, node, axes, *found)
    if len(seq) == 2 and all(c.dim() == 2 for c in cores):
        added = values[0].dtype.is_floating_point and not all(bool(((c == 0) | (c == 1)).all()) for c in cores)
        keep = [(c == 0) if added else (c != 0) for c in cores]
        if added and not all(bool((c[~k] <= torch.finfo(c.dtype).min).all()) for c, k in zip(cores, keep)):
            return None
        w = _band(keep)
        if w is None:
            return None
        S = em.sizes.axis(axes[seq[-1]])
        made = f"causal<{S}>()" if w == 0 else f"causal<{S}>() * window<{S}, {em.sizes.expr(w)}>()"
        mask = body.assign_lead(f"{node.name}_keep" if added else node.name, axes, {}, made)
        if added:  # 0 where kept, -inf elsewhere: added to scores
            mask = body.assign(node.name, axes, lambda L: f"where(0, {mask.index(L)})")
        return dataclasses.replace(mask, mask=("causal",) if w == 0 else ("window", w))
    return None  # computed in the language from what made it


def _band(keeps) -> int | None:
    """0 when every run's mask is causal (key j <= query i), w when it is the causal window
    i - w < j <= i (Mistral's sliding window, narrower than some run's length), else None."""
    widths = set()
    for k in keeps:
        n = k.shape[-1]
        i, j = torch.arange(n)[:, None], torch.arange(n)[None]
        w = int(k[-1].sum())
        if torch.equal(k, (j <= i) & (i - j < w)):
            widths.add(w if w < n else 0)
        else:
            return None
    if len(widths - {0}) > 1:
        return None
    return max(widths)


def _affine(cores) -> tuple[float, float] | None:
    """(a, b) when every run's values are a * position + b."""
    c = cores[0]
    if c.numel() < 2:
        return None
    b, a = c[0].item(), (c[1] - c[0]).item()
    for c in cores:
        ref = a * torch.arange(len(c), dtype=c.dtype) + b
        if not torch.equal(c, ref):
            return None
    return a, b


def _positions(em, body, node: fx.Node, axes, a: float, b: float) -> TracedValue:
    n = next(x for x in axes if x.kind is DimKind.SEQ)
    p = body.assign_lead(node.name if (a, b) == (1, 0) else f"{node.name}_0", axes, {},
                         f"positions<{em.sizes.axis(n)}>()")
    if (a, b) == (1, 0):
        return p
    expr = (f"{number(a)} * {p.wire}[i]" if a != 1 else f"{p.wire}[i]") + (f" + {number(b)}" if b else "")
    return body.assign_lead(node.name, axes, {next(t for t, x in enumerate(axes) if x.kept): "i"}, expr)


def _stored(em, body, node: fx.Node, axes, value: torch.Tensor) -> TracedValue:
    """A constant tensor of fixed shape: a tensor of the weights file, read through ``detach``."""
    name = _buffer_name(node) or f"{node.name}_table"
    key = f"{name}{CONSTANT}"
    if em.constant_owners.setdefault((id(body.module), key), node.name) != node.name:  # two from one buffer
        key = f"{name}_{node.name}{CONSTANT}"
    em.constants[(id(body.module), key)] = value.detach().clone()
    kept = tuple(a for a in axes if a.kept)
    box = body.learn(name, f"-> {body.type_of(kept)}", [("weight", key, False)])
    body.decls.append(f"# {box}: a constant of the model ({_what(node)}), stored in the weights file")
    letters = "abcefgmnpq"[:len(kept)]
    idx = f"[{', '.join(letters)}]" if letters else ""
    return body.assign_lead(node.name, axes, dict(zip([t for t, a in enumerate(axes) if a.kept], letters)),
                            f"detach({box}(){idx})")


def _buffer_name(node: fx.Node) -> str | None:
    """The name of the one buffer a constant is made from (``inv_freq``), if one."""
    seen, todo, found = set(), [node], set()
    while todo:
        n = todo.pop()
        if n in seen:
            continue
        seen.add(n)
        if n.op == "get_attr":
            found.add(str(n.target).rsplit(".", 1)[-1])
        todo += n.all_input_nodes
    return found.pop() if len(found) == 1 else None


def _what(node: fx.Node) -> str:
    return f"buffer {node.target}" if node.op == "get_attr" else f"made at {where_(node).rsplit('/', 1)[-1]}"

