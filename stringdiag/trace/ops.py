"""What each torch operation is in the language: elementwise arithmetic as scalar
expressions under index names, matrix products and einsum as contractions, softmax and
reductions along one axis, reshapes as ``flatten``/``unflatten``, cuts as slices and ``cat``,
``F.scaled_dot_product_attention`` as the prelude's ``sdpa``. Anything else is an opaque box."""
from __future__ import annotations

import math
from typing import Any

import torch
from torch import fx

from torch.utils import _pytree as pytree

from ..errors import DiagError
from .body import TracedBody, ident
from .capture import Capture
from ..graph.types import DimKind
from .dims import Axis, classify
from .values import Empty, Opaque, Slot, TracedValue, aligned, letters_for, number, op_name, out_axes, where_

SCALAR = {  # name -> template over the operands
    "add": "{0} + {1}", "iadd": "{0} + {1}", "radd": "{1} + {0}", "sub": "{0} - {1}", "isub": "{0} - {1}",
    "rsub": "{1} - {0}", "mul": "{0} * {1}", "imul": "{0} * {1}", "rmul": "{1} * {0}", "truediv": "{0} / {1}",
    "div": "{0} / {1}", "itruediv": "{0} / {1}", "rtruediv": "{1} / {0}", "neg": "-{0}", "pow": "pow({0}, {1})",
    "rsqrt": "1 / sqrt({0})", "sqrt": "sqrt({0})", "exp": "exp({0})", "log": "log({0})", "tanh": "tanh({0})",
    "sigmoid": "sigmoid({0})", "relu": "relu({0})", "erf": "erf({0})", "sin": "sin({0})", "cos": "cos({0})",
    "silu": "{0} * sigmoid({0})", "reciprocal": "1 / {0}", "square": "{0} * {0}", "maximum": "max({0}, {1})",
    "minimum": "min({0}, {1})", "softplus": "softplus({0})", "elu": "elu({0})",
}
RELABEL = {"contiguous", "clone", "detach", "unsqueeze", "squeeze", "expand", "expand_as", "broadcast_to", "flatten",
           "view", "reshape", "view_as", "reshape_as", "unflatten"}


def operand(v: Any, out_letters: dict[int, str], out_ndim: int) -> str:
    if isinstance(v, TracedValue):
        return v.index(aligned(len(v.axes), out_letters, out_ndim))
    return number(v)


def scalar(template: str):
    def handler(em, body: TracedBody, cap: Capture, node: fx.Node, args, kwargs) -> TracedValue:
        if set(kwargs) - {"approximate", "inplace", "out"} or kwargs.get("out") is not None:
            raise DiagError(f"'{node.target}' with {sorted(kwargs)}")
        axes = out_axes(cap, node)
        if template == SCALAR["mul"] and 1 in args[1:] and isinstance(args[0], TracedValue):  # x * 1.0: x itself
            return args[0].relabel(axes)
        return body.assign(node.name, axes,
                           lambda L: template.format(*[operand(a, L, len(axes)) for a in args]))
    return handler


def gelu(em, body, cap, node, args, kwargs) -> TracedValue:
    tanh = kwargs.get("approximate", args[1] if len(args) > 1 else "none") == "tanh"
    return scalar("gelu_tanh({0})" if tanh else "gelu({0})")(em, body, cap, node, args[:1], {})


def matmul(em, body: TracedBody, cap: Capture, node: fx.Node, args, kwargs) -> TracedValue:
    a, b = args[0], args[1]
    if not (isinstance(a, TracedValue) and isinstance(b, TracedValue)) or len(a.axes) < 2 or len(b.axes) < 2:
        raise DiagError("a product of vectors")
    axes = out_axes(cap, node)
    n = len(axes)

    def expr(L):
        la = aligned(len(a.axes) - 2, L, n - 2)
        lb = aligned(len(b.axes) - 2, L, n - 2)
        na, nb = len(a.axes), len(b.axes)
        la.update({na - 2: L.get(n - 2), na - 1: "z"})
        lb.update({nb - 2: "z", nb - 1: L.get(n - 1)})
        prod = f"{a.index(la)} * {b.index(lb)}"
        return f"sum_z {prod}" if a.axes[-1].kept else prod
    return body.assign(node.name, axes, expr)


def linear(em, body: TracedBody, cap: Capture, node: fx.Node, args, kwargs) -> TracedValue:
    """``F.linear(x, W, b)`` with W, b tensors of the module (learnable tensors):
    ``y[..., a] = sum_z x[..., z] * W[a, z] + b[a]``."""
    x, w = args[0], args[1] if len(args) > 1 else kwargs.get("weight")
    b = args[2] if len(args) > 2 else kwargs.get("bias")
    if not (isinstance(x, TracedValue) and isinstance(w, TracedValue)) or len(w.axes) != 2 or not all(a.kept for a in w.axes) \
            or not x.axes[-1].kept or not (b is None or isinstance(b, TracedValue) and len(b.axes) == 1):
        raise DiagError("linear of these operands")
    axes = out_axes(cap, node)
    n = len(axes)

    def expr(L):
        lx = aligned(len(x.axes) - 1, L, n - 1)
        lx[len(x.axes) - 1] = "z"
        prod = f"sum_z {x.index(lx)} * {w.index({0: L.get(n - 1), 1: 'z'})}"
        return prod if b is None else f"{prod} + {b.index({0: L.get(n - 1)})}"
    return body.assign(node.name, axes, expr)


def einsum(em, body: TracedBody, cap: Capture, node: fx.Node, args, kwargs) -> TracedValue:
    eq, ops = args[0], args[1:]
    ops = ops[0] if len(ops) == 1 and isinstance(ops[0], (list, tuple)) else ops
    if "..." in eq:
        raise DiagError("einsum with '...'")
    lhs, out = eq.replace(" ", "").split("->")
    terms = lhs.split(",")
    axes = out_axes(cap, node)
    summed = sorted({c for t in terms for c in t} - set(out))

    def expr(L):
        names = {c: L.get(k) for k, c in enumerate(out)}
        names.update({c: f"z{c}" for c in summed})
        reads = [v.index({k: names[c] for k, c in enumerate(t) if v.axes[k].kept}) for t, v in zip(terms, ops)]
        kept = [f"z{c}" for c in summed if any(v.axes[t.index(c)].kept for t, v in zip(terms, ops) if c in t)]
        head = ("sum_" + kept[0] if len(kept) == 1 else "sum_{" + ", ".join(kept) + "}") + " " if kept else ""
        return head + " * ".join(reads)
    return body.assign(node.name, axes, expr)


def _dim(v: TracedValue, d: int) -> int:
    d = d % len(v.axes)
    if not v.axes[d].kept:
        raise DiagError("an operation along an axis of size one")
    return d


def softmax(em, body: TracedBody, cap: Capture, node: fx.Node, args, kwargs) -> TracedValue:
    x, d = args[0], kwargs.get("dim", args[1] if len(args) > 1 else -1)
    if kwargs.get("dtype") is not None and kwargs["dtype"] != cap.values[0][node.args[0]].dtype:
        _dropped_cast(em, node, cap.values[0][node.args[0]].dtype, kwargs["dtype"])
    d = _dim(x, d)
    letters = {t: c for t, c in _letters(x).items() if t != d}
    wire = body.fresh(node.name)
    lhs = ", ".join(letters[t] for t in sorted(letters))
    body.say(f"{wire}{f'[{lhs}]' if lhs else ''} = softmax({x.index(letters)})")
    order = sorted(letters) + [d]
    return TracedValue(wire, x.axes, tuple(order.index(t) if x.axes[t].kept else None for t in range(len(x.axes))))


def _letters(v: TracedValue) -> dict[int, str]:
    return letters_for(v.axes)


def reduce(kind: str):
    def handler(em, body: TracedBody, cap: Capture, node: fx.Node, args, kwargs) -> TracedValue:
        x = args[0]
        dims = kwargs.get("dim", args[1] if len(args) > 1 else None)
        dims = range(len(x.axes)) if dims is None else [dims] if isinstance(dims, int) else dims
        dims = sorted({d % len(x.axes) for d in dims if x.axes[d % len(x.axes)].kept})
        axes = out_axes(cap, node)
        L = _letters(x)
        red = {t: f"z{k}" for k, t in enumerate(dims)}
        keep = [t for t in sorted(L) if t not in red]
        src = x.index({**{t: L[t] for t in keep}, **red})
        total = ("sum_" + red[dims[0]] if len(dims) == 1 else "sum_{" + ", ".join(red.values()) + "}") + f" {src}"
        if kind == "mean":
            total = f"({total}) / " + " / ".join(f"({body.em.sizes.axis(x.axes[t])})" for t in dims)
        wire = body.fresh(node.name)
        lhs = ", ".join(L[t] for t in keep)
        body.say(f"{wire}{f'[{lhs}]' if lhs else ''} = {total}")
        return TracedValue.whole(wire, axes)
    return handler


def relabel(em, body: TracedBody, cap: Capture, node: fx.Node, args, kwargs) -> TracedValue:
    """A reshape: pure relabelling when it only adds or drops axes of size one; otherwise
    ``flatten``/``unflatten`` of one group of axes."""
    x, axes = args[0], out_axes(cap, node)
    a_in = [x.axes[t] for t in x.kept]
    a_out = [a for a in axes if a.kept]
    if [a.size for a in a_in] == [a.size for a in a_out]:
        return x.relabel(axes)
    if op_name(node) in ("expand", "expand_as", "broadcast_to"):
        return expand(body, node, x, axes)
    xs, ys = [a.size for a in a_in], [a.size for a in a_out]
    p = 0
    while p < min(len(xs), len(ys)) and xs[p] == ys[p]:
        p += 1
    q = 0
    while q < min(len(xs), len(ys)) - p and xs[-1 - q] == ys[-1 - q]:
        q += 1
    if q == 0:
        return reshape(body, node, x, axes)
    # the axes merged or split lie between others: moved last (no statement), reshaped, moved back
    xk, ok = x.kept, [t for t, a in enumerate(axes) if a.kept]
    x_order = xk[:p] + xk[len(xk) - q:] + xk[p:len(xk) - q]
    o_order = ok[:p] + ok[len(ok) - q:] + ok[p:len(ok) - q]
    moved = TracedValue(x.wire, tuple(x.axes[t] for t in x_order), tuple(x.pos[t] for t in x_order), x.ids)
    r = reshape(body, node, moved, tuple(axes[t] for t in o_order))
    pos: list = [None] * len(axes)
    for k, t in enumerate(o_order):
        pos[t] = r.pos[k]
    return TracedValue(r.wire, tuple(axes), tuple(pos))


def expand(body: TracedBody, node: fx.Node, x: TracedValue, axes) -> TracedValue:
    """``expand``: an axis of size one made n copies (``repeat_kv`` of grouped-query attention)
    is a product with ``ones<n>()``; one expanded over the batch or the sequence stays a broadcast."""
    shift = len(axes) - len(x.axes)
    new = [t for t, a in enumerate(axes) if a.kind is DimKind.FIXED and (t < shift or not x.axes[t - shift].kept)]
    kept = [a if a.kept and (t in new or t >= shift and x.axes[t - shift].kept) else Axis(DimKind.ONE, a.size)
            for t, a in enumerate(axes)]
    if not new:
        return x.relabel(tuple(kept))
    ones = {t: body.assign_lead(f"ones_{axes[t].size}", (axes[t],), {}, f"ones<{body.em.sizes.expr(axes[t].size)}>()")
            for t in new}
    return body.assign(node.name, tuple(kept), lambda L: " * ".join(
        [x.index(aligned(len(x.axes), L, len(axes)))] + [ones[t].index({0: L[t]}) for t in new]))


def reshape(body: TracedBody, node: fx.Node, x: TracedValue, axes) -> TracedValue:
    """One group of trailing axes merged into one (``flatten``, two at a time from the right) or
    one split into several (``unflatten``, one part at a time from the left)."""
    sin = [x.axes[t].size for t in x.kept]
    sout = [a.size for a in axes if a.kept]
    lead = 0
    while lead < min(len(sin), len(sout)) and sin[lead] == sout[lead]:
        lead += 1
    gin, gout = sin[lead:], sout[lead:]
    if not ((len(gin) == 1 and len(gout) > 1) or (len(gin) > 1 and len(gout) == 1)):
        raise DiagError(f"a reshape of {sin} into {sout} (one trailing axis into several, or several into one, "
                        "only)")
    sizes = body.em.sizes
    sizes.product(gin[0], gout) if len(gin) == 1 else sizes.product(gout[0], gin)
    keep = [x.axes[t] for t in x.kept[:lead]]
    v = body.ordered(x)
    steps = len(gout) - 1 if len(gin) == 1 else len(gin) - 1
    for k in range(steps):
        last = k == steps - 1
        if len(gin) == 1:  # [.., prod(gout[k:])] -> [.., gout[k], prod(gout[k + 1:])]
            rest = " * ".join(_factor(sizes.expr(p)) for p in gout[k + 1:])
            shape = keep + [Axis(DimKind.FIXED, p) for p in gout[:k + 1]] + [Axis(DimKind.FIXED, math.prod(gout[k + 1:]))]
            call = f"unflatten<{sizes.expr(gout[k])}, {rest}>"
            held = len(keep) + k
        else:  # [.., gin[0], .., gin[-k - 2], gin[-k - 1] * ...] -> [.., gin[-k - 2] * ...]
            shape = keep + [Axis(DimKind.FIXED, p) for p in gin[:-k - 2]] + [Axis(DimKind.FIXED, math.prod(gin[-k - 2:]))]
            call = "flatten"
            held = len(shape) - 1
        held_letters = {t: c for t, c in letters_for(v.axes).items() if v.kept.index(t) < held}
        v = body.assign_lead(node.name if last else f"{node.name}_part", axes if last else tuple(shape),
                             held_letters, f"{call}({v.index(held_letters)})")
    return v


def _factor(e: str) -> str:
    return f"({e})" if "+" in e else e


def transpose(em, body, cap, node, args, kwargs) -> TracedValue:
    """``transpose``/``permute``/``t``: no statement, only the places of the axes on the wire move."""
    x = args[0]
    n = len(x.axes)
    op = op_label(node)
    if op == "permute":
        dims = args[1:] if not isinstance(args[1], (list, tuple)) else args[1]
    elif op == "t":
        dims = [1, 0]
    else:
        a, b = args[1] % n, args[2] % n
        dims = list(range(n))
        dims[a], dims[b] = b, a
    return TracedValue(x.wire, tuple(x.axes[d % n] for d in dims), tuple(x.pos[d % n] for d in dims))


def cast(em, body, cap, node, args, kwargs) -> Any:
    before = cap.values[0][node.args[0]]
    after = cap.values[0][node]
    if before.dtype != after.dtype:
        _dropped_cast(em, node, before.dtype, after.dtype)
    return args[0].relabel(out_axes(cap, node)) if isinstance(args[0], TracedValue) else args[0]


def _dropped_cast(em, node: fx.Node, before: torch.dtype, after: torch.dtype) -> None:
    em.warn(node, f"a cast from {before} to {after} is dropped: the diagram computes in the one dtype it is "
                  "compiled with")


def dropout(em, body, cap, node, args, kwargs) -> TracedValue:
    p = kwargs.get("p", args[1] if len(args) > 1 else 0.5)
    training = kwargs.get("training", args[2] if len(args) > 2 else True)
    if p == 0 or not training:
        return args[0]
    return body.assign(node.name, out_axes(cap, node), lambda L: f"dropout({args[0].index(L)}, {number(p)})")


def getitem(em, body, cap, node, args, kwargs) -> Any:
    x, key = args
    if not isinstance(x, TracedValue):
        return x[key]
    if (isinstance(key, TracedValue) or isinstance(key, (float, int)) and not isinstance(node.args[1], (int, type(None))))\
            and len(x.axes) == 2 and all(a.kept for a in x.axes):  # table[ids]: rows of a table
        return rows(body, node.name, body.whole(x), x.axes[0].size, key, out_axes(cap, node))
    return cut(body, node, x, key if isinstance(key, tuple) else (key,), out_axes(cap, node))


def cut(body: TracedBody, node: fx.Node, x: TracedValue, key: tuple, axes) -> TracedValue:
    """``x[..., p:q]`` (a slice of the last axis) or ``x[:, 1]`` (integer indices), with ``None``
    for new axes of size one."""
    n, t, spans, picks = len(x.axes), 0, [], {}
    for k, item in enumerate(key):
        if item is Ellipsis:
            t = n - sum(1 for i in key[k + 1:] if i is not None)
        elif item is None:
            continue
        elif isinstance(item, slice):
            if item != slice(None):
                spans.append((t, item))
            t += 1
        elif isinstance(item, int):
            picks[t] = item % x.axes[t].size
            t += 1
        elif isinstance(item, list) and len(item) == 1 and isinstance(item[0], int):  # x[:, [k]]: entry k, kept
            k = item[0] % x.axes[t].size
            if axes[t].kept:
                spans.append((t, slice(k, k + 1)))
            else:
                picks[t] = k
            t += 1
        else:
            raise DiagError("an index by a tensor")
    if picks:
        return _index(body, node, x, picks, spans, axes)
    spans = [(t, sl) for t, sl in spans if sl.indices(x.axes[t].size) != (0, x.axes[t].size, 1)]
    if not spans:  # every slice the whole axis (``x[:, 0:]``)
        return x.relabel(axes)
    if len(spans) > 1:
        raise DiagError("slices of more than one axis")
    d = spans[0][0]
    if d != n - 1:
        start, stop, step = spans[0][1].indices(x.axes[d].size)
        if step != 1 or not x.axes[d].kept or not axes[d].kept:
            raise DiagError("a strided slice other than of the last axis")
        return Empty(axes) if stop <= start else _slice_axis(body, node.name, x, d, start, stop - start, axes)
    start, stop, step = spans[0][1].indices(x.axes[-1].size)
    if step != 1:
        return _strided(body, node, x, start, stop, step, axes)
    if stop <= start:
        return Empty(axes)
    return _slice(body, node.name, x, start, stop - start, axes)


def _strided(body: TracedBody, node: fx.Node, x: TracedValue, start: int, stop: int, step: int, axes) -> TracedValue:
    """``x[..., start::step]`` (GPT-J's ``x[..., ::2]``, ``x[..., 1::2]``): the last axis cut into
    rows of ``step`` (``unflatten``), and the ``start``-th of each row picked."""
    n = x.axes[-1].size
    if n % step or start >= step or stop < n - (n - 1 - start) % step:
        raise DiagError("a strided slice other than x[..., k::m] over the whole axis")
    sizes = body.em.sizes
    sizes.product(n, [n // step, step])
    x = body.ordered(x)
    keep = {t: c for t, c in letters_for(x.axes).items() if t != len(x.axes) - 1}
    rows = body.assign_lead(f"{node.name}_rows", x.axes[:-1] + (Axis(DimKind.FIXED, n // step), Axis(DimKind.FIXED, step)),
                            keep, f"unflatten<{sizes.expr(n // step)}, {sizes.expr(step)}>({x.index(keep)})")
    return body.assign(node.name, axes, lambda L: rows.index({**aligned(len(rows.axes) - 1, L, len(axes)),
                                                               len(rows.axes) - 1: str(start)}))


def repeat_interleave(em, body, cap, node, args, kwargs) -> TracedValue:
    """``repeat_interleave(x, r, dim=-1)``: each entry of the last axis r times in a row
    (``y[.., a, k] = x[.., a] * ones<r>()[k]``, the two axes flattened)."""
    a = dict(zip(("input", "repeats", "dim"), args), **kwargs)
    x, r, d = a["input"], a["repeats"], a.get("dim")
    if not isinstance(x, TracedValue) or not isinstance(r, int) or d is None or d % len(x.axes) != len(x.axes) - 1:
        raise DiagError("repeat_interleave other than a number of times along the last axis")
    sizes = body.em.sizes
    sizes.product(x.axes[-1].size * r, [x.axes[-1].size, r])
    ones = body.assign_lead(f"ones_{r}", (Axis(DimKind.FIXED, r),), {}, f"ones<{sizes.expr(r)}>()")
    x = body.ordered(x)
    L = letters_for(x.axes)
    wide = body.fresh(f"{node.name}_rows")
    body.say(f"{wide}[{', '.join(L[t] for t in sorted(L))}, r] = {x.index(L)} * {ones.wire}[r]")
    keep = {t: c for t, c in L.items() if t != len(x.axes) - 1}
    read = f"{wide}[{', '.join(keep[t] for t in sorted(keep))}]" if keep else wide
    return body.assign_lead(node.name, out_axes(cap, node), keep, f"flatten({read})")


def stack(em, body, cap, node, args, kwargs) -> TracedValue:
    """``torch.stack(xs, dim=-1)``: a new last axis t of len(xs) entries,
    ``y[.., t] = x0[..] * eq(p[t], 0) + x1[..] * eq(p[t], 1) + ...`` with p = positions."""
    xs, d = args[0], kwargs.get("dim", args[1] if len(args) > 1 else 0)
    axes = out_axes(cap, node)
    if d % len(axes) != len(axes) - 1 or not all(isinstance(v, TracedValue) for v in xs):
        raise DiagError("a stack other than along a new last axis")
    p = body.assign_lead(f"{node.name}_at", (axes[-1],), {}, f"positions<{body.em.sizes.axis(axes[-1])}>()")
    n = len(axes)
    return body.assign(node.name, axes, lambda L: " + ".join(
        f"{v.index(aligned(len(v.axes), L, n - 1))} * eq({p.wire}[{L[n - 1]}], {k})" for k, v in enumerate(xs)))


def _index(body: TracedBody, node: fx.Node, x: TracedValue, picks: dict, spans: list, axes) -> TracedValue:
    """Integer indices: ``y[i, b] = x[i, 1, b]`` (the picked axes disappear)."""
    if spans:
        raise DiagError("integer indices and a slice together")
    rest = [t for t in x.kept if t not in picks]
    out = [t for t, a in enumerate(axes) if a.kept]

    def expr(L):
        letters = {t: L[o] for t, o in zip(rest, out)}
        letters.update({t: str(p) for t, p in picks.items() if x.axes[t].kept})
        return x.index(letters)
    return body.assign(node.name, axes, expr)


def _slice_axis(body: TracedBody, base: str, x: TracedValue, d: int, start: int, length: int, axes) -> TracedValue:
    """``x[:, start:start + length, :]`` along an axis other than the last (Falcon's fused heads):
    the other axes named, the slice in its place; the wire holds the sliced axis last."""
    sizes = body.em.sizes
    size = x.axes[d].size
    sizes.total(size, [start, length, size - start - length])
    L = _letters(x)
    keep = {t: L[t] for t in x.kept if t != d}
    lo = sizes.expr(start) if start else "0"
    hi = f"{lo} + {sizes.expr(length)}" if start else sizes.expr(length)
    wire = body.fresh(base)
    lhs = ", ".join(keep[t] for t in sorted(keep))
    body.say(f"{wire}{f'[{lhs}]' if lhs else ''} = {x.index({**keep, d: f'{lo}:{hi}'})}")
    order = sorted(keep) + [d]
    return TracedValue(wire, tuple(axes), tuple(order.index(t) if a.kept else None for t, a in enumerate(axes)))


def _slice(body: TracedBody, base: str, x: TracedValue, start: int, length: int, axes, lo: str | None = None) -> TracedValue:
    """``x[..., start:start + length]``; ``lo`` writes the start where the cut has several parts."""
    sizes = body.em.sizes
    size = x.axes[-1].size
    sizes.total(size, [start, length, size - start - length])
    if x.pos[-1] != len(x.kept) - 1:  # the slice is written on the wire's last axis
        x = body.ordered(x)
    L = _letters(x)
    keep = {t: L[t] for t in x.kept[:-1]}
    lo = lo or (sizes.expr(start) if start else "0")
    hi = f"{lo} + {sizes.expr(length)}" if start else sizes.expr(length)
    rhs = f"{x.index(keep)[:-1]}, {lo}:{hi}]" if keep else f"{x.wire}[{lo}:{hi}]"
    return body.assign_lead(base, axes, keep, rhs)


def split(em, body, cap, node, args, kwargs) -> tuple:
    x, size = args[0], kwargs.get("split_size_or_sections", kwargs.get("split_size", args[1]))
    d = kwargs.get("dim", args[2] if len(args) > 2 else 0) % len(x.axes)
    if d != len(x.axes) - 1:
        raise DiagError("a split other than of the last axis")
    parts = [t.shape[d] for t in cap.values[0][node]]
    value = cap.values[0][node]
    body.em.sizes.total(x.axes[-1].size, parts)
    out, start = [], 0
    names = node.meta.get("targets") or []
    names = names if len(names) == len(parts) else [f"{node.name}_{k}" for k in range(len(parts))]
    for k, n in enumerate(parts):
        axes = tuple(classify([run[node][k].shape for run in cap.values], node.name))
        lo = " + ".join(body.em.sizes.expr(p) for p in parts[:k]) or "0"
        out.append(_slice(body, names[k], x, start, n, axes, lo))
        start += n
    return tuple(out) if isinstance(value, tuple) else out


def cat(em, body, cap, node, args, kwargs) -> TracedValue:
    """``torch.cat(xs, dim)`` along any axis: the prelude's ``cat`` (nested for more than two),
    the other axes indexed; a part broadcast along that axis (a class token) an axis of one."""
    xs, d = args[0], kwargs.get("dim", args[1] if len(args) > 1 else 0)
    axes = out_axes(cap, node)
    n = len(axes)
    d %= n
    xs = [v for v in xs if not isinstance(v, Empty)]
    if len(xs) == 1 and isinstance(xs[0], TracedValue):
        return xs[0].relabel(axes)
    if not all(isinstance(v, TracedValue) and len(v.axes) == n for v in xs) or not axes[d].kept:
        raise DiagError("a cat of tensors of different ranks, or along a broadcast axis")
    xs = [v if v.axes[d].kept else _unit_axis(body, v, d) for v in xs]
    body.em.sizes.total(axes[d].size, [v.axes[d].size for v in xs])
    L = {t: c for t, c in _letters(TracedValue.whole("", axes)).items() if t != d}
    reads = [v.index({t: c for t, c in L.items() if v.axes[t].kept}) for v in xs]
    expr = reads[0]
    for r in reads[1:]:
        expr = f"cat({expr}, {r})"
    wire = body.fresh(node.name)
    lhs = ", ".join(L[t] for t in sorted(L))
    body.say(f"{wire}{f'[{lhs}]' if lhs else ''} = {expr}")
    order = sorted(L) + [d]  # the wire: the other axes, then the one cut along
    return TracedValue(wire, axes, tuple(order.index(t) if a.kept else None for t, a in enumerate(axes)))


def _unit_axis(body: TracedBody, v: TracedValue, d: int) -> TracedValue:
    """``v`` with its broadcast axis ``d`` (of size one) on the wire: a product with ``ones<1>()``."""
    if v.axes[d].size != 1:
        raise DiagError("a cat of a part broadcast along the axis cut")
    one = body.assign_lead("one", (Axis(DimKind.FIXED, 1),), {}, "ones<1>()")
    axes = tuple(Axis(DimKind.FIXED, 1) if t == d else a for t, a in enumerate(v.axes))
    L = letters_for(v.axes)
    wire = body.fresh(f"{v.wire.rstrip('()')}_row")
    body.say(f"{wire}[{', '.join([L[t] for t in sorted(L)] + ['r'])}] = {v.index(L)} * {one.wire}[r]")
    order = sorted(L) + [d]
    return TracedValue(wire, axes, tuple(order.index(t) if a.kept else None for t, a in enumerate(axes)))


def conv2d(em, body, cap, node, args, kwargs) -> TracedValue:
    """``F.conv2d`` of patches (stride = kernel, no padding: a ViT's patch embedding): the image cut
    into patches by ``unflatten`` and each patch contracted with the kernel,
    ``y[o, m, g] = sum_{c, u, e} x[c, m, u, g, e] * W[o, c, u, e] + b[o]``."""
    a = dict(zip(("input", "weight", "bias", "stride", "padding", "dilation", "groups"), args), **kwargs)
    x, w, b = a["input"], a["weight"], a.get("bias")
    kh, kw = w.axes[2].size, w.axes[3].size
    pair = lambda v, k: tuple(v) if isinstance(v, (tuple, list)) else (v, v)  # noqa: E731
    if (pair(a.get("stride", 1), 0) != (kh, kw) or pair(a.get("padding", 0), 0) != (0, 0)
            or pair(a.get("dilation", 1), 0) != (1, 1) or a.get("groups", 1) != 1 or len(x.axes) != 4
            or not all(t.kept for t in x.axes[1:]) or x.axes[2].size % kh or x.axes[3].size % kw):
        raise DiagError("a conv2d other than of whole patches (stride = kernel, no padding)")
    sizes = body.em.sizes
    H, W = x.axes[2].size, x.axes[3].size
    sizes.product(H, [H // kh, kh])
    sizes.product(W, [W // kw, kw])
    x = body.ordered(x)
    L = letters_for(x.axes)  # c, h, w (after the batch)
    c, h = L[1], L[2]
    cols = body.fresh(f"{node.name}_cols")
    body.say(f"{cols}[{c}, {h}] = unflatten<{sizes.expr(W // kw)}, {sizes.expr(kw)}>({x.index({1: c, 2: h})})")
    rows = body.fresh(f"{node.name}_patches")
    body.say(f"{rows}[{c}, g, e] = unflatten<{sizes.expr(H // kh)}, {sizes.expr(kh)}>({cols}[{c}, :, g, e])")
    kernel = body.whole(w)
    out = f"sum_{{zc, zu, ze}} {rows}[zc, g, ze, m, zu] * {kernel}[o, zc, zu, ze]"
    if isinstance(b, TracedValue):
        out += f" + {b.index({0: 'o'})}"
    wire = body.fresh(node.name)
    body.say(f"{wire}[o, m, g] = {out}")
    return TracedValue.whole(wire, out_axes(cap, node))


def opaque(em, body: TracedBody, cap: Capture, node: fx.Node, args, kwargs, why: str) -> Any:
    """A ``fixed`` box named after the operation, run by torch itself when compiled; warned at its line."""
    value = cap.values[0][node]
    for a in pytree.tree_leaves((node.args, node.kwargs)):
        if isinstance(a, fx.Node) and not isinstance(cap.values[0][a], torch.Tensor) and any(
                run[a] != cap.values[0][a] for run in cap.values[1:]):
            raise DiagError(f"{where_(node)}: '{op_label(node)}' is not expressible in the language ({why}), and "
                            f"torch would run it with '{a.name}' = {cap.values[0][a]!r}, a size of this example that "
                            "changes with the batch or the length: cannot trace it")
    if isinstance(value, (tuple, list)) and all(isinstance(v, torch.Tensor) for v in value):
        used = {_field(value, u.args[1]) for u in node.users if op_name(u) in ("getitem", "getattr")}
        return tuple(_opaque_one(em, body, cap, node, args, kwargs, why, k) if k in used else None
                     for k in range(len(value)))
    if not isinstance(value, torch.Tensor):
        raise DiagError(f"{where_(node)}: '{node.target}' ({why}) returns {type(value).__name__}; cannot trace it")
    return _opaque_one(em, body, cap, node, args, kwargs, why, None)


def _opaque_one(em, body: TracedBody, cap: Capture, node: fx.Node, args, kwargs, why: str, k: int | None) -> TracedValue:
    """One output (the k-th of a tuple, or the only one) of an opaque operation."""
    shapes = [run[node] if k is None else run[node][k] for run in cap.values]
    axes = tuple(classify([t.shape for t in shapes], node.name))
    ins = [v for v in pytree.tree_leaves((args, kwargs)) if isinstance(v, TracedValue)]
    slots = iter(range(len(ins)))
    marked = pytree.tree_map(lambda a: Slot(next(slots)) if isinstance(a, TracedValue) else a, (args, kwargs))
    name = _fixed_name(em, op_label(node))
    target = node.target if node.op == "call_function" else _method(node.target)
    em.fixed[name] = Opaque(name, op_label(node), target if k is None else _pick(target, k), marked[0], marked[1],
                            [v.axes for v in ins], axes)
    em.warn(node, f"'{op_label(node)}' is not expressible in the language ({why}); kept as the marked box "
                  f"'{name}' (abstract in the file; Traced.compile runs it with torch)")
    wire = body.fresh(node.name if k is None else f"{node.name}_{k}")
    body.say(f"{wire} = {name}({', '.join(body.whole(v) for v in ins)})")
    return TracedValue.whole(wire, axes)


def constant(em, body: TracedBody, cap: Capture, node: fx.Node, value: torch.Tensor, path: str) -> TracedValue:
    """A buffer (RoPE's ``inv_freq``, say): a marked box with no inputs that gives its values."""
    axes = out_axes(cap, node)
    name = _fixed_name(em, ident(path))
    em.fixed[name] = Opaque(name, f"buffer {path}", _const(value.detach().clone()), (), {}, [], axes)
    em.warn(node, f"the buffer '{path}' is a constant tensor, which the language has not: kept as the marked box "
                  f"'{name}' (abstract in the file; Traced.compile gives its values)")
    wire = body.fresh(path)
    body.say(f"{wire} = {name}()")
    return TracedValue.whole(wire, axes)


def _const(t: torch.Tensor):
    return lambda: t


def arange(em, body: TracedBody, cap: Capture, node: fx.Node, args, kwargs) -> TracedValue:
    """``torch.arange(n)`` for n the sequence's length or a fixed size: the prelude's ``positions``."""
    if len(args) != 1 or set(kwargs) - {"device", "dtype"}:
        raise DiagError("an arange other than torch.arange(n)")
    axes = out_axes(cap, node)
    return body.assign_lead(node.name, axes, {}, f"positions<{body.em.sizes.axis(axes[0])}>()")


def causal_mask(em, body: TracedBody, cap: Capture, node: fx.Node, args, kwargs) -> Any:
    """Hugging Face's ``create_causal_mask`` with no padding and no cache: None (the attention is
    then causal by itself), the prelude's ``causal`` mask (boolean), or the same added to the
    scores (0 where a query sees a key, -inf or the dtype's least number elsewhere: ``where(0, causal)``),
    as the examples show it is."""
    value = cap.values[0][node]
    if value is None:
        return None
    if kwargs.get("attention_mask") is not None or kwargs.get("cache") is not None:
        raise DiagError("create_causal_mask with padding or a cache")
    axes = out_axes(cap, node)
    tril = [torch.ones(run[node].shape[-2:], dtype=torch.bool).tril() for run in cap.values]
    if value.dtype == torch.bool:
        exact = all(torch.equal(run[node], t.expand_as(run[node])) for run, t in zip(cap.values, tril))
    else:
        exact = all(bool((run[node][..., t] == 0).all() and (run[node][..., ~t] <= torch.finfo(value.dtype).min).all())
                    for run, t in zip(cap.values, tril))
    if not exact:
        raise DiagError("create_causal_mask that is not the causal mask")
    mask = body.assign_lead(node.name, axes, {}, f"causal<{body.em.sizes.axis(axes[-1])}>()")
    if value.dtype == torch.bool:
        return mask
    return body.assign(f"{node.name}_added", axes, lambda L: f"where(0, {mask.index(L)})")


def rows(body: TracedBody, base: str, table: str, n_rows: int, ids, axes) -> TracedValue:
    """``embed``: a row of ``table`` (``n_rows`` rows) per id. Token ids are read as they are; a
    computed number (positions, say) through ``bucket``; one number for every position is one row."""
    V = body.em.sizes.expr(n_rows)
    if not isinstance(ids, TracedValue):  # the same id everywhere (token type 0): one row, broadcast
        flat = tuple(a if t == len(axes) - 1 or not a.kept else Axis(DimKind.ONE, a.size) for t, a in enumerate(axes))
        return body.assign_lead(base, flat, {}, f"embed(bucket<{V}>({number(ids)}), {table})")
    keep = {t: c for t, c in letters_for(axes).items() if t < len(axes) - 1}  # the ids' axes; a row each
    read = ids.index(aligned(len(ids.axes), keep, len(axes) - 1))
    return body.assign_lead(base, axes, keep, f"embed({read if ids.ids else f'bucket<{V}>({read})'}, {table})")


def embedding(em, body, cap, node, args, kwargs) -> TracedValue:
    """``F.embedding(ids, weight, padding_idx, ...)`` (an ``nn.Embedding`` subclass's forward): its
    rows as ``embed`` (the padding row changes the gradient only)."""
    ids, w = args[0], args[1] if len(args) > 1 else kwargs["weight"]
    rest = dict(zip(("padding_idx", "max_norm"), args[2:]), **kwargs)
    if not isinstance(w, TracedValue) or len(w.axes) != 2 or rest.get("max_norm") is not None:
        raise DiagError("an embedding with max_norm, or of a table not of the module")
    return rows(body, node.name, body.whole(w), w.axes[0].size, ids, out_axes(cap, node))


def rms_norm(em, body, cap, node, args, kwargs) -> TracedValue:
    """``F.rms_norm(x, shape, weight, eps)`` over the last axis: x / sqrt(mean(x²) + eps) * weight
    (eps None: the dtype's machine epsilon, as torch takes it)."""
    a = dict(zip(("input", "normalized_shape", "weight", "eps"), args), **kwargs)
    x, w = a["input"], a.get("weight")
    shape = a["normalized_shape"]
    if not isinstance(x, TracedValue) or len(shape if isinstance(shape, (list, tuple)) else [shape]) != 1:
        raise DiagError("rms_norm over more than the last axis")
    eps = a.get("eps")
    eps = torch.finfo(cap.values[0][node.args[0]].dtype).eps if eps is None else eps
    axes = out_axes(cap, node)
    L = _letters(x)
    last = len(x.axes) - 1
    keep = {t: c for t, c in L.items() if t != last}
    ms = body.fresh(f"{node.name}_ms")
    lhs = ", ".join(keep[t] for t in sorted(keep))
    z = {**keep, last: "z"}
    body.say(f"{ms}{f'[{lhs}]' if lhs else ''} = (sum_z {x.index(z)} * {x.index(z)}) / ({body.em.sizes.axis(x.axes[last])})")
    n = len(axes)

    def expr(Lo):
        out = f"{x.index(aligned(len(x.axes), Lo, n))} / sqrt({ms}{_read(keep, Lo, n, len(x.axes))} + {number(eps)})"
        return out if w is None else f"{out} * {w.index({0: Lo[n - 1]})}"
    return body.assign(node.name, axes, expr)


def where(em, body, cap, node, args, kwargs) -> TracedValue:
    """``torch.where(mask, x, y)`` with a mask the trace recognised (causal, a window): ``where(x, mask)``
    when y is -inf or the dtype's least number (masked scores), else ``mask * x + (1 - mask) * y``."""
    c, x, y = (list(args) + [kwargs.get(k) for k in ("condition", "input", "other")][len(args):])[:3]
    if not isinstance(c, TracedValue) or c.mask is None:
        raise DiagError("torch.where of a condition other than a causal or window mask")
    axes = out_axes(cap, node)
    n = len(axes)

    def read(v, L):
        return v.index(aligned(len(v.axes), L, n)) if isinstance(v, TracedValue) else number(v)
    if not isinstance(y, TracedValue) and y <= torch.finfo(cap.values[0][node].dtype).min:
        return body.assign(node.name, axes, lambda L: f"where({read(x, L)}, {read(c, L)})")
    return body.assign(node.name, axes, lambda L: f"{read(c, L)} * {read(x, L)} + (1 - {read(c, L)}) * {read(y, L)}")


def layer_norm(em, body, cap, node, args, kwargs) -> TracedValue:
    """``F.layer_norm`` over the last axis (a LayerNorm without gain or bias, OLMo's): centred,
    divided by sqrt(variance + eps), times the weight and plus the bias when there are."""
    a = dict(zip(("input", "normalized_shape", "weight", "bias", "eps"), args), **kwargs)
    x, w, b = a["input"], a.get("weight"), a.get("bias")
    shape = a["normalized_shape"]
    if not isinstance(x, TracedValue) or len(shape if isinstance(shape, (list, tuple)) else [shape]) != 1:
        raise DiagError("layer_norm over more than the last axis")
    axes = out_axes(cap, node)
    L = _letters(x)
    last = len(x.axes) - 1
    keep = {t: c for t, c in L.items() if t != last}
    lhs = ", ".join(keep[t] for t in sorted(keep))
    n_last = f"({body.em.sizes.axis(x.axes[last])})"
    mean = body.fresh(f"{node.name}_mean")
    body.say(f"{mean}{f'[{lhs}]' if lhs else ''} = (sum_z {x.index({**keep, last: 'z'})}) / {n_last}")
    centred = body.assign(f"{node.name}_centred", x.axes, lambda Lo: f"{x.index(Lo)} - {mean}{_read(keep, Lo, len(x.axes), len(x.axes))}")
    var = body.fresh(f"{node.name}_var")
    c = centred.index({**keep, last: "z"})
    body.say(f"{var}{f'[{lhs}]' if lhs else ''} = (sum_z {c} * {c}) / {n_last}")
    n = len(axes)

    def expr(Lo):
        out = f"{centred.index(aligned(len(x.axes), Lo, n))} / sqrt({var}{_read(keep, Lo, n, len(x.axes))} + {number(a.get('eps', 1e-5))})"
        out = out if w is None else f"{out} * {w.index({0: Lo[n - 1]})}"
        return out if b is None else f"{out} + {b.index({0: Lo[n - 1]})}"
    return body.assign(node.name, axes, expr)


def _read(keep: dict, out_letters: dict, n_out: int, n_in: int) -> str:
    """The index of a value over the kept axes ``keep`` of an operand, under the output's letters."""
    shift = n_out - n_in
    letters = [out_letters[t + shift] for t in sorted(keep)]
    return f"[{', '.join(letters)}]" if letters else ""


def _field(value, key) -> int:
    """The position of ``key`` (an index, or a field of a named tuple: ``cummax(x).values``)."""
    if not isinstance(key, str):
        return key
    return next(k for k in range(len(value)) if value[k] is getattr(value, key))


def getattr_(em, body, cap, node, args, kwargs) -> Any:
    obj, key = args[0], args[1]
    if isinstance(obj, tuple):
        return obj[_field(cap.values[0][node.args[0]], key)]
    if not isinstance(obj, TracedValue):  # a model output: a record of values
        return getattr(obj, key)
    raise DiagError(f"the attribute '{key}' of a tensor")


def _pick(fn, k: int):
    return lambda *a, **kw: fn(*a, **kw)[k]


def _method(name: str):
    return lambda self, *a, **k: getattr(self, name)(*a, **k)


def op_label(node: fx.Node) -> str:
    t = node.target
    return ident(t if isinstance(t, str) else getattr(t, "__name__", str(t)))


def _fixed_name(em, label: str) -> str:
    name, k = f"op_{label}", 1
    while name in em.fixed:
        k += 1
        name = f"op_{label}_{k}"
    return name


OPS = {name: scalar(t) for name, t in SCALAR.items()}
OPS.update({name: relabel for name in RELABEL})
OPS.update({
    "gelu": gelu, "matmul": matmul, "bmm": matmul, "einsum": einsum, "softmax": softmax, "linear": linear,
    "mean": reduce("mean"), "sum": reduce("sum"), "transpose": transpose, "permute": transpose, "t": transpose,
    "to": cast, "type": cast, "type_as": cast, "float": cast, "double": cast, "half": cast, "bfloat16": cast,
    "dropout": dropout, "getitem": getitem, "split": split, "chunk": split, "cat": cat, "concat": cat,
    "getattr": getattr_, "arange": arange, "create_causal_mask": causal_mask, "embedding": embedding,
    "rms_norm": rms_norm, "layer_norm": layer_norm, "where": where, "repeat_interleave": repeat_interleave, "stack": stack,
    "conv2d": conv2d,
})
