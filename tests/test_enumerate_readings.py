"""The count under three readings of Sec. 5, against a brute force written here.

The brute force shares no code with ``stringdiag.enumerate``: it grows wirings bottom-up
(each new occurrence reads the input or outputs not yet read), so every member appears in
every topological order; it tells members apart with its own encoding as a networkx graph
and VF2, in which a symmetric generator's in-edges carry no port and an interchangeable
generator is split into one single-output node per output (any output of any occurrence on
the same sources may then stand in for any other: the split graph is the class); and it
re-expresses reductions (5) and (6) as plain predicates that remove one ConcatFF:
(5) ``ConcatFF(x, x)`` read by a port whose first step is a learnable map;
(6) ``ConcatFF(ConcatFF(a, x), x)`` (or mirrored) where the outer merges into the inner.
Only the input is copied, so the ``x`` of both rules is the input.
"""
from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import networkx as nx
import pytest

import stringdiag
from stringdiag.cli.main import main

ROOT = Path(__file__).resolve().parents[1]
X = ("x",)
ABSORBS = {  # ports whose first step is a learnable map applied token by token
    "AttPrep": {0}, "AttApply": {1}, "LinAttPrep": {0}, "LinAttApply": {2}, "ConcatFF": {0, 1},
    "AttPrepQK": {0, 1}, "LinAttPrepQK": {0, 1},
}


def signatures(file: str, names: list[str]) -> dict:
    prog = stringdiag.load(ROOT / "gallery" / file)
    return {n: ([tuple(t) for t in prog[n].input_types], [tuple(t) for t in prog[n].output_types]) for n in names}


def grow(sig: dict, names: list[str], bound: int) -> dict:
    """Every ordered wiring, keyed by an ordered canonical key: (occurrences, root) with
    occurrences (name, sources), sources X or (occurrence, port)."""
    stream = sig[names[0]][0][0]
    found: dict = {}

    def step(occ: list, unread: list):
        streams = [u for u in unread if sig[occ[u[0]][0]][1][u[1]] == stream]
        if len(unread) == 1 and streams:
            w = (tuple(occ), unread[0])
            found.setdefault(ordered_key(w), w)
        if len(occ) == bound or len(unread) > 2 * (bound - len(occ)) + 1:
            return
        for n in names:
            ins, outs = sig[n]
            for picks in _pick(ins, unread, occ, sig, stream, 0, ()):
                k = len(occ)
                left = [u for u in unread if u not in picks]
                step(occ + [(n, picks)], left + [(k, p) for p in range(len(outs))])

    step([], [])
    return found


def _pick(ins, unread, occ, sig, stream, q, chosen):
    if q == len(ins):
        yield chosen
        return
    if ins[q] == stream:
        yield from _pick(ins, unread, occ, sig, stream, q + 1, chosen + (X,))
    for u in unread:
        if u not in chosen and sig[occ[u[0]][0]][1][u[1]] == ins[q]:
            yield from _pick(ins, unread, occ, sig, stream, q + 1, chosen + (u,))


def ordered_key(w) -> tuple:
    """Occurrences numbered in the order a walk from the root meets them."""
    occ, root = w
    order: dict = {}

    def walk(k):
        if k not in order:
            order[k] = len(order)
            for s in occ[k][1]:
                if s != X:
                    walk(s[0])

    walk(root[0])
    if len(order) != len(occ):
        return ("dead", id(w))  # an occurrence the output does not read: never a member
    re = lambda s: s if s == X else (order[s[0]], s[1])  # noqa: E731
    return tuple(sorted((order[k], n, tuple(map(re, srcs))) for k, (n, srcs) in enumerate(occ))), re(root)


def encode(w, sig, symmetric: set, interchangeable: set, paired: set = frozenset()) -> nx.DiGraph:
    """The split graph: an interchangeable occurrence is one node per output, each reading
    all its sources; a paired one is one node per output reading only the source at the
    output's own position; a symmetric one's in-edges have no port."""
    occ, root = w
    g = nx.DiGraph()
    g.add_node("x", label="x")
    g.add_node("out", label="out")
    split = set(interchangeable) | set(paired)

    def node(s):
        if s == X:
            return "x"
        return s if occ[s[0]][0] in split else (s[0], "all")

    for k, (n, srcs) in enumerate(occ):
        if n in paired:
            for p, s in enumerate(srcs):
                g.add_node((k, p), label=n)
                port = f"{'' if s == X or occ[s[0]][0] in split else s[1]}>p"
                old = g.edges[node(s), (k, p)]["label"] if g.has_edge(node(s), (k, p)) else ""
                g.add_edge(node(s), (k, p), label=";".join(sorted(filter(None, old.split(";") + [port]))))
            continue
        heads = [(k, p) for p in range(len(sig[n][1]))] if n in interchangeable else [(k, "all")]
        for h in heads:
            g.add_node(h, label=n)
            for q, s in enumerate(srcs):
                src = node(s)
                port = f"{'' if s == X or occ[s[0]][0] in split else s[1]}>{'*' if n in symmetric else q}"
                old = g.edges[src, h]["label"] if g.has_edge(src, h) else ""
                g.add_edge(src, h, label=";".join(sorted(filter(None, old.split(";") + [port]))))
    g.add_edge(node(root), "out", label=f"{'' if occ[root[0]][0] in split else root[1]}>out")
    return g


class Classes:
    """Members up to isomorphism of their encodings (WL hash buckets, then VF2)."""

    def __init__(self):
        self.buckets: dict = {}
        self.graphs: list = []

    def find(self, g) -> int | None:
        h = nx.weisfeiler_lehman_graph_hash(g, node_attr="label", edge_attr="label")
        for i in self.buckets.get(h, []):
            if nx.is_isomorphic(self.graphs[i], g, node_match=_same, edge_match=_same):
                return i
        return None

    def add(self, g) -> int:
        i = self.find(g)
        if i is None:
            i = len(self.graphs)
            self.graphs.append(g)
            self.buckets.setdefault(nx.weisfeiler_lehman_graph_hash(g, node_attr="label", edge_attr="label"), []).append(i)
        return i


def _same(a, b):
    return a["label"] == b["label"]


def smaller(w):
    """Every wiring one backward application of (5) or (6) makes of ``w`` (one ConcatFF removed)."""
    occ, root = w
    readers = {s: (j, q) for j, (_, srcs) in enumerate(occ) for q, s in enumerate(srcs) if s != X}
    for c, (n, srcs) in enumerate(occ):
        if n != "ConcatFF" or (c, 0) == root:
            continue
        j, q = readers[(c, 0)]
        if srcs == (X, X) and q in ABSORBS[occ[j][0]]:  # (5): the reader reads x itself
            yield _remove(occ, root, c, X)
        if occ[j][0] == "ConcatFF" and occ[j][1][1 - q] == X and srcs[1 - q] == X:
            yield _merge(occ, root, j, (c, 0))  # (6): ConcatFF(ConcatFF(a, x), x) is ConcatFF(a, x), mirrored too


def _remove(occ, root, c, replacement):
    occ = [(n, tuple(replacement if s == (c, 0) else s for s in srcs)) for n, srcs in occ]
    return _drop(occ, root, c)


def _merge(occ, root, outer, inner_out):
    """The outer ConcatFF removed: its reader reads the inner one instead."""
    occ = [(n, tuple(inner_out if s == (outer, 0) else s for s in srcs)) for n, srcs in occ]
    return _drop(occ, inner_out if root == (outer, 0) else root, outer)


def _drop(occ, root, c):
    re = lambda s: s if s == X else (s[0] - (s[0] > c), s[1])  # noqa: E731
    return tuple((n, tuple(map(re, srcs))) for k, (n, srcs) in enumerate(occ) if k != c), re(root)


def brute(file, names, bound, symmetric=(), interchangeable=(), require=(), paired=()) -> dict:
    sig = signatures(file, names)
    ws = list(grow(sig, names, bound).values())
    classes = Classes()
    enc = lambda w: encode(w, sig, set(symmetric), set(interchangeable), set(paired))  # noqa: E731
    member = [classes.add(enc(w)) for w in ws]
    raw = len(classes.graphs)
    need = [any(n in require for n, _ in ws[i][0]) or not require for i in range(len(ws))]
    keep = {member[i] for i in range(len(ws)) if need[i]}
    parent = {m: m for m in keep}

    def find(a):
        while parent[a] != a:
            a = parent[a]
        return a

    for i, w in enumerate(ws):
        if member[i] not in keep:
            continue
        for v in smaller(w):
            j = classes.find(enc(v))
            if j in keep and find(j) != find(member[i]):
                parent[find(member[i])] = find(j)
    roots = {find(m) for m in keep}
    fam = Counter()
    for r in roots:
        i = member.index(r)
        has = {n for n, _ in ws[i][0]}
        lin, dot = "LinAttApply" in has, "AttApply" in has
        fam["both" if lin and dot else "linear" if lin else "dot" if dot else "none"] += 1
    return {"raw": raw, "required": len(keep), "reduced": len(roots), "families": dict(fam)}


def tool(file, names, bound, extra, rules=True) -> dict:
    import contextlib
    import io

    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        rc = main(["enumerate", str(ROOT / "gallery" / file), "--generators", ",".join(names), "--max", str(bound),
                   *(["--rules", str(ROOT / "rules" / "absorb.rules"), str(ROOT / "rules" / "merge.rules")]
                     if rules else []), *extra, "--json"])
    assert rc == 0
    data = json.loads(out.getvalue())
    counts = {s["name"]: s["count"] for s in data["stages"]}
    fams = Counter(m["family"] for m in data["mechanisms"])
    return {"raw": counts["raw"], "required": counts.get("required", counts["not-composite"]),
            "reduced": counts.get("reduced", counts.get("required", counts["not-composite"])),
            "families": dict(fams)}


PLAIN = ["AttPrep", "AttApply", "LinAttPrep", "LinAttApply", "ConcatFF"]
QK = ["AttPrepQK", "AttApply", "LinAttPrepQK", "LinAttApply", "ConcatFF"]
BEST = ["--symmetric", "ConcatFF", "--require", "AttApply,LinAttApply"]


@pytest.mark.parametrize("file, names, symmetric, interchangeable, require, extra", [
    ("anatomy.diag", PLAIN, ["ConcatFF"], ["LinAttPrep"], ["AttApply", "LinAttApply"],
     BEST + ["--interchangeable", "LinAttPrep"]),
    ("anatomy_qk.diag", QK, ["ConcatFF"], ["LinAttPrepQK"], ["AttApply", "LinAttApply"],
     BEST + ["--interchangeable", "LinAttPrepQK"]),
    ("anatomy.diag", PLAIN, [], [], [], []),  # the old reading: every port ordered
], ids=["best-supported", "query-key", "ordered"])
def test_count_matches_the_brute_force(file, names, symmetric, interchangeable, require, extra):
    want = brute(file, names, 5, symmetric, interchangeable, require)
    assert tool(file, names, 5, extra) == want


def test_query_key_streams_without_concatff_give_the_issues_fourteen():
    """Issue 21's 14 "when ConcatFF is dropped": with query/key streams, M0, M1 and either fed
    into the query, key or value port of an outer linear or dot attention (4/4/6); LinAttPrepQK
    paired (each output a map of its own input). A finding, checked against the brute force."""
    names = QK[:4]
    want = brute("anatomy_qk.diag", names, 5, (), (), ["AttApply", "LinAttApply"], ["LinAttPrepQK"])
    got = tool("anatomy_qk.diag", names, 5, ["--paired", "LinAttPrepQK", "--require", "AttApply,LinAttApply"])
    assert got == want
    assert (got["reduced"], got["families"]) == (14, {"linear": 4, "dot": 4, "both": 6})


def test_paired_with_concatff_matches_the_brute_force():
    """Paired moves across occurrences and the reductions together, at bound 4 (fast)."""
    want = brute("anatomy_qk.diag", QK, 4, ["ConcatFF"], (), ["AttApply", "LinAttApply"], ["LinAttPrepQK"])
    assert tool("anatomy_qk.diag", QK, 4, ["--symmetric", "ConcatFF", "--paired", "LinAttPrepQK",
                                           "--require", "AttApply,LinAttApply"]) == want


def test_a_space_too_large_for_the_budget_is_refused_before_the_work(capsys):
    import time

    t = time.process_time()
    rc = main(["enumerate", str(ROOT / "gallery" / "anatomy.diag"), "--generators", ",".join(PLAIN), "--max", "7",
               "--rules", str(ROOT / "rules" / "absorb.rules"), "--time-budget", "1"])
    err = capsys.readouterr().err
    assert rc == 1 and time.process_time() - t < 2
    assert err.startswith("estimate: about ") and "error: enumerating --max 7 would take about" in err
    assert "use --max " in err and "--time-budget" in err.splitlines()[-1]
