"""``nn.MultiheadAttention`` as a definition: per-head projections W_Q, W_K, W_V (one packed
``in_proj`` tensor in torch, cut into three by the weight map), the prelude's ``sdpa`` per head
(or the scores written out, when the averaged attention weights are asked for too), W_O on the
concatenated heads."""
from __future__ import annotations

import inspect

from torch import nn

from ..errors import DiagError
from .body import Body
from .capture import Call
from .dims import classify


def _options(m: nn.MultiheadAttention, call: Call) -> dict:
    bound = inspect.signature(m.forward).bind(*call.args, **call.kwargs)
    bound.apply_defaults()
    a = bound.arguments
    if a["attn_mask"] is not None or a["key_padding_mask"] is not None or a["is_causal"]:
        raise DiagError("nn.MultiheadAttention with a mask is not traced yet")
    if not m.batch_first or not m._qkv_same_embed_dim or m.bias_k is not None or m.add_zero_attn:
        raise DiagError("nn.MultiheadAttention is traced with batch_first=True, kdim = vdim = embed_dim, "
                        "no bias_kv and no zero attention only")
    return a


def multihead(em, m: nn.MultiheadAttention, calls: list[Call]):
    """The definition of one ``nn.MultiheadAttention`` as called (query, key, value: batch first)."""
    a = _options(m, calls[0])
    sizes, h, dim = em.sizes, m.num_heads, m.embed_dim
    sizes.product(dim, [h, dim // h])
    axes = [tuple(classify([c.args[k].shape if k < len(c.args) else c.kwargs[n].shape for c in calls], n))
            for k, n in enumerate(("query", "key", "value"))]
    body = Body(em)
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
