"""The space of mechanisms built from generators (Khatri et al. (2024), Sec. 5), as wirings.

A member has one input of the generators' stream type and one output of that type; it is
made of at most ``max`` generator occurrences, each with weights of its own. Only the input
may be copied (any number of times); each output of an occurrence is read exactly once
(another :class:`~.reading.Copy` policy: at least once). Ports are ordered here: the
symmetries a reading declares are quotiented afterwards (``symmetry.py``).

A wiring is found top-down: the diagram's output is a *demand* of the stream type; a demand
is met by the input (not the diagram's output itself), by a new occurrence (one of whose
outputs it takes, the occurrence's inputs becoming new demands and its other outputs
*supplies*), or by a supply already made (no cycle). A wiring is complete when no demand
and no unread supply is left. With ordered ports and one output, a depth-first walk from
the output numbers the occurrences canonically, so two wirings are isomorphic exactly when
their :func:`canonical` forms are equal — the engine's isomorphism test confirms it on the
built diagrams (``stages.py``).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Iterator

from ..errors import DiagError
from ..graph.diagram import Diagram
from ..graph.types import TensorType
from .reading import Copy

X = ("x",)  # the input
Src = tuple  # X, or (occurrence, output port)


@dataclass(frozen=True)
class Generator:
    name: str
    ins: tuple[TensorType, ...]
    outs: tuple[TensorType, ...]
    defn: Diagram


@dataclass(frozen=True)
class Wiring:
    """A member as data: occurrences (generator index, input sources), in canonical order
    (occurrence 0 makes the output, on ``root`` port)."""

    occurrences: tuple[tuple[int, tuple[Src, ...]], ...]
    root: tuple[int, int]

    @property
    def size(self) -> int:
        return len(self.occurrences)

    def topological(self) -> list[int]:
        """Occurrences in an order where each follows the producers of its inputs."""
        order: list[int] = []
        seen: set[int] = set()

        def visit(k: int) -> None:
            if k in seen:
                return
            seen.add(k)
            for src in self.occurrences[k][1]:
                if src != X:
                    visit(src[0])
            order.append(k)

        for k in range(len(self.occurrences)):
            visit(k)
        return order


def generators(defns: list[Diagram]) -> tuple[list[Generator], TensorType]:
    """The generators, and the stream type: the type of the first generator's first input
    (every member maps it to itself)."""
    if not defns:
        raise DiagError("name at least one generator")
    gens = [Generator(d.name, tuple(d.input_types), tuple(d.output_types), d) for d in defns]
    stream = gens[0].ins[0] if gens[0].ins else None
    if stream is None or not any(stream in g.outs for g in gens):
        raise DiagError(f"no generator makes the stream type of '{gens[0].name}''s first input, so no "
                        "mechanism maps it to itself")
    return gens, stream


OUT = ("out",)  # the demand of the diagram's output


def wirings(gens: list[Generator], stream: TensorType, max_size: int, copy: Copy | bool = Copy.INPUT,
            once: bool = False) -> Iterator[Wiring]:
    """Every member with at most ``max_size`` occurrences (each generator at most once if
    ``once``), once each up to isomorphism of ordered wirings. ``copy``: what may be read more
    than once besides the input (``True`` is :attr:`Copy.ALL`, for older callers)."""
    seen: set = set()
    copy = Copy.ALL if copy is True else Copy.INPUT if copy is False else copy
    ctx = (gens, stream, max_size, copy, once)
    for occ, root in _search(ctx, [], [OUT], {}, None):
        w = canonical(occ, root)
        if w not in seen:
            seen.add(w)
            yield w


def _search(ctx, occ: list, demands: list, supplies: dict, root) -> Iterator[tuple]:
    """Meet the last demand every way there is, then the rest (depth first)."""
    gens, stream = ctx[:2]
    if not demands:
        if all(n > 0 for n in supplies.values()):
            yield occ, root
        return
    demand, rest = demands[-1], demands[:-1]
    want = stream if demand == OUT else gens[occ[demand[0]][0]].ins[demand[1]]
    for src, o, r, sup in _options(ctx, occ, demand, want, rest, supplies):
        o = _fill(o, demand, src)
        sup = sup if src == X else {**sup, src: sup[src] + 1}
        yield from _search(ctx, o, r, sup, src if demand == OUT else root)


def _options(ctx, occ, demand, want, rest, supplies) -> Iterator[tuple]:
    """(source, occurrences, demands left, supplies) for each way to meet ``demand``."""
    gens, stream, max_size, copy, once = ctx
    if demand != OUT and want == stream:  # the input, copied
        yield X, occ, rest, supplies
    again = copy is Copy.ALL or (copy is Copy.STREAMS and want == stream)
    for (k, p), n in supplies.items():  # an output already made, unless that closes a cycle
        if gens[occ[k][0]].outs[p] == want and (again or not n) and \
                (demand == OUT or not _reaches(occ, demand[0], k)):
            yield (k, p), occ, rest, supplies
    if len(occ) >= max_size:
        return
    used = {g for g, _ in occ} if once else ()
    for g, gen in enumerate(gens):  # a new occurrence: its inputs become demands
        if g in used:
            continue
        k = len(occ)
        for p in (p for p, t in enumerate(gen.outs) if t == want):
            yield ((k, p), occ + [(g, (None,) * len(gen.ins))],
                   rest + [(k, q) for q in reversed(range(len(gen.ins)))],
                   {**supplies, **{(k, q): 0 for q in range(len(gen.outs))}})


def _fill(occ: list, demand: tuple, src) -> list:
    if demand == OUT:
        return occ
    k, port = demand
    g, srcs = occ[k]
    return occ[:k] + [(g, srcs[:port] + (src,) + srcs[port + 1:])] + occ[k + 1:]


def _reaches(occ: list, start: int, goal: int) -> bool:
    """Does ``goal`` read, through the wiring so far, an output of ``start``?  (Then feeding
    ``goal`` into ``start`` closes a cycle.)"""
    readers: dict[int, list[int]] = {}
    for j, (_, srcs) in enumerate(occ):
        for s in srcs:
            if s is not None and s != X:
                readers.setdefault(s[0], []).append(j)
    stack, seen = [start], {start}
    while stack:
        k = stack.pop()
        if k == goal:
            return True
        for r in readers.get(k, ()):
            if r not in seen:
                seen.add(r)
                stack.append(r)
    return False


def canonical(occ: list, root: tuple) -> Wiring:
    """Number occurrences in the order a depth-first walk from the output meets them (inputs
    in port order): a numbering every isomorphic wiring shares."""
    order: dict[int, int] = {}

    def visit(k: int) -> None:
        if k in order:
            return
        order[k] = len(order)
        for s in occ[k][1]:
            if s != X:
                visit(s[0])

    visit(root[0])
    ranked = sorted(order, key=order.get)
    occs = tuple((occ[k][0], tuple(s if s == X else (order[s[0]], s[1]) for s in occ[k][1])) for k in ranked)
    return Wiring(occs, (0, root[1]))


__all__ = ["Generator", "Wiring", "X", "generators", "wirings", "canonical"]


def is_composite(w: Wiring, gens: list[Generator], stream: TensorType) -> bool:
    """Is the member a sequential composite ``f ; g`` of two smaller members?  That is: some
    value ``v`` of the stream type other than the output, such that the occurrences ``v``
    depends on (``f``) send nothing but ``v`` to the rest (``g``), and ``g`` never reads the
    input — ``g`` reads ``f``'s output where it would read the input."""
    occ = w.occurrences
    for k, (g, _) in enumerate(occ):
        for p, t in enumerate(gens[g].outs):
            if t != stream or (k, p) == w.root:
                continue
            f = _ancestors(occ, k)
            rest = [j for j in range(len(occ)) if j not in f]
            if any(X in occ[j][1] for j in rest):
                continue
            leaks = any(s != X and s[0] in f and s != (k, p) for j in rest for s in occ[j][1])
            if not leaks and w.root[0] not in f:
                return True
    return False


def _ancestors(occ, k: int) -> set[int]:
    """``k`` and every occurrence whose outputs ``k`` reads, transitively."""
    out, stack = {k}, [k]
    while stack:
        for s in occ[stack.pop()][1]:
            if s != X and s[0] not in out:
                out.add(s[0])
                stack.append(s[0])
    return out
