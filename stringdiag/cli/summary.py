"""A diagram described as plain data: the content of ``stringdiag info``."""
from __future__ import annotations

from collections import Counter

from ..analysis.combine import dimensions, expanded_counts, learnables
from ..analysis.complexity import analyse
from ..graph.diagram import BOX_CLASSES, Diagram


def summarize(d: Diagram) -> dict:
    """Inputs, outputs, dimensions with their colour, boxes by kind, learnable boxes.

    >>> from stringdiag import loads
    >>> p = loads("dim s : seq\\ndim d : fixed\\nlearn F : [d] -> [d]\\n"
    ...           "diagram R(x: [s, d]) -> [s, d] { return x + F(x) }")
    >>> s = summarize(p["R"])
    >>> s["dimensions"], s["boxes"]["by_kind"], [l["name"] for l in s["learnable"]]
    ({'s': 'seq', 'd': 'fixed'}, {'learn': 1, 'fixed': 1}, ['F'])
    """
    dims = {n: _kind(n, owner) for n, owner in dimensions(d).items()}
    order = {k: i for i, k in enumerate(BOX_CLASSES)}
    by_kind = Counter(d.box(b)["box"] for b in d.boxes())
    expanded = expanded_counts(d)  # per definition, combined: never d.expand() (2^n boxes for n nestings)
    names = d.input_names or [f"in{k}" for k in range(len(d.inputs))]
    outs = [d.graph.nodes[w]["name"] or ("out" if len(d.outputs) == 1 else f"out{k + 1}")
            for k, w in enumerate(d.outputs)]
    return {
        "name": d.name,
        "signature": d.signature(),
        "position": str(d.pos) if d.pos else "",
        "inputs": [{"name": n, "indices": [str(x) for x in d.wire_type(w)]} for n, w in zip(names, d.inputs)],
        "outputs": [{"name": n, "indices": [str(x) for x in d.wire_type(w)]} for n, w in zip(outs, d.outputs)],
        "dimensions": dims,
        "boxes": {
            "total": sum(by_kind.values()),
            "expanded_total": sum(expanded.values()),
            "by_kind": dict(sorted(by_kind.items(), key=lambda kv: order[kv[0]])),
            "expanded": dict(sorted(expanded.items(), key=lambda kv: order[kv[0]])),
        },
        "learnable": learnables(d),
        "complexity": _complexity(d),
    }


def _complexity(d: Diagram) -> dict:
    c = analyse(d)
    return {"time": c.time, "memory": c.memory, "seq_time": c.seq_time, "seq_memory": c.seq_memory}


def _kind(name: str, owner: Diagram) -> str:
    """``seq`` or ``fixed`` as the mentioning definition's program declares it, else ``generic``."""
    decl = owner.program.lookup_dim(name) if owner.program is not None else None
    return decl.kind if decl else "generic"
