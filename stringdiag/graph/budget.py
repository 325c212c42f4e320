"""How many boxes a diagram becomes when it is expanded or compiled, counted before the work.

``render --expand`` opens every definition and unrolls every stack of known count;
``compile`` lowers every definition and the body of every copy of a stack (one body for a
shared stack, applied t times by one loop: what is built does not grow with its count). Both are linear in what they build, which can be
exponential in the source (definitions each using the next twice) or as large as a count
(``repeat 1000000000 B(x)``). The count here is per definition, each read once for each binding
of its generics, multiplied, never built, so a command can refuse in words with the figure
before it starts (:func:`refuse_above`), as ``train`` refuses sizes that do not fit in memory.

It is an estimate: the ``reindex`` boxes an expansion adds where a definition's output skips
a SIMD index, and the prelude definitions the compiler keeps as one box, are not told apart.
"""
from __future__ import annotations

from enum import Enum
from typing import Mapping

from ..errors import DiagError
from .box import Box, Kind
from .hypergraph import Hypergraph, count_value

# the most boxes an expansion is unrolled to (Graphviz takes about a minute for 600 boxes on a
# busy machine; the gallery's largest expanded picture has under two hundred)
MAX_EXPANDED = 5_000
# the most boxes a compiled module is lowered from (the gallery's largest models have under two hundred)
MAX_LOWERED = 200_000
# memory one lowered box takes (its fx nodes, the module of a learnable copy), measured on
# ``repeat 2000`` of a three-box block: about 55 kB a copy
BYTES_PER_BOX = 18_000


class Build(Enum):
    """What is built from the diagram: which boxes open into their definition's body."""

    EXPANDED = "expand"  # expand(unroll=...), render --expand: definitions inlined, stacks of known count unrolled
    LOWERED = "compile"  # compile: definitions inlined, every stack copy's body and every scanned body lowered


def boxes(d: Hypergraph, build: Build, sizes: Mapping[str, int] | None = None) -> int:
    """About how many boxes ``build`` makes of ``d`` with the fixed sizes ``sizes`` (declared
    defaults fill in; a count of unknown size counts one copy)."""
    memo: dict[tuple, int] = {}

    def size(x: Hypergraph, env: Mapping[str, int | None], bound: tuple) -> int:
        key = (id(x.graph), bound)
        if key not in memo:
            memo[key] = sum(_box(x.record(b), x, env, build, size) for b in x.boxes())
        return memo[key]

    return size(d, dict(sizes or {}), ())


def _box(node: Box, x: Hypergraph, env: Mapping[str, int | None], build: Build, size) -> int:
    """The boxes one box of ``x`` becomes."""
    if node.kind is not Kind.DIAGRAM or node.ref is None:
        return 1
    if node.scan:
        return 1 if build is Build.EXPANDED else 1 + size(node.ref, *bind_generics(node, env))
    body = size(node.ref, *bind_generics(node, env))
    if node.repeat is None:
        return body
    t = count_value(node.repeat.count, x.program, env)
    if t is None:
        return 1 if build is Build.EXPANDED else body
    if build is Build.EXPANDED:
        return t * body
    if node.shared:  # one body, applied t times by one loop (its time is t applications: not counted here)
        return 1 + body
    return t + t * body  # a loop over t modules, one body each


def bind_generics(node: Box, env: Mapping[str, int | None],
                  base: Mapping[str, int | None] | None = None) -> tuple[dict, tuple]:
    """The sizes inside a diagram box: ``base`` (the caller's sizes ``env`` by default), with the
    callee's generics bound to their values where the caller's sizes say (None where not)."""
    inner = dict(env if base is None else base)
    bound = []
    for g, dim in node.generics:
        v = dim.evaluate(env) if all(env.get(n) is not None for n in dim.names()) else None
        inner[g] = v
        bound.append((g, v))
    return inner, tuple(bound)


def refuse_above(d: Hypergraph, build: Build, limit: int, option: str, sizes: Mapping[str, int] | None = None) -> int:
    """The count of :func:`boxes`; a :class:`DiagError` with the figure when it is over ``limit``
    (``option`` names the command-line option that raises it)."""
    n = boxes(d, build, sizes)
    if n > limit:
        gb = n * BYTES_PER_BOX / 1e9
        memory = f", about {gb:,.0f} GB of memory" if build is Build.LOWERED else ""
        raise DiagError(f"refusing to {build.value} '{d.name}': it would make about {n:,} boxes{memory}, over "
                        f"{limit:,} ({option}); a stack's count, or definitions nested many times over, "
                        f"multiply it", d.pos)
    return n


__all__ = ["Build", "boxes", "refuse_above", "MAX_EXPANDED", "MAX_LOWERED", "BYTES_PER_BOX"]
