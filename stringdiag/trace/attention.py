"""``nn.MultiheadAttention`` as a definition: per-head projections W_Q, W_K, W_V (one packed
``in_proj`` tensor in torch, cut into three by the weight map), the prelude's ``sdpa`` per head
(or the scores written out, when the averaged attention weights are asked for too), W_O on the
concatenated heads."""
from __future__ import annotations

import inspect
import math

import torch
from torch import fx, nn

from ..errors import DiagError
from .body import TracedBody
from .capture import ModuleCall
from ..graph.types import DimKind
from .dims import Axis, classify
from .values import TracedValue, aligned, letters_for, number, out_axes


def _options(m: nn.MultiheadAttention, call: ModuleCall) -> dict:
    bound = inspect.signature(m.forward).bind(*call.args, **call.kwargs)
    bound.apply_defaults()
    a = bound.arguments
    if a["attn_mask"] is not None or a["key_padding_mask"] is not None or a["is_causal"]:
        raise DiagError("nn.MultiheadAttention with a mask is not traced yet")
    if not m.batch_first or not m._qkv_same_embed_dim or m.bias_k is not None or m.add_zero_attn:
        raise DiagError("nn.MultiheadAttention is traced with batch_first=True, kdim = vdim = embed_dim, "
                        "no bias_kv and no zero attention only")
    return a


def multihead(em, m: nn.MultiheadAttention, calls: list[ModuleCall]):
    """The definition of one ``nn.MultiheadAttention`` as called (query, key, value: batch first)."""
    a = _options(m, calls[0])
    sizes, h, dim = em.sizes, m.num_heads, m.embed_dim
    sizes.product(dim, [h, dim // h])
    axes = [tuple(classify([c.args[k].shape if k < len(c.args) else c.kwargs[n].shape for c in calls], n))
            for k, n in enumerate(("query", "key", "value"))]
    body = TracedBody(em)
    D, H, K = sizes.expr(dim), sizes.expr(h), sizes.expr(dim // h)
    bias = str(m.in_proj_bias is not None).lower()
    body.decls += [f"learn WQ, WK, WV : [{D}] -> [{H}, {K}] via linear(bias = {bias})",
                   f"learn WO : [{H} * {K}] -> [{D}] via linear(bias = {str(m.out_proj.bias is not None).lower()})"]
    body.weights += [(("WQ.weight", "WK.weight", "WV.weight"), "in_proj_weight", False),
                     ("WO.weight", "out_proj.weight", False)]
    if m.in_proj_bias is not None:
        body.weights += [(("WQ.bias", "WK.bias", "WV.bias"), "in_proj_bias", False)]
    if m.out_proj.bias is not None:
        body.weights += [("WO.bias", "out_proj.bias", False)]
    names = ["query", "key", "value"]
    ins = [f"{n}: {body.type_of(x)}" for n, x in zip(names, axes)]
    S = [sizes.axis(x[1]) for x in axes]
    body.lines += ["q[i] = WQ(query[i])", "kk[j] = WK(key[j])", "vv[j] = WV(value[j])"]
    if a["need_weights"]:
        body.lines += ["e[a, i, j] = sum_f q[i, a, f] * kk[j, a, f]",
                       f"att[a, i] = softmax(e[a, i] / sqrt({K}))",
                       "o[i, a] = sum_j att[a, i, j] * vv[j, a]"]
    else:
        body.lines += ["qh[a, i, f] = q[i, a, f]", "kh[a, j, f] = kk[j, a, f]", "vh[a, j, f] = vv[j, a, f]",
                       f"oh[a] = sdpa<{S[0]}, {S[1]}, {K}, {K}, {K}>(qh[a], kh[a], vh[a])",
                       "o[i, a, f] = oh[a, i, f]"]
    body.lines += ["heads[i] = flatten(o[i])", "y = WO(heads)"]
    sig = body.type_of(axes[0])
    if a["need_weights"]:
        avg = a["average_attn_weights"]
        body.lines += [f"w[i, j] = (sum_a att[a, i, j]) / {H}" if avg else "w = att", "return y, w"]
        sig += f", [{S[0]}, {S[1]}]" if avg else f", [{H}, {S[0]}, {S[1]}]"
    else:
        body.lines += ["return y"]
    return em.write("MultiheadAttention", ins, sig, body, [0, 1, 2])


SDPA_ARGS = ("query", "key", "value", "attn_mask", "dropout_p", "is_causal", "scale", "enable_gqa")


def _heads_in_order(body: TracedBody, v: TracedValue) -> TracedValue:
    """``v`` with its last two axes in torch's order on the wire, as ``sdpa``'s ports want them."""
    p = [v.pos[t] for t in (len(v.axes) - 2, len(v.axes) - 1)]
    return v if None not in p and p[0] < p[1] else body.ordered(v)


def sdpa(em, body: TracedBody, cap, node, args, kwargs) -> TracedValue:
    """``F.scaled_dot_product_attention``: the prelude's ``sdpa``/``causal_sdpa`` per head when it
    scales by 1/sqrt(E) and has no mask; otherwise written out (scores, mask, softmax, sum)."""
    a = {"attn_mask": None, "dropout_p": 0.0, "is_causal": False, "scale": None,
         **dict(zip(SDPA_ARGS, args)), **kwargs}
    m_node = node.kwargs.get("attn_mask", node.args[3] if len(node.args) > 3 else None)
    a["bool_mask"] = isinstance(m_node, fx.Node) and cap.values[0][m_node].dtype == torch.bool
    return attend(em, body, cap, node, a)


def attend(em, body: TracedBody, cap, node, a: dict) -> TracedValue:
    """Attention with the arguments of ``F.scaled_dot_product_attention`` (and ``bool_mask``)."""
    q, k, v = a["query"], a["key"], a["value"]
    axes = out_axes(cap, node)
    n = len(axes)
    if a.get("enable_gqa") and k.axes[-3].kept and k.axes[-3].size != q.axes[-3].size:  # (one group: a broadcast)
        a = {**a, "key": _heads_repeated(body, node, k, q.axes[-3]), "value": _heads_repeated(body, node, v, q.axes[-3])}
        k, v = a["key"], a["value"]
    lead = {t: c for t, c in letters_for(axes).items() if t < n - 2}
    if any(axes[t].kind is DimKind.SEQ for t in lead) or a["dropout_p"]:
        raise DiagError("scaled_dot_product_attention over a sequence of heads, or with dropout")
    S = em.sizes.axis
    E = S(q.axes[-1])
    default = a["scale"] is None or math.isclose(a["scale"], 1 / math.sqrt(q.axes[-1].size), rel_tol=1e-12)
    mask = a["attn_mask"].mask if isinstance(a["attn_mask"], TracedValue) else None
    if (a["attn_mask"] is None or mask) and default and not (mask and a["is_causal"]):
        q, k, v = (_heads_in_order(body, t) for t in (q, k, v))
        if mask and mask[0] == "window":  # computed on the band only: O(s·w)
            fn = f"causal_window_sdpa<{S(q.axes[-2])}, {E}, {S(v.axes[-1])}, {E}, {em.sizes.expr(mask[1])}>"
        elif a["is_causal"] or mask:
            fn = f"causal_sdpa<{S(q.axes[-2])}, {E}, {S(v.axes[-1])}, {E}>"
        else:
            fn = f"sdpa<{S(q.axes[-2])}, {S(k.axes[-2])}, {E}, {S(v.axes[-1])}, {E}>"
        reads = [t.index(aligned(len(t.axes) - 2, lead, n - 2)) for t in (q, k, v)]
        return body.assign_lead(node.name, axes, lead, f"{fn}({', '.join(reads)})")
    return _written_out(body, node, axes, lead, a, E if default else None)


def _heads_repeated(body: TracedBody, node, x: TracedValue, heads: Axis) -> TracedValue:
    """Grouped-query attention's keys or values, [.., G, s, E], each of the G heads repeated for
    the H / G query heads of its group (as torch's ``enable_gqa`` and Hugging Face's ``repeat_kv``):
    a product with ``ones<H / G>()``, the group and its copies flattened into H heads."""
    g_axis = len(x.axes) - 3
    G = x.axes[g_axis]
    if not G.kept or heads.size % G.size:
        raise DiagError("grouped-query attention whose groups do not divide the heads")
    sizes = body.em.sizes
    R = heads.size // G.size
    sizes.product(heads.size, [G.size, R])
    ones = body.assign_lead(f"ones_{R}", (Axis(DimKind.FIXED, R),), {}, f"ones<{sizes.expr(R)}>()")
    x = body.ordered(x)
    L = letters_for(x.axes)
    rest = {t: c for t, c in L.items() if t != g_axis}
    wire = body.fresh(f"{x.wire}_groups")
    body.say(f"{wire}[{', '.join(L[t] for t in sorted(L))}, r] = {x.index(L)} * {ones.wire}[r]")
    flat = body.fresh(f"{x.wire}_heads")
    read = ", ".join(":" if t == g_axis else rest[t] for t in sorted(L)) + ", :"
    body.say(f"{flat}[{', '.join(rest[t] for t in sorted(rest))}] = flatten({wire}[{read}])")
    axes = list(x.axes)
    axes[g_axis] = heads
    order = sorted(rest) + [g_axis]  # the wire holds the other axes, then the heads
    return TracedValue(flat, tuple(axes), tuple(order.index(t) if a.kept else None for t, a in enumerate(axes)))


def _written_out(body: TracedBody, node, axes, lead: dict, a: dict, root: str | None) -> TracedValue:
    """Scores, scale, mask, softmax over the keys, and the weighted sum of the values."""
    q, k, v, mask = a["query"], a["key"], a["value"], a["attn_mask"]
    n = len(axes)
    L = ", ".join(lead[t] for t in sorted(lead))
    head = L + ", " if L else ""

    def read(t: TracedValue, last2: tuple) -> str:
        r = len(t.axes)
        return t.index({**aligned(r - 2, lead, n - 2), r - 2: last2[0], r - 1: last2[1]})
    e = body.fresh(f"{node.name}_scores")
    body.say(f"{e}[{head}i, j] = sum_z {read(q, ('i', 'z'))} * {read(k, ('j', 'z'))}")
    x = f"{e}[{head}i] / sqrt({root})" if root else f"{e}[{head}i] * {number(a['scale'])}"
    if a["is_causal"]:
        mk = body.fresh("causal_mask")
        body.say(f"{mk} = causal<{body.em.sizes.axis(q.axes[-2])}>()")
        x = f"where({x}, {mk}[i])"
    if isinstance(mask, TracedValue):
        m = mask.index({**aligned(len(mask.axes) - 2, lead, n - 2), len(mask.axes) - 2: "i"})
        x = f"where({x}, {m})" if a["bool_mask"] else f"{x} + {m}"
    att = body.fresh(f"{node.name}_weights")
    body.say(f"{att}[{head}i] = softmax({x})")
    return _weighted(body, node, axes, head, att, read(v, ("j", "f")))


def _weighted(body: TracedBody, node, axes, head: str, att: str, value: str) -> TracedValue:
    wire = body.fresh(node.name)
    body.say(f"{wire}[{head}i, f] = sum_j {att}[{head}i, j] * {value}")
    return TracedValue.whole(wire, axes)


def attention_of(em, body: TracedBody, cap, node, found: dict, env: dict) -> TracedValue:
    """The eager attention ``eager_attention.py`` found, ending at ``node`` (its product with the values)."""
    a = {name: (env[n] if isinstance(n, fx.Node) else n) for name, n in found.items()}
    m = found["attn_mask"]
    a.update(dropout_p=0.0, is_causal=False,
             bool_mask=isinstance(m, fx.Node) and cap.values[0][m].dtype == torch.bool)
    return attend(em, body, cap, node, a)
