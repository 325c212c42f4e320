"""Soundness of every step kind where weights are shared, against an independent evaluator.

Random small programs (hypothesis, fixed seed) use definitions several times, with local
learnables (fresh per use) and global ones (one set). On each, every shipped rule (both ways
for equations) and every step kind (copy, unfold, fold) is applied at every match; each step
the engine calls an equation (≡) must leave the function unchanged.

"Unchanged" is decided by the tests' NumPy interpreter of the graph (``numpy_eval.py``): it
reads boxes, SIMD labels and axes straight from the graph, recurses into definitions, runs
loops step by step, and gives each weight set its own random map by the identity the README
defines (a global learnable by its name; a local one by the path of instances it lies in).
It shares no code with the compiler or the oracle.
"""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st
from numpy_eval import Seeded, SeededWeights, evaluate

import stringdiag
from stringdiag import DiagError
from stringdiag.derive import steps
from stringdiag.derive.derivation import _call_of
from stringdiag.rewrite.match import Index, find_matches
from stringdiag.rewrite.rule import EQUATION, Rule, library

SIZES = {"s": 3, "d": 2}


# -- the independent evaluator (tests/numpy_eval.py) ---------------------------------------------
def run(d, x: np.ndarray, rename=None) -> tuple[np.ndarray, set]:
    """The output and the weight sets read (by their identity, renamed back)."""
    weights = SeededWeights(rename)
    return evaluate(d, [x], SIZES, weights)[0], weights.read


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
    names = {d.wire_label(w) for w in d.wires()} - {None}
    for name in sorted(names):
        yield f"copy {name}", (lambda nm=name: steps.copy(d, nm))
    used = {d.record(b).op for b in d.boxes() if d.record(b).kind == "diagram"}
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
@pytest.mark.slow
def test_every_equation_step_keeps_the_function(source, seed):
    prog = stringdiag.loads(source)
    start = prog["Main"]
    x = np.random.default_rng(seed).normal(size=(2, SIZES["s"], SIZES["d"]))
    for d in (start, start.expand()):
        before, sets = run(d, x)
        for what, thunk in candidates(d, prog):
            try:
                out = thunk()
            except DiagError:
                event(f"{what.split()[0]} refused")
                continue  # refused, with a message: allowed
            event(f"{what.split()[0]} {out.relation}" + (" (a renamed weight set paired)" if out.correspond else ""))
            if out.relation != steps.EQ:
                continue
            after, now = run(out.diagram, x, {str(new[-1]): str(old[-1]) for new, old in out.correspond.items()})
            # no new weight set: each one the step renamed is paired (a loop made around a local learnable)
            assert not now - sets, f"{what} reads weight sets the diagram had not: {sorted(now - sets)}\n{source}"
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
        w = Seeded(key).draw(3, 2)  # [d + 1, d]: the map, then the bias
        return np.tanh(v @ w[:2] + w[2])

    a, b = learn(("learn", True, "H#1/L"), x), learn(("learn", True, "H#2/L"), x)
    e = np.einsum("bif,bjf->bij", a, b)
    want = np.einsum("bij,bjc->bic", e, b) + learn(("learn", False, "G"), a)
    assert np.allclose(run(prog["Main"], x)[0], want, rtol=1e-12, atol=1e-12)
    assert np.allclose(run(prog["Main"].expand(), x)[0], want, rtol=1e-12, atol=1e-12)


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
    assert not np.allclose(run(d, x)[0], run(out.diagram, x)[0])
