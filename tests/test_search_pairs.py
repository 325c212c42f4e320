"""derive --find on pairs no one wrote down: equal pairs made by random walks of equations from
gallery diagrams are found, and pairs that differ are never reported equal.

The judge of "equal" is the tests' NumPy evaluator (``numpy_eval.py``, float64, weights drawn
per weight set), not the engine: every walked pair is confirmed equal by it, and every near
miss confirmed different, before the search is asked about it.
"""
from __future__ import annotations

import random
from pathlib import Path

import numpy as np
from numpy_eval import SeededWeights, evaluate

from stringdiag.graph.expand import expand
from stringdiag.graph.iso import canonical_hash
from stringdiag.search.engine import Bounds, search
from stringdiag.search.find import moves_of
from stringdiag.search.moves import rule_moves, structural_moves
from stringdiag.search.session import DiagramRef, Session

SIZES = {"s": 4, "d": 3, "k": 2, "t": 3}
WALK = Bounds(max_steps=3, time_budget=30.0, max_boxes=80, max_states=150)
STARTS = ("gallery/scores.diag:MultiplicativeAttention", "gallery/attention.diag:SelfAttention",
          "gallery/similarity.diag:CausalLinearAttention")


def value(d, seed: int = 0) -> np.ndarray:
    """The diagram on a random input, opened to primitives, with weights drawn per weight set."""
    flat = expand(d)
    rng = np.random.default_rng(seed)
    xs = [rng.normal(size=[SIZES[str(n)] for n in t]) for t in flat.input_types]
    return evaluate(flat, xs, SIZES, SeededWeights())[0]


def walk(session: Session, rng: random.Random, length: int):
    """A chain of ``length`` equations (≡) taken at random from the start, each to a new diagram."""
    cur, seen = session.start, {canonical_hash(session.start)}
    for _ in range(length):
        moves = [m for m in [*rule_moves(session.runner, cur, False, WALK.max_boxes),
                             *structural_moves(cur, WALK.max_boxes)]
                 if canonical_hash(m.diagram) not in seen]
        if not moves:
            break
        cur = rng.choice(moves).diagram
        seen.add(canonical_hash(cur))
    return cur


def test_equal_pairs_from_random_walks_are_found(tmp_path):
    rng = random.Random(40)
    for start in STARTS:
        session = Session(DiagramRef.parse(start), None, tmp_path / "walk.deriv", WALK.max_boxes)
        target = walk(session, rng, 2)
        assert canonical_hash(target) != canonical_hash(session.start)
        assert np.allclose(value(session.start), value(target), atol=1e-9)  # the judge: equal
        out = search(session.start, target, moves_of(session, WALK), WALK)
        assert out.found is not None, (start, out.why)
        assert not out.reduction  # an equality, by equations alone
        cur = session.start  # the chain, run again by the checker, reaches the walked diagram
        for line in out.found.steps:
            cur = session.run(cur, line).diagram
        assert expand(cur).isomorphic(expand(target))


FAMILY = """dim s : seq
dim d, k : fixed
learn Q, K : [d] -> [k]
diagram Base(x: [s, d]) -> [s, s] {{
  q = Q(x)
  kk = K(x)
  e[i, j] = sum_f q[i, f] * kk[j, f]
  return e
}}
diagram Other(x: [s, d]) -> [s, s] {{
  a = {wa}(x)
  b = {wb}(x)
  e[i, j] = sum_f {first} * {second}
  return e
}}
"""


def variant(rng: random.Random) -> str:
    """A product of two projections of the rows, drawn at random: which weights, which row
    reads which index, which factor comes first."""
    wa, wb = rng.choice("QK"), rng.choice("QK")
    i, j = ("i", "j") if rng.random() < 0.5 else ("j", "i")
    first, second = f"a[{i}, f]", f"b[{j}, f]"
    if rng.random() < 0.5:
        first, second = second, first
    return FAMILY.format(wa=wa, wb=wb, first=first, second=second)


def test_pairs_that_differ_are_never_reported_equal(tmp_path):
    rng = random.Random(7)
    bounds = Bounds(max_steps=2, time_budget=10.0, max_boxes=40, max_states=25, reductions=True)
    seen: dict[bool, int] = {True: 0, False: 0}
    for n in range(40):
        if min(seen.values()) >= 3:
            break
        src = tmp_path / f"pair{n}.diag"
        src.write_text(variant(rng))
        session = Session(DiagramRef.parse(f"{src}:Base"), DiagramRef.parse(f"{src}:Other"), tmp_path / "p.deriv", 40)
        equal = bool(np.allclose(value(session.start, n), value(session.target, n), atol=1e-9))
        if seen[equal] >= 3:
            continue
        seen[equal] += 1
        out = search(session.start, session.target, moves_of(session, bounds), bounds)
        if equal:  # written otherwise (factors commuted, indices renamed): found by equations
            assert out.found is not None and not out.reduction, src.read_text()
        else:  # a transposed product or one weight set for two: never an equality
            assert out.found is None or out.reduction, (src.read_text(), out.found.steps)
    assert min(seen.values()) >= 3  # both kinds drawn
