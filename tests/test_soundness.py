"""Soundness of every step kind where weights are shared, against an independent evaluator.

Random small programs (hypothesis, fixed seed) use definitions several times, with local
learnables (fresh per use) and global ones (one set). On each, every shipped rule (both ways
for equations) and every step kind (copy, unfold, fold) is applied at every match; each step
the engine calls an equation (≡) must leave the function unchanged.

"Unchanged" is decided here, by a NumPy interpreter of the graph written for this test: it
reads boxes, SIMD labels and axes straight from the graph, recurses into definitions, and
gives each weight set its own random matrix by the identity the README defines (a global
learnable by its name; a local one by the path of instances it lies in). It shares no code
with the compiler or the oracle.
"""
from __future__ import annotations

import hashlib

import networkx as nx
import numpy as np
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

import stringdiag
from stringdiag import DiagError
from stringdiag.derive import steps
from stringdiag.derive.derivation import _call_of
from stringdiag.rewrite.match import Index, find_matches
from stringdiag.rewrite.rule import EQUATION, Rule, library

SIZES = {"s": 3, "d": 2}


# -- the independent evaluator ---------------------------------------------------------------
def weights_for(key: str, n_in: int, n_out: int) -> np.ndarray:
    seed = int.from_bytes(hashlib.sha256(f"{key}|{n_in}|{n_out}".encode()).digest()[:8], "little")
    return np.random.default_rng(seed).normal(size=(n_in + 1, n_out)) / np.sqrt(n_in + 1)


SCALAR = {
    "add": np.add, "sub": np.subtract, "mul": np.multiply, "div": np.divide, "neg": np.negative,
    "tanh": np.tanh, "exp": np.exp, "relu": lambda x: np.maximum(x, 0.0), "sigmoid": lambda x: 1 / (1 + np.exp(-x)),
}


def constant(v):
    if isinstance(v, tuple) and v and v[0] == "num":
        return float(v[1])
    raise NotImplementedError(f"constant {v!r}")


def evaluate(d, inputs: list[np.ndarray], sizes: dict[str, int], prefix: str = "", rename=None) -> list[np.ndarray]:
    """Values of the outputs; every array is [batch..., *wire type]. ``rename`` maps instance
    paths a step renamed back to the ones they had (a fold makes ``H#1`` into ``G#1/H#1``)."""
    g = d.graph
    val = dict(zip(d.inputs, inputs))
    batch = inputs[0].shape[: inputs[0].ndim - len(d.wire_type(d.inputs[0]))] if inputs else ()
    for n in nx.topological_sort(g):
        a = g.nodes[n]
        if a["kind"] != "box":
            continue
        ins = sorted((k, w, e["axes"]) for w, _, k, e in g.in_edges(n, keys=True, data=True))
        outs = [w for _, w, _ in sorted(g.out_edges(n, keys=True), key=lambda e: e[2])]
        simd = [(lab, dim.evaluate(sizes)) for lab, dim in a["simd"]]
        types = [[dim.evaluate(sizes) for dim in d.wire_type(w)] for w in outs]
        if a["box"] == "contract":
            res = [contract(a, [(val[w], axes) for _, w, axes in ins], simd, sizes, len(types[0]) - len(simd))]
        else:
            xs = [aligned(val[w], axes, simd, batch) for _, w, axes in ins]
            res = apply(a, xs, batch, simd, types, sizes, prefix, rename or {})
        for w, y, t in zip(outs, res, types):
            val[w] = np.broadcast_to(y, tuple(batch) + tuple(t))
    return [val[w] for w in d.outputs]


def aligned(x: np.ndarray, axes: tuple, simd: list, batch: tuple) -> np.ndarray:
    """The input as [batch, every SIMD label of the box, local axes in order]."""
    nb = len(batch)
    order, shape = [], []
    for lab, size in simd:
        if lab in axes:
            order.append(nb + axes.index(lab))
        shape.append(size if lab in axes else 1)
    local = sorted((k, i) for i, k in enumerate(axes) if isinstance(k, int))
    order += [nb + i for _, i in local]
    y = np.transpose(x, list(range(nb)) + order)
    return y.reshape(tuple(batch) + tuple(shape) + tuple(x.shape[nb + i] for _, i in local))


def contract(a, ins, simd, sizes, n_local) -> np.ndarray:
    letters = iter("abcdefghijklmnopqrstuvwxyz")
    sym = {lab: next(letters) for lab, _ in simd + [(lab, dim) for lab, dim in a.get("summed", ())]}
    local = [next(letters) for _ in range(n_local)]
    subs = ["..." + "".join(sym[x] if isinstance(x, str) else local[x] for x in axes) for _, axes in ins]
    out = "..." + "".join(sym[lab] for lab, _ in simd) + "".join(local)
    return np.einsum(",".join(subs) + "->" + out, *[x for x, _ in ins])


def apply(a, xs, batch, simd, types, sizes, prefix, rename) -> list[np.ndarray]:
    lead = tuple(batch) + tuple(size for _, size in simd)
    locals_ = [t[len(simd):] for t in types]
    xs = [np.broadcast_to(x, lead + x.shape[len(lead):]) for x in xs]
    if a["box"] == "fixed":
        return [SCALAR[a["op"]](*xs)]
    if a["box"] == "const":
        return [np.full(lead, constant(a["value"]))]
    if a["box"] == "reindex":
        return [xs[0]]
    if a["box"] == "learn":
        key = ("local:" + renamed(prefix + a["param"], rename)) if a.get("local") else ("global:" + a["param"])
        flat = np.concatenate([x.reshape(lead + (-1,)) for x in xs] + [np.ones(lead + (1,))], axis=-1)
        n_out = sum(int(np.prod(t)) for t in locals_)
        y = np.tanh(flat @ weights_for(key, flat.shape[-1] - 1, n_out))
        outs, k = [], 0
        for t in locals_:
            m = int(np.prod(t))
            outs.append(y[..., k:k + m].reshape(lead + tuple(t)))
            k += m
        return outs
    if a["box"] == "diagram":
        callee = a["ref"]
        inner = {**SIZES, **{gname: dim.evaluate(sizes) for gname, dim in a.get("generics", ())}}
        return evaluate(callee, xs, inner, prefix + a["instance"] + "/", rename)
    raise NotImplementedError(a["box"])


def renamed(path: str, rename: dict[str, str]) -> str:
    for new, old in rename.items():
        if path == new or path.startswith(new + "/"):
            return old + path[len(new):]
    return path


def run(d, x: np.ndarray, rename=None) -> np.ndarray:
    return evaluate(d, [x], SIZES, rename=rename)[0]


# -- random programs ---------------------------------------------------------------------------
HEADER = """\
dim s : seq
dim d : fixed
learn G : [d] -> [d]
learn P : [d], [d] -> [d]
diagram Mix(a: [s, d], b: [s, d]) -> [s, d] {
  e[i, j] = sum_f a[i, f] * b[j, f]
  y[i] = sum_j e[i, j] * b[j]
  return y
}
"""


@st.composite
def expression(draw, names: list[str], calls: list[str], depth: int, seq: bool) -> str:
    if depth == 0 or draw(st.integers(0, 3)) == 0:
        return draw(st.sampled_from(names))
    kinds = ["call", "add", "mul", "tanh", "G", "P"] + (["mix"] if seq else [])
    kind = draw(st.sampled_from(kinds))
    sub = lambda: draw(expression(names, calls, depth - 1, seq))  # noqa: E731
    if kind == "call" and calls:
        return f"{draw(st.sampled_from(calls))}({sub()})"
    if kind == "add":
        return f"({sub()} + {sub()})"
    if kind == "mul":
        return f"({sub()} * {sub()})"
    if kind == "tanh":
        return f"tanh({sub()})"
    if kind == "P":
        return f"P({sub()}, {sub()})"
    if kind == "mix":
        return f"Mix({sub()}, {sub()})"
    return f"G({sub()})"


@st.composite
def programs(draw) -> str:
    lines = [HEADER]
    defs: list[str] = []
    for k in range(draw(st.integers(1, 3))):
        local = draw(st.booleans())
        names = ["x"]
        calls = defs + (["L"] if local else [])
        body = draw(expression(names, calls, 2, False))
        lines.append(f"diagram H{k}(x: [d]) -> [d] {{\n" + ("  learn L : [d] -> [d]\n" if local else "")
                     + f"  return {body}\n}}\n")
        defs.append(f"H{k}")
    names = ["x"]
    stmts = []
    for k in range(draw(st.integers(1, 4))):
        if stmts and draw(st.integers(0, 3)) == 0:  # the same use again: two weight sets, or one
            e = stmts[-1].split(" = ", 1)[1]
        elif draw(st.booleans()):  # a use of a definition (or of G) on a wire: the common case
            e = f"{draw(st.sampled_from(defs + ['G']))}({draw(st.sampled_from(names))})"
        else:
            e = draw(expression(names, defs, 2, True))
        stmts.append(f"  w{k} = {e}")
        names.append(f"w{k}")
    # read wires several times (copies), the same definition on the same wire twice (two sets)
    ret = " + ".join(draw(st.lists(st.sampled_from(names[1:] or names), min_size=1, max_size=4)))
    lines.append("diagram Main(x: [s, d]) -> [s, d] {\n" + "\n".join(stmts) + f"\n  return {ret}\n}}\n")
    return "\n".join(lines)


# -- every step at every match ----------------------------------------------------------------
def _matchable_side(side) -> bool:
    """Sides with boxes only: a side that is bare wires has nothing to find."""
    return any(True for _ in side.boxes())


def _matchable(rule, reverse: bool) -> bool:
    return _matchable_side(rule.sides(reverse)[0])


SIDES = [(r, rev) for r in library().values() for rev in ([False, True] if r.kind == EQUATION else [False])
         if _matchable(r, rev)]


def candidates(d, prog):
    """(description, thunk) for every step kind at every place it applies."""
    ix = Index(d)  # one index of the diagram for every rule (steps copy before they rewrite)
    for rule, reverse in SIDES:
        try:
            matches = find_matches(d, rule, reverse, index=ix, ties=True, limit=6)
        except DiagError:  # a side the engine refuses to match, with its reason (scan_map reversed)
            continue
        for m in matches:
            yield f"apply {rule.name}{' reversed' if reverse else ''} at {m.where}", \
                (lambda r=rule, mm=m: steps.apply_rule(d, r, mm))
    names = {d.graph.nodes[w]["name"] for w in d.wires()} - {None}
    for name in sorted(names):
        yield f"copy {name}", (lambda nm=name: steps.copy(d, nm))
    used = {d.box(b)["op"] for b in d.boxes() if d.box(b)["box"] == "diagram"}
    every = frozenset(used | set(prog.defs) | {"softmax"})
    for name in sorted(used):
        yield f"unfold {name}", (lambda nm=name: steps.unfold(d, nm, every))
    for name, defn in prog.defs.items():
        body = prog[name]
        if name == "Main" or body.generics or not _matchable_side(body):
            continue
        call = _call_of(defn, body)
        rule = Rule(f"fold {name}", EQUATION, body, call, ())
        for m in find_matches(d, rule, index=ix, ties=True, limit=4):
            yield f"fold {name} at {m.where}", (lambda b=body, c=call, mm=m: steps.fold(d, b, c, [mm]))


@settings(max_examples=int(__import__("os").environ.get("SOUNDNESS_EXAMPLES", 2000)), derandomize=True, deadline=None, database=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(programs(), st.integers(0, 2**31 - 1))
def test_every_equation_step_keeps_the_function(source, seed):
    prog = stringdiag.loads(source)
    start = prog["Main"]
    x = np.random.default_rng(seed).normal(size=(2, SIZES["s"], SIZES["d"]))
    for d in (start, start.expand()):
        before = run(d, x)
        for what, thunk in candidates(d, prog):
            try:
                out = thunk()
            except DiagError:
                event(f"{what.split()[0]} refused")
                continue  # refused, with a message: allowed
            event(f"{what.split()[0]} {out.relation}")
            if out.relation != steps.EQ:
                continue
            if any(out.diagram.box(b).get("scan") for b in out.diagram.boxes()):
                event("a loop made (the reference evaluates no loops; tests/test_iteration_laws.py does)")
                continue
            after = run(out.diagram, x, {str(new[-1]): str(old[-1]) for new, old in out.correspond.items()})
            err = np.abs(after - before).max() / max(np.abs(before).max(), 1e-300)
            assert err < 1e-9, f"{what} is labelled ≡ but changes the function (relative error {err:.3g})\n{source}"


# -- the evaluator itself, against hand-written NumPy -------------------------------------------
def test_the_evaluator_agrees_with_hand_written_numpy():
    prog = stringdiag.loads(HEADER + """
diagram H(x: [d]) -> [d] {
  learn L : [d] -> [d]
  return L(x)
}
diagram Main(x: [s, d]) -> [s, d] {
  a = H(x)
  return Mix(a, H(x)) + G(a)
}
""")
    x = np.random.default_rng(1).normal(size=(2, 3, 2))

    def learn(key, v):
        w = weights_for(key, 2, 2)
        return np.tanh(v @ w[:2] + w[2])

    a, b = learn("local:H#1/L", x), learn("local:H#2/L", x)
    e = np.einsum("bif,bjf->bij", a, b)
    want = np.einsum("bij,bjc->bic", e, b) + learn("global:G", a)
    assert np.allclose(run(prog["Main"], x), want, rtol=1e-12, atol=1e-12)
    assert np.allclose(run(prog["Main"].expand(), x), want, rtol=1e-12, atol=1e-12)


def test_the_evaluator_sees_a_tie():
    """Two uses of H merged into one is a different function: the evaluator must say so."""
    prog = stringdiag.loads(HEADER + """
diagram H(x: [d]) -> [d] {
  learn L : [d] -> [d]
  return L(x)
}
diagram Two(x: [s, d]) -> [s, d] {
  a = H(x)
  b = H(x)
  return a + b
}
""")
    d = prog["Two"]
    (m,) = [m for m in find_matches(d, library()["copy_nat"], reverse=True, ties=True)][:1]
    out = steps.apply_rule(d, library()["copy_nat"], m)
    assert out.relation == steps.RED
    x = np.random.default_rng(2).normal(size=(1, 3, 2))
    assert not np.allclose(run(d, x), run(out.diagram, x))
