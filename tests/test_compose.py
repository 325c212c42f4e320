"""The composition API (``graph/compose.py``) against source text.

The independent reference for every composition is the same diagram written in the
``.diag`` language and loaded with ``stringdiag.loads``: the two must be isomorphic (which
respects weight sharing), compile, expand, and — with weight sets matched by identity —
compute the same float64 function (``oracle.equal``). One small composition is also checked
against PyTorch written by hand.
"""
from __future__ import annotations

import itertools
from functools import reduce
from pathlib import Path

import networkx as nx
import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import stringdiag
from stringdiag import DiagError
from stringdiag.graph.compose import copy, delete, fresh, identity, swap, tensor, then, use
from stringdiag.graph.iso import labelled
from stringdiag.graph.weights import weight_sets
from stringdiag.render.draw import to_graphviz, to_svg
from stringdiag.verify.oracle import equal

ROOT = Path(__file__).resolve().parents[1]
ANATOMY = ROOT / "gallery" / "anatomy.diag"
S, T = "[s, d]", "[s, k]"
DIMS = {"d": 4, "k": 3}

DEFS = """\
dim s : seq
dim d, k : fixed
learn G : [d] -> [d]
diagram H(x: [s, d]) -> [s, d] {
  learn F : [d] -> [d]
  return F(x)
}
diagram H2(x: [s, d]) -> [s, d] {
  learn F : [d] -> [d]
  return F(x) + x
}
diagram K(x: [s, d]) -> [s, k] {
  learn Q : [d] -> [k]
  q[i] = Q(x[i])
  return q
}
diagram J(a: [s, k], x: [s, d]) -> [s, d] {
  e[i, j] = sum_f a[i, f] * a[j, f]
  y[i] = sum_j softmax(e[i])[j] * x[j]
  return y
}
diagram L(x: [s, d]) -> [s, k], [s, d] {
  learn P : [d] -> [k]
  return P(x), G(x)
}
diagram Add(a: [s, d], b: [s, d]) -> [s, d] {
  return a + b
}
diagram Glob(x: [s, d]) -> [s, d] {
  return G(x)
}
"""

# the same diagrams as the tests build them, written by hand
REFERENCES = """\
diagram Seq(x: [s, d]) -> [s, k] { return K(H(x)) }
diagram Par(x: [s, d], y: [s, d]) -> [s, d], [s, k] { return H(x), K(y) }
diagram Fan(x: [s, d]) -> [s, d], [s, k] { return H(x), K(x) }
diagram Thrice(x: [s, d]) -> [s, d], [s, d], [s, d] { return x, x, x }
diagram Swapped(x: [s, d], y: [s, d]) -> [s, k], [s, d] { return K(y), H(x) }
diagram Id(x: [s, d]) -> [s, d] { return x }
diagram KeepOne(x: [s, d], _y: [s, d]) -> [s, d] { return H(x) }
diagram Split(x: [s, d]) -> [s, k], [s, d] {
  p, g = L(x)
  return p, H(g)
}
diagram Attend(x: [s, d]) -> [s, d] { return J(K(x), x) }
diagram HH(x: [s, d]) -> [s, d] { return H(H(x)) }
diagram GG(x: [s, d]) -> [s, d] { return Glob(Glob(x)) }
diagram Residual(x: [s, d]) -> [s, d] { return Add(H(x), x) }
diagram D(x: [s, d]) -> [s, d] { return Add(H(x), H(x)) }
diagram E(x: [s, d]) -> [s, d] {
  a = H(x)
  return Add(a, a)
}
diagram Passing(x: [s, d]) -> [s, d], [s, d] { return x, H(x) }
diagram Swap2(x: [s, d], y: [s, k]) -> [s, k], [s, d] { return y, x }
"""

PROG = stringdiag.loads(DEFS + REFERENCES)


def u(name: str, **kw):
    return use(PROG[name], **kw)


# -- the generators and both compositions, each against its source text -------------------
@pytest.mark.parametrize("ref, build", [
    ("Seq", lambda: then(u("H"), u("K"))),
    ("Par", lambda: tensor(u("H"), u("K"))),
    ("Fan", lambda: then(copy(S), tensor(u("H"), u("K")))),
    ("Thrice", lambda: copy(S, 3)),
    ("Swapped", lambda: then(tensor(u("H"), u("K")), swap(S, T))),
    ("Id", lambda: identity(S)),
    ("KeepOne", lambda: then(tensor(u("H"), delete(S)), identity(S))),
    ("Split", lambda: then(u("L"), tensor(identity(T), u("H")))),
    ("Attend", lambda: then(copy(S), then(tensor(u("K"), identity(S)), u("J")))),
    ("HH", lambda: then(u("H"), u("H"))),
    ("GG", lambda: then(u("Glob"), u("Glob"))),
    ("Residual", lambda: then(copy(S), then(tensor(u("H"), identity(S)), u("Add")))),
    ("D", lambda: then(copy(S), then(tensor(u("H"), u("H")), u("Add")))),
    ("E", lambda: then(u("H"), then(copy(S), u("Add")))),
    ("Passing", lambda: then(copy(S), tensor(identity(S), u("H")))),
    ("Swap2", lambda: swap(S, T)),
])
def test_composition_is_the_diagram_written_in_source(ref, build):
    d, want = build(), PROG[ref]
    assert d.input_types == want.input_types and d.output_types == want.output_types
    assert d.isomorphic(want)
    assert d.expand().isomorphic(want.expand())
    assert d.expand().isomorphic(d.expand().expand())
    m = stringdiag.compile(d, dims=DIMS)
    xs = [torch.randn(*[dim.evaluate({"s": 5, **DIMS}) for dim in t]) for t in d.input_types]
    ys = m(*xs)
    ys = ys if isinstance(ys, tuple) else (ys,)
    assert [tuple(y.shape) for y in ys] == [tuple(dim.evaluate({"s": 5, **DIMS}) for dim in t)
                                           for t in d.output_types]
    # with every weight set matched to the source's by identity, the functions agree in float64
    assert equal(d, want, dims=DIMS, correspond=correspondence(d, want), trials=1)[0]


def test_unit_and_associativity_laws_hold_up_to_isomorphism():
    h, k = u("H"), u("K")
    assert then(identity(S), h).isomorphic(h) and then(h, identity(S)).isomorphic(h)
    assert then(then(h, k), identity(T)).isomorphic(then(h, then(k, identity(T))))
    a, b, c = u("H"), u("K"), u("L")
    assert tensor(tensor(a, b), c).isomorphic(tensor(a, tensor(b, c)))
    # interchange: (a ⊗ b) ; (c ⊗ id) = (a ; c) ⊗ (b ; id)
    assert then(tensor(a, b), tensor(c, identity(T))).isomorphic(tensor(then(a, c), then(b, identity(T))))
    assert then(swap(S, T), swap(T, S)).isomorphic(identity(f"{S}, {T}"))
    assert then(copy(S), tensor(identity(S), delete(S))).isomorphic(identity(S))


def test_identity_glued_to_identity_and_copies_of_copies():
    assert then(identity(S), identity(S)).isomorphic(PROG["Id"])
    assert then(copy(S), tensor(copy(S), identity(S))).isomorphic(PROG["Thrice"])
    twice = then(copy(S), copy(f"{S}, {S}", 1))
    assert twice.outputs == [twice.inputs[0]] * 2
    assert delete(S).outputs == [] and len(copy(S, 0).outputs) == 0


def test_the_methods_on_diagram_delegate():
    h, k = u("H"), u("K")
    assert h.then(k).isomorphic(then(h, k))
    assert h.tensor(k).isomorphic(tensor(h, k))
    f = h.fresh()
    assert f.isomorphic(h) and weight_sets(f) != weight_sets(h)


BLOCK = """dim s : seq
dim d : fixed
learn G : [d] -> [d]
diagram B(x: [s, d]) -> [s, d] {
  learn F : [d] -> [d]
  return x + F(x)
}
diagram Glob(x: [s, d]) -> [s, d] {
  return G(x)
}
"""


@pytest.mark.parametrize("op", ["then", "tensor"])
def test_composing_a_block_with_itself_says_whether_weights_are_shared(op):
    """``blk.then(blk)`` is refused until ``shared`` says one function or two; the compiled
    modules hold one block's parameters or two (counted by torch, not by the engine)."""
    prog = stringdiag.loads(BLOCK)
    blk = prog["B"]
    with pytest.raises(DiagError, match="both sides hold the weights of F.*shared=True"):
        getattr(blk, op)(blk)
    one = sum(p.numel() for p in stringdiag.compile(prog["B"], dims=dict(d=3), approximator="linear").parameters())
    for shared, copies in ((True, 1), (False, 2)):
        m = stringdiag.compile(getattr(blk, op)(blk, shared=shared), dims=dict(d=3), approximator="linear")
        assert sum(p.numel() for p in m.parameters()) == copies * one
    assert getattr(blk, op)(blk.fresh()) is not None  # two blocks with weights of their own need no word
    g = prog["Glob"]  # a global learnable is asked about too: shared=False gives the second its own
    with pytest.raises(DiagError, match="both sides hold the weights of G"):
        getattr(g, op)(g)
    for shared, copies in ((True, 1), (False, 2)):
        m = stringdiag.compile(getattr(g, op)(g, shared=shared), dims=dict(d=3), approximator="linear")
        assert sum(p.numel() for p in m.parameters()) == copies * (3 * 3 + 3)


# -- types -----------------------------------------------------------------------------
def test_then_refuses_types_that_differ_naming_both():
    with pytest.raises(DiagError, match=r"outputs of H have types \[s, d\] but the inputs of J have types "
                                        r"\[s, k\], \[s, d\]"):
        then(u("H"), u("J"))
    with pytest.raises(DiagError, match=r"have types nothing but"):
        then(delete(S), identity(S))


def test_types_are_read_from_text_or_given_as_dims():
    d = PROG["H"].input_types[0]
    assert identity([d]).input_types == identity(S).input_types == identity(d).input_types == [d]
    assert str(identity("[d + k, 2*d]").input_types[0][0]) == "d + k"
    assert identity("[]").input_types == [()] and identity("").input_types == []
    assert identity([S, T]).input_types == identity(f"{S}, {T}").input_types == identity([("s", "d"), T]).input_types
    with pytest.raises(DiagError, match="not a list of types"):
        identity("[s, d")
    with pytest.raises(DiagError, match="not a dimension"):
        identity("[s-d]")
    with pytest.raises(DiagError, match="n >= 0"):
        copy(S, -1)


# -- weights -----------------------------------------------------------------------------
def test_a_use_has_its_own_weights_and_then_keeps_identities():
    h = u("H")
    shared, two = then(h, h), then(h, fresh(h))
    assert len(weight_sets(shared)) == 1 and len(weight_sets(two)) == 2
    assert len(weight_sets(shared.expand())) == 1 and len(weight_sets(two.expand())) == 2
    # shared and separate weights are not isomorphic, either way round
    assert two.isomorphic(PROG["HH"]) and not shared.isomorphic(PROG["HH"])
    assert two.expand().isomorphic(PROG["HH"].expand()) and not shared.expand().isomorphic(PROG["HH"].expand())
    # two uses built separately are two sets, like H(H(x))
    assert then(u("H"), u("H")).isomorphic(PROG["HH"])
    # a global learnable is one set wherever it is used: sharing changes nothing
    g = u("Glob")
    assert then(g, g).isomorphic(then(g, fresh(g))) and then(g, g).isomorphic(PROG["GG"])


def test_fresh_renames_every_set_of_its_own_and_keeps_what_was_shared():
    h = u("H")
    shared = then(h, h)
    again = fresh(shared)
    assert len(weight_sets(again)) == 1 and weight_sets(again).isdisjoint(weight_sets(shared))
    assert again.isomorphic(shared)
    body = PROG["L"]  # a local P and the global G
    keys = weight_sets(fresh(body))
    assert ("learn", False, "G") in keys and ("learn", True, "P") not in keys


def test_shared_weights_are_the_copied_diagram_numerically_but_not_structurally():
    h = u("H")
    tied = then(copy(S), then(tensor(h, h), u("Add")))  # H(x) + H(x) with one set of weights
    assert not tied.isomorphic(PROG["D"]) and not tied.isomorphic(PROG["E"])
    assert not PROG["D"].isomorphic(PROG["E"])
    (key,) = weight_sets(tied.expand())
    (ekey,) = weight_sets(PROG["E"].expand())
    assert equal(tied, PROG["E"], dims=DIMS, correspond={ekey: key})[0]
    dkeys = sorted(weight_sets(PROG["D"].expand()))
    # D has two sets: given both our one set of weights, it computes our function; one alone does not
    assert equal(tied, PROG["D"], dims=DIMS, correspond={dkeys[0]: key, dkeys[1]: key})[0]
    assert not equal(tied, PROG["D"], dims=DIMS, correspond={dkeys[0]: key})[0]


def test_the_oracle_matches_weights_by_identity_not_by_structure():
    built = then(u("H", instance="H#1"), u("H", instance="H#2"))
    assert equal(built, PROG["HH"], dims=DIMS)[0]  # the same identities as the source's uses
    assert not equal(then(u("H"), u("H")), PROG["HH"], dims=DIMS)[0]  # fresh ones: unmatched, so random


def test_local_learnables_used_twice_with_and_without_fresh():
    decl = next(PROG["H"].record(b).ref for b in PROG["H"].boxes())
    assert decl.local
    f = use(decl, program=PROG)
    assert len(weight_sets(then(f, f))) == 1 and len(weight_sets(then(f, fresh(f)))) == 2
    twice = stringdiag.loads("dim d : fixed\ndiagram X(x: [d]) -> [d] {\n  learn F : [d] -> [d]\n"
                             "  return F(F(x))\n}")["X"]
    assert then(f, f).isomorphic(twice) and not then(f, fresh(f)).isomorphic(twice)
    g = use(PROG.lookup_box("G"), program=PROG)
    assert weight_sets(then(g, g)) == weight_sets(then(g, fresh(g))) == {("learn", False, "G")}
    with pytest.raises(DiagError, match="global learnable"):
        use(PROG.lookup_box("G"), instance="G#2")
    with pytest.raises(DiagError, match="fixed box"):
        use(PROG.lookup_box("relu"), instance="r")


def test_fresh_and_expand_commute_and_keep_the_instance_paths():
    d = PROG["D"]  # two uses of H: two sets, H#1/F and H#2/F once expanded
    a, b = fresh(d).expand(), fresh(d.expand())
    assert a.isomorphic(b) and a.isomorphic(d.expand())
    assert len(weight_sets(a)) == len(weight_sets(b)) == 2
    heads = {k[-1].split("/")[0] for k in weight_sets(b)}
    assert len(heads) == 2 and all("@" in h for h in heads)  # H#1/F became H@n/F, and the path stayed
    frames = {c[1] for n in b.boxes() for c in b.record(n).clusters if c[0] == "def"}
    assert {f.split("/")[0] for f in frames} >= heads  # the picture's frames are renamed with them
    assert use(PROG.lookup_def("H")).isomorphic(u("H"))  # a Definition is used like its diagram


def test_two_bodies_local_learnables_under_one_identity_are_refused():
    h, h2 = PROG["H"], PROG["H2"]  # bodies: each has a local F named 'F' at the top level
    with pytest.raises(DiagError, match="weight set 'F'.*fresh"):
        then(h, h2)
    assert len(weight_sets(then(h, fresh(h2)))) == 2
    assert len(weight_sets(then(h, h))) == 1


def test_a_declared_box_over_its_own_boundary():
    decl = PROG.lookup_box("cat")
    d = use(decl)
    src = stringdiag.loads("diagram C<n, m>(a: [n], b: [m]) -> [n + m] { return cat<n, m>(a, b) }")["C"]
    assert d.isomorphic(src) and d.signature() == "cat : [n], [m] -> [m + n]"
    relu = use(PROG.lookup_box("relu"), program=PROG)
    src = stringdiag.loads("diagram R(x: []) -> [] { return relu(x) }")["R"]
    assert then(relu, relu).isomorphic(stringdiag.loads("diagram R(x: []) -> [] { return relu(relu(x)) }")["R"])
    assert relu.isomorphic(src)


# -- SIMD definitions: the anatomy's generators ------------------------------------------
ANATOMY_REFS = stringdiag.loads(f"""\
import "{ANATOMY}"
diagram Heads(x: [s, d]) -> [s, d] {{ return ConcatFF(M1(x), M0(x)) }}
diagram Deep(x: [s, d]) -> [s, d] {{ return M1(M1(x)) }}
""")
SD = "[s, d]"


def m1(**kw):
    a = ANATOMY_REFS
    return then(copy(SD), then(tensor(use(a["AttPrep"], **kw.get("prep", {})), identity(SD)),
                               use(a["AttApply"], **kw.get("apply", {}))))


def m0():
    a = ANATOMY_REFS
    return then(copy(SD), then(tensor(use(a["LinAttPrep"]), identity(SD)), use(a["LinAttApply"])))


def test_the_anatomy_mechanisms_built_bottom_up():
    a = ANATOMY_REFS
    assert m1().isomorphic(a["M1"]) and m0().isomorphic(a["M0"])
    assert m1().expand().isomorphic(a["M1"].expand()) and m0().expand().isomorphic(a["M0"].expand())
    same = m1(prep={"instance": "AttPrep#1"}, apply={"instance": "AttApply#1"})
    assert equal(same, a["M1"], dims={"d": 6, "k": 4})[0]
    b = m0()
    assert equal(b, a["M0"], dims={"d": 6, "k": 4}, correspond=correspondence(b, a["M0"]))[0]


def test_composites_of_composites_and_their_weights():
    a = ANATOMY_REFS
    heads = then(copy(SD), then(tensor(m1(), m0()), use(a["ConcatFF"])))
    assert heads.expand().isomorphic(a["Heads"].expand())
    assert equal(heads, a["Heads"], dims={"d": 6, "k": 4}, correspond=correspondence(heads, a["Heads"]))[0]
    one = m1()
    assert then(one, fresh(one)).expand().isomorphic(a["Deep"].expand())
    assert not then(one, one).expand().isomorphic(a["Deep"].expand())  # one head's weights, twice
    assert len(weight_sets(then(one, one).expand())) == len(weight_sets(one.expand())) == 3


def test_a_composite_renders_with_a_frame_for_each_copy():
    d = then(then(PROG["H"], fresh(PROG["H"])), PROG["K"])  # bodies: SIMD statements, H's pasted twice
    assert to_svg(d).lstrip().startswith(("<?xml", "<svg"))
    src = to_graphviz(d).source
    assert src.count("subgraph cluster_") == 3  # H's frame twice and K's, never merged
    assert to_svg(m1(), expand=True).count("<svg") == 1
    names = [d.wire_label(w) for w in d.wires() if d.wire_label(w)]
    assert len(names) == len(set(names))  # the two copies' wires are told apart


def test_expanded_composites_draw_each_copy_in_its_own_frames():
    e = PROG["D"].expand()
    count = to_graphviz(e).source.count("subgraph cluster_")
    assert count >= 3
    assert to_graphviz(then(e, fresh(e))).source.count("subgraph cluster_") == 2 * count
    assert to_graphviz(then(e, e)).source.count("subgraph cluster_") == 2 * count  # shared weights, two places
    twice = then(then(e, e), then(e, e))  # pasted copies of pasted copies stay apart
    assert to_graphviz(twice).source.count("subgraph cluster_") == 4 * count


def test_inputs_keep_distinct_names_so_that_compiled_arguments_are_distinct():
    d = tensor(u("H"), u("H"))
    assert len(set(d.input_names)) == 2
    m = stringdiag.compile(d, dims=DIMS)
    assert len(m(torch.randn(5, 4), torch.randn(5, 4))) == 2


# -- one small composition by hand ---------------------------------------------------------
def test_the_residual_computes_x_plus_a_linear_map_of_x_by_hand():
    d = then(copy(S), then(tensor(u("H"), identity(S)), u("Add")))
    m = stringdiag.compile(d, dims=DIMS, approximator="linear", dtype=torch.float64)
    (attr,) = m.weight_sets.values()
    lin = m.get_submodule(attr)
    x = torch.randn(2, 5, 4, dtype=torch.float64)
    want = x @ lin.weight.detach().T + lin.bias.detach() + x
    assert torch.allclose(m(x), want, rtol=1e-12, atol=1e-12)


# -- random chains against source text ------------------------------------------------------
def correspondence(a, b) -> dict:
    """Each weight set of ``b`` (expanded) with the set of ``a`` it stands for, read off an
    isomorphism of the two: what the oracle needs when fresh identities differ from the source's."""
    la, lb = labelled(a.expand()), labelled(b.expand())
    same = lambda x, y: x["label"] == y["label"]  # noqa: E731
    gm = nx.algorithms.isomorphism.DiGraphMatcher(lb, la, node_match=same, edge_match=same)
    assert gm.is_isomorphic()
    return {n[1]: gm.mapping[n][1] for n in lb if isinstance(n, tuple) and n[0] == "weights"}


# (name, input types, output types) of the definitions a chain is made of
ATOMS = [("H", [S], [S]), ("K", [S], [T]), ("J", [T, S], [S]), ("L", [S], [T, S]), ("Add", [S, S], [S]),
         ("Glob", [S], [S])]


class Chain:
    """A diagram built twice, in step: with the API, and as statements of source text."""

    def __init__(self, types: list[str]):
        self.names = itertools.count()
        self.params = [(f"x{k}", t) for k, t in enumerate(types)]
        self.api = identity(", ".join(types), program=PROG)
        self.lines: list[str] = []
        self.outs = [n for n, _ in self.params]  # source names of the current outputs

    def atom(self, name: str, args: list[str]) -> tuple:
        _, _, outs = next(a for a in ATOMS if a[0] == name)
        got = [f"w{next(self.names)}" for _ in outs]
        self.lines.append(f"  {', '.join(got)} = {name}({', '.join(args)})")
        return use(PROG[name]), got

    def then_layer(self, draw) -> None:
        """Compose with a layer of pieces that together read every current output."""
        types = [show(t) for t in self.api.output_types]
        pieces, outs, p = [], [], 0
        while p < len(types):
            fits = [a for a in ATOMS if types[p:p + len(a[1])] == a[1]]
            kind = draw(st.sampled_from(["id", "copy", "swap", "atom"] if fits else ["id", "copy", "swap"]))
            if kind == "swap" and p + 1 < len(types):
                pieces.append(swap(types[p], types[p + 1]))
                outs += [self.outs[p + 1], self.outs[p]]
                p += 2
            elif kind == "copy":
                n = draw(st.integers(0, 2))
                pieces.append(copy(types[p], n))
                outs += [self.outs[p]] * n
                p += 1
            elif kind == "atom":
                name, ins, _ = draw(st.sampled_from(fits))
                d, got = self.atom(name, self.outs[p:p + len(ins)])
                pieces.append(d)
                outs += got
                p += len(ins)
            else:
                pieces.append(identity(types[p]))
                outs.append(self.outs[p])
                p += 1
        layer = reduce(tensor, pieces) if pieces else identity("")
        self.api, self.outs = then(self.api, layer), outs

    def tensor_atom(self, draw) -> None:
        name, ins, _ = draw(st.sampled_from(ATOMS))
        params = [(f"x{len(self.params) + k}", t) for k, t in enumerate(ins)]
        d, got = self.atom(name, [n for n, _ in params])
        left = draw(st.booleans())
        self.api = tensor(d, self.api) if left else tensor(self.api, d)
        self.params = params + self.params if left else self.params + params
        self.outs = got + self.outs if left else self.outs + got

    def source(self) -> str:
        header = ", ".join(f"{n}: {t}" for n, t in self.params)
        out_types = ", ".join(show(t) for t in self.api.output_types)
        body = "\n".join(self.lines)
        return f"diagram Chain({header}) -> {out_types} {{\n{body}\n  return {', '.join(self.outs)}\n}}\n"


def show(t) -> str:
    return "[" + ", ".join(str(d) for d in t) + "]"


@st.composite
def chains(draw):
    c = Chain(draw(st.lists(st.sampled_from([S, T]), min_size=1, max_size=2)))
    for _ in range(draw(st.integers(1, 6))):
        if draw(st.booleans()):
            c.then_layer(draw)
        else:
            c.tensor_atom(draw)
    return c


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(chains())
def test_random_chains_are_their_source_text(c):
    if not c.api.outputs:
        c.api = tensor(c.api, identity(S))  # a diagram returns something: pass a new input through
        c.params.append((f"x{len(c.params)}", S))
        c.outs.append(c.params[-1][0])
    want = stringdiag.loads(DEFS + c.source())["Chain"]
    assert c.api.input_types == want.input_types and c.api.output_types == want.output_types
    assert c.api.isomorphic(want), c.source()
    assert c.api.expand().isomorphic(want.expand()), c.source()


@settings(max_examples=8, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(chains())
def test_random_chains_compute_what_their_source_text_computes(c):
    if not c.api.outputs:
        return
    want = stringdiag.loads(DEFS + c.source())["Chain"]
    assert equal(c.api, want, dims=DIMS, correspond=correspondence(c.api, want), trials=1)[0], c.source()
