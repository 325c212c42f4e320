"""Members up to the symmetries a reading declares: canonical forms, and an independent check.

A generator declared *symmetric* may have its inputs permuted, one declared
*interchangeable* its outputs: ``ConcatFF(a, b)`` and ``ConcatFF(b, a)`` are one mechanism
(a universal approximator of the concatenation is one of the swapped concatenation), and so
are ``LinAttApply(p.0, p.1, x)`` and ``LinAttApply(p.1, p.0, x)`` when both outputs of
``p = LinAttPrep(x)`` are learnable maps of the same stream. The group acting on a wiring is
the product, over its occurrences, of each generator's permutations.

Two ways, that share no code:

- :func:`orbit` applies every element of the group to an ordered wiring and takes the
  canonical numbering of each result (``space.canonical``, a complete invariant of ordered
  wirings); the least element of the orbit is the member's *canonical form*. Two wirings are
  one member exactly when their orbits meet, i.e. when their canonical forms are equal.
- :func:`confirm` checks the classes without that code: each wiring becomes a labelled
  graph in which the ports of a symmetric generator and the outputs of an interchangeable one
  carry no number, and networkx's VF2 decides isomorphism. Every wiring must be isomorphic
  to its class's form, and the forms pairwise not. (The engine's isomorphism on built
  diagrams cannot do this: there the ports are ordered, as the compiled code is.)
"""
from __future__ import annotations

import warnings
from collections.abc import Iterable

import networkx as nx

from ..errors import DiagError
from .reading import Reading
from .space import X, Generator, Wiring, canonical


def check(gens: list[Generator], reading: Reading) -> None:
    """A declared symmetry must name a generator and permute ports of one type."""
    names = {g.name for g in gens}
    for option, declared, side in (("--symmetric", reading.symmetric, "ins"),
                                   ("--interchangeable", reading.interchangeable, "outs"),
                                   ("--paired", reading.paired, "ins"), ("--paired", reading.paired, "outs")):
        for n in sorted(declared):
            if n not in names:
                raise DiagError(f"{option}: '{n}' is not one of the generators ({', '.join(sorted(names))})")
            ports = getattr(next(g for g in gens if g.name == n), side)
            if len(set(ports)) > 1:
                what = "inputs" if side == "ins" else "outputs"
                raise DiagError(f"{option}: the {what} of '{n}' have different types, so they cannot be permuted")
    for n in sorted(reading.paired):
        g = next(g for g in gens if g.name == n)
        if len(g.ins) != len(g.outs):
            raise DiagError(f"--paired: '{n}' has {len(g.ins)} inputs and {len(g.outs)} outputs; each output "
                            "must be a map of one input")
    for n in reading.require:
        if n not in names:
            raise DiagError(f"--require: '{n}' is not one of the generators ({', '.join(sorted(names))})")


def _moves(w: Wiring, gens: list[Generator], reading: Reading) -> list[tuple[dict, dict]]:
    """Elementary moves on ``w``, each (input orders by occurrence, reference renaming), that
    generate its group: adjacent input swaps of a symmetric occurrence; output swaps within an
    interchangeable occurrence, and between two occurrences of one interchangeable generator
    that read the same sources (each output is the same kind of learnable map of those
    sources, with weights of its own, so any may stand in for any other)."""
    moves: list[tuple[dict, dict]] = []
    occ = w.occurrences
    for k, (g, srcs) in enumerate(occ):
        name = gens[g].name
        if name in reading.symmetric:
            for q in range(len(srcs) - 1):
                order = list(range(len(srcs)))
                order[q], order[q + 1] = q + 1, q
                moves.append(({k: order}, {}))
        if name in reading.interchangeable:
            for p in range(len(gens[g].outs) - 1):
                moves.append(({}, {(k, p): (k, p + 1), (k, p + 1): (k, p)}))
            for j in range(k + 1, len(occ)):
                if occ[j] == occ[k]:  # the same generator on the same sources
                    moves.append(({}, {(k, 0): (j, 0), (j, 0): (k, 0)}))
        if name in reading.paired:
            moves.extend(_paired(occ, k))
    return moves


def _paired(occ, k: int) -> list[tuple[dict, dict]]:
    """Moves of a paired occurrence ``k``: inputs and outputs swapped together; an output
    exchanged with one of another occurrence of the generator made from the same source."""
    g, srcs = occ[k]
    moves = []
    for q in range(len(srcs) - 1):
        order = list(range(len(srcs)))
        order[q], order[q + 1] = q + 1, q
        moves.append(({k: order}, {(k, q): (k, q + 1), (k, q + 1): (k, q)}))
    for j in range(len(occ)):
        if j != k and occ[j][0] == g:
            moves.extend(({}, {(k, p): (j, r), (j, r): (k, p)}) for p, s in enumerate(srcs)
                         for r, t in enumerate(occ[j][1]) if s == t)
    return moves


def _apply(w: Wiring, move: tuple[dict, dict]) -> Wiring:
    """The wiring with the inputs of the occurrences in ``move[0]`` reordered and the
    references in ``move[1]`` renamed, renumbered canonically."""
    orders, rename = move

    def ref(s):
        return rename.get(s, s)

    occ = [(g, tuple(ref(srcs[i]) for i in orders.get(k, range(len(srcs)))))
           for k, (g, srcs) in enumerate(w.occurrences)]
    crosses = any(a[0] != b[0] for a, b in rename.items())  # only an exchange between occurrences can close a cycle
    return canonical(occ, ref(w.root)) if not crosses or _acyclic(occ) else None


def _acyclic(occ) -> bool:
    """No occurrence reads, through others, its own output (an exchange of outputs between
    two occurrences can close a cycle; that wiring is no member)."""
    state: dict[int, int] = {}

    def visit(k: int) -> bool:
        if state.get(k) == 1:
            return False
        if state.get(k) == 2:
            return True
        state[k] = 1
        ok = all(visit(s[0]) for s in occ[k][1] if s != X)
        state[k] = 2
        return ok

    return all(visit(k) for k in range(len(occ)))


def sort_key(w: Wiring) -> tuple:
    """A total order on wirings (the input before any output)."""
    return tuple((g, tuple((-1, -1) if s == X else s for s in srcs)) for g, srcs in w.occurrences), w.root


def orbit(w: Wiring, gens: list[Generator], reading: Reading) -> set[Wiring]:
    """Every ordered wiring the declared symmetries make of ``w`` (``w`` included): the
    closure under the elementary moves."""
    seen, todo = {w}, [w]
    while todo:
        v = todo.pop()
        for move in _moves(v, gens, reading):
            u = _apply(v, move)
            if u is not None and u not in seen:
                seen.add(u)
                todo.append(u)
    return seen


def classes(ws: Iterable[Wiring], gens: list[Generator], reading: Reading) -> dict[Wiring, Wiring]:
    """Each ordered wiring's canonical form: the least element of its orbit. The orbits of
    the wirings given are closed (every permuted wiring is a member too), so an orbit is
    computed once, for its first wiring."""
    form: dict[Wiring, Wiring] = {}
    for w in ws:
        if w not in form:
            orb = orbit(w, gens, reading)
            least = min(orb, key=sort_key)
            for v in orb:
                form[v] = least
    return form


def graph(w: Wiring, gens: list[Generator], reading: Reading) -> nx.DiGraph:
    """The wiring as a labelled graph, written from the declarations, not from the moves: a
    node per occurrence, per output, the input and the output. An edge into an occurrence is
    labelled with its port, except where the generator is symmetric; an output node with its
    port, except where the generator is interchangeable, and then all occurrences of that
    generator on the same sources are one node holding all their outputs. A paired
    generator has no node: each output reads its own input alone."""
    g = nx.DiGraph()
    g.add_node("x", label="x")
    g.add_node("out", label="out")
    node: dict[int, object] = {}
    for k, (gi, srcs) in enumerate(w.occurrences):
        name = gens[gi].name
        node[k] = ("pool", gi, srcs) if name in reading.interchangeable else k
    for k, (gi, srcs) in enumerate(w.occurrences):
        gen, n = gens[gi], node[k]
        if gen.name in reading.paired:  # no occurrence node: each output a map of its own input
            for p, s in enumerate(srcs):
                g.add_node((k, p), label=f"{gen.name}.*")
                g.add_edge("x" if s == X else s, (k, p), label=("*",))
            continue
        size = sum(1 for j in node if node[j] == n)
        g.add_node(n, label=f"{gen.name}x{size}")
        for p in range(len(gen.outs)):
            g.add_node((k, p), label=f"{gen.name}.{'*' if gen.name in reading.interchangeable else p}")
            g.add_edge(n, (k, p), label=("",))
        if any(node[j] == n for j in range(k)):
            continue  # a pool's sources are written once, by its first occurrence
        for q, s in enumerate(srcs):
            src = "x" if s == X else s
            lab = "*" if gen.name in reading.symmetric else str(q)
            old = g.edges[src, n]["label"] if g.has_edge(src, n) else ()
            g.add_edge(src, n, label=tuple(sorted(old + (lab,))))
    g.add_edge(w.root, "out", label=("",))
    return g


def _same(a: dict, b: dict) -> bool:
    return a["label"] == b["label"]


def confirm(form: dict[Wiring, Wiring], gens: list[Generator], reading: Reading) -> None:
    """Check the classes independently (VF2 on :func:`graph`): each wiring is isomorphic to
    its form, and no two forms are. Raises ``DiagError`` (a bug) otherwise."""
    if not reading.symmetric and not reading.interchangeable and not reading.paired:
        bad = [w for w, f in form.items() if w != f]
        if bad:
            raise DiagError("internal check failed: a wiring has a form other than itself with no symmetry")
        return
    graphs = {f: graph(f, gens, reading) for f in set(form.values())}
    for w, f in form.items():
        if w != f and not nx.is_isomorphic(graph(w, gens, reading), graphs[f], node_match=_same, edge_match=_same):
            raise DiagError(f"internal check failed: {w} and its canonical form {f} are not the same member")
    buckets: dict[str, list[Wiring]] = {}
    for f, g in graphs.items():
        with warnings.catch_warnings():  # networkx 3.5+ warns that directed hashes changed: only compared within this run
            warnings.simplefilter("ignore", UserWarning)
            h = nx.weisfeiler_lehman_graph_hash(g, node_attr="label", edge_attr="label")
        for other in buckets.setdefault(h, []):
            if nx.is_isomorphic(graphs[other], g, node_match=_same, edge_match=_same):
                raise DiagError(f"internal check failed: canonical forms {other} and {f} are the same member")
        buckets[h].append(f)


__all__ = ["check", "orbit", "classes", "graph", "confirm", "sort_key"]
