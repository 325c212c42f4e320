"""The enumeration's fast paths against the slow ones they replace.

- Rules applied to wirings (``enumerate/rewiring.py``) against the engine's matcher and
  double-pushout rewrite on the built member, read back: the same results, with the same
  multiplicity, for every rule and every ordered wiring of the spaces below.
- Canonical forms under declared symmetries (``enumerate/symmetry.py``) against networkx's
  VF2 on an encoding written from the declarations, on random small spaces (hypothesis): two
  wirings have one form exactly when they are isomorphic.
"""
from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest
from hypothesis import HealthCheck, assume, given, settings, strategies as st

import stringdiag
from stringdiag import DiagError
from stringdiag.enumerate import rewiring, symmetry
from stringdiag.enumerate.build import build
from stringdiag.enumerate.reading import Copy, Reading
from stringdiag.enumerate.space import generators, wirings
from stringdiag.enumerate.stages import Oriented, Work, _results, enumerate_space
from stringdiag.rewrite.match import Index
from stringdiag.rewrite.rule import load_rules

ROOT = Path(__file__).resolve().parents[1]
PLAIN = ["AttPrep", "AttApply", "LinAttPrep", "LinAttApply", "ConcatFF"]
QK = ["AttPrepQK", "AttApply", "LinAttPrepQK", "LinAttApply", "ConcatFF"]
RULES = ["absorb.rules", "merge.rules"]


def _gens(file: str, names: list[str]):
    prog = stringdiag.load(ROOT / "gallery" / file)
    return generators([prog[n] for n in names])


@pytest.mark.parametrize("file, names, rule_files, bound, copy", [
    ("anatomy.diag", PLAIN, RULES, 4, Copy.INPUT),
    ("anatomy.diag", PLAIN, RULES, 3, Copy.ALL),
    ("anatomy.diag", PLAIN, RULES, 4, Copy.STREAMS),
    ("anatomy_qk.diag", QK, RULES + ["absorb_qk.rules"], 4, Copy.INPUT),
], ids=["anatomy", "anatomy-copy-all", "anatomy-copy-streams", "query-key"])
def test_rules_on_wirings_give_what_the_engine_gives_on_diagrams(file, names, rule_files, bound, copy):
    gens, stream = _gens(file, names)
    oriented = [Oriented.of(r) for f in rule_files for r in load_rules(ROOT / "rules" / f)]
    fast = [(o, rewiring.compile_rule(o.pattern, o.replacement, gens)) for o in oriented]
    fast = [(o, f) for o, f in fast if f is not None]
    assert len(fast) >= 12  # (5) and (6) on ConcatFF and the generators of this file
    found = 0
    for w in wirings(gens, stream, bound, copy):
        d = build(w, gens, "w")
        ix = Index(d)
        for o, f in fast:
            want = Counter(_results(d, o, ix, gens))
            assert Counter(rewiring.rewrites(f, w)) == want, (o.rule.name, w)
            found += sum(want.values())
    assert found > 50  # the rules fire: the comparison is not vacuous


def test_a_rule_over_another_generator_is_left_to_the_engine():
    gens, _ = _gens("anatomy_qk.diag", QK)
    prep = next(r for r in load_rules(ROOT / "rules" / "absorb.rules") if r.name == "absorb_prep_back")
    o = Oriented.of(prep)  # AttPrep is not one of these generators
    assert rewiring.compile_rule(o.pattern, o.replacement, gens) is None


def test_confirming_the_classes_changes_nothing():
    prog = stringdiag.load(ROOT / "gallery" / "anatomy.diag")
    defns = [prog[n] for n in PLAIN]
    rules = [r for f in RULES for r in load_rules(ROOT / "rules" / f)]
    reading = Reading(4, symmetric=frozenset({"ConcatFF"}), interchangeable=frozenset({"LinAttPrep"}),
                      require=("AttApply", "LinAttApply"))
    plain = enumerate_space(defns, reading, rules)
    confirmed = enumerate_space(defns, reading, rules, work=Work(confirm=True))
    assert [(s.name, [m.wiring for m in s.members]) for s in plain.stages] == \
        [(s.name, [m.wiring for m in s.members]) for s in confirmed.stages]


SPACES = {"anatomy.diag": PLAIN, "anatomy_qk.diag": QK}


@st.composite
def spaces(draw):
    file = draw(st.sampled_from(sorted(SPACES)))
    every = SPACES[file]
    names = ["ConcatFF"] + draw(st.lists(st.sampled_from(every[:4]), min_size=1, max_size=3, unique=True))
    pick = lambda: frozenset(draw(st.lists(st.sampled_from(names), max_size=2, unique=True)))  # noqa: E731
    symmetric, interchangeable, paired = pick(), pick(), pick()
    copy = draw(st.sampled_from(list(Copy)))
    bound = draw(st.integers(1, 4 if copy is Copy.INPUT else 3))
    return file, names, Reading(bound, copy, symmetric, interchangeable - paired, paired=paired - symmetric)


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])
@given(spaces())
def test_one_form_exactly_when_isomorphic(space):
    file, names, reading = space
    gens, stream = _gens(file, names)
    try:
        symmetry.check(gens, reading)
    except DiagError:
        assume(False)  # a declaration these generators do not allow
    ws = list(wirings(gens, stream, reading.max, reading.copy))
    form = symmetry.classes(ws, gens, reading)
    assert set(form) == set(ws)
    symmetry.confirm(form, gens, reading)  # each wiring isomorphic to its form, no two forms isomorphic


def test_the_cli_confirms_on_request(capsys, monkeypatch):
    import json

    from stringdiag.cli.main import main

    calls = []
    real = symmetry.confirm
    monkeypatch.setattr(symmetry, "confirm", lambda *a: calls.append(1) or real(*a))

    args = ["enumerate", str(ROOT / "gallery" / "anatomy.diag"), "--generators", ",".join(PLAIN), "--max", "3",
            "--symmetric", "ConcatFF", "--interchangeable", "LinAttPrep", "--json"]
    stages = []
    for extra in ([], ["--confirm"]):
        assert main(args + extra) == 0
        assert bool(calls) == bool(extra)
        stages.append(json.loads(capsys.readouterr().out)["stages"])
    assert stages[0] == stages[1] and stages[0][0]["count"] > 0
