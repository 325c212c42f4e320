"""derive --verify compiles each diagram once: step n + 1 starts from the diagram step n made,
and the oracle's ``Reuse`` keeps that diagram's expansion and modules. The verdicts must be
the ones of comparisons that build everything afresh, with fewer compilations."""
from __future__ import annotations

import pytest

from stringdiag.derive.derivation import load_derivation
from stringdiag.verify import oracle


def verified(path: str, monkeypatch, fresh: bool) -> tuple[list, int]:
    calls = []
    real = oracle.compile
    with monkeypatch.context() as m:
        m.setattr(oracle, "compile", lambda *a, **k: calls.append(1) or real(*a, **k))
        if fresh:  # every comparison starts from nothing
            m.setattr(oracle.Reuse, "keep", lambda self, *ds: self._held.clear())
        deriv = load_derivation(path, verify=True)
    return [s.verified for s in deriv.steps], len(calls)


@pytest.mark.parametrize("path", ["gallery/linearize.deriv", "gallery/residual.deriv"])
def test_reused_modules_give_the_verdicts_of_fresh_ones_with_fewer_compilations(path, monkeypatch):
    shared, n_shared = verified(path, monkeypatch, fresh=False)
    alone, n_alone = verified(path, monkeypatch, fresh=True)
    assert shared == alone and any(v is not None for v in shared)
    steps = sum(v is not None for v in shared)
    assert n_shared < n_alone if steps > 1 else n_shared == n_alone


def test_a_diagram_let_go_is_built_again_and_another_has_its_own():
    from stringdiag import loads
    prog = loads("dim n : fixed\ndiagram F(x: [n]) -> [n] { return exp(x) }\n"
                 "diagram G(x: [n]) -> [n] { return exp(exp(x)) }\n")
    reuse = oracle.Reuse()
    d = prog["F"]
    first = reuse.flat(d, None)
    assert reuse.flat(d, None) is first
    d2 = prog["G"]
    assert reuse.flat(d2, None) is not first
    reuse.keep(d2)
    assert reuse.flat(d, None) is not first  # let go by keep: built again


def test_compare_runs_torch_at_one_thread_and_restores_it():
    import torch
    from stringdiag import loads
    prog = loads("dim n : fixed\ndiagram F(x: [n]) -> [n] { return exp(x) }\n")
    before = torch.get_num_threads()
    seen = []
    real = oracle._verdicts
    oracle._verdicts = lambda *a: seen.append(torch.get_num_threads()) or real(*a)
    try:
        assert oracle.compare(prog["F"], prog["F"]).same
    finally:
        oracle._verdicts = real
    assert seen and set(seen) == {1} and torch.get_num_threads() == before
