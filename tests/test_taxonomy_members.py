"""The named members of the taxonomy (Khatri et al. (2024), Sec. 4; gallery/taxonomy_*.diag):
each agrees with a hand-written float64 reference of its paper's mechanism, trains as a head,
and is reached from its parent by its derivation; and the random box kind (a fixed tensor drawn
from a seed, never trained) that the Performer's projection and BigBird's random keys need."""
from __future__ import annotations

import math
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F

import stringdiag
from stringdiag import DiagError, compile
from stringdiag.analysis.combine import parameter_count
from stringdiag.derive.derivation import EQ, REWIRE, load_derivation
from stringdiag.train.loop import TrainConfig, train
from stringdiag.train.model import LanguageModel
from helpers import rel_norm

pytestmark = pytest.mark.usefixtures("one_thread")

GALLERY = Path(__file__).resolve().parents[1] / "gallery"
DIMS = {"d": 5, "k": 3, "m": 4, "w": 2, "g": 2, "r": 2}
S = 7


def member(file: str, name: str):
    return stringdiag.load(GALLERY / file)[name]


def compiled(file: str, name: str):
    """The member compiled with the sizes of DIMS it takes (compile refuses a name it does not)."""
    from stringdiag.graph.arguments import accepted_dims

    torch.manual_seed(0)
    d = member(file, name)
    return compile(d, dims={k: v for k, v in DIMS.items() if k in accepted_dims(d)}, approximator="linear",
                   dtype=torch.float64)


def lin(mod, x):
    """An nn.Linear applied by hand: x W^T + b."""
    return x @ mod.weight.T + mod.bias


def qkv(m, x):
    return lin(m.Q, x), lin(m.K, x), lin(m.V, x)


def softmax_attention(q, k, v, keep):
    """softmax(q k^T / sqrt(k) masked to ``keep``) v."""
    e = (q @ k.transpose(-1, -2)) / math.sqrt(q.shape[-1])
    return torch.softmax(e.masked_fill(~keep, float("-inf")), dim=-1) @ v


def grid(s):
    i = torch.arange(s)
    return i[:, None], i[None, :]


X = torch.randn(2, S, DIMS["d"], generator=torch.Generator().manual_seed(3), dtype=torch.float64)


# -- references of the cited mechanisms ------------------------------------------------------
def ref_linear_transformer(m, x):
    q, k, v = qkv(m, x)
    a = (F.elu(q) + 1) @ (F.elu(k) + 1).transpose(-1, -2)  # quadratic form, normalised by rows
    return (a / a.sum(-1, keepdim=True)) @ v


def favor(x, omega):
    xs = x / DIMS["k"] ** 0.25
    return torch.exp(xs @ omega.T - (xs * xs).sum(-1, keepdim=True) / 2) / math.sqrt(omega.shape[0])


def ref_performer(m, x):
    q, k, v = qkv(m, x)
    omega = torch.randn(DIMS["m"], DIMS["k"], generator=torch.Generator().manual_seed(7), dtype=torch.float64)
    a = favor(q, omega) @ favor(k, omega).transpose(-1, -2)
    return (a / a.sum(-1, keepdim=True)) @ v


def dpfp(x):
    r = torch.cat([F.relu(x), F.relu(-x)], -1)
    phi = torch.cat([r * torch.roll(r, -1, -1), r * torch.roll(r, -2, -1)], -1)
    return phi / phi.sum(-1, keepdim=True)


def ref_dpfp(m, x):
    q, k, v = qkv(m, x)
    w = dpfp(k).transpose(-1, -2) @ v  # the fast weights
    return dpfp(q) @ w


def window(s):
    i, j = grid(s)
    return (i - j).abs() < DIMS["w"]


def global_tokens(s, g):
    i, j = grid(s)
    return (i < g) | (j < g)


def ref_sliding(m, x):
    return softmax_attention(*qkv(m, x), window(x.shape[-2]))


def ref_longformer(m, x):
    s = x.shape[-2]
    return softmax_attention(*qkv(m, x), window(s) | global_tokens(s, DIMS["g"]))


def ref_bigbird(m, x):
    s = x.shape[-2]
    u = 0.5 * (1 + torch.erf(torch.randn(s, s, generator=torch.Generator().manual_seed(11), dtype=torch.float64)
                             / math.sqrt(2)))
    return softmax_attention(*qkv(m, x), window(s) | global_tokens(s, DIMS["g"]) | (u < DIMS["r"] / s))


def ref_star(m, x):
    s = x.shape[-2]
    i, j = grid(s)
    ring = ((i - j).abs() <= 1) | ((i - j).abs() == s - 1)
    return softmax_attention(*qkv(m, x), ring | global_tokens(s, 1))


def ref_etc(m, x):
    q, k, v = qkv(m, x)
    gx = m.Glob.weight
    keys, vals = torch.cat([k, lin(m.K, gx).expand(2, -1, -1)], -2), torch.cat([v, lin(m.V, gx).expand(2, -1, -1)], -2)
    keep = torch.cat([window(x.shape[-2]), torch.ones(x.shape[-2], DIMS["g"], dtype=torch.bool)], -1)
    return softmax_attention(q, keys, vals, keep)


def gaussian(q, k, v, mu, sigma):
    """softmax(q k^T / sqrt(k) - (j - mu_i)^2 / (2 sigma_i^2)) v (q None: no scores)."""
    j = torch.arange(v.shape[-2], dtype=torch.float64)
    e = 0.0 if q is None else (q @ k.transpose(-1, -2)) / math.sqrt(q.shape[-1])
    return torch.softmax(e - (j - mu[..., None]) ** 2 / (2 * sigma[..., None] ** 2), dim=-1) @ v


def ref_gaussian_transformer(m, x):
    q, k, v = qkv(m, x)
    pos = torch.arange(x.shape[-2], dtype=torch.float64)
    return gaussian(q, k, v, pos, F.softplus(m.GaussWidth.weight).expand(x.shape[-2]))


def ref_localness(m, x):
    q, k, v = qkv(m, x)
    s = x.shape[-2]
    h = torch.tanh(lin(m.LocW, q))
    return gaussian(q, k, v, s * torch.sigmoid(lin(m.LocP, h)[..., 0]), s * torch.sigmoid(lin(m.LocD, h)[..., 0]) / 2)


def ref_hardcoded(m, x):
    v = lin(m.V, x)
    pos = torch.arange(x.shape[-2], dtype=torch.float64)
    return gaussian(None, None, v, pos, torch.ones(x.shape[-2], dtype=torch.float64))


MEMBERS = {
    ("taxonomy_linear.diag", "LinearTransformer"): ref_linear_transformer,
    ("taxonomy_linear.diag", "PerformerFAVOR"): ref_performer,
    ("taxonomy_linear.diag", "FastWeightDPFP"): ref_dpfp,
    ("taxonomy.diag", "SlidingWindowAttention"): ref_sliding,
    ("taxonomy_sparse.diag", "Longformer"): ref_longformer,
    ("taxonomy_sparse.diag", "BigBird"): ref_bigbird,
    ("taxonomy_sparse.diag", "StarTransformer"): ref_star,
    ("taxonomy_sparse.diag", "ETC"): ref_etc,
    ("taxonomy_gaussian.diag", "GaussianTransformer"): ref_gaussian_transformer,
    ("taxonomy_gaussian.diag", "LocalnessAttention"): ref_localness,
    ("taxonomy_gaussian.diag", "HardcodedGaussian"): ref_hardcoded,
}


@pytest.mark.parametrize("file,name", sorted(MEMBERS), ids=lambda x: x)
def test_member_agrees_with_its_papers_mechanism(file, name):
    m = compiled(file, name)
    assert rel_norm(m(X), MEMBERS[(file, name)](m, X)) < 1e-10


def test_the_masks_are_what_the_notes_say():
    """Support per row, counted by brute force: window 2w-1 inside, global rows full, ring 3."""
    prog = stringdiag.loads("dim s : seq\ndim d : fixed\n"
                            "diagram G(x: [s, d]) -> [s, s] { return global<s, 2>() }\n"
                            "diagram R(x: [s, d]) -> [s, s] { return ring<s>() }\n", "masks.diag")
    x = torch.zeros(1, 9, 1, dtype=torch.float64)
    gl = compile(prog["G"], dims={"d": 1}, dtype=torch.float64)(x)[0]
    ring = compile(prog["R"], dims={"d": 1}, dtype=torch.float64)(x)[0]
    assert gl.sum(-1).tolist() == [9, 9] + [2] * 7
    assert ring.sum(-1).tolist() == [3] * 9 and torch.equal(ring, ring.T)
    assert all(ring[i, (i + 1) % 9] == 1 for i in range(9))


# -- training ------------------------------------------------------------------------------
def pattern(n=400, vocab=12):
    g = torch.Generator().manual_seed(0)
    base = torch.arange(vocab).repeat(n // vocab + 1)[:n]
    return torch.where(torch.rand(n, generator=g) < 0.1, torch.randint(vocab, (n,), generator=g), base)


@pytest.mark.parametrize("file,name", sorted(MEMBERS), ids=lambda x: x)
def test_member_trains_as_a_head(file, name):
    head = member(file, name)
    dims = {"k": 4, "m": 4, "w": 2, "g": 2, "r": 2}
    ids = pattern()
    torch.manual_seed(0)
    # the members attend both ways (not causal): trained as heads of a non-causal model
    make = lambda: LanguageModel(head, vocab=12, d_model=16, n_layers=1, n_heads=2, approximator="linear",
                                 dims=dims, check_causal=False)
    cfg = TrainConfig(context=8, batch_size=8, eval_every=3, warmup=2, max_steps=3, valid_tokens=None)
    hist = train(make, ids[:300], ids[300:], cfg, log=lambda s: None)
    row = hist.rows[-1]
    assert row["step"] == 3 and math.isfinite(row["train_loss"]) and math.isfinite(row["valid_ppl"])


# -- the random box kind ---------------------------------------------------------------------
RANDOM = """\
dim s : seq
dim d, m : fixed
random W : -> [m, d] seed 7
random W2 : -> [m, d] seed 7
random W3 : -> [m, d] seed 8
random R : -> [s, s] seed 5
learn L : [d] -> [m]
diagram Twice(x: [s, d]) -> [s, m] {
  y[i, r] = sum_f W()[r, f] * x[i, f] + sum_f W()[r, f] * x[i, f] + L(x)[i, r]
  return y
}
diagram Seeds(x: [s, d]) -> [s, m] {
  y[i, r] = sum_f (W2()[r, f] - W()[r, f] + W3()[r, f]) * x[i, f]
  return y
}
diagram Seq(x: [s, d]) -> [s, d] {
  y[i] = sum_j R()[i, j] * x[j]
  return y
}
"""


def test_random_box_is_a_buffer_drawn_from_its_seed_and_never_trained():
    prog = stringdiag.loads(RANDOM, "random.diag")
    a, b = (compile(prog["Twice"], dims={"d": 3, "m": 4}, approximator="linear", dtype=torch.float64)
            for _ in range(2))
    w = torch.randn(4, 3, generator=torch.Generator().manual_seed(7), dtype=torch.float64)
    assert len(dict(a.named_buffers())) == 1  # one box used twice: one tensor
    (buf,) = a.buffers()
    assert torch.equal(buf[0], w) and torch.equal(buf, next(b.buffers()))  # deterministic across compiles
    assert all(p.data_ptr() != buf.data_ptr() for p in a.parameters()) and not buf.requires_grad
    x = torch.randn(2, 5, 3, dtype=torch.float64, requires_grad=True)
    a(x).sum().backward()
    assert buf.grad is None and all(p.grad is not None for p in a.parameters())
    assert torch.allclose(x.grad, (2 * w.sum(0)).expand(2, 5, 3) + (a.L.weight.sum(0)).expand(2, 5, 3))
    # the compiled module's parameters are those the analysis counts: the random tensor adds none
    n = sum(p.numel() for p in a.parameters())
    assert n == parameter_count(prog["Twice"], {"d": 3, "m": 4}, "linear") == 3 * 4 + 4


def test_same_seed_same_tensor_other_seed_another():
    prog = stringdiag.loads(RANDOM, "random.diag")
    m = compile(prog["Seeds"], dims={"d": 3, "m": 4}, dtype=torch.float64)
    w3 = torch.randn(4, 3, generator=torch.Generator().manual_seed(8), dtype=torch.float64)
    x = torch.randn(2, 5, 3, dtype=torch.float64)
    assert torch.allclose(m(x), x @ w3.T, rtol=0, atol=1e-12)  # W2 - W = 0: seed 7 twice is one tensor
    assert not torch.allclose(w3, torch.randn(4, 3, generator=torch.Generator().manual_seed(7), dtype=torch.float64))


def test_random_box_over_a_sequence_is_drawn_at_run_time_for_its_length():
    m = compile(stringdiag.loads(RANDOM, "random.diag")["Seq"], dims={"d": 3}, dtype=torch.float64)
    assert list(m.buffers()) == []
    for s in (4, 6):
        x = torch.randn(2, s, 3, dtype=torch.float64)
        r = torch.randn(s, s, generator=torch.Generator().manual_seed(5), dtype=torch.float64)
        assert torch.allclose(m(x), r @ x, rtol=0, atol=1e-12) and torch.equal(m(x), m(x))


def test_single_precision_module_sees_the_same_draw():
    prog = stringdiag.loads(RANDOM, "random.diag")
    m = compile(prog["Seeds"], dims={"d": 3, "m": 4})
    x = torch.randn(2, 5, 3)
    w3 = torch.randn(4, 3, generator=torch.Generator().manual_seed(8), dtype=torch.float64).float()
    assert m(x).dtype == torch.float32 and torch.allclose(m(x), x @ w3.T, atol=1e-5)


@pytest.mark.parametrize("text,message", [
    ("random W : -> [d]\n", "a random box needs its seed"),
    ("random W : [d] -> [d] seed 3\n", "no inputs and one output"),
    ("learn W : [d] -> [d] seed 3\n", "only a random box has a seed"),
])
def test_random_box_declarations_are_checked(text, message):
    with pytest.raises(DiagError, match=message):
        stringdiag.loads("dim d : fixed\n" + text, "bad.diag")


def test_random_box_is_drawn_apart_and_isomorphism_tells_seeds_apart():
    from stringdiag.render.draw import to_svg

    prog = stringdiag.loads(RANDOM.replace("W2()", "W()"), "random.diag")
    other = stringdiag.loads(RANDOM.replace("W2()", "W3()"), "random.diag")
    assert "seed 7" in to_svg(prog["Twice"])
    assert not prog["Seeds"].isomorphic(other["Seeds"])  # seed 7 and seed 8 are different tensors


# -- derivations -------------------------------------------------------------------------------
# Each edge's derivation is checked with --verify, its relations and complexities as claimed, by
# tests/test_gallery_derivations.py (EXPECTED), which runs every gallery derivation once.
def test_every_taxonomy_derivation_is_checked_with_its_relations():
    from test_gallery_derivations import EXPECTED

    names = sorted(p.name for p in GALLERY.glob("tax_*.deriv"))
    assert len(names) == 15 and set(names) <= set(EXPECTED)
    assert sum(EXPECTED[n][0].count(REWIRE) for n in names) == 2  # ETC and the query-predicted windows


def test_specialising_a_generic_abstract_box_may_use_its_parameter(tmp_path):
    """Issue 9 item 6: `specialise N(a) := {...}` on N<n> used to fail with "undefined dimension 'n'"."""
    p = tmp_path / "n.deriv"
    p.write_text(f'start {GALLERY}/taxonomy.diag:PrimordialAttention\n'
                 'specialise sim(p, r) := { return sum_f p[f] * r[f] }\n'
                 'specialise N(a) := { return ssoftmax<n, k>(a) }\n'
                 f'target {GALLERY}/attention.diag:SelfAttention\n')
    assert load_derivation(p).target.name == "SelfAttention"
    p.write_text(f'start {GALLERY}/taxonomy.diag:PrimordialAttention\n'
                 'specialise sim(p, r) := { return sum_f p[f] * r[f] }\n'
                 'specialise N(a) := { return ssoftmax<n, zz>(a) }\n')
    with pytest.raises(DiagError, match="undefined dimension 'zz'") as e:
        load_derivation(p)
    assert e.value.pos.line == 3  # at the body's own line, not the step before it


def test_fold_a_generic_definition(tmp_path):
    """Issue 9 item 6: `fold softmax` used to be refused because softmax<n> has parameters."""
    p = tmp_path / "f.deriv"
    p.write_text(f'start {GALLERY}/attention.diag:SelfAttention\nunfold softmax\nfold softmax\n'
                 f'target {GALLERY}/attention.diag:SelfAttention\n')
    d = load_derivation(p, verify=True)
    assert [s.relation for s in d.steps[1:]] == [EQ, EQ] and d.steps[2].verified < 1e-12
    folded = [d.result.record(b) for b in d.result.boxes() if d.result.record(b).op == "softmax"]
    assert len(folded) == 1 and [str(x) for _, x in folded[0].generics] == ["s"]


def test_an_error_in_the_generated_header_points_at_the_body(tmp_path):
    """The header the derivation writes for an inline body (here with an input named twice) is
    reported at the body, not on the line of the step before it."""
    p = tmp_path / "h.deriv"
    p.write_text(f'start {GALLERY}/taxonomy.diag:PrimordialAttention\n'
                 'specialise sim(p, p) := { return sum_f p[f] * p[f] }\n')
    with pytest.raises(DiagError, match="declared twice") as e:
        load_derivation(p)
    assert (e.value.pos.line, e.value.pos.col) == (2, 25)
