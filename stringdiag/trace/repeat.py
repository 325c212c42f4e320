"""Uses of one definition in sequence, each fed the last one's output (``nn.ModuleList``
layers run in a loop), written as one ``repeat`` statement."""
from __future__ import annotations

import re

from .body import TracedBody, TracedUse, prefixed


def _reads(lines: list, wire: str) -> int:
    pattern = re.compile(rf"(?<![\w.]){re.escape(wire)}(?![\w])")
    return sum(len(pattern.findall(x.text().split("=", 1)[1] if isinstance(x, TracedUse) else x.split("=", 1)[-1]))
               for x in lines)


def _chained(prev: TracedUse, x: TracedUse, lines: list) -> bool:
    """``x`` continues a stack ending at ``prev``: the same definition, one output each, ``x``
    reading ``prev``'s output first and the same other inputs, that output read nowhere else."""
    return (x.name == prev.name and len(x.outs) == len(prev.outs) == 1 and x.ins[:1] == prev.outs
            and x.ins[1:] == prev.ins[1:] and _reads(lines, prev.outs[0]) == 1)


def _chains(lines: list) -> list:
    runs: list = []
    for x in lines:
        prev = runs[-1][-1] if runs else None
        if isinstance(x, TracedUse) and isinstance(prev, TracedUse) and _chained(prev, x, lines):
            runs[-1].append(x)
        else:
            runs.append([x])
    return runs


def stack(body: TracedBody) -> list:
    out = []
    """The body's statements with each stack of two or more uses as one ``repeat``."""
    for run in _chains(body.lines):
        if len(run) < 2:
            out += run
            continue
        wire = run[-1].outs[0]
        head = f"{wire} = repeat {len(run)} {run[0].name}({', '.join(run[0].ins)})"
        body.weights += [(prefixed(f"{wire}.{k}", o), f"{u.attr}.{t}", tr)
                         for k, u in enumerate(run) for o, t, tr in u.weights]
        out.append(head)
    return out
