"""Each condition of the matcher (``rewrite/conditions.py``, after Chyp's) shown rejecting a
match: a small target and rule where that condition, and only it, says no. Where the other
conditions would let the match through, the test lifts the condition (monkeypatched to
always hold) and the match appears; otherwise it names the condition that rejects."""
from __future__ import annotations


import stringdiag
from stringdiag.graph.types import Dim
from stringdiag.rewrite import conditions as C
from stringdiag.rewrite import context, search
from stringdiag.rewrite.match import Index, find_matches, pattern
from stringdiag.rewrite.rule import library, loads_rules
from stringdiag.rewrite.unify import Unifier, bind_function, identity
from stringdiag.syntax.records import replace

HEAD = """dim s : seq
dim d, e : fixed
learn F, G : [d] -> [d]
"""


def program(src: str):
    return stringdiag.loads(HEAD + src, "target.diag")


def rule(src: str):
    (r,) = loads_rules(HEAD + src, "test.rules")
    return r


def box_of(d, op: str) -> int:
    (b,) = [b for b in d.boxes() if d.record(b).op == op]
    return b


def rejecting(r, target, pop: str, top: str) -> set[str]:
    """The conditions on a candidate box that reject the target box ``top`` for the pattern
    box ``pop``: the reason a match there is not found."""
    p, ix = pattern(r), Index(target)
    pb, tb = box_of(p.d, pop), box_of(target, top)
    pn, tn, pv, tv = p.node[pb], target.record(tb), p.views[pb], ix.view(tb)
    uni = Unifier(p.vars)
    checks = {
        "same_shape": C.same_shape(pv, tv), "same_scan": C.same_scan(pv, tv), "same_box": C.same_box(pn, tn),
        "same_definition": C.same_definition(pn, tn), "same_locality": C.same_locality(pn, tn),
        "same_constant": C.same_constant(pn, tn, uni.copy()), "same_generics": C.same_generics(pn, tn, uni.copy()),
        "same_local_types": pb not in p.local or C.same_local_types(p.local[pb], target, tb, uni.copy()),
    }
    return {name for name, ok in checks.items() if not ok}


def lifted(monkeypatch, module, name: str, target, r, lift=lambda *a: True, **kw) -> list:
    """No match with the condition; the matches found with it lifted (``lift`` instead)."""
    assert find_matches(target, r, **kw) == []
    monkeypatch.setattr(module, name, lift)
    return find_matches(target, r, **kw)


SCANNED = """learn H : [d], [d] -> [d], [d]
diagram Scanned(h: [d], x: [s, d]) -> [d], [s, d] {
  hh, y[i] = scan H(h, x[i])
  return hh, y
}"""


# -- a candidate box -----------------------------------------------------------------------------
def test_same_box_a_process_is_its_name():
    """(The index files boxes by name too, so the search never even tries G for F.)"""
    t = program("diagram G1(x: [s, d]) -> [s, d] { return G(x) }")["G1"]
    r = rule("rule once(x: [d]) -> [d] { return F(x) } == { return F(x) }")
    assert find_matches(t, r) == []
    assert rejecting(r, t, "F", "G") == {"same_box"}


def test_same_box_a_box_variable_is_a_process():
    t = program("diagram T(x: [s, d]) -> [d, s] {\n  y[j, i] = x[i, j]\n  return y\n}")["T"]
    r = rule("rule any<n, m>(x: [n, m]) -> [m, n] given f : [n, m] -> [m, n] { return f(x) } == "
             "{ return f(x) }")
    p, ix = pattern(r), Index(t)
    (pb,), (tb,) = p.boxes, list(t.boxes())
    assert C.same_shape(p.views[pb], ix.view(tb)) and not C.same_box(p.node[pb], t.record(tb))
    assert find_matches(t, r) == []


def test_same_scan_a_scan_is_not_its_simd_box():
    p = program(SCANNED)["Scanned"]
    v = Index(p).view(box_of(p, "H"))
    assert v.scan and C.same_scan(v, v)
    assert not C.same_scan(v, replace(v, scan=False))


def test_same_shape_summed_indices_count():
    r = rule("rule commute<n>(a: [n], b: [n]) -> [] { return sum_j a[j] * b[j] } == "
             "{ return sum_j b[j] * a[j] }")
    t = program("diagram Two(a: [s, d], b: [s, d]) -> [] { return sum_i sum_f a[i, f] * b[i, f] }")["Two"]
    ms = find_matches(t, r)
    assert all(len(m.boxes) == 1 for m in ms)
    p, ix = pattern(r), Index(t)
    (pb,) = p.boxes
    two = [b for b in t.boxes() if len(t.record(b).summed) == 2]
    assert two and all(not C.same_shape(p.views[pb], ix.view(b)) for b in two)
    assert not any(set(m.targets) & set(two) for m in ms)


def test_same_definition_one_name_two_definitions(monkeypatch):
    t = program("""diagram Sq(x: [d]) -> [d] { return x * x }
diagram Use(x: [s, d]) -> [s, d] { return Sq(x) }""")["Use"]
    r = rule("diagram Sq(x: [d]) -> [d] { return x + x }\n"
             "rule sq(x: [d]) -> [d] { return Sq(x) } == { return Sq(x) }")
    assert rejecting(r, t, "Sq", "Sq") == {"same_definition"}
    assert len(lifted(monkeypatch, search, "same_definition", t, r)) == 1


def test_same_locality_a_local_learnable_is_not_the_global_one(monkeypatch):
    t = program("""diagram Head(x: [s, d]) -> [s, d] {
  learn F : [d] -> [d]
  return F(x)
}""")["Head"]
    r = rule("rule f(x: [d]) -> [d] { return F(x) } == { return F(x) }")
    assert rejecting(r, t, "F", "F") == {"same_locality"}
    assert len(lifted(monkeypatch, search, "same_locality", t, r)) == 1


def test_same_constant(monkeypatch):
    t = program("diagram Triple(x: [s, d]) -> [s, d] { return x * 3 }")["Triple"]
    r = rule("rule double(x: [d]) -> [d] { return x * 2 } == { return x + x }")
    assert rejecting(r, t, "2", "3") == {"same_constant"}
    assert len(lifted(monkeypatch, search, "same_constant", t, r)) == 1


def test_same_generics_one_function_per_size(monkeypatch):
    t = program("""diagram Scale<n>(x: [d]) -> [d] { return x * sqrt(n) }
diagram Use(x: [s, d]) -> [s, d] { return Scale<e>(x) }""")["Use"]
    r = rule("diagram Scale<n>(x: [d]) -> [d] { return x * sqrt(n) }\n"
             "rule sc(x: [d]) -> [d] { return Scale<d>(x) } == { return Scale<d>(x) }")
    assert rejecting(r, t, "Scale", "Scale") == {"same_generics"}
    assert len(lifted(monkeypatch, search, "same_generics", t, r)) == 1


def test_same_local_types_a_declared_dimension_is_a_constant():
    t = program("learn K : [e] -> [e]\ndiagram Wide(x: [s, e]) -> [s, e] { return K(x) }")["Wide"]
    r = rule("learn K : [d] -> [d]\nrule k(x: [d]) -> [d] { return K(x) } == { return K(x) }")
    assert rejecting(r, t, "K", "K") == {"same_local_types"}
    assert find_matches(t, r) == []


def test_one_name_one_function(monkeypatch):
    t = program("diagram FG(x: [s, d]) -> [s, d] { return G(F(x)) }")["FG"]
    r = rule("rule twice_any<n>(x: [n]) -> [n] given f : [n] -> [n] { return f(f(x)) } == { return f(f(x)) }")
    f, g = (identity(t.record(box_of(t, op)), with_generics=True) for op in "FG")
    assert bind_function(bind_function({}, "f", f, 1), "f", g, 2) is None
    rebind = lambda idents, name, ident, tb: {**idents, name: (ident, tb)}  # noqa: E731
    assert len(lifted(monkeypatch, search, "bind_function", t, r, rebind, ties=True)) == 1  # F, G: two weight sets


# -- a candidate box, its labels placed ------------------------------------------------------------
def test_every_label_placed():
    assert C.every_label_placed({"i": "a", "j": "b"}, {"i": Dim.var("n"), "j": Dim.var("n")})
    assert not C.every_label_placed({"i": "a"}, {"i": Dim.var("n"), "j": Dim.var("n")})


def test_scan_kept():
    p = program(SCANNED)["Scanned"]
    v = Index(p).view(box_of(p, "H"))
    (lab, dim), = v.labels
    assert C.scan_kept(v, v, {lab: lab})
    wider = replace(v, labels=v.labels + (("other", dim),))
    assert not C.scan_kept(v, wider, {lab: lab})


def test_context_links_an_extra_axis_must_be_a_context_index():
    """The target reads ``a`` along ``i`` too, which is the rule's ``i``, not a context index:
    the rule's ``a`` is one vector for every ``i``, the target's is not."""
    t = program("diagram Rows(a: [s, d], b: [s, d]) -> [s] {\n  y[i] = sum_j a[i, j] * b[i, j]\n  return y\n}")["Rows"]
    r = rule("rule r<n, m>(a: [m], b: [n, m]) -> [n] {\n  y[i] = sum_j a[j] * b[i, j]\n  return y\n} == "
             "{\n  y[i] = sum_j b[i, j] * a[j]\n  return y\n}")
    assert find_matches(t, r) == []
    p, ix = pattern(r), Index(t)
    (pb,), (tb,) = p.boxes, list(t.boxes())
    pl = search.Placement(p, pb, ix, tb)
    placed = list(pl.ports(0, {}, frozenset(), Unifier(p.vars), {}))
    assert placed and all(C.every_label_placed(lam, pl.pdim) for lam, _, _ in placed)
    ctx = ()  # every label of the target box is the image of one of the rule's
    assert all(C.context_links(pl.pv, pl.tv, tb, wires, ctx) is None for _, _, wires in placed)
    t2 = program("diagram Col(a: [d], b: [s, d]) -> [s] {\n  y[i] = sum_j a[j] * b[i, j]\n  return y\n}")["Col"]
    assert len(find_matches(t2, r)) == 1


# -- SIMD context ---------------------------------------------------------------------------------
def test_iterates_once_a_gram_matrix_is_no_product_of_two_vectors(monkeypatch):
    t = program("""diagram Gram(x: [s, d]) -> [s, s] {
  g[i, k] = sum_f x[i, f] * x[k, f]
  return g
}""")["Gram"]
    r = rule("rule commute<n>(a: [n], b: [n]) -> [] { return sum_j a[j] * b[j] } == "
             "{ return sum_j b[j] * a[j] }")
    assert len(lifted(monkeypatch, context, "iterates_once", t, r)) >= 1


# -- a whole match --------------------------------------------------------------------------------
CONVEX = """diagram Through(x: [d]) -> [d], [d] {
  y = tanh(x)
  w = sigmoid(relu(y))
  return y, w
}
diagram Fed(x: [d]) -> [d], [d] {
  y = tanh(x)
  w = sigmoid(y)
  return y, w
}
"""
TWO = "rule two(x: [d], z: [d]) -> [d], [d] { return tanh(x), sigmoid(z) } == { return tanh(x), sigmoid(z) }"


def test_fed_from_outside_an_input_made_by_the_match(monkeypatch):
    t = program(CONVEX)["Fed"]
    assert len(lifted(monkeypatch, C, "fed_from_outside", t, rule(TWO))) == 1


def test_convex_no_path_leaves_and_reenters(monkeypatch):
    t = program(CONVEX)["Through"]
    assert len(lifted(monkeypatch, C, "convex", t, rule(TWO))) == 1


def test_glued_an_interior_wire_read_outside(monkeypatch):
    t = program("""dim k : fixed
diagram NumAndScores(q: [s, k], kk: [s, k], v: [s, d]) -> [s, d], [s, s] {
  a[i, j] = sum_f q[i, f] * kk[j, f]
  y[i]    = sum_j a[i, j] * v[j]
  return y, a
}""")["NumAndScores"]
    r = library()["assoc"]  # (A B) C = A (B C), rules/contraction.rules
    assert len(lifted(monkeypatch, C, "glued", t, r)) == 1


def test_settle_sums_of_dimensions_add_up():
    n, m = Dim.var("n"), Dim.var("m")
    u = Unifier(frozenset({"n", "m"}))
    assert u.unify(n + m, Dim.var("d"))  # undecided until n and m are bound
    assert u.unify(n, Dim.var("d")) and u.unify(m, Dim.var("d"))
    assert not u.settle()  # d + d is not d


def test_weight_ties_a_reduction_found_only_when_asked():
    p = program("""diagram Head(x: [s, d]) -> [s, d] {
  learn W : [d] -> [d]
  return W(x)
}
diagram Two(x: [s, d]) -> [s, d] { return Head(Head(x)) }""")
    flat = p["Two"].expand()
    r = rule("rule twice_any<n>(x: [n]) -> [n] given f : [n] -> [n] { return f(f(x)) } == { return f(f(x)) }")
    assert find_matches(flat, r) == []
    (m,) = find_matches(flat, r, ties=True)
    assert m.ties == C.weight_ties(pattern(r), flat, m.boxes) and len(m.ties[0]) == 2
