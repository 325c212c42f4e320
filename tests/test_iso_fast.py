"""The fast isomorphism check (colour refinement, individualisation, a confirming walk) against
the reference: networkx's VF2 on the labelled graphs (``iso.isomorphic_vf2``).

Random small programs are drawn as lists of statements over wires of type ``[s, d]`` (global
learnables, definitions with weights of their own, arithmetic, copies, contractions), then
written out with statements in another dependency-respecting order, other wire and index
names and other spellings (``F(a)`` or ``t[i] = F(a[i])``): the same diagram. Perturbations
(two arguments swapped, an axis changed, a box or an argument changed, weight sets tied)
and unrelated pairs must be told apart exactly when networkx tells them apart. Symmetric
programs (identical unused branches, several uses of one definition, shared and separate
weights) exercise individualisation; made-up graphs on which colour refinement is blind
(unions of cycles, regular graphs) exercise its backtracking.
"""
from __future__ import annotations

import os
import random
import subprocess
import sys
from pathlib import Path

import networkx as nx
from hypothesis import given, settings
from hypothesis import strategies as st

import stringdiag
from stringdiag.graph import iso
from stringdiag.graph.weights import tie, weight_sets

HEADER = """\
dim s : seq
dim d : fixed
learn F, G : [d] -> [d]
learn P : [d], [d] -> [d]
diagram H(x: [s, d]) -> [s, d] {
  learn W : [d] -> [d]
  return W(x)
}
diagram K(x: [s, d], y: [s, d]) -> [s, d] {
  learn U : [d] -> [d]
  return U(x) + y
}
"""

# statement kinds and their number of arguments; every statement makes one [s, d] wire
ARITY = {"F": 1, "G": 1, "relu": 1, "H": 1, "P": 2, "K": 2, "add": 2, "mul": 2, "att": 3, "attT": 3}
KINDS = sorted(ARITY)
INDEX_POOL = ["i", "j", "f", "k", "m", "n", "p", "q", "r", "t", "u"]


@st.composite
def programs(draw, max_units: int = 6, min_units: int = 1):
    """(units, outputs): unit ``u`` makes wire ``u + 2`` from earlier wires (0, 1: inputs)."""
    units = []
    for u in range(draw(st.integers(min_units, max_units))):
        kind = draw(st.sampled_from(KINDS))
        units.append((kind, tuple(draw(st.integers(0, u + 1)) for _ in range(ARITY[kind]))))
    outs = draw(st.lists(st.integers(0, len(units) + 1), min_size=1, max_size=2))
    return units, outs


def topological(units: list, rng: random.Random) -> list[int]:
    done = {0, 1}
    order: list[int] = []
    left = set(range(len(units)))
    while left:
        ready = sorted(u for u in left if set(units[u][1]) <= done)
        u = rng.choice(ready)
        order.append(u)
        done.add(u + 2)
        left.remove(u)
    return order


def body(name: str, prog, rng: random.Random | None = None) -> str:
    """The diagram's source; with ``rng``, another order, other names and other spellings."""
    units, outs = prog
    n = len(units) + 2
    if rng is None:
        order = list(range(len(units)))
        names = ["x", "z"] + [f"w{u}" for u in range(len(units))]
        inter = [f"e{u}" for u in range(len(units))]
    else:
        order = topological(units, rng)
        labels = rng.sample(range(1000), 2 * n)
        names = [f"v{k}" for k in labels[:n]]
        inter = [f"h{k}" for k in labels[n:]]
    lines = []
    for u in order:
        kind, args = units[u]
        a = [names[x] for x in args]
        t = names[u + 2]
        i, j, f = rng.sample(INDEX_POOL, 3) if rng else ("i", "j", "f")
        if kind in ("F", "G", "relu"):
            if rng and rng.random() < 0.5:
                lines.append(f"  {t}[{i}] = {kind}({a[0]}[{i}])")
            else:
                lines.append(f"  {t} = {kind}({a[0]})")
        elif kind == "H":
            lines.append(f"  {t} = H({a[0]})")
        elif kind in ("P", "K"):
            lines.append(f"  {t} = {kind}({a[0]}, {a[1]})")
        elif kind == "add":
            lines.append(f"  {t} = {a[0]} + {a[1]}")
        elif kind == "mul":
            lines.append(f"  {t} = {a[0]} * {a[1]}")
        else:  # a contraction into [s, s] and back: axes are structure
            e = inter[u]
            left, right = (i, j) if kind == "att" else (j, i)
            lines.append(f"  {e}[{i}, {j}] = sum_{f} {a[0]}[{left}, {f}] * {a[1]}[{right}, {f}]")
            lines.append(f"  {t}[{i}] = sum_{j} {e}[{i}, {j}] * {a[2]}[{j}]")
    ret = ", ".join(names[o] for o in outs)
    types = ", ".join("[s, d]" for _ in outs)
    return (f"diagram {name}({names[0]}: [s, d], {names[1]}: [s, d]) -> {types} {{\n"
            + "\n".join(lines) + f"\n  return {ret}\n}}\n")


def load(*bodies: str) -> list[stringdiag.Diagram]:
    prog = stringdiag.loads(HEADER + "\n".join(bodies), "random.diag")
    return [prog[f"D{k}"] for k in range(len(bodies))]


def agree(a: stringdiag.Diagram, b: stringdiag.Diagram) -> bool:
    """The fast check and the reference give one answer (returned); isomorphic diagrams have
    one hash."""
    fast, ref = iso.isomorphic(a, b), iso.isomorphic_vf2(a, b)
    assert fast == ref, (fast, ref)
    assert iso.isomorphic(b, a) == fast
    if fast:
        assert iso.canonical_hash(a) == iso.canonical_hash(b)
    return fast


def same_structure(d: stringdiag.Diagram) -> None:
    """The fast builder's nodes, labels and edges are :func:`iso.labelled`'s."""
    h, g = iso.labelled(d), iso._graph(d)
    assert {k: g.node_labels[lb] for k, lb in zip(g.keys, g.lab)} == {n: a["label"] for n, a in h.nodes(data=True)}
    edges = g.edges()
    assert len({(u, v) for u, v, _ in edges}) == len(edges)
    assert {(g.keys[u], g.keys[v]): lb for u, v, lb in edges} == {(u, v): a["label"] for u, v, a in h.edges(data=True)}
    assert sorted((v, u, k) for u, vs in enumerate(g.out) for v, k in vs) == \
        sorted((v, u, k) for v, us in enumerate(g.inn) for u, k in us)


# -- the same diagram, written differently --------------------------------------------------
@settings(max_examples=80, deadline=None, derandomize=True)
@given(prog=programs(), seed=st.integers(0, 2**32 - 1))
def test_renaming_reordering_and_respelling_give_an_isomorphic_diagram(prog, seed):
    a, b = load(body("D0", prog), body("D1", prog, random.Random(seed)))
    same_structure(a)
    same_structure(a.expand())
    assert iso.isomorphic(a, b) and iso.isomorphic_vf2(a, b)
    assert iso.canonical_hash(a) == iso.canonical_hash(b)
    ea, eb = a.expand(), b.expand()
    assert iso.isomorphic(ea, eb) and iso.isomorphic_vf2(ea, eb)
    assert iso.canonical_hash(ea) == iso.canonical_hash(eb)


# -- small changes, and unrelated pairs -----------------------------------------------------
def perturb(prog, rng: random.Random):
    """One small change: two arguments swapped, a contraction's axes swapped, another box of
    the same arity, or another argument."""
    units, outs = prog
    units = list(units)
    u = rng.randrange(len(units))
    kind, args = units[u]
    how = rng.choice(["swap", "axes", "kind", "arg"])
    if how == "swap" and len(args) >= 2:
        units[u] = (kind, (args[1], args[0]) + args[2:])
    elif how == "axes" and kind in ("att", "attT"):
        units[u] = ("attT" if kind == "att" else "att", args)
    elif how == "kind" or len(args) == 1 and how == "swap":
        units[u] = (rng.choice([k for k in KINDS if ARITY[k] == len(args)]), args)
    else:
        k = rng.randrange(len(args))
        units[u] = (kind, args[:k] + (rng.randrange(u + 2),) + args[k + 1:])
    return units, outs


@settings(max_examples=100, deadline=None, derandomize=True)
@given(prog=programs(), seed=st.integers(0, 2**32 - 1))
def test_small_changes_are_seen_exactly_when_networkx_sees_them(prog, seed):
    rng = random.Random(seed)
    other = perturb(prog, rng)
    a, b, c = load(body("D0", prog), body("D1", other), body("D2", other, rng))
    agree(a, b)
    agree(a, c)
    agree(a.expand(), c.expand())


@settings(max_examples=60, deadline=None, derandomize=True)
@given(p=programs(max_units=3), q=programs(max_units=3))
def test_unrelated_small_programs_agree_with_networkx(p, q):
    a, b = load(body("D0", p), body("D1", q))
    agree(a, b)
    agree(a.expand(), b.expand())


def test_known_differences():
    base = [("H", (0,)), ("H", (0,)), ("att", (2, 3, 1)), ("add", (4, 1))], [5]
    changes = [
        ([("H", (0,)), ("H", (0,)), ("attT", (2, 3, 1)), ("add", (4, 1))], [5]),  # an axis
        ([("H", (0,)), ("H", (0,)), ("att", (2, 3, 1)), ("add", (1, 4))], [5]),  # two ports
        ([("H", (0,)), ("H", (1,)), ("att", (2, 3, 1)), ("add", (4, 1))], [5]),  # an argument
        ([("H", (0,)), ("H", (0,)), ("att", (2, 3, 1)), ("mul", (4, 1))], [5]),  # a box
        ([("H", (0,)), ("H", (0,)), ("att", (2, 3, 1)), ("add", (4, 1))], [4]),  # an output
    ]
    for change in changes:
        a, b = load(body("D0", base), body("D1", change))
        assert not agree(a, b) and not agree(a.expand(), b.expand())
        assert iso.canonical_hash(a) != iso.canonical_hash(b)
        assert iso.canonical_hash(a.expand()) != iso.canonical_hash(b.expand())


# -- symmetric diagrams: identical branches, several uses of one definition -----------------
@settings(max_examples=60, deadline=None, derandomize=True)
@given(prog=programs(max_units=4), extra=st.lists(st.sampled_from(["F", "H", "K", "att"]), min_size=2, max_size=5),
       seed=st.integers(0, 2**32 - 1))
def test_identical_parallel_branches(prog, extra, seed):
    """Branches nothing reads, drawn twice or more from the same few shapes: the stable colouring
    is not discrete, and the search must pair them up."""
    units, outs = prog
    units = list(units)
    for kind in extra * 2:  # every shape at least twice
        units.append((kind, tuple(min(1, k) for k in range(ARITY[kind]))))
    sym = (units, outs)
    rng = random.Random(seed)
    a, b, c = load(body("D0", sym), body("D1", sym, rng), body("D2", perturb(sym, rng), rng))
    assert agree(a, b) and agree(a.expand(), b.expand())
    agree(a, c)
    agree(a.expand(), c.expand())


@settings(max_examples=40, deadline=None, derandomize=True)
@given(n=st.integers(3, 5), seed=st.integers(0, 2**32 - 1))
def test_shared_and_separate_weights(n, seed):
    """n uses of ``H`` in parallel, summed in order; their weight sets tied in pairs in
    different ways: isomorphic exactly when networkx says so, never when one tie is missing."""
    units = [("H", (0,)) for _ in range(n)]
    acc = 2
    for k in range(1, n):
        units.append(("add", (acc, k + 2)))
        acc = len(units) + 1
    (d,) = load(body("D0", (units, [acc])))
    keys = sorted(weight_sets(d.expand()), key=repr)
    assert len(keys) == n
    rng = random.Random(seed)
    variants = []
    for _ in range(3):
        e = d.expand()
        pairs = rng.sample(keys, 4) if n >= 4 else rng.sample(keys, 2)
        tie(e, [pairs[i:i + 2] for i in range(0, len(pairs), 2)])
        variants.append(e)
    untied = d.expand()
    for v in variants:
        assert not agree(v, untied)
        for w in variants:
            agree(v, w)
    # one tie against one copy: two uses sharing a set are not one use read twice
    one = d.expand()
    tie(one, [keys[:2]])
    copy = [("H", (0,)) for _ in range(n - 1)] + [("add", (2, 2))]
    for k in range(3, n + 1):
        copy.append(("add", (len(copy) + 1, k)))
    (copied,) = load(body("D0", (copy, [len(copy) + 1])))
    assert not agree(one, copied.expand())


# -- made-up graphs on which colour refinement alone is blind --------------------------------
def labelled_graph(edges, n: int, labels=None, edge_labels=None) -> nx.DiGraph:
    h = nx.DiGraph()
    for v in range(n):
        h.add_node(v, label=(labels[v] if labels else "n"))
    for k, (u, v) in enumerate(edges):
        h.add_edge(u, v, label=(edge_labels[k] if edge_labels else "e"))
    return h


def fast(h1: nx.DiGraph, h2: nx.DiGraph) -> bool:
    return iso._isomorphic(iso._from_labelled(h1), iso._from_labelled(h2))


def reference(h1: nx.DiGraph, h2: nx.DiGraph) -> bool:
    same = lambda x, y: x["label"] == y["label"]  # noqa: E731
    return nx.is_isomorphic(h1, h2, node_match=same, edge_match=same)


def cycles(lengths: list[int]) -> list[tuple[int, int]]:
    edges, start = [], 0
    for m in lengths:
        edges += [(start + k, start + (k + 1) % m) for k in range(m)]
        start += m
    return edges


def shuffled(h: nx.DiGraph, rng: random.Random) -> nx.DiGraph:
    nodes = list(h.nodes)
    perm = dict(zip(nodes, rng.sample(nodes, len(nodes))))
    out = nx.DiGraph()
    for v in rng.sample(nodes, len(nodes)):
        out.add_node(perm[v], **h.nodes[v])
    for u, v, a in rng.sample(list(h.edges(data=True)), h.number_of_edges()):
        out.add_edge(perm[u], perm[v], **a)
    return out


def test_unions_of_cycles():
    """Every node looks alike to colour refinement: two triangles against a hexagon."""
    rng = random.Random(7)
    shapes = [[6], [3, 3], [2, 4], [4, 2], [2, 2, 2], [5, 1], [1, 1, 4]]
    for p in shapes:
        for q in shapes:
            h1, h2 = labelled_graph(cycles(p), 6), labelled_graph(cycles(q), 6)
            assert fast(h1, shuffled(h2, rng)) == reference(h1, h2) == (sorted(p) == sorted(q))


@settings(max_examples=60, deadline=None, derandomize=True)
@given(n=st.integers(4, 14), degree=st.integers(2, 3), seed=st.integers(0, 2**32 - 1), relabel=st.booleans())
def test_regular_graphs_against_networkx(n, degree, seed, relabel):
    """Random regular graphs (both directions of every edge) and small changes to them: the
    search backtracks over candidates that refinement cannot tell apart."""
    if n * degree % 2:
        n += 1
    rng = random.Random(seed)
    g1 = nx.random_regular_graph(degree, n, seed=rng.randrange(2**31))
    g2 = nx.random_regular_graph(degree, n, seed=rng.randrange(2**31))
    labels = [rng.choice("ab") for _ in range(n)] if relabel else None
    h1 = labelled_graph([e for u, v in g1.edges for e in ((u, v), (v, u))], n, labels)
    h2 = labelled_graph([e for u, v in g2.edges for e in ((u, v), (v, u))], n, labels)
    assert fast(h1, shuffled(h1, rng))
    assert fast(h1, h2) == reference(h1, h2)
    # a directed twist: one edge's direction dropped
    u, v = next(iter(g1.edges))
    h3 = h1.copy()
    h3.remove_edge(u, v)
    h4 = shuffled(h1, rng)
    h4.remove_edge(*rng.choice(list(h4.edges)))
    assert fast(h3, h4) == reference(h3, h4)


@settings(max_examples=60, deadline=None, derandomize=True)
@given(n=st.integers(1, 9), p=st.floats(0.1, 0.6), seed=st.integers(0, 2**32 - 1))
def test_random_labelled_digraphs_against_networkx(n, p, seed):
    rng = random.Random(seed)

    def draw():
        g = nx.gnp_random_graph(n, p, seed=rng.randrange(2**31), directed=True)
        return labelled_graph(list(g.edges), n, [rng.choice("ab") for _ in range(n)],
                              [rng.choice("xy") for _ in g.edges])

    h1, h2 = draw(), draw()
    assert fast(h1, shuffled(h1, rng))
    assert fast(h1, h2) == reference(h1, h2)


# -- the hash -------------------------------------------------------------------------------
def test_canonical_hash_is_the_same_in_another_process():
    """No salted ``hash()`` of strings in the hash: another process (another PYTHONHASHSEED)
    gives the same digest."""
    prog = ([("H", (0,)), ("F", (2,)), ("att", (2, 3, 1)), ("mul", (4, 4))], [5, 3])
    src = HEADER + body("D0", prog)
    here = iso.canonical_hash(stringdiag.loads(src, "h.diag")["D0"])
    code = ("import sys, stringdiag; from stringdiag.graph import iso; "
            "print(iso.canonical_hash(stringdiag.loads(sys.stdin.read(), 'h.diag')['D0']))")
    root = Path(__file__).resolve().parent.parent
    for seed in ("1", "2"):
        env = dict(os.environ, PYTHONHASHSEED=seed)
        done = subprocess.run([sys.executable, "-c", code], input=src, capture_output=True, text=True, env=env,
                              cwd=root, check=True)
        assert done.stdout.strip() == here
