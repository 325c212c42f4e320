"""What porting a model needs, each against a hand-written reference: per-box approximators
(``via linear(bias = false)``), layer norm with its own eps, learnable tensors held at a
maximum length (``where s <= n``), parameter names from diagram paths, and ``load_weights``
with every problem it finds listed."""
from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

import stringdiag
from stringdiag import DiagError
from stringdiag.analysis.combine import parameter_count

HEAD = "dim s : seq\ndim d, k, r : fixed\n"


def n_params(m: torch.nn.Module) -> int:
    return sum(p.numel() for p in m.parameters())


def randn(*shape: int, seed: int = 0) -> torch.Tensor:
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed), dtype=torch.float64)


# -- per-box approximators ----------------------------------------------------------------------
VIA = HEAD + """learn Q : [d] -> [k] via linear(bias = false)
learn V : [d] -> [k] via mlp(hidden = 5, bias = false)
learn U : [d] -> [k]
diagram A(x: [s, d]) -> [s, k] {
  return Q(x) + V(x) + U(x)
}
"""


@pytest.mark.parametrize("policy", ["linear", "mlp"])
def test_a_box_with_via_is_built_by_it_whatever_the_policy(policy):
    prog = stringdiag.loads(VIA)
    m = stringdiag.compile(prog["A"], dims=dict(d=4, k=3), approximator=policy, dtype=torch.float64)
    assert m.Q.bias is None and m.Q.weight.shape == (3, 4)
    assert [tuple(p.shape) for p in m.V.parameters()] == [(5, 4), (3, 5)]
    x = randn(2, 6, 4)
    u = m.U(x)  # the policy's own module, checked by its own tests
    want = x @ m.Q.weight.T + torch.relu(x @ m.V[0].weight.T) @ m.V[2].weight.T + u
    assert torch.allclose(m(x), want, rtol=1e-12, atol=1e-12)
    # analysis counts what compile builds: 12 (Q) + 20 + 15 (V) + U by the policy
    u_count = 4 * 3 + 3 if policy == "linear" else 4 * 4 + 4 + 4 * 3 + 3
    assert parameter_count(prog["A"], dict(d=4, k=3), policy) == n_params(m) == 12 + 35 + u_count


@pytest.mark.parametrize("decl, message", [
    ("learn Q : [d] -> [k] via conv", "unknown approximator 'conv'"),
    ("learn Q : [d] -> [k] via linear(hidden = 3)", "'hidden' is not an option of 'linear'"),
    ("learn Q : [d] -> [k] via linear(bias = no)", "'bias' takes true or false, not 'no'"),
    ("learn Q : [d] -> [k] via mlp(hidden = 0)", "'hidden' takes a positive integer"),
    ("learn Q : [d] -> [k] via linear(bias = false, bias = true)", "'bias' is given twice"),
    ("learn Q : -> [k] via linear", "a learnable tensor has no approximator"),
    ("fixed Q : [d] -> [k] via linear", "only a learnable box has an approximator"),
    ("learn Q : -> [r, k] where r <= 8", "'r' must be a seq dimension"),
    ("learn Q : [d] -> [s] where s <= 8", "'s' must be a seq dimension"),
    ("learn Q : -> [s, k] where s <= 0", "largest length of 's' must be given once, as a positive integer"),
])
def test_bad_declarations_are_positioned_errors(decl, message):
    with pytest.raises(DiagError, match=message) as e:
        stringdiag.loads(HEAD + decl + "\n", "bad.diag")
    assert e.value.pos is not None and e.value.pos.line == 3


# -- layer norm's eps ----------------------------------------------------------------------------------
LN = HEAD + """diagram N(x: [s, d]) -> [s, d] {
  y[i] = layernorm_eps(x[i], 1e-12)
  return y
}
"""


def test_layernorm_eps_is_torch_layer_norm_with_that_eps():
    m = stringdiag.compile(stringdiag.loads(LN)["N"], dims=dict(d=5), dtype=torch.float64)
    with torch.no_grad():
        m.y.weight.copy_(randn(5, seed=1))
        m.y.bias.copy_(randn(5, seed=2))
    x = 1.0 + 1e-6 * randn(2, 3, 5)  # variance ~1e-12: eps decides the result
    want = F.layer_norm(x, (5,), m.y.weight, m.y.bias, eps=1e-12)
    other = F.layer_norm(x, (5,), m.y.weight, m.y.bias, eps=1e-5)
    assert (m(x) - want).abs().max() < 1e-9 * want.abs().max()
    assert (want - other).abs().max() > 0.1 * want.abs().max()  # the default eps would fail this


# -- learnable tensors held at a maximum length ------------------------------------------------------
BOUNDED = HEAD + """learn E : -> [r, s] where s <= 6
diagram P(x: [s, d]) -> [r, d] {
  y[c, f] = sum_j E()[c, j] * x[j, f]
  return y
}
"""


def test_a_bounded_learnable_tensor_is_sliced_to_the_run_and_refuses_longer_ones():
    prog = stringdiag.loads(BOUNDED)
    m = stringdiag.compile(prog["P"], dims=dict(d=3, r=2), dtype=torch.float64)
    assert m.E.weight.shape == (2, 6)
    assert parameter_count(prog["P"], dict(d=3, r=2), "linear") == n_params(m) == 12
    for s in (1, 4, 6):
        x = randn(2, s, 3, seed=s)
        assert torch.allclose(m(x), m.E.weight[:, :s] @ x, rtol=1e-12, atol=1e-12)
    with pytest.raises(DiagError, match=r"'E' holds at most 6 positions along 's' .* but this input has 7"):
        m(randn(2, 7, 3))


# -- parameter names -----------------------------------------------------------------------------------
LAYERED = HEAD + """diagram H(x: [s, d]) -> [s, d] {
  learn F : [d] -> [d]
  return F(x)
}
diagram G(x: [s, d]) -> [s, d] {
  inner = H(x)
  return inner + H(inner)
}
diagram T(x: [s, d]) -> [s, d] {
  first = G(x)
  second = G(first)
  n = layernorm(second)
  return n
}
"""


def names(src: str, name: str = "T") -> list[str]:
    m = stringdiag.compile(stringdiag.loads(src)[name], dims=dict(d=2), approximator="linear")
    return sorted(m.state_dict())


def test_parameter_names_follow_the_names_uses_are_assigned_to():
    got = names(LAYERED)
    assert got == sorted([f"{a}.{b}.F.{w}" for a in ("first", "second") for b in ("inner", "H_2")
                          for w in ("weight", "bias")] + ["n.bias", "n.weight"])
    # stable: an unrelated definition before, and a layer added after, change no name
    moved = LAYERED.replace("diagram H", "diagram Z(x: [s, d]) -> [s, d] {\n  return H(x)\n}\ndiagram H", 1)
    moved = moved.replace("  return n\n", "  third = G(n)\n  return third\n")
    assert set(got) < set(names(moved))


# -- load_weights ----------------------------------------------------------------------------------------
SMALL = HEAD + """learn A : [d] -> [k]
learn B : [d] -> [k] via linear(bias = false)
diagram M(x: [s, d]) -> [s, k] {
  return A(x) + B(x)
}
"""


def small():
    return stringdiag.compile(stringdiag.loads(SMALL)["M"], dims=dict(d=4, k=3), approximator="linear",
                              dtype=torch.float64)


def test_load_weights_maps_globs_cuts_packed_tensors_and_transposes():
    m = small()
    packed = randn(4, 6)  # [in, out], A's and B's weights side by side, as a Conv1D stores them
    ref = {"proj.weight": packed, "a.bias": randn(3, seed=1)}
    stringdiag.load_weights(m, ref, {"proj.*": ["A.*", "B.*"], "a.*": "A.*"}, transpose="proj.weight")
    assert torch.equal(m.A.weight, packed.T[:3]) and torch.equal(m.B.weight, packed.T[3:])
    assert torch.equal(m.A.bias, ref["a.bias"])
    n = small()
    stringdiag.load_weights(n, {"A.weight": m.A.weight, "A.bias": m.A.bias, "b": m.B.weight},
                            lambda name: "B.weight" if name == "b" else name)
    x = randn(2, 5, 4)
    assert torch.equal(n(x), m(x))


def test_load_weights_lists_every_problem_and_changes_nothing():
    m = small()
    before = {k: v.clone() for k, v in m.state_dict().items()}
    ref = {"A.weight": randn(4, 3), "A.bias": randn(3), "extra": randn(2), "B.weight": randn(3, 4),
           "again": randn(3)}
    with pytest.raises(DiagError) as e:
        stringdiag.load_weights(m, ref, {"again": "A.bias"})
    text = str(e.value)
    assert "4 problems" in text
    assert "'A.weight' [4, 3] does not fit 'A.weight' [3, 4] (stored [in, out]? add 'A.weight' to transpose=)" in text
    assert "the module has no tensor 'extra'" in text
    assert "'A.bias' is given 2 times" in text
    assert "'A.weight' [3, 4] is given nothing" in text
    assert all(torch.equal(v, before[k]) for k, v in m.state_dict().items())
    stringdiag.load_weights(m, ref, {"again": None, "extra": None}, transpose=["A.*"])  # the fix loads
    assert torch.equal(m.A.weight, ref["A.weight"].T)


def test_a_bounded_tensor_inside_a_definition_used_over_another_length():
    """The definition's seq dimension s is a parameter: used over t, its E is still held at 6."""
    prog = stringdiag.loads("""dim s, t : seq
dim d, r : fixed
diagram P(x: [s, d]) -> [r, d] {
  learn E : -> [r, s] where s <= 6
  y[c, f] = sum_j E()[c, j] * x[j, f]
  return y
}
diagram Q(x: [t, d]) -> [r, d] {
  first = P(x)
  return first
}
""")
    m = stringdiag.compile(prog["Q"], dims=dict(d=3, r=2), dtype=torch.float64)
    w = m.first.E.weight
    assert w.shape == (2, 6) and parameter_count(prog["Q"], dict(d=3, r=2), "linear") == n_params(m) == 12
    x = randn(1, 5, 3)
    assert torch.allclose(m(x), w[:, :5] @ x, rtol=1e-12, atol=1e-12)
    with pytest.raises(DiagError, match="but this input has 8"):
        m(randn(1, 8, 3))
