"""``y = repeat t Block(x)``: t copies of a definition in sequence, each with weights of its own
(one set with ``shared``), as one box: elaborated, unrolled on request, compiled, costed and
matched without unrolling the source. References are hand-written: a float64 PyTorch loop over
the compiled module's own layers, parameter counts of the block compiled alone, the unrolled
source written out by hand (compared up to isomorphism)."""
from __future__ import annotations

import sys
from pathlib import Path

import pytest
import torch

import stringdiag
from stringdiag.analysis.combine import learnables, parameter_count
from stringdiag.analysis.complexity import analyse
from stringdiag.errors import DiagError
from stringdiag.graph.weights import tie, weight_sets
from stringdiag.lower.lower import compile
from stringdiag.render.draw import to_svg
from stringdiag.rewrite.match import find_matches
from stringdiag.rewrite.rule import loads_rules

HEAD = """\
dim s : seq
dim d : fixed
dim L : fixed

diagram Block(x: [s, d]) -> [s, d] {
  learn F : [d] -> [d]
  return x + F(relu(x))
}

diagram Cross(x: [s, d], m: [d]) -> [s, d] {
  learn G : [d] -> [d]
  return x + G(x) * m
}
"""

SRC = HEAD + """
diagram Own(x: [s, d]) -> [s, d] {
  y = repeat 3 Block(x)
  return y
}

diagram Shared(x: [s, d]) -> [s, d] {
  y = repeat 3 shared Block(x)
  return y
}

diagram Deep(x: [s, d]) -> [s, d] {
  y = repeat L Block(x)
  return y
}

diagram WithMemory(x: [s, d], m: [d]) -> [s, d] {
  y = repeat 2 Cross(x, m)
  return y
}

diagram Hand(x: [s, d]) -> [s, d] {
  y1 = Block(x)
  y2 = Block(y1)
  y3 = Block(y2)
  return y3
}

diagram HandMemory(x: [s, d], m: [d]) -> [s, d] {
  y1 = Cross(x, m)
  y2 = Cross(y1, m)
  return y2
}
"""

D = 4


@pytest.fixture(scope="module")
def prog():
    return stringdiag.loads(SRC, "repeat.diag")


def the_box(d):
    (b,) = list(d.boxes())
    return d.record(b)


def test_one_box_with_its_count_and_sharing(prog):
    own, shared, deep = the_box(prog["Own"]), the_box(prog["Shared"]), the_box(prog["Deep"])
    assert (own.kind, own.op, str(own.repeat.count), own.shared) == ("diagram", "Block", "3", False)
    assert (str(shared.repeat.count), shared.shared) == ("3", True)
    assert str(deep.repeat.count) == "L"
    assert len(prog["Own"].expand()) == 1  # expand keeps it a box unless asked to unroll


def test_shared_and_repeat_stay_names_elsewhere():
    p = stringdiag.loads(HEAD + "diagram U(x: [s, d]) -> [s, d] {\n  shared = Block(x)\n  return shared\n}", "u.diag")
    assert len(p["U"]) == 1


BAD = [
    ("y = repeat 0 Block(x)", 14, "at least one copy"),
    ("y = repeat s Block(x)", 14, "seq dimension"),
    ("y = repeat Q Block(x)", 14, "undefined dimension 'Q'"),
    ("y = repeat Z Block(x)", 14, "'Z' is 0"),
    ("y = repeat 2 Grow(x)", 16, "cannot be repeated"),
    ("y = repeat 2 H(x)", 16, "declared box"),
    ("a, y = repeat 2 Block(x)", 3, "one value"),
    ("y = repeat 2 Block(x, x)", 16, "takes 1 input"),
    ("y = repeat 2 shared Nope(x)", 23, "undefined box"),
]


@pytest.mark.parametrize("stmt, col, words", BAD)
def test_bad_uses_are_positioned_errors(stmt, col, words):
    src = (HEAD + "dim Z : fixed = 0\nlearn H : [d] -> [d]\n"
           "diagram Grow(x: [s, d]) -> [s, d + d] {\n  return cat(x, x)\n}\n"
           f"diagram T(x: [s, d]) -> [s, d] {{\n  {stmt}\n  return y\n}}\n")
    line = src.count("\n", 0, src.index(stmt)) + 1
    with pytest.raises(DiagError) as e:
        stringdiag.loads(src, "bad.diag")
    assert words in e.value.message
    assert (e.value.pos.line, e.value.pos.col) == (line, col)


def _linear(gm, name):
    params = dict(gm.named_parameters())
    return params[f"{name}.weight"], params[f"{name}.bias"]


def test_compiled_own_weights_equal_a_hand_written_loop(prog):
    gm = compile(prog["Own"], dims={"d": D}, approximator="linear", dtype=torch.float64)
    layers = [_linear(gm, f"y.{k}.F") for k in range(3)]
    assert len({id(w) for w, _ in layers}) == 3
    x = torch.randn(2, 5, D, dtype=torch.float64)
    y = x
    for w, b in layers:  # Block: x + F(relu(x)), F linear
        y = y + torch.relu(y) @ w.T + b
    got = gm(x)
    assert ((got - y).norm() / y.norm()).item() < 1e-12


def test_compiled_shared_weights_equal_a_hand_written_loop(prog):
    gm = compile(prog["Shared"], dims={"d": D}, approximator="linear", dtype=torch.float64)
    assert sorted(n for n, _ in gm.named_parameters()) == ["y.F.bias", "y.F.weight"]
    w, b = _linear(gm, "y.F")
    x = torch.randn(3, 4, D, dtype=torch.float64)
    y = x
    for _ in range(3):
        y = y + torch.relu(y) @ w.T + b
    assert ((gm(x) - y).norm() / y.norm()).item() < 1e-12


def test_compiled_extra_arguments_reach_every_copy(prog):
    gm = compile(prog["WithMemory"], dims={"d": D}, approximator="linear", dtype=torch.float64)
    x, m = torch.randn(2, 5, D, dtype=torch.float64), torch.randn(D, dtype=torch.float64)
    y = x
    for k in range(2):
        w, b = _linear(gm, f"y.{k}.G")
        y = y + (y @ w.T + b) * m
    assert ((gm(x, m) - y).norm() / y.norm()).item() < 1e-12


@pytest.mark.parametrize("approximator", ["linear", "mlp"])
def test_parameters_t_times_or_once(prog, approximator):
    dims = {"d": D, "L": 5}

    def n(name):
        return sum(p.numel() for p in compile(prog[name], dims=dims, approximator=approximator).parameters())

    block = n("Block")
    assert n("Own") == 3 * block and n("Deep") == 5 * block and n("Shared") == block
    for name in ("Own", "Deep", "Shared", "WithMemory"):
        assert parameter_count(prog[name], dims, approximator) == n(name)


def test_a_count_named_by_a_fixed_dimension_needs_its_size(prog):
    with pytest.raises(DiagError, match="L"):
        compile(prog["Deep"], dims={"d": D})
    with pytest.raises(DiagError, match="at least one"):
        compile(prog["Deep"], dims={"d": D, "L": 0})


def test_info_costs_t_times_and_lists_each_weight_set(prog):
    assert analyse(prog["Block"]).time == "s·d^2"
    assert analyse(prog["Deep"]).time == "s·L·d^2" and analyse(prog["Deep"]).memory == "s·L·d"
    assert [e["name"] for e in learnables(prog["Own"])] == ["Block#1/0/F", "Block#1/1/F", "Block#1/2/F"]
    (shared,) = learnables(prog["Shared"])
    assert (shared["name"], shared["uses"]) == ("Block#1/F", 3)


def test_unrolled_equals_the_source_unrolled_by_hand(prog):
    own = prog["Own"].expand(unroll={})
    hand = prog["Hand"].expand()
    assert len(own) == len(hand) == 9 and own.isomorphic(hand)
    assert prog["WithMemory"].expand(unroll={}).isomorphic(prog["HandMemory"].expand())
    assert len(prog["Deep"].expand(unroll={"L": 3})) == 9 and prog["Deep"].expand(unroll={"L": 3}).isomorphic(hand)
    assert len(prog["Deep"].expand(unroll={})) == 1  # a count of no given size stays one box


def test_shared_unrolls_to_one_weight_set(prog):
    shared = prog["Shared"].expand(unroll={})
    assert sorted(weight_sets(shared)) == [("learn", True, "Block#1/F")]
    hand = prog["Hand"].expand()
    assert not shared.isomorphic(hand)  # three functions are not one
    tie(hand, [weight_sets(hand)])
    assert shared.isomorphic(hand)


def test_own_and_shared_and_counts_are_different_boxes(prog):
    assert not prog["Own"].isomorphic(prog["Shared"])
    assert not prog["Own"].isomorphic(prog["Deep"])
    assert prog["Own"].isomorphic(stringdiag.loads(SRC, "again.diag")["Own"])


def test_render_draws_one_box_labelled_times_t(prog):
    assert "Block ×3" in to_svg(prog["Own"]) and "Block ×3 shared" in to_svg(prog["Shared"])
    assert "Block ×L" in to_svg(prog["Deep"])


def test_a_rule_on_the_block_does_not_match_its_repeat(prog):
    (r,) = loads_rules(HEAD + "rule one(x: [s, d]) -> [s, d] { return Block(x) } == { return Block(x) }", "t.rules")
    (f,) = loads_rules(HEAD + "rule any(x: [s, d]) -> [s, d] given f : [s, d] -> [s, d] "
                       "{ return f(x) } == { return f(x) }", "f.rules")
    once = stringdiag.loads(HEAD + "diagram O(x: [s, d]) -> [s, d] { return Block(x) }", "o.diag")["O"]
    assert len(find_matches(once, r)) == 1 and len(find_matches(once, f)) == 1
    assert find_matches(prog["Own"], r) == [] and find_matches(prog["Own"], f) == []


def test_render_expand_draws_the_layers(prog):
    svg = to_svg(prog["Own"], expand=True)
    assert "×3" not in svg and svg.count(">F<") == 3


GALLERY = Path(__file__).resolve().parents[1] / "gallery"
BENCH = Path(__file__).resolve().parents[1] / "benchmarks"


def test_gallery_encoder_stack_is_its_two_layers_written_out():
    src = (GALLERY / "transformer.diag").read_text()
    line = next(x for x in src.splitlines() if "repeat 2 EncoderLayer(x1)" in x)
    hand = src.replace(line, "  x2 = EncoderLayer(x1)\n  x3 = EncoderLayer(x2)")
    stack = stringdiag.loads(src, "transformer.diag")["TransformerEncoder"]
    written = stringdiag.loads(hand, "hand.diag")["TransformerEncoder"]
    assert stack.expand(unroll={}).isomorphic(written.expand())
    dims = {"v": 5, "h": 2, "dh": 2, "dm": 4, "df": 3}
    assert parameter_count(stack, dims) == parameter_count(written, dims)


def test_benchmark_encoder_in_one_line_is_the_encoder_written_out():
    sys.path.insert(0, str(BENCH))
    from transformer_source import transformer_source

    one = stringdiag.loads(transformer_source(4, heads=2, repeat=True), "one.diag")["Encoder"]
    many = stringdiag.loads(transformer_source(4, heads=2), "many.diag")["Encoder"]
    assert sum("repeat" in x for x in transformer_source(48, repeat=True).splitlines()) == 1
    assert one.expand(unroll={}).isomorphic(many.expand())


NESTED = HEAD + """
dim n : fixed
diagram Outer(x: [s, d], m: [d]) -> [s, d] {
  y = repeat 2 Cross(x, m)
  return relu(y)
}
diagram Nested(x: [s, d], m: [d]) -> [s, d] {
  y = repeat 3 Outer(x, m)
  return y
}
diagram Simd(x: [n, s, d], m: [n, d]) -> [n, s, d] {
  y[b] = repeat 2 Cross(x[b], m[b])
  return y
}
"""


def _modules_by_key(gm) -> dict:
    """Each weight set's module in a compiled module, by its key (weights.weight_key)."""
    modules = dict(gm.named_modules())
    return {key: modules[attr] for key, attr in gm.weight_sets.items() if key[0] == "learn"}


def test_nested_stacks_compile_to_their_unrolled_expansion():
    p = stringdiag.loads(NESTED, "nested.diag")
    dims = {"d": D}
    stacked = compile(p["Nested"], dims=dims, approximator="linear", dtype=torch.float64)
    unrolled = compile(p["Nested"].expand(unroll={}), dims=dims, approximator="linear", dtype=torch.float64)
    mine, theirs = _modules_by_key(stacked), _modules_by_key(unrolled)
    assert sorted(mine) == sorted(theirs) and len(mine) == 6  # 3 x 2 copies, each its own G
    for key, mod in theirs.items():
        mod.load_state_dict(mine[key].state_dict())
    x, m = torch.randn(2, 5, D, dtype=torch.float64), torch.randn(D, dtype=torch.float64)
    want = unrolled(x, m)
    assert ((stacked(x, m) - want).norm() / want.norm()).item() < 1e-12
    assert parameter_count(p["Nested"], dims, "linear") == 6 * (D * D + D)


def test_a_stack_inside_simd_boxes_runs_per_index():
    p = stringdiag.loads(NESTED, "nested.diag")
    gm = compile(p["Simd"], dims={"d": D, "n": 2}, approximator="linear", dtype=torch.float64)
    x, m = torch.randn(2, 5, D, dtype=torch.float64), torch.randn(2, D, dtype=torch.float64)
    y = x
    for k in range(2):
        w, b = _linear(gm, f"y.{k}.G")
        y = y + (y @ w.T + b) * m[:, None, :]
    assert ((gm(x, m) - y).norm() / y.norm()).item() < 1e-12


def test_a_derivation_step_does_not_unfold_a_stack(prog):
    from stringdiag.derive.steps import unfold

    with pytest.raises(DiagError, match="repeat"):
        unfold(prog["Own"], "Block", frozenset({"Block", "Cross"}))
