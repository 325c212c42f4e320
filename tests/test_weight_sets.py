"""Weight sets counted everywhere (issue 24, item 2): a step that keeps or ties weights sees
every use of a set, at the top level and inside definition boxes, scanned cells and stacks,
and its verdict does not depend on the order of the steps (``unfold`` first or not).

The global learner ``R`` has one set of weights wherever it is used. ``T`` reads it at the
top level (``r = R(enc)``, the use a step names) and, as each test places it, once more: at
the top level, inside a definition box (``H``), a scanned cell (``Cell``), a stack (``repeat 2
Blk``, unshared or shared). Where a step is accepted, the reference is the compiled modules
of both sides in float64, written here: the weight sets (and parameter counts) must be the
same, and with the same weights the same function.
"""
from __future__ import annotations

import re
from pathlib import Path

import pytest
import torch
from hypothesis import given, settings, strategies as st, HealthCheck

import stringdiag
from stringdiag import DiagError
from stringdiag.cli.main import main
from stringdiag.derive import steps
from stringdiag.derive.derivation import _call_of, all_definitions, load_derivation
from stringdiag.graph.box import Box, Instance, Kind
from stringdiag.graph.weights import weight_key
from stringdiag.graph.weightuse import Holder, uses
from stringdiag.rewrite.match import find_matches
from stringdiag.rewrite.rule import EQUATION, Rule, library

HEAD = """\
dim n : seq
dim d : fixed = 3

learn E : [d] -> [d]
learn R : [d] -> [d]

diagram H(x: [n, d]) -> [n, d] {
  return R(x)
}
diagram HE(x: [n, d]) -> [n, d] {
  return E(x)
}
diagram Cell(h: [d], x: [d]) -> [d], [d] {
  s = h + R(x)
  return s, s
}
diagram Blk(x: [n, d]) -> [n, d] {
  return x + R(x)
}
diagram G(x: [n, d]) -> [n, d] {
  learn F : [d] -> [d]
  return F(x)
}
"""

# where the other use is: (statement or None, the term it adds to the output)
PLACES = {
    "top": (None, "R(x)"),
    "def": (None, "H(x)"),
    "scan": ("_h, y[t] = scan Cell(zeros<d>(), x[t])", "y"),
    "stack": ("z = repeat 2 Blk(x)", "z"),
    "shared": ("zs = repeat 2 shared Blk(x)", "zs"),
    "mapdef": (None, "HE(x)"),  # the absorbed map's own weights, inside a definition box
}
OF_R = {"top", "def", "scan", "stack", "shared"}  # the placements that use R again
LINE = re.compile(r"^\S+:\d+:\d+: error: ")
DIMS = {"n": 5}


def diag(places, reads: int = 1) -> str:
    """``T``: ``r = R(enc)`` read ``reads`` times, plus the other uses ``places``."""
    stmts = [PLACES[p][0] for p in places if PLACES[p][0]]
    terms = ["r"] * reads + [PLACES[p][1] for p in places]
    body = "".join(f"  {s}\n" for s in stmts)
    return (HEAD + "diagram T(x: [n, d]) -> [n, d] {\n  enc = E(x)\n  r = R(enc)\n" + body
            + f"  return {' + '.join(terms)}\n}}\n")


def derive(tmp: Path, places, script: str, reads: int = 1):
    (tmp / "w.diag").write_text(diag(places, reads))
    (tmp / "x.deriv").write_text("start w.diag:T\n" + script)
    return load_derivation(tmp / "x.deriv")


def verdict(tmp: Path, places, script: str, reads: int = 1) -> str:
    """The last step's relation, or 'refused'."""
    try:
        return derive(tmp, places, script, reads).steps[-1].relation
    except DiagError:
        return "refused"


# -- the reference: the compiled modules in float64 ------------------------------------------
def compiled(d):
    torch.manual_seed(0)
    return stringdiag.compile(d, dims=DIMS, dtype=torch.float64)


def n_params(m) -> int:
    return sum(p.numel() for p in m.parameters())  # a shared module's parameters count once


def give_weights(src, dst, correspond=None) -> None:
    """``dst`` takes ``src``'s weights, set by set (``correspond``: dst's key -> src's)."""
    correspond = correspond or {}
    for key, attr in dst.weight_sets.items():
        dst.get_submodule(attr).load_state_dict(src.get_submodule(src.weight_sets[correspond.get(key, key)])
                                                .state_dict())


def assert_same_function(before, after, correspond=None) -> None:
    mb, ma = compiled(before), compiled(after)
    correspond = correspond or {}
    assert {correspond.get(k, k) for k in ma.weight_sets} == set(mb.weight_sets)
    assert n_params(ma) == n_params(mb)
    give_weights(mb, ma, correspond)
    x = torch.randn(DIMS["n"], 3, dtype=torch.float64)
    assert torch.allclose(ma(x), mb(x), rtol=1e-12, atol=1e-12)


def mlp(m, attr: str, x: torch.Tensor) -> torch.Tensor:
    """The default approximator by hand: Linear, ReLU, Linear (the module's own weights)."""
    w1, b1, w2, b2 = (t.detach() for t in m.get_submodule(attr).parameters())
    return torch.relu(x @ w1.T + b1) @ w2.T + b2


# -- the query ---------------------------------------------------------------------------------
def test_every_use_of_a_global_set_is_found_with_where_it_is():
    t = stringdiag.loads(diag(["top", "def", "scan", "stack", "shared"]))["T"]
    found = uses(t, ("learn", False, "R"))
    direct = [u for u in found if not u.nested]
    assert len(direct) == 2 and all(t.record(u.box).op == "R" for u in direct)
    vias = sorted((t.record(u.box).op, u.within[0][1]) for u in found if u.nested)
    assert vias == [("Blk", Holder.STACK), ("Blk", Holder.STACK), ("Cell", Holder.SCAN), ("H", Holder.DEFINITION)]
    assert uses(t, ("learn", False, "E"))[0].within == ()
    assert uses(t, ("learn", False, "nothing")) == []


def test_a_local_set_is_found_inside_the_instance_that_owns_it():
    p = stringdiag.loads(HEAD + "diagram W(x: [n, d]) -> [n, d] {\n  a = G(x)\n  b = repeat 2 G(a)\n"
                         "  c = repeat 2 shared G(b)\n  return c\n}\n")
    w = p["W"]
    ops = {k: [(w.record(u.box).op, u.where()) for u in uses(w, ("learn", True, k))]
           for k in ("G#1/F", "G#2/0/F", "G#2/1/F", "G#3/F", "G#2/F", "G#3/0/F", "G#9/F")}
    assert ops["G#1/F"] == [("G", "inside 'G' (a definition box)")]
    assert ops["G#2/0/F"] == ops["G#2/1/F"] == [("G", "inside 'G' (a repeat stack)")]
    assert ops["G#3/F"] == [("G", "inside 'G' (a repeat stack)")]
    assert ops["G#2/F"] == ops["G#3/0/F"] == ops["G#9/F"] == []  # an unshared copy has a number; a shared one none
    # the paths are those the compiled module names its weights by
    m = stringdiag.compile(w, dims=DIMS)
    assert {("layer", "G#2/0"), ("layer", "G#2/1"), ("layer", "G#3")} <= set(m.weight_sets)


MENU = {  # a statement making y{k} from v, each holding weights differently
    "def": "y{k} = G({v})",
    "nested": "y{k} = GG({v})",
    "stack": "y{k} = repeat 2 G({v})",
    "shared": "y{k} = repeat 2 shared G({v})",
    "cell": "_h{k}, y{k}[t] = scan LC(zeros<d>(), {v}[t])",
    "global": "y{k} = H({v})",
    "copy": "y{k} = {v} + R({v})",
    "defcell": "y{k} = DC({v})",
    "defstack": "y{k} = DS({v})",
}
MORE = """\
diagram GG(x: [n, d]) -> [n, d] {
  return G(G(x))
}
diagram DC(x: [n, d]) -> [n, d] {
  _h, y[t] = scan LC(zeros<d>(), x[t])
  return y
}
diagram DS(x: [n, d]) -> [n, d] {
  y = repeat 2 G(x)
  return G(y)
}
diagram LC(h: [d], x: [d]) -> [d], [d] {
  learn L : [d] -> [d]
  s = h + L(x) + R(x)
  return s, s
}
"""


@settings(max_examples=15, deadline=None)
@given(st.lists(st.sampled_from(sorted(MENU)), min_size=1, max_size=4))
def test_the_query_finds_every_set_the_compiled_module_has(chain):
    """The reference: the weight sets the compiled module registers (lowering names every set
    by its path, inside stacks and cells too). Each is found; sets it lacks are not."""
    lines = [f"  {MENU[what].format(k=k, v=f'y{k - 1}' if k else 'x')}\n" for k, what in enumerate(chain)]
    src = HEAD + MORE + "diagram W(x: [n, d]) -> [n, d] {\n" + "".join(lines) + f"  return y{len(chain) - 1}\n}}\n"
    w = stringdiag.loads(src)["W"]
    have = {k for k in stringdiag.compile(w, dims=DIMS).weight_sets if k[0] == "learn"}
    for key in have:
        assert uses(w, key), key
    made_up = {("learn", True, p) for k in have if k[1] for p in (k[2] + "x", "X#1/" + k[2], k[2].replace("#", "#9"),
                                                                 k[2].replace("/0/", "/2/"))}
    made_up |= {("learn", False, "F"), ("learn", False, "L"), ("learn", True, "F")}
    for key in made_up - have:
        assert not uses(w, key), key


# -- absorb -------------------------------------------------------------------------------------
@pytest.mark.parametrize("place, where", [
    ("top", "used 2 times"),
    ("def", "inside 'H' (a definition box)"),
    ("scan", "inside 'Cell' (a scanned cell)"),
    ("stack", "inside 'Blk' (a repeat stack)"),
    ("shared", "inside 'Blk' (a repeat stack)"),
])
def test_absorb_refuses_to_split_the_reader_s_weights(tmp_path, place, where):
    with pytest.raises(DiagError, match=re.escape(where)) as e:
        derive(tmp_path, [place], "absorb enc into R as S\n")
    assert "split" in e.value.message and e.value.pos is not None and e.value.pos.line == 2


def test_absorb_verdict_does_not_depend_on_unfolding_first(tmp_path):
    assert verdict(tmp_path, ["def"], "absorb enc into R as S\n") == "refused"
    assert verdict(tmp_path, ["def"], "unfold H\nabsorb enc into R as S\n") == "refused"
    assert verdict(tmp_path, ["mapdef"], "absorb enc into R as S\n") == "⇔"
    assert verdict(tmp_path, ["mapdef"], "unfold HE\nabsorb enc into R as S\n") == "⇔"


def test_absorb_into_a_declared_learner_used_inside_a_definition_would_tie(tmp_path):
    (tmp_path / "w.diag").write_text(diag([]) + "learn S : [d] -> [d]\ndiagram HS(x: [n, d]) -> [n, d] {\n"
                                     "  return S(x)\n}\ndiagram T2(x: [n, d]) -> [n, d] {\n  enc = E(x)\n"
                                     "  return R(enc) + HS(x)\n}\n")
    (tmp_path / "x.deriv").write_text("start w.diag:T2\nabsorb enc into R as S\n")
    with pytest.raises(DiagError, match="would tie two weight sets"):
        load_derivation(tmp_path / "x.deriv")


def test_absorb_accepted_keeps_the_map_s_weights_shared(tmp_path):
    """``E`` is used again inside ``HE``: after the step, what is not the new learner is the
    function it was, with ``E``'s weights still one set (by hand, in float64)."""
    res = derive(tmp_path, ["mapdef"], "absorb enc into R as S\n")
    before, after = res.steps[0].diagram, res.result
    mb, ma = compiled(before), compiled(after)
    assert set(ma.weight_sets) == set(mb.weight_sets) - {("learn", False, "R")} | {("learn", True, "S")}
    give_weights(mb, ma, {("learn", True, "S"): ("learn", False, "R")})  # S: any weights of its type
    x = torch.randn(DIMS["n"], 3, dtype=torch.float64)
    e, r, s = (ma.weight_sets.get(k) or mb.weight_sets[k] for k in
               (("learn", False, "E"), ("learn", False, "R"), ("learn", True, "S")))
    rest_before = mb(x) - mlp(mb, r, mlp(mb, e, x))
    rest_after = ma(x) - mlp(ma, s, x)
    assert torch.allclose(rest_before, mlp(mb, e, x), rtol=1e-12, atol=1e-12)  # HE(x) = E(x): one set
    assert torch.allclose(rest_after, rest_before, rtol=1e-12, atol=1e-12)


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(places=st.sets(st.sampled_from(sorted(PLACES))), unfold=st.booleans())
def test_absorb_is_refused_exactly_when_the_reader_is_used_again_anywhere(tmp_path, places, unfold):
    order = sorted(places)
    script = "absorb enc into R as S\n"
    if unfold and {"def", "mapdef"} & places:
        script = "".join(f"unfold {n}\n" for p, n in (("def", "H"), ("mapdef", "HE")) if p in places) + script
    want = "refused" if OF_R & places else "⇔"
    assert verdict(tmp_path, order, script) == want


def test_derive_refuses_on_the_command_line_with_a_positioned_error(tmp_path, capsys):
    for place in ("def", "scan", "stack"):
        (tmp_path / "w.diag").write_text(diag([place]))
        (tmp_path / "x.deriv").write_text("start w.diag:T\nabsorb enc into R as S\n")
        rc = main(["derive", str(tmp_path / "x.deriv")])
        err = capsys.readouterr().err
        assert rc == 1, err
        assert "Traceback" not in err and "internal error" not in err
        first = err.splitlines()[0]
        assert LINE.match(first) and ":2:8: error: " in first and "split its weights in two" in first, first


# -- copy ------------------------------------------------------------------------------------------
@pytest.mark.parametrize("places", [["top"], ["def"], ["scan"], ["stack"], ["shared"], ["def", "scan", "stack"]])
def test_copy_keeps_one_set_wherever_else_it_is_used(tmp_path, places):
    res = derive(tmp_path, places, "copy r\n", reads=2)
    assert res.steps[1].relation == "≡"
    assert_same_function(res.steps[0].diagram, res.result)
    again = derive(tmp_path, places, "unfold H\ncopy r\n", reads=2) if "def" in places else res
    assert again.steps[-1].relation == "≡"
    assert_same_function(again.steps[0].diagram, again.result)


# -- fold --------------------------------------------------------------------------------------------
@pytest.mark.parametrize("places", [["top"], ["def"], ["scan"], ["stack"], ["shared"]])
def test_fold_of_a_global_set_keeps_it_one_set(tmp_path, places):
    """``H`` is ``R`` applied: folding ``r`` into a use of ``H`` leaves ``R`` one set (its
    other uses, at any depth, are the same set), with ``unfold`` first or not."""
    for script in ("fold H at r\n", "unfold H\nfold H at r\n") if "def" in places else ("fold H at r\n",):
        res = derive(tmp_path, places, script)
        assert res.steps[-1].relation == "≡"
        assert_same_function(res.steps[0].diagram, res.result)  # H has no weights of its own: none renamed


def _fold_setting(extra_instance: str | None):
    """``W`` = two uses of ``G`` (local weights), opened; with ``extra_instance``, a box that
    computes with that instance's weights stays closed beside them (what no step of a
    derivation makes, but a fold must not miss)."""
    p = stringdiag.loads(HEAD + "diagram W(x: [n, d]) -> [n, d] {\n  a = G(x)\n  b = G(a)\n  return b\n}\n")
    cur = p["W"].expand()
    if extra_instance is not None:
        g = p["G"]
        (u,) = cur.inputs
        cur.emit(Box(Kind.DIAGRAM, "G", ref=g, weights=Instance(extra_instance)), [(u, (0, 1))], g.output_types)
    return p, cur


@pytest.mark.parametrize("extra, refused", [(None, False), ("G#2", True), ("G#7", False)])
def test_fold_refuses_a_local_set_used_inside_a_box_outside_the_fold(extra, refused):
    p, cur = _fold_setting(extra)
    defn = p.lookup_def("G")
    body = defn.diagram()
    rule = Rule("fold G", EQUATION, body, _call_of(defn, body), ())
    (match,) = [m for m in find_matches(cur, rule, ties=True) if "b" in m.where]
    if refused:
        with pytest.raises(DiagError, match=r"also used outside the fold \(by 'G', inside 'G' \(a definition box\)\)"):
            steps.fold(cur, body, _call_of(defn, body), [match])
        return
    out = steps.fold(cur, body, _call_of(defn, body), [match])
    assert out.relation == "≡"
    assert_same_function(cur, out.diagram, out.correspond)


# -- rules that tie weights -----------------------------------------------------------------------
TIE_EXTRA = {  # a third use of G beside a and b, kept closed: the statement, and its instance
    "none": (None, None),
    "def of the kept set": ("c = G(x)", "G#1"),
    "def of the tied set": ("c = G(x)", "G#2"),
    "another def": ("c = G(x)", "G#9"),
    "shared stack of the tied set": ("c = repeat 2 shared G(x)", "G#2"),
    "unshared stack": ("c = repeat 2 G(x)", "G#2"),
}
TIE_REFUSED = {"shared stack of the tied set"}  # a loop holding a tied set: no step opens it


def _tie_setting(extra: str):
    """Two opened uses of ``G`` read by ``a`` and ``b``: ``copy_nat`` reversed makes them one
    box, tying ``G#1/F`` and ``G#2/F``. ``extra`` (``TIE_EXTRA``) adds a third use ``c`` kept
    closed, computing with the weights of the instance named: what no step of a derivation
    makes (an instance is opened whole by ``unfold``), but a tie must not miss."""
    stmt, inst = TIE_EXTRA[extra]
    body = "  a = G(x)\n  b = G(x)\n" + (f"  {stmt}\n  return a + b + c\n" if stmt else "  return a + b\n")
    p = stringdiag.loads(HEAD + "diagram W(x: [n, d]) -> [n, d] {\n" + body + "}\n")
    cur = p["W"].expand(keep=lambda node: node.instance == "G#3")  # c: the third use (a stack stays a box)
    for box in cur.boxes():
        if cur.record(box).op == "G":
            cur.update(box, weights=Instance(inst))
    return cur


def _tie(cur, unfold_first: bool):
    """``copy_nat`` reversed at ``a, b`` (after ``unfold G`` where ``unfold_first`` and a box
    ``G`` that is not a loop is there to open)."""
    if unfold_first and any(cur.record(b).op == "G" and cur.record(b).loop is None for b in cur.boxes()):
        cur = steps.unfold(cur, "G", all_definitions(cur)).diagram
    rule = library()["copy_nat"]
    match = next(m for m in find_matches(cur, rule, reverse=True, ties=True)
                 if {cur.wire_label(w) for b in m.boxes.values() for w in cur.box_outputs(b)} == {"a", "b"})
    assert match.ties
    return cur, steps.apply_rule(cur, rule, match)


def assert_tie_is_a_reduction(before, after) -> None:
    """With ``G#1/F`` and ``G#2/F`` given one value, ``before`` computes what ``after`` does
    (the compiled modules in float64, one set fewer after)."""
    mb, ma = compiled(before), compiled(after)
    assert set(ma.weight_sets) == set(mb.weight_sets) - {("learn", True, "G#2/F")}
    one, two = (mb.weight_sets[("learn", True, k)] for k in ("G#1/F", "G#2/F"))
    mb.get_submodule(two).load_state_dict(mb.get_submodule(one).state_dict())
    give_weights(mb, ma)
    x = torch.randn(DIMS["n"], 3, dtype=torch.float64)
    assert torch.allclose(ma(x), mb(x), rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("extra", sorted(TIE_EXTRA))
@pytest.mark.parametrize("unfold_first", [False, True])
def test_a_rule_tie_reaches_every_use_of_the_sets_it_ties(extra, unfold_first):
    """The tie renames ``G#2/F`` to ``G#1/F`` at the top level and inside the definition boxes
    (opened, as ``unfold`` opens them); a loop holding ``G#2/F`` refuses it."""
    cur = _tie_setting(extra)
    if extra in TIE_REFUSED:
        with pytest.raises(DiagError, match=r"leave the uses of 'G#2/F' inside 'G' \(a repeat stack\) apart"):
            _tie(cur, unfold_first)
        return
    before, out = _tie(cur, unfold_first)
    assert out.relation == "⇒"
    assert all(weight_key(out.diagram.record(b)) != ("learn", True, "G#2/F") for b in out.diagram.boxes())
    assert_tie_is_a_reduction(before, out.diagram)
    if extra == "def of the tied set" and not unfold_first:
        assert "opens G" in out.note


@pytest.mark.parametrize("extra", sorted(TIE_EXTRA))
def test_a_rule_tie_gives_one_verdict_and_one_result_with_unfold_first_or_not(extra):
    """The same tie with and without ``unfold G`` first: one verdict; when accepted,
    isomorphic results whose compiled modules are equal in float64 (same sets, same function
    with the same weights)."""
    got = []
    for first in (False, True):
        try:
            got.append(_tie(_tie_setting(extra), first)[1].diagram)
        except DiagError:
            got.append(None)
    assert (got[0] is None) == (got[1] is None) == (extra in TIE_REFUSED)
    if got[0] is None:
        return
    direct, unfolded = got
    # a box holding a set the tie renames is opened either way; one holding none of them only
    # by the unfold (≡: the same once expanded)
    assert direct.isomorphic(unfolded) == (extra not in ("def of the kept set", "another def"))
    assert direct.expand().isomorphic(unfolded.expand())
    assert_same_function(direct, unfolded)


def test_a_tie_inside_a_definition_box_is_traced_for_its_picture():
    """The boxes the tie did not touch keep their place: each is traced to itself or to the box
    it became, with its kind and name."""
    cur = _tie_setting("def of the tied set")
    _, out = _tie(cur, False)
    assert out.kept is not None and out.kept
    for b, k in out.kept.items():
        assert (cur.record(b).kind, cur.record(b).op) == (out.diagram.record(k).kind, out.diagram.record(k).op)


# -- specialise (a reduction: it reaches every use of the set, or is refused) ----------------------
COMP = "diagram Comp(v: [d]) -> [d] {\n  learn W : [d] -> [d]\n  return relu(W(v))\n}\n"


def by_hand_relu(m, places, x: torch.Tensor) -> torch.Tensor:
    """``T`` with every ``R`` made ``relu``, written out (``E`` read off the module's weights)."""
    out = torch.relu(mlp(m, m.weight_sets[("learn", False, "E")], x))
    for p in places:
        if p in ("top", "def"):
            out = out + torch.relu(x)
        elif p == "scan":  # s_t = s_{t-1} + relu(x_t), from zeros: a running sum
            out = out + torch.cumsum(torch.relu(x), dim=0)
        else:  # two copies of x + relu(x), shared or not: relu has no weights
            z = x + torch.relu(x)
            out = out + z + torch.relu(z)
    return out


@pytest.mark.parametrize("places", [["top"], ["def"], ["scan"], ["stack"], ["shared"],
                                    ["top", "def", "scan", "stack", "shared"]])
def test_specialise_reaches_every_use_of_the_set(tmp_path, places):
    """``R := relu`` everywhere: in a definition box (opened, as ``unfold`` would), a scanned
    cell and a stack (their bodies specialised); the function is relu at every use."""
    res = derive(tmp_path, places, "specialise R(v) := { return relu(v) }\n")
    assert res.steps[-1].relation == "⇒"
    m = compiled(res.result)
    assert ("learn", False, "R") not in m.weight_sets
    x = torch.randn(DIMS["n"], 3, dtype=torch.float64)
    assert torch.allclose(m(x), by_hand_relu(m, places, x), rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("composite", ["R(v) := { return relu(v) }", "R := Comp"])
def test_specialise_verdict_and_result_do_not_depend_on_unfolding_first(tmp_path, composite):
    (tmp_path / "w.diag").write_text(diag(["top", "def"]) + COMP)
    results = []
    for script in ("", "unfold H\n"):
        (tmp_path / "x.deriv").write_text(f"start w.diag:T\n{script}specialise {composite}\n")
        res = load_derivation(tmp_path / "x.deriv")
        assert res.steps[-1].relation == "⇒"
        results.append(res.result)
    assert results[0].expand().isomorphic(results[1].expand())
    sets = [set(compiled(r).weight_sets) for r in results]
    assert sets[0] == sets[1]
    if composite == "R := Comp":  # the composite's weights: one set, as R's were
        assert sets[0] == {("learn", False, "E"), ("learn", True, "R/W")}


@pytest.mark.parametrize("place, where", [
    ("scan", "inside 'Cell' (a scanned cell)"),
    ("stack", "inside 'Blk' (a repeat stack)"),
    ("shared", "inside 'Blk' (a repeat stack)"),
])
def test_specialise_refuses_a_composite_whose_weights_a_loop_would_split(tmp_path, place, where):
    (tmp_path / "w.diag").write_text(diag([place]) + COMP)
    (tmp_path / "x.deriv").write_text("start w.diag:T\nspecialise R := Comp\n")
    with pytest.raises(DiagError, match=re.escape(f"'R' is one function here and {where}")) as e:
        load_derivation(tmp_path / "x.deriv")
    assert e.value.pos is not None and e.value.pos.line == 2


def test_specialise_inside_one_cell_only_is_a_reduction(tmp_path):
    """Where every use is inside one loop, its weights are one set there: accepted."""
    (tmp_path / "w.diag").write_text(HEAD + COMP + "diagram U(x: [n, d]) -> [n, d] {\n"
                                     "  _h, y[t] = scan Cell(zeros<d>(), x[t])\n  return y\n}\n")
    (tmp_path / "x.deriv").write_text("start w.diag:U\nspecialise R := Comp\n")
    res = load_derivation(tmp_path / "x.deriv")
    assert res.steps[-1].relation == "⇒" and "Cell" in res.steps[-1].note


def test_specialise_leaves_another_definition_s_local_learner_of_the_same_name(tmp_path):
    """``G`` declares its own ``F`` (a set per instance): specialising the global ``F`` does
    not open ``G``, whose ``F`` is another function."""
    (tmp_path / "w.diag").write_text(HEAD + "learn F : [d] -> [d]\ndiagram V(x: [n, d]) -> [n, d] {\n"
                                     "  return F(x) + G(x)\n}\n")
    (tmp_path / "x.deriv").write_text("start w.diag:V\nspecialise F(v) := { return relu(v) }\n")
    res = load_derivation(tmp_path / "x.deriv")
    assert res.steps[-1].relation == "⇒" and "opens" not in res.steps[-1].note
    assert set(compiled(res.result).weight_sets) == {("learn", True, "G#1/F")}


# -- a reduction rule fills a hole: every use of its set, or none ----------------------------------
DROP = """\
rule drop<m>(x: [m]) -> [m] given f : [m] -> [m] {
  return f(x)
} => {
  return relu(x)
}
"""


def derive_rule(tmp: Path, places, script: str):
    """``script`` after ``start``, with the rule ``drop`` in use."""
    (tmp / "drop.rules").write_text(DROP)
    (tmp / "w.diag").write_text(diag(places))
    (tmp / "x.deriv").write_text('use "drop.rules"\nstart w.diag:T\n' + script)
    return load_derivation(tmp / "x.deriv")


@pytest.mark.parametrize("place, where", [
    ("top", "by 'R'"),
    ("def", "inside 'H' (a definition box)"),
    ("scan", "inside 'Cell' (a scanned cell)"),
    ("stack", "inside 'Blk' (a repeat stack)"),
    ("shared", "inside 'Blk' (a repeat stack)"),
])
def test_a_reduction_rule_refuses_to_fill_one_use_of_a_shared_set(tmp_path, place, where):
    with pytest.raises(DiagError, match=re.escape(f"its weights (R) are also used {where}, outside the match")):
        derive_rule(tmp_path, [place], "apply drop at r\n")
    if place == "def":  # unfold first: the same verdict
        with pytest.raises(DiagError, match=re.escape("its weights (R) are also used by 'R', outside the match")):
            derive_rule(tmp_path, [place], "unfold H\napply drop at r\n")
    with pytest.raises(DiagError, match="outside the match"):  # every match: each leaves the other uses
        derive_rule(tmp_path, [place, "top"], "apply drop everywhere\n")


def test_a_reduction_rule_filling_the_only_use_is_a_reduction(tmp_path):
    res = derive_rule(tmp_path, ["mapdef"], "apply drop at r\n")
    assert res.steps[-1].relation == "⇒"
    m = compiled(res.result)
    assert ("learn", False, "R") not in m.weight_sets
    x = torch.randn(DIMS["n"], 3, dtype=torch.float64)
    e = mlp(m, m.weight_sets[("learn", False, "E")], x)
    assert torch.allclose(m(x), torch.relu(e) + e, rtol=1e-12, atol=1e-12)  # HE(x) = E(x): one set


STEPS = {  # the step, and whether a second use of R anywhere must refuse it
    "absorb": ("absorb enc into R as S\n", True),
    "fill": ("apply drop at r\n", True),
    "specialise": ("specialise R(v) := { return relu(v) }\n", False),
}


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(step=st.sampled_from(sorted(STEPS)), places=st.sets(st.sampled_from(sorted(PLACES))))
def test_no_verdict_depends_on_unfolding_first(tmp_path, step, places):
    """Each step, with the definition boxes opened first or not: one verdict, the expected one."""
    script, refused_by_another_use = STEPS[step]
    opened = "".join(f"unfold {n}\n" for p, n in (("def", "H"), ("mapdef", "HE")) if p in places)
    verdicts = set()
    for first in ("", opened):
        try:
            verdicts.add(derive_rule(tmp_path, sorted(places), first + script).steps[-1].relation)
        except DiagError:
            verdicts.add("refused")
    want = "refused" if refused_by_another_use and OF_R & places else {"absorb": "⇔"}.get(step, "⇒")
    assert verdicts == {want}
