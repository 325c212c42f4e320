"""The rewrite engine: the oracle, rules as data, matching, and double-pushout rewriting.

Every equation in rules/*.rules is checked numerically (both sides on random inputs, shared
weights), and applied both ways inside a SIMD context, the result checked against the
target by the same oracle.
"""
from __future__ import annotations

import sys
from pathlib import Path

import pytest

import stringdiag
from stringdiag import DiagError
from stringdiag.analysis.complexity import analyse
from stringdiag.graph.box import Box, Kind
from stringdiag.graph.diagram import Diagram
from stringdiag.elaborate.loader import prelude
from stringdiag.graph.types import Dim
from stringdiag.derive.steps import copy_box
from stringdiag.rewrite import find_matches, load_rules, loads_rules, rewrite, rewrite_all, select
from stringdiag.rewrite import match as M
from stringdiag.rewrite.iterated import iterated
from stringdiag.rewrite.rule import RULES_DIR
from stringdiag.rewrite.unify import Unifier
from stringdiag.verify.oracle import dim_names
from stringdiag.verify import equal

ROOT = Path(__file__).resolve().parents[1]
RULES = load_rules(RULES_DIR)
EQUATIONS = [r for r in RULES if r.kind == "equation"]
LIB = {r.name: r for r in RULES}

HEAD = """\
dim s : seq
dim d, k : fixed
learn Q, K : [d] -> [k]
learn V    : [d] -> [d]
"""

KERNEL = HEAD + """
# the O(s^2) form of linear attention: sim(q, k) = phi(q) . phi(k) in eq. (1) of Khatri et al. (2024)
diagram KernelAttention(x: [s, d]) -> [s, d] {
  pq = elu1(Q(x))
  pk = elu1(K(x))
  v  = V(x)
  a[i, j]  = sum_f pq[i, f] * pk[j, f]
  one      = ones<s>()
  z[i]     = sum_j a[i, j] * one[j]
  an[i, j] = a[i, j] / z[i]
  y[i]     = sum_j an[i, j] * v[j]
  return y
}

# the numerator alone: y = (phi(Q) phi(K)^T) V
diagram Num(x: [s, d]) -> [s, d] {
  pq = elu1(Q(x))
  pk = elu1(K(x))
  v  = V(x)
  a[i, j] = sum_f pq[i, f] * pk[j, f]
  y[i]    = sum_j a[i, j] * v[j]
  return y
}

# the same with the score matrix also returned: its wire is read outside the match
diagram NumAndScores(x: [s, d]) -> [s, d], [s, s] {
  pq = elu1(Q(x))
  pk = elu1(K(x))
  v  = V(x)
  a[i, j] = sum_f pq[i, f] * pk[j, f]
  y[i]    = sum_j a[i, j] * v[j]
  return y, a
}

# transposed spellings: the keys arrive as [k, s], the product is written v-first
diagram NumT(x: [s, d]) -> [s, d] {
  pq = elu1(Q(x))
  pkt[f, j] = elu1(K(x))[j, f]
  v  = V(x)
  a[i, j] = sum_f pq[i, f] * pkt[f, j]
  y[i]    = sum_j a[i, j] * v[j]
  return y
}

# multi-head: the head index h is a SIMD box around the whole head
dim h : fixed
learn QH, KH : [d] -> [h, k]
diagram MultiHead(x: [s, d]) -> [s, h, d] {
  q[i] = QH(x[i])
  kk[j] = KH(x[j])
  v = V(x)
  a[hh, i, j] = sum_f elu1(q)[i, hh, f] * elu1(kk)[j, hh, f]
  y[i, hh] = sum_j a[hh, i, j] * v[j]
  return y
}
"""


@pytest.fixture(scope="module")
def kernel():
    return stringdiag.loads(KERNEL, "kernel.diag")


def inst(rule) -> dict:
    """Box variables stand for any process: test them as random universal approximators."""
    return {v: "learn" for v in rule.vars}


# -- a target built for any rule side: the side inside a SIMD box, between other boxes ----------
def lifted(side: Diagram, ctx=(("h", "H"),), copied=(), surround: bool = True,
           keep: frozenset[str] = frozenset()) -> Diagram:
    """``side`` used as a definition inside SIMD boxes over ``ctx`` (the inputs numbered in
    ``copied`` are copied into every iteration instead), with tanh before and after, its
    dimension variables renamed, expanded to primitives (except ``keep``)."""
    sub = {v: Dim.var(v.upper() + "_") for v in side.generics}
    ctx = tuple((lab, Dim.var(n)) for lab, n in ctx)
    labels = tuple(lab for lab, _ in ctx)
    out = Diagram(name="Lifted", program=side.program)
    tanh = prelude().boxes["tanh"]

    def squash(w):
        labs = tuple((f"a{q}", x) for q, x in enumerate(out.wire_type(w)))
        return out.emit(Box(Kind.FIXED, "tanh", labs, ref=tanh), [(w, tuple(lab for lab, _ in labs))], [()])[1][0]

    args = []
    for k, (t, name) in enumerate(zip(side.input_types, side.input_names)):
        t = tuple(x.substitute(sub) for x in t)
        lead = () if k in copied else ctx
        w = out.add_wire(tuple(x for _, x in lead) + t, name=name)
        out.inputs.append(w)
        out.input_names.append(name)
        args.append((squash(w) if surround else w, (() if k in copied else labels) + tuple(range(len(t)))))
    outs = [tuple(x.substitute(sub) for x in t) for t in side.output_types]
    _, ws = out.emit(Box(Kind.DIAGRAM, "Side", ctx, generics=tuple((v, sub[v]) for v in side.generics), ref=side),
                     args, outs)
    out.outputs += [squash(w) if surround else w for w in ws]
    return out.expand(keep)


def defined(side: Diagram) -> frozenset[str]:
    return frozenset(side.record(b).op for b in side.boxes() if side.record(b).kind == "diagram")


# == the oracle ==================================================================================
def test_oracle_tells_a_transposition_apart():
    p = stringdiag.loads("""dim s : seq
dim d : fixed
diagram A(x: [s, d], y: [d, s]) -> [s, s] {
  e[i, j] = sum_f x[i, f] * y[f, j]
  return e
}
diagram B(x: [s, d], y: [d, s]) -> [s, s] {
  e[j, i] = sum_f x[i, f] * y[f, j]
  return e
}""")
    same, err = equal(p["A"], p["A"])
    assert same and err == 0.0
    same, err = equal(p["A"], p["B"])
    assert not same and err > 0.1


def test_oracle_shares_weights_by_name():
    p = stringdiag.loads(HEAD + """
learn Q2 : [d] -> [k]
diagram A(x: [s, d]) -> [s, d] {
  q = Q(x)
  kk = K(x)
  e[i, j] = sum_f q[i, f] * kk[j, f]
  y[i] = sum_j softmax(e[i] / sqrt(k))[j] * V(x)[j]
  return y
}
diagram B(x: [s, d]) -> [s, d] {
  v = V(x)
  kk = K(x)
  qq = Q(x)
  e[a, b] = sum_c qq[a, c] * kk[b, c]
  y[a] = sum_b softmax(e[a] / sqrt(k))[b] * v[b]
  return y
}
diagram C(x: [s, d]) -> [s, d] {
  q = Q2(x)
  kk = K(x)
  e[i, j] = sum_f q[i, f] * kk[j, f]
  y[i] = sum_j softmax(e[i] / sqrt(k))[j] * V(x)[j]
  return y
}""")
    assert equal(p["A"], p["B"])[0]          # same boxes, renamed and reordered: one function
    assert not equal(p["A"], p["C"])[0]      # Q2 is another set of weights


def test_oracle_instantiates_abstract_boxes():
    """App. B.2: sim(x, y) = exp(x . y / sqrt(k)) in the generic attention is Vaswani et al.'s."""
    gen = stringdiag.load(ROOT / "gallery" / "similarity.diag")["GenericSimilarityAttention"]
    sa = stringdiag.load(ROOT / "gallery" / "attention.diag")["SelfAttention"]
    expdot = stringdiag.loads(HEAD + """
diagram expdot(a: [k], b: [k]) -> [] {
  return exp((sum_f a[f] * b[f]) / sqrt(k))
}""")["expdot"]
    with pytest.raises(DiagError, match="'sim' .* abstract family .* instantiate"):
        equal(gen, sa)
    assert equal(gen, sa, instantiate={"sim": expdot})[0]
    assert not equal(gen, sa, instantiate={"sim": "learn"})[0]


def test_oracle_refuses_different_boundaries(kernel):
    with pytest.raises(DiagError, match="different boundaries"):
        equal(kernel["Num"], kernel["NumAndScores"])


def test_oracle_default_sizes_are_distinct_primes():
    from stringdiag.verify.oracle import default_sizes

    sizes = default_sizes({"s", "d", "k", "h"}, {"d": 4})
    assert sizes["d"] == 4 and len(set(sizes.values())) == 4
    assert all(v in (2, 3, 5, 7, 11, 13) for n, v in sizes.items() if n != "d")


# == rules as data ===============================================================================
def test_library_loads():
    names = {r.name for r in RULES}
    assert {"assoc", "assoc_mv", "commute", "scalar_out", "div_out", "simd_scan", "slide",
            "copy_nat"} <= names
    assert LIB["assoc"].kind == "equation" and LIB["assoc"].symbol == "≡"
    assert LIB["assoc"].dims == ("n", "m", "p", "q")
    assert LIB["slide"].vars.keys() == {"f", "g"}
    for r in RULES:  # one boundary
        assert r.lhs.input_types == r.rhs.input_types and r.lhs.output_types == r.rhs.output_types


@pytest.mark.parametrize("rule", EQUATIONS, ids=lambda r: r.name)
def test_every_equation_holds_numerically(rule):
    same, err = equal(rule.lhs, rule.rhs, instantiate=inst(rule), nonzero=tuple(rule.nonzero.values()))
    assert same, f"{rule.name}: relative error {err:.3g}"


def test_a_wrong_equation_is_caught():
    (bad,) = loads_rules("""
rule assoc_wrong<n, m, p, q>(a: [n, m], b: [m, p], c: [p, q]) -> [n, q] {
  ab[i, k] = sum_j a[i, j] * b[j, k]
  y[i, l]  = sum_k ab[i, k] * c[k, l]
  return y
} == {
  bc[j, l] = sum_k b[j, k] * c[k, l]
  y[i, l]  = sum_j a[i, j] * bc[j, l] + 0.001 * a[i, 0]
  return y
}""".replace(" + 0.001 * a[i, 0]", " * 1.001"))
    assert not equal(bad.lhs, bad.rhs)[0]


def test_reductions_go_one_way():
    (r,) = loads_rules("""
learn F : [n] -> [n]
rule residual<n>(x: [n]) -> [n] {
  return F(x)
} => {
  return x + F(x)
}""".replace("learn F : [n] -> [n]\n", "dim n : fixed\nlearn F : [n] -> [n]\n").replace("<n>", ""))
    assert r.kind == "reduction" and r.symbol == "⇒"
    assert r.sides()[0] is r.lhs
    with pytest.raises(DiagError, match="reduction .* right to left"):
        r.sides(reverse=True)
    (u,) = loads_rules("dim n : fixed\nlearn G : [n] -> [n]\nrule u(x: [n]) -> [n] { return G(x) } ⇒ "
                       "{ return G(G(x)) }")
    assert u.kind == "reduction"


@pytest.mark.parametrize("src, where, message", [
    ("rule r<n>(a: [n]) -> [] { return sum_j a[j] } = { return 1 }", "1:47", "unexpected '='; expected '=='"),
    ("rule r<n>(a: [n]) -> [] { return sum_j a[j] }\n", "1:46", "end of file; expected '=='"),
    ("rule r<n>(a: [n]) -> [] { return sum_j a[j] } == { return b }", "1:59", "undefined name 'b'"),
    ("rule r<n>(a: [n]) -> [] { } == { return sum_j a[j] }", "1:25", "left side of rule 'r' is empty"),
    ("rule r<n>(a: [n]) -> [n] { return sum_j a[j] } == { return a }", "1:35",
     "output 1 of 'r (left)' has type [] but the diagram declares [n]"),
    ("rule r<n>(a: [n]) -> [] { return sum_j a[j] } == { return sum_j a[j] }\n"
     "rule r<n>(a: [n]) -> [] { return sum_j a[j] } == { return sum_j a[j] }", "2:6", "rule 'r' is already defined"),
    ("rule r<n>(a: [n]) -> [] given f : [n] -> [] { return sum_j a[j] } == { return sum_j a[j] }", "1:31",
     "box variable 'f' is used by neither side"),
    ("dim s : seq\nrule r<s>(a: [s]) -> [] { return sum_j a[j] } == { return sum_j a[j] }", "2:8",
     "has the name of a declared dimension"),
    ("rule r<n>(a: [m]) -> [] { return sum_j a[j] } == { return sum_j a[j] }", "1:15", "undefined dimension 'm'"),
])
def test_rule_errors_are_positioned(src, where, message):
    with pytest.raises(DiagError) as e:
        loads_rules(src, "bad.rules")
    assert str(e.value.pos) == f"bad.rules:{where}", e.value.render()
    assert message in e.value.message
    assert e.value.render().startswith(f"bad.rules:{where}: error:")


def test_rules_files_say_their_format_at_the_top():
    for f in sorted(RULES_DIR.glob("*.rules")):
        head = f.read_text().split("\nrule ")[0]
        assert "rule NAME" in head or "Format" in head, f


def test_rules_files_reuse_the_diag_language(tmp_path):
    """A .rules file may import .diag files, declare boxes and helper diagrams."""
    (tmp_path / "lib.diag").write_text(HEAD + "diagram Sq(x: [s, d]) -> [s, d] { return x * x }\n")
    (tmp_path / "my.rules").write_text('import "lib.diag"\n'
                                       "rule sq_twice(x: [s, d]) -> [s, d] { return Sq(x) * 2 } == "
                                       "{ return Sq(x) + Sq(x) }\n")
    (r,) = load_rules(tmp_path)
    assert r.dims == () and equal(r.lhs, r.rhs)[0]


# == matching =====================================================================================
def test_assoc_matches_the_score_chain(kernel):
    (m,) = find_matches(kernel["Num"], LIB["assoc"])
    assert m.where == "y" and m.names == {"a", "y"} and not m.slots
    assert {str(k): str(v) for k, v in m.dims.items()} == {"n": "s", "m": "k", "p": "s", "q": "d"}
    a, b, c = m.pattern.inputs
    assert m.boundary[b][1] == (1, 0)  # b[j, k] is pk[k, j]: the keys are read transposed
    assert m.boundary[a][1] == (0, 1) and m.boundary[c][1] == (0, 1)


def test_transposed_and_reordered_spellings_match(kernel):
    (m,) = find_matches(kernel["NumT"], LIB["assoc"])
    assert m.boundary[m.pattern.inputs[1]][1] == (0, 1)  # pkt is already [k, s]
    res = rewrite(kernel["NumT"], m)
    assert equal(kernel["NumT"], res)[0]
    assert analyse(res).seq_time == "s"


def test_gluing_a_wire_read_outside_the_match_blocks_it(kernel):
    assert find_matches(kernel["NumAndScores"], LIB["assoc"]) == []
    # in KernelAttention the score matrix feeds the normaliser and the numerator
    t = kernel["KernelAttention"]
    assert find_matches(t, LIB["assoc_mv"]) == [] and find_matches(t, LIB["assoc"]) == []


def test_convexity():
    (r,) = loads_rules("""dim n : fixed
rule two(x: [n], z: [n]) -> [n], [n] { return tanh(x), sigmoid(z) } == { return tanh(x), sigmoid(z) }""")
    p = stringdiag.loads("""dim n : fixed
diagram Through(x: [n]) -> [n], [n] {
  y = tanh(x)
  w = sigmoid(relu(y))
  return y, w
}
diagram Fed(x: [n]) -> [n], [n] {
  y = tanh(x)
  w = sigmoid(y)
  return y, w
}
diagram Apart(x: [n], u: [n]) -> [n], [n] {
  y = tanh(x)
  w = sigmoid(relu(u))
  return y, w
}""")
    assert find_matches(p["Through"], r) == []  # y leaves the match and re-enters through relu
    assert find_matches(p["Fed"], r) == []      # an input of the match made by the match
    assert len(find_matches(p["Apart"], r)) == 1


def test_matching_inside_a_simd_box(kernel):
    t = kernel["MultiHead"]
    (m,) = find_matches(t, LIB["assoc"])
    assert [n for n, _ in m.slots] == ["hh"] and str(m.slots[0][1]) == "h"
    res = rewrite(t, m)
    assert equal(t, res)[0]
    assert analyse(t).seq_time == "s^2" and analyse(res).seq_time == "s"


def test_box_identity_dimensions_and_weights():
    p = stringdiag.loads(HEAD + """
dim e : fixed
learn F, G : [d] -> [d]
diagram FF(x: [s, d]) -> [s, d] { return F(F(x)) }
diagram FG(x: [s, d]) -> [s, d] { return G(F(x)) }
diagram Wide(x: [s, e]) -> [s, e] { return x * 2 }
""")
    rules = loads_rules(HEAD + """learn F : [d] -> [d]
rule twice(x: [d]) -> [d] { return F(F(x)) } == { return F(F(x)) }
rule twice_any<n>(x: [n]) -> [n] given f : [n] -> [n] { return f(f(x)) } == { return f(f(x)) }
rule double_d(x: [d]) -> [d] { return x * 2 } == { return x + x }
""")
    twice, twice_any, double_d = rules
    assert len(find_matches(p["FF"], twice)) == 1
    assert find_matches(p["FG"], twice) == []       # the rule's F is F, not G
    assert len(find_matches(p["FF"], twice_any)) == 1
    assert find_matches(p["FG"], twice_any) == []   # one box variable, one process
    assert find_matches(p["Wide"], double_d) == []  # d is a declared dimension: a constant


def test_settle_binds_a_variable_named_only_in_a_sum():
    """A rule variable that its side names only in a sum (``yank``'s ``m + 1``) is bound by the
    sum where the rest is known and what is left is a size; otherwise the match is not settled."""
    m, n = Dim.var("m"), Dim.var("n")
    s, d, e = Dim.var("s"), Dim.var("d"), Dim.var("e")

    def settled(*pairs):
        u = Unifier(frozenset({"m", "n"}))
        assert all(u.unify(r, t) for r, t in pairs)
        return u.sub if u.settle() else None

    assert settled((m + 1, s + 1)) == {"m": s}
    assert settled((m * 2, d * 2 + 2)) == {"m": d + 1}
    assert settled((m + n, d + e), (m + 1, e + 1)) == {"m": e, "n": d}  # one sum binds, then the next
    assert settled((m + 1, s)) is None  # s - 1 is no dimension
    assert settled((m + 1, Dim.const(1))) is None  # nor is 0
    assert settled((m * 2, d * 2 + 1)) is None  # nor a half
    assert settled((m + n, d)) is None  # two unknowns, one equation
    assert settled((m * m + 1, s + 1)) is None  # not to the first power
    assert settled((m + 1, s + 1), (m + 2, s + 3)) is None  # bound, then contradicted


def test_learnables_of_different_instances_are_different_processes():
    """Expanded, each head has its own Q: a box variable used twice cannot take two of them."""
    p = stringdiag.loads(HEAD + """
diagram Head(x: [s, d]) -> [s, d] {
  learn W : [d] -> [d]
  return W(x)
}
diagram Two(x: [s, d]) -> [s, d] { return Head(Head(x)) }
""")
    flat = p["Two"].expand()
    (r,) = loads_rules("rule twice_any<n>(x: [n]) -> [n] given f : [n] -> [n] { return f(f(x)) } == "
                       "{ return f(f(x)) }")
    assert find_matches(flat, r) == []  # not as an equation
    (m,) = find_matches(flat, r, ties=True)  # as a reduction: the two heads' weights tied
    assert m.ties == (frozenset({("learn", True, "Head#1/W"), ("learn", True, "Head#2/W")}),)
    tied = rewrite(flat, m)
    assert {tied.record(b).param for b in tied.boxes() if tied.record(b).kind == "learn"} == {"Head#1/W"}
    (fis,) = loads_rules("""rule fission<n, a, b, c>(x: [n, a]) -> [n, c]
  given f : [a] -> [b]
  given g : [b] -> [c]
{
  y[i] = g(f(x[i]))
  return y
} == {
  u[i] = f(x[i])
  y[i] = g(u[i])
  return y
}""")  # no longer in the library (both sides are one graph), still a rule to match with
    ms = find_matches(flat, fis)
    assert ms and all(len({flat.record(b).param for b in m.boxes.values()}) == 2 for m in ms)
    res = rewrite(flat, ms[0])  # the weights of each head stay its own
    assert {res.record(b).param for b in res.boxes()} == {"Head#1/W", "Head#2/W"}
    assert equal(flat, res)[0]


def test_match_descriptions_select_one_match(kernel):
    t = kernel["KernelAttention"]
    (m,) = find_matches(t, LIB["div_out"])
    assert m.where == "y" and {"an", "y"} <= m.names
    assert select([m], "y") is m and select([m], "an, y") is m
    with pytest.raises(DiagError, match="no match at 'q'"):
        select([m], "q")
    flat = model(2)
    ms = find_matches(flat, LIB["assoc"])
    assert len(ms) == 16 and len({x.where for x in ms}) == 16  # instance paths tell heads apart
    # a head's output is named by the layer that uses the head: h_0 ... h_7 in Layer#1, Layer#2
    assert [x.where for x in ms] == [f"Layer#{k // 8 + 1}/h_{k % 8}" for k in range(16)]
    one = select(ms, ms[10].where)
    assert one is ms[10] and select(ms, ms[10].where) is one  # stable: the same again
    with pytest.raises(DiagError, match="no match at"):
        select(ms, "Layer#3/Head#1/y")


def model(layers: int, heads: int = 8) -> Diagram:
    sys.path.insert(0, str(ROOT / "benchmarks"))
    from bench_rewrite import KERNEL as KER, SOFTMAX
    from transformer_source import transformer_source

    src = transformer_source(layers, heads=heads).replace(SOFTMAX, KER)
    return stringdiag.loads(src, "encoder.diag")["Encoder"].expand()


def test_matching_is_near_linear(monkeypatch):
    """Anchored on a rare box and grown along ports: the work per match does not grow with
    the target (counted in calls that try a pattern box on a target box)."""
    calls = [0]
    real = M.Matcher.box

    def counting(self, *a):
        calls[0] += 1
        return real(self, *a)

    monkeypatch.setattr(M.Matcher, "box", counting)
    work = {}
    for layers in (2, 8):
        flat = model(layers)
        calls[0] = 0
        ms = find_matches(flat, LIB["assoc"])
        work[layers] = (calls[0], len(ms), len(flat))
    (c2, m2, b2), (c8, m8, b8) = work[2], work[8]
    assert m8 == 4 * m2
    assert c8 / c2 < 1.2 * b8 / b2


# == double-pushout rewriting ======================================================================
CASES = [(r, rev, copied) for r in EQUATIONS for rev in (False, True) for copied in ((), (0,))
         if not (rev and not len(r.rhs)) and not (copied and not r.lhs.inputs)]


def undetermined(pat, rep) -> str:
    """What the other side needs that a match of this side cannot say: a dimension only the other
    side names (rules/sumformer.rules' dot_padded, read right to left, would have to invent the
    padding's width), or an input only the other side reads (a deleted constant)."""
    if dim_names(rep) - dim_names(pat):
        return "is not determined by the match"
    for k, w in enumerate(pat.inputs):
        if not pat.consumers(w) and w not in pat.outputs and (rep.consumers(rep.inputs[k]) or rep.inputs[k] in rep.outputs):
            return "is not used by the matched side"
    return ""


@pytest.mark.parametrize("rule, reverse, copied", CASES,
                         ids=[f"{r.name}-{'rl' if rev else 'lr'}-{'copied' if c else 'indexed'}"
                              for r, rev, c in CASES])
def test_every_equation_rewrites_inside_a_simd_box(rule, reverse, copied):
    """The side inside a SIMD box (inputs indexed by it, or the first copied into it) between
    other boxes: find it, replace it by the other side, check the result numerically."""
    pat, rep = rule.sides(reverse)
    t = lifted(pat, copied=copied, keep=defined(pat))
    if reverse and rule.name == "scan_map":  # its right side passes the carry through unread:
        with pytest.raises(DiagError, match="use the rule the other way"):  # no match can say which
            find_matches(t, rule, reverse)
        return
    ms = find_matches(t, rule, reverse)
    assert ms, f"{rule.name} does not find its own side"
    if len(set(pat.outputs)) < len(pat.outputs):  # the side returns one wire twice (copy_nat)
        with pytest.raises(DiagError, match="split a copied wire"):
            rewrite(t, ms[0])
        return
    why = undetermined(pat, rep)
    if why:  # an equation usable one way only: the engine says why, and rewrites nothing
        with pytest.raises(DiagError, match=why):
            rewrite(t, ms[0])
        return
    for m in ms[:2]:
        res = rewrite(t, m)
        # (the lifted side reads the rule's inputs in order: one it assumes non-zero stays so)
        same, err = equal(t, res, instantiate=inst(rule), trials=2, nonzero=tuple(rule.nonzero.values()))
        assert same, f"{rule.name} at {m.where}: relative error {err:.3g}"
        grown = len(res) - (len(t) - len(pat) + len(rep))  # a reindex may bridge an output laid out anew
        # (as may one after an inserted scan, whose outputs are laid out with the scanned index
        # last, and one that copies an input passed straight through across the context)
        bridged = not len(rep) or any(rep.record(b).scan for b in rep.boxes())
        passed = sum(1 for y in rep.outputs if y in rep.inputs)
        assert 0 <= grown <= (len(rep.outputs) if bridged else passed) or rule.name.startswith("copy_nat")
        res.canonical_hash()
        res.expand()


def test_rewriting_leaves_the_target_alone(kernel):
    t = kernel["Num"]
    before = t.canonical_hash()
    (m,) = find_matches(t, LIB["assoc"])
    res = rewrite(t, m)
    assert t.canonical_hash() == before and res.canonical_hash() != before
    back = find_matches(res, LIB["assoc"], reverse=True)
    assert len(back) == 1
    home = rewrite(res, back[0])  # the equation used both ways returns home, with its
    assert iterated(home).isomorphic(iterated(t))  # contraction spelled y[i, c] = sum_j ...
    assert equal(t, home)[0]


def test_linearisation_of_kernel_attention(kernel):
    """Seed 003 Sec. 3.2 / App. B.3, after sim := phi . phi: divide after the sum, copy the
    score matrix through its copy, then associativity twice: O(s^2) becomes O(s), and the
    result is the gallery's LinearAttention (up to how its contractions are spelled)."""
    t = kernel["KernelAttention"]
    assert analyse(t).seq_time == "s^2" and analyse(t).seq_memory == "s^2"
    t1 = rewrite(t, select(find_matches(t, LIB["div_out"]), "y"))
    a = next(w for w in t1.wires() if t1.wire_label(w) == "a")
    z = next(b for b, _ in t1.consumers(a) if t1.wire_label(t1.box_outputs(b)[0]) == "z")
    t2 = copy_box(t1, t1.producer(a), [(z, 0)])
    t3 = rewrite(t2, select(find_matches(t2, LIB["assoc"]), "t"))
    t4 = rewrite(t3, select(find_matches(t3, LIB["assoc_mv"]), "z"))
    for step in (t1, t2, t3, t4):
        assert equal(t, step)[0]
    c = analyse(t4)
    assert c.seq_time == "s" and c.seq_memory == "s"
    assert "s^2" not in c.time
    lin = stringdiag.load(ROOT / "gallery" / "similarity.diag")["LinearAttention"]
    assert t4.isomorphic(lin) and iterated(t4).isomorphic(iterated(lin))
    assert not t4.isomorphic(p_generic())  # and not the quadratic form any more
    stringdiag.compile(t4, dims={"d": 4, "k": 3})


def p_generic():
    return stringdiag.load(ROOT / "gallery" / "similarity.diag")["GenericSimilarityAttention"]


def test_generic_similarity_attention_normalises_after_the_sum():
    """In App. B.2's diagram sim is abstract, so associativity waits for sim := phi . phi; the
    normalisation already moves out of the sum."""
    g = p_generic()
    assert find_matches(g, LIB["assoc"]) == []
    (m,) = find_matches(g, LIB["div_out"])
    res = rewrite(g, m)
    assert equal(g, res, instantiate={"sim": "learn"})[0]


def test_a_local_axis_out_of_place_is_reindexed():
    """A replacement box whose local axis the target wants before a context index."""
    (r,) = loads_rules("""
diagram colsum<n, m>(a: [n, m]) -> [m] {
  y[c] = sum_j a[j, c]
  return y
}
rule colsum_def<n, m>(a: [n, m]) -> [m] {
  y[c] = sum_j a[j, c]
  return y
} == {
  return colsum(a)
}""")
    p = stringdiag.loads("dim s : seq\ndim d, h : fixed\n"
                         "diagram T(x: [h, s, d]) -> [d, h] {\n  y[c, g] = sum_j x[g, j, c]\n  return y\n}")
    ms = find_matches(p["T"], r)  # the rule's column index is the target's c, or its g
    assert len(ms) == 2 and {str(m.dims["m"]) for m in ms} == {"d", "h"}
    for m in ms:
        res = rewrite(p["T"], m)
        reindexed = any(res.record(b).kind == "reindex" for b in res.boxes())
        assert reindexed == (str(m.dims["m"]) == "d")  # colsum's output axis must come first
        assert equal(p["T"], res)[0]


def test_copy_naturality_merges_and_copies():
    p = stringdiag.loads(HEAD + """
diagram Twice(x: [s, d]) -> [s, k] {
  return Q(x) * Q(x)
}""")
    t = p["Twice"]
    (r,) = [x for x in RULES if x.name == "copy_nat"]
    ms = find_matches(t, r, reverse=True)
    assert ms
    merged = rewrite(t, ms[0])
    assert len(merged) == len(t) - 1 and equal(t, merged)[0]
    q = next(b for b in merged.boxes() if merged.record(b).op == "Q")
    mul = next(b for b in merged.boxes() if merged.record(b).op == "mul")
    back = copy_box(merged, q, [(mul, 1)])
    assert len(back) == len(t) and back.isomorphic(t) and equal(t, back)[0]
    with pytest.raises(DiagError, match="does not read"):
        copy_box(merged, q, [(q, 0)])


def test_matmul_as_dot_products_both_ways():
    (r,) = [x for x in RULES if x.name == "matmul_dots"]
    p = stringdiag.loads("dim s : seq\ndim d : fixed\n"
                         "diagram G(x: [s, d]) -> [s, s] {\n  e[i, j] = sum_f x[i, f] * x[j, f]\n  return e\n}")
    g = p["G"]
    (m,) = find_matches(g, r)
    dots = rewrite(g, m)
    assert any(dots.record(b).op == "dot" for b in dots.boxes())
    assert equal(g, dots)[0]
    assert dots.expand().isomorphic(g.expand())  # a dot product is a contraction, opened
    (back,) = find_matches(dots, r, reverse=True)
    assert rewrite(dots, back).isomorphic(g)


def test_rewrite_all_in_a_model():
    flat = model(2, heads=2)
    out, n = rewrite_all(flat, LIB["assoc"])
    assert n == 4
    assert analyse(flat).seq_time == "s^2" and analyse(out).seq_time == "s"
    assert find_matches(out, LIB["assoc"]) == []
    assert len(find_matches(out, LIB["assoc"], reverse=True)) == 4
    assert equal(flat, out, dims={"v": 5, "dm": 4, "dh": 2, "df": 3}, trials=1)[0]


def test_reduction_specialises_a_learnable():
    """A reduction (⇒) replaces a universal approximator by a composite: applied one way."""
    (r,) = loads_rules(HEAD + "rule residual(x: [d]) -> [d] given f : [d] -> [d] "
                       "{ return f(x) } => { return x + f(x) }")
    p = stringdiag.loads(HEAD + "learn F : [d] -> [d]\ndiagram A(x: [s, d]) -> [s, d] { return F(x) }")
    (m,) = find_matches(p["A"], r)
    res = rewrite(p["A"], m)
    assert len(res) == 2 and {res.record(b).op for b in res.boxes()} == {"F", "add"}
    with pytest.raises(DiagError, match="reduction"):
        find_matches(res, r, reverse=True)


@pytest.mark.parametrize("src, message", [
    ("rule r<n, m>(x: [n]) -> [n] { return tanh(x) } == { return tanh(x) + (sum_j ones<m>()[j]) * 0 }",
     "dimension variable 'm' is not determined by the match"),
    ("rule r<n>(x: [n], y: [n]) -> [n] { return tanh(x) } == { return tanh(x) + y * 0 }",
     "input 2 is not used by the matched side"),
])
def test_replacements_the_match_does_not_determine_are_refused(src, message):
    (r,) = loads_rules(src)
    p = stringdiag.loads("dim n : fixed\ndiagram A(x: [n], y: [n]) -> [n] { return tanh(x) + y }")
    (m,) = find_matches(p["A"], r)
    with pytest.raises(DiagError, match=message):
        rewrite(p["A"], m)


def test_identity_sides():
    """A side that returns its input: usable as a replacement, refused as a pattern."""
    (r,) = loads_rules("rule twice_neg<n>(x: [n]) -> [n] { return neg(neg(x)) } == { return x }")
    p = stringdiag.loads("dim n : fixed\ndiagram A(x: [n]) -> [n] { return tanh(neg(neg(tanh(x)))) }\n"
                         "diagram B(x: [n]) -> [n] { return neg(neg(x)) }")
    for t in (p["A"], p["B"]):
        (m,) = find_matches(t, r)
        res = rewrite(t, m)
        assert len(res) == len(t) - 2 and equal(t, res)[0]
    with pytest.raises(DiagError, match="no boxes, so there is nothing to match"):
        find_matches(p["A"], r, reverse=True)
    (pass_through,) = loads_rules("rule r<n>(x: [n], y: [n]) -> [n], [n] { return tanh(x), y } == "
                                  "{ return tanh(x), y }")
    with pytest.raises(DiagError, match="an input that no box reads"):
        find_matches(p["A"], pass_through)


def test_a_passed_through_input_is_never_overwritten():
    (r,) = loads_rules("rule r<n>(x: [n]) -> [n], [n] { return tanh(x), x } == { return tanh(x), neg(neg(x)) }")
    p = stringdiag.loads("dim n : fixed\ndiagram A(x: [n]) -> [n], [n] { return tanh(x), x }")
    (m,) = find_matches(p["A"], r)
    with pytest.raises(DiagError, match="would overwrite"):
        rewrite(p["A"], m)
    same = rewrite(p["A"], m, r.lhs)  # the side itself as its replacement: the pass-through stays
    assert same.isomorphic(p["A"])
