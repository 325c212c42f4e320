"""Find softmax attention in a diagram, to lower it to ``F.scaled_dot_product_attention``.

The pattern is the paper's scaled dot product: a contraction of queries and keys over a
feature index, optionally scaled by a constant and causally masked, a softmax over the
key index, and a contraction with the values over the key index — with the score and
attention matrices used nowhere else, so they need never be materialised. Any further
indices shared by queries, keys and values (heads) become batch axes of the fused call.

Indices are followed through the boxes by *role* (``i`` query position, ``j`` key
position, ``f`` feature, ``v`` value feature, ``h0, h1...`` shared), since each box
names its own indices.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

from ..graph import constants
from ..graph.diagram import Diagram


@dataclass
class Attention:
    scores: int            # the query-key contraction box
    apply: int             # the attention-value contraction box (where the result goes)
    skipped: list[int]     # boxes replaced by the fused call
    q: tuple[int, tuple]   # (wire, order of its axes as roles)
    k: tuple[int, tuple]
    v: tuple[int, tuple]
    heads: list[str]       # shared roles, in order
    out_roles: list[str]   # roles of the result wire's axes
    scale: float
    causal: bool


def _only_consumer(d: Diagram, w: int) -> tuple[int, int] | None:
    cons = d.consumers(w)
    if len(cons) != 1 or w in d.outputs:
        return None
    return cons[0]


def _roles_through(d: Diagram, b: int, port: int, in_roles: list) -> tuple[dict, dict]:
    """Map a box's SIMD labels and local axes to roles, from one input's axis roles."""
    _, axes = d.box_inputs(b)[port]
    labels, local = {}, {}
    for a, role in zip(axes, in_roles):
        (labels if isinstance(a, str) else local)[a] = role
    return labels, local


def _out_roles(d: Diagram, b: int, labels: dict, local: dict) -> list:
    node = d.box(b)
    n_local = len(d.local_out_type(b, 0))
    return [labels.get(lab) for lab, _ in node["simd"]] + [local.get(k) for k in range(n_local)]


def _const(d: Diagram, w: int, sizes: dict[str, int]) -> float | None:
    """The value of a constant wire when it is known before run time."""
    p = d.producer(w)
    if p is None or d.box(p)["box"] != "const" or d.wire_type(w) != ():
        return None
    try:
        return float(constants.evaluate(d.box(p)["value"], lambda dim: dim.evaluate(sizes)))
    except (KeyError, TypeError, ValueError, ZeroDivisionError):
        return None


def find_attention(d: Diagram, sizes: dict[str, int]) -> list[Attention]:
    found = []
    for b in d.boxes():
        m = _match(d, b, sizes)
        if m is not None:
            found.append(m)
    return found


def _match(d: Diagram, c1: int, sizes: dict[str, int]) -> Attention | None:
    node = d.box(c1)
    if node["box"] != "contract" or len(node.get("summed", ())) != 1 or len(d.box_inputs(c1)) != 2:
        return None
    if d.local_out_type(c1, 0) != ():
        return None
    (f, _), = node["summed"]
    (qw, qa), (kw, ka) = d.box_inputs(c1)
    if any(isinstance(a, int) for a in qa + ka):
        return None
    qs, ks = set(qa), set(ka)
    simd = [lab for lab, _ in node["simd"]]
    i_l = [lab for lab in simd if lab in qs and lab not in ks]
    j_l = [lab for lab in simd if lab in ks and lab not in qs]
    heads = [lab for lab in simd if lab in qs and lab in ks]
    if len(i_l) != 1 or len(j_l) != 1 or f not in qs or f not in ks or len(heads) + 2 != len(simd):
        return None
    role = {i_l[0]: "i", j_l[0]: "j", f: "f", **{h: f"h{n}" for n, h in enumerate(heads)}}
    head_roles = [role[h] for h in heads]
    roles = [role[lab] for lab in simd]
    cur, skipped, scale, causal = d.box_outputs(c1)[0], [c1], 1.0, False
    while True:
        nxt = _only_consumer(d, cur)
        if nxt is None:
            return None
        b, port = nxt
        bn = d.box(b)
        labels, local = _roles_through(d, b, port, roles)
        if bn["box"] == "fixed" and bn["op"] == "div" and port == 0:
            c = _const(d, d.box_inputs(b)[1][0], sizes)
            if c is None or c == 0:
                return None
            scale /= c
        elif bn["box"] == "fixed" and bn["op"] == "where" and port == 0:
            mw, maxes = d.box_inputs(b)[1]
            mp = d.producer(mw)
            if mp is None or d.box(mp)["op"] != "causal" or d.box(mp)["box"] != "fixed":
                return None
            if [labels.get(a) if isinstance(a, str) else local.get(a) for a in maxes] != ["i", "j"]:
                return None
            causal = True
            if len(d.consumers(mw)) == 1:
                skipped.append(mp)
        elif bn["box"] == "diagram" and bn["op"] in ("scale", "softmax", "ssoftmax"):
            gen = dict(bn.get("generics", ()))
            if bn["op"] in ("scale", "ssoftmax"):
                k = gen["k"]
                if any(n not in sizes for n in k.names()):
                    return None
                scale /= math.sqrt(k.evaluate(sizes))
            if bn["op"] != "scale" and local.get(0) != "j":
                return None
        else:
            return None
        skipped.append(b)
        roles = _out_roles(d, b, labels, local)
        cur = d.box_outputs(b)[0]
        if bn["op"] in ("softmax", "ssoftmax"):
            break
    nxt = _only_consumer(d, cur)
    if nxt is None:
        return None
    c2, port = nxt
    n2 = d.box(c2)
    if n2["box"] != "contract" or len(n2.get("summed", ())) != 1 or len(d.box_inputs(c2)) != 2:
        return None
    labels, local = _roles_through(d, c2, port, roles)
    if local:
        return None
    (sj, _), = n2["summed"]
    if labels.get(sj) != "j":
        return None
    vw, va = d.box_inputs(c2)[1 - port]
    v_roles = []
    for a in va:
        if isinstance(a, int):
            v_roles.append("v" if a == 0 else None)
        else:
            v_roles.append(labels.get(a, "v"))
    v_count = v_roles.count("v")
    if v_count != 1 or None in v_roles or "i" in v_roles or "j" not in v_roles:
        return None
    if sorted(r for r in v_roles if r.startswith("h")) != sorted(head_roles):
        return None
    out_labels = {**labels, **{a: "v" for a in va if isinstance(a, str) and a not in labels}}
    n_local = len(d.local_out_type(c2, 0))
    out_roles = [out_labels.get(lab) for lab, _ in n2["simd"]] + ["v"] * n_local
    if sorted(out_roles, key=str) != sorted(head_roles + ["i", "v"], key=str):
        return None
    q_roles = [role[a] for a in qa]
    k_roles = [role[a] for a in ka]
    return Attention(scores=c1, apply=c2, skipped=skipped, q=(qw, tuple(q_roles)), k=(kw, tuple(k_roles)),
                     v=(vw, tuple(v_roles)), heads=head_roles, out_roles=out_roles, scale=scale, causal=causal)


@dataclass
class CausalLinear:
    """sum_{j <= i, f} q[i, f] k[j, f] v[j]: causal linear attention (or its normaliser)."""

    box: int
    skipped: list[int]
    q: tuple[int, tuple]
    k: tuple[int, tuple]
    v: tuple[int, tuple] | None  # None: the normaliser, with no values
    heads: list[str]
    out_roles: list[str]


def find_causal_linear(d: Diagram) -> list[CausalLinear]:
    found = []
    for b in d.boxes():
        m = _match_linear(d, b)
        if m is not None:
            found.append(m)
    return found


def _match_linear(d: Diagram, b: int) -> CausalLinear | None:
    node = d.box(b)
    if node["box"] != "contract" or len(node.get("summed", ())) != 2:
        return None
    ins = d.box_inputs(b)
    if len(ins) not in (3, 4):
        return None
    mask = [(w, a) for w, a in ins
            if d.producer(w) is not None and d.box(d.producer(w))["op"] == "causal"
            and d.box(d.producer(w))["box"] == "fixed"]
    if len(mask) != 1:
        return None
    (mw, (li, lj)), = mask
    if not (isinstance(li, str) and isinstance(lj, str)):
        return None
    summed = {lab for lab, _ in node["summed"]}
    if lj not in summed or li in summed:
        return None
    (f,) = summed - {lj}
    rest = [(w, a) for w, a in ins if (w, a) != mask[0]]
    q = [(w, a) for w, a in rest if li in a and f in a and lj not in a]
    k = [(w, a) for w, a in rest if lj in a and f in a and li not in a]
    v = [(w, a) for w, a in rest if lj in a and f not in a and li not in a]
    if len(q) != 1 or len(k) != 1 or len(v) > 1 or len(q) + len(k) + len(v) != len(rest):
        return None
    simd = [lab for lab, _ in node["simd"]]
    heads = [lab for lab in simd if lab != li and lab in q[0][1] and lab in k[0][1]]
    role = {li: "i", lj: "j", f: "f", **{h: f"h{n}" for n, h in enumerate(heads)}}
    n_local = len(d.local_out_type(b, 0))
    value_labels = [lab for lab in simd if lab not in role]
    if v:
        vw, va = v[0]
        v_roles = [role.get(a, "v") if isinstance(a, str) else ("v" if a == 0 else None) for a in va]
        if v_roles.count("v") != 1 or None in v_roles or len(value_labels) + n_local != 1:
            return None
        for lab in value_labels:
            role[lab] = "v"
    elif value_labels or n_local:
        return None
    if any(r is None for r in (role.get(a) for a in q[0][1] + k[0][1])):
        return None
    out_roles = [role[lab] for lab in simd] + ["v"] * n_local
    if sorted(out_roles) != sorted([role[h] for h in heads] + ["i"] + (["v"] if v else [])):
        return None
    skipped = [d.producer(mw)] if len(d.consumers(mw)) == 1 else []
    return CausalLinear(box=b, skipped=skipped, q=(q[0][0], tuple(role[a] for a in q[0][1])),
                        k=(k[0][0], tuple(role[a] for a in k[0][1])),
                        v=(v[0][0], tuple(v_roles)) if v else None,
                        heads=[role[h] for h in heads], out_roles=out_roles)
