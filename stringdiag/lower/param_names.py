"""Parameter names from diagram paths: what a ``state_dict`` key says about where a weight lives.

A weight set's identity (``graph/weights.py``) is a path of instances, ``EncoderLayer#2/WQ``,
numbered by the order of uses in a body. Its *name* is the same path read through the
source: each use of a definition is named by the wire its result is assigned to
(``x3 = EncoderLayer(x2)`` names that use ``x3``), a learnable box by its declaration, joined
with dots (``x3.WQ``), and a module's own parameters follow (``x3.WQ.weight``). A use whose
result is not assigned a name of its own (``y = x + Attn(x)``), or whose name is taken in
its body, is named by its definition and use number (``Attn_1``). So a name depends only on
names written along its path, and renaming a wire elsewhere, adding a layer or reordering
definitions leaves it unchanged. A stack (``x3 = repeat 2 Layer(x1)``) is named like a use, its
copies by their number: ``x3.0.n1.weight`` is what ``n1.weight`` is in one ``Layer`` alone, so a
map written for one layer ports a stack with the layer number in front (``porting.py``: ``{layer}``).
"""
from __future__ import annotations

import re

from torch import nn

from ..graph.box import Kind
from ..graph.diagram import Diagram


def ident(text: str) -> str:
    """A Python identifier for ``text`` (fx node and module attribute names)."""
    s = re.sub(r"\W+", "_", text).strip("_") or "p"
    return s if not s[0].isdigit() else "p" + s


def sites(d: Diagram, ipath: str = "", out: dict[str, str] | None = None) -> dict[str, str]:
    """Instance path (``EncoderLayer#2``, ``EncoderLayer#2/layernorm#1``) -> the name of that
    use in its body (``x3``, ``n1``), for every use of a definition at any depth."""
    out = {} if out is None else out
    uses = [(b, d.record(b)) for b in d.boxes() if d.record(b).kind is Kind.DIAGRAM
            and d.record(b).instance is not None]
    named: dict[int, str] = {}
    for b, node in uses:
        outs = d.box_outputs(b)
        wire = d.wire_label(outs[0]) if outs else None
        if wire:
            named[b] = ident(wire)
    taken = [n for n in named.values()] + [ident(str(d.record(b).param)) for b in d.boxes()
                                            if d.record(b).kind is Kind.LEARN]
    for b, node in uses:
        path = ipath + node.instance
        if path in out:
            continue
        name = named.get(b)
        out[path] = name if name is not None and taken.count(name) == 1 else ident(node.instance)
        sites(node.ref, path + "/", out)
    return out


def dotted(key: str, names: dict[str, str]) -> str:
    """A weight set's path of instances as a dotted name: each prefix by its use's name, and a
    stack's copy by its number (``Layer#1/0/layernorm#1``: the body's names are the same in
    every copy, so they are looked up without the copy numbers)."""
    parts = str(key).split("/")

    def name(k: int, p: str) -> str:
        if p.isdigit():  # copy k of a stack
            return p
        return names.get("/".join(q for q in parts[: k + 1] if not q.isdigit()), ident(p))
    return ".".join(name(k, p) for k, p in enumerate(parts))


def place(root: nn.Module, name: str, module: nn.Module) -> str:
    """Attach ``module`` at the dotted ``name`` under ``root``, making plain containers for
    the prefixes; a name taken already gets ``_`` appended at the first clash. Returns it."""
    parts = name.split(".")
    at, done = root, []
    for k, part in enumerate(parts):
        last = k == len(parts) - 1
        while hasattr(at, part) and (last or type(getattr(at, part)) is not nn.Module):
            part += "_"
        done.append(part)
        if last:
            at.add_module(part, module)
        else:
            if not hasattr(at, part):
                at.add_module(part, nn.Module())
            at = getattr(at, part)
    return ".".join(done)
