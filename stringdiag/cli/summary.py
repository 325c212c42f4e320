"""A diagram described as plain data: the content of ``stringdiag info``."""
from __future__ import annotations

from collections import Counter

from ..analysis.combine import dimensions, expanded_counts, learnables
from ..analysis.complexity import analyse
from ..graph.diagram import BOX_CLASSES, Diagram


class Summary(dict):
    """What ``info`` says of a diagram: a dict (its ``--json``), printed as ``info`` prints it,
    shown in a notebook as tables."""

    def text(self) -> str:
        s = self
        lines = [f"{s['signature']}    ({s['position']})"]
        width = max([len(p["name"]) for p in s["inputs"] + s["outputs"]] + [4])
        lines.append("inputs:")
        lines += [f"  {p['name']:<{width}}  [{', '.join(p['indices'])}]" + (f" of {p['of']}" if "of" in p else "")
                  for p in s["inputs"]]
        lines.append("outputs:")
        lines += [f"  {p['name']:<{width}}  [{', '.join(p['indices'])}]" for p in s["outputs"]]
        lines.append("dimensions:")
        lines += [f"  {name:<{width}}  {kind}" for name, kind in s["dimensions"].items()]
        b = s["boxes"]
        lines.append(f"boxes: {b['total']} ({b['expanded_total']} when expanded)")
        kinds = [*b["by_kind"], *(k for k in b["expanded"] if k not in b["by_kind"])]  # random boxes inside definitions too
        lines += [f"  {kind:<9} {b['by_kind'].get(kind, 0):>4}   {b['expanded'].get(kind, 0):>5}" for kind in kinds]
        lines.append("learnable boxes (parameters; uses):")
        if not s["learnable"]:
            lines.append("  none")
        pw = max([len(p["name"]) for p in s["learnable"]] + [4])
        for p in s["learnable"]:
            # a local learnable of a definition used very often is listed once: its weight sets counted
            sets = f"   ({p['weight_sets']:,} weight sets)" if "weight_sets" in p else ""
            lines.append(f"  {p['name']:<{pw}}  {p['signature']:<24} x{p['uses']}{sets}")
        c = s["complexity"]
        lines.append(f"time:   O({c['time']})   in the sequence length: O({c['seq_time']})")
        lines.append(f"memory: O({c['memory']})   in the sequence length: O({c['seq_memory']})")
        lines += [f"compiled: {x['text']}" for x in s.get("chunked", ())]
        many = len(s.get("degree", ())) > 1
        for r in s.get("degree", ()):
            lines.append(f"degree{' of ' + r['output'] if many else ''}: {r['text']}")
        lines += [f"  {line}" for line in s.get("confirmed", ())]
        return "\n".join(lines) + "\n"

    def __str__(self) -> str:
        return self.text()

    def _repr_pretty_(self, p, cycle: bool) -> None:  # IPython's text form
        p.text(self.text())

    def _repr_html_(self) -> str:
        from ..render.notebook import table

        s, b, c = self, self["boxes"], self["complexity"]
        ports = [[io, p["name"], f"[{', '.join(p['indices'])}]"] for io in ("inputs", "outputs") for p in s[io]]
        kinds = [*b["by_kind"], *(k for k in b["expanded"] if k not in b["by_kind"])]
        parts = [
            table(["", "wire", "indices"], ports, f"{s['signature']}    ({s['position']})"),
            table(["dimension", "kind"], [[n, k] for n, k in s["dimensions"].items()]),
            table(["boxes", "here", "expanded"], [[k, b["by_kind"].get(k, 0), b["expanded"].get(k, 0)] for k in kinds]
                  + [["total", b["total"], b["expanded_total"]]]),
            table(["learnable box", "type", "uses", "weight sets"],
                  [[p["name"], p["signature"], p["uses"], p.get("weight_sets", "")] for p in s["learnable"]]),
            table(["", "all dimensions", "in the sequence length"],
                  [["time", f"O({c['time']})", f"O({c['seq_time']})"],
                   ["memory", f"O({c['memory']})", f"O({c['seq_memory']})"]]
                  + [[f"degree {r['output']}", r["text"], ""] for r in s.get("degree", ())]),
        ]
        return "<div>" + "".join(parts) + "</div>"


def summarize(d: Diagram) -> Summary:
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
    by_kind = Counter(d.record(b).kind.value for b in d.boxes())
    expanded = expanded_counts(d)  # per definition, combined: never d.expand() (2^n boxes for n nestings)
    names = d.input_names or [f"in{k}" for k in range(len(d.inputs))]
    outs = [d.wire_label(w) or ("out" if len(d.outputs) == 1 else f"out{k + 1}")
            for k, w in enumerate(d.outputs)]
    return Summary({
        "name": d.name,
        "signature": d.signature(),
        "position": str(d.pos) if d.pos else "",
        "inputs": [{"name": n, "indices": [str(x) for x in d.wire_type(w)],
                    **({"of": str(d.id_range(w))} if d.id_range(w) is not None else {})}  # token ids: [s] of v
                   for n, w in zip(names, d.inputs)],
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
        **({"chunked": chunked} if (chunked := _chunked(d)) else {}),
    })


def _chunked(d: Diagram) -> list[dict]:
    """The scans ``compile`` lowers through their chunked form (``lower/scans.py``); torch is
    imported only for a diagram with a scan in it."""
    if not _has_scan(d, set()):
        return []
    from ..lower.scans import planned

    return [c.as_dict() for c in planned(d)]


def _has_scan(d: Diagram, seen: set) -> bool:
    if id(d) in seen:
        return False
    seen.add(id(d))
    return any(d.record(b).scan or (isinstance(d.record(b).ref, Diagram) and _has_scan(d.record(b).ref, seen))
               for b in d.boxes())


def _complexity(d: Diagram) -> dict:
    c = analyse(d)
    return {"time": c.time, "memory": c.memory, "seq_time": c.seq_time, "seq_memory": c.seq_memory}


def _kind(name: str, owner: Diagram) -> str:
    """``seq`` or ``fixed`` as the mentioning definition's program declares it, else ``generic``."""
    decl = owner.program.lookup_dim(name) if owner.program is not None else None
    return str(decl.kind) if decl else "generic"  # the word, as the file writes it (JSON, tables)
