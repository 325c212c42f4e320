"""Ids computed inside a diagram: the prelude's ``bucket<n>(x)`` makes a number an id in
0, ..., n - 1 (the nearest integer, clamped), typed ``[] of n``, so that ``embed`` (or ``gather``)
reads a table by it at d per id, where a one-hot product costs n·d (T5's relative-position
bias: gallery/modern/t5.diag). Checked against torch's own indexing in float64 (values, and
the gradient: the table's by index, none through the id), costed, and refused where misused
with a message that names what works."""
from __future__ import annotations

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

import stringdiag
from stringdiag.analysis.complexity import analyse
from stringdiag.cli.main import main
from stringdiag.errors import DiagError

HEAD = "dim s : seq\ndim n, h : fixed\nlearn T : -> [n, h]\n"
LOOKUP = stringdiag.loads(HEAD + """
diagram Lookup(x: [s, s]) -> [s, s, h] {
  y[i, j] = embed(bucket<n>(x[i, j]), T())
  return y
}
diagram OneHot(x: [s, s]) -> [s, s, h] {
  p = positions<n>()
  y[i, j, a] = sum_b eq(x[i, j], p[b]) * T()[b, a]
  return y
}
""", "ids.diag")


def reference(x: torch.Tensor, table: torch.Tensor, n: int) -> torch.Tensor:
    """Row round(x) of the table, clamped to its n rows, by torch's own indexing."""
    return table[torch.round(x).clamp(0, n - 1).long()]


@settings(max_examples=25, deadline=None)
@given(n=st.integers(1, 7), s=st.integers(1, 5), spread=st.floats(0.5, 12.0), seed=st.integers(0, 2**16))
def test_a_lookup_at_a_computed_bucket_is_torchs_indexing_values_and_gradients(n, s, spread, seed):
    g = torch.Generator().manual_seed(seed)
    m = stringdiag.compile(LOOKUP["Lookup"], dims={"n": n, "h": 3}, dtype=torch.float64)
    x = ((torch.rand(2, s, s, generator=g, dtype=torch.float64) - 0.3) * spread).requires_grad_()
    y = m(x)
    table = m.T.weight
    want = reference(x.detach(), table.detach(), n)
    assert y.dtype == torch.float64 and torch.equal(y, want)
    gy = torch.randn(y.shape, generator=g, dtype=torch.float64)
    (gt,) = torch.autograd.grad(y, table, gy)
    leaf = table.detach().clone().requires_grad_()
    (gr,) = torch.autograd.grad(reference(x.detach(), leaf, n), leaf, gy)
    assert torch.allclose(gt, gr, rtol=0, atol=1e-12)
    assert torch.autograd.grad(y.sum(), x, allow_unused=True)[0] is None  # no gradient flows to x


def test_integer_valued_numbers_pass_unchanged_and_agree_with_the_one_hot_product():
    """Where x holds integers in range the lookup is the one-hot contraction exactly (what T5's
    bias used before); below 0 and beyond n - 1 it clamps, the one-hot gives zeros."""
    n = 6
    look, hot = (stringdiag.compile(LOOKUP[name], dims={"n": n, "h": 4}, dtype=torch.float64) for name in
                 ("Lookup", "OneHot"))
    hot.load_state_dict(look.state_dict())
    x = torch.randint(0, n, (3, 5, 5)).to(torch.float64)
    assert torch.equal(look(x), hot(x))
    table = look.T.weight.detach()
    assert torch.equal(look(torch.full((1, 2, 2), -3.0)), table[0].expand(1, 2, 2, 4))
    assert torch.equal(look(torch.full((1, 2, 2), 99.0)), table[n - 1].expand(1, 2, 2, 4))


def test_a_nan_is_refused_at_run_time():
    m = stringdiag.compile(LOOKUP["Lookup"], dims={"n": 4, "h": 2}, dtype=torch.float64)
    with pytest.raises(DiagError, match=r"bucket<4> is given NaN"):
        m(torch.full((1, 2, 2), float("nan")))


def test_a_lookup_costs_h_per_entry_where_the_one_hot_product_costs_n_h():
    assert str(analyse(LOOKUP["Lookup"]).time) == "s^2·h + h·n"
    assert str(analyse(LOOKUP["OneHot"]).time) == "s^2·h·n"


@pytest.mark.parametrize("body, message", [
    ("y[i] = embed(x[i], T())\n  return y",
     "input 1 of 'embed' takes token ids ([] of v) but is given real numbers ([]); token ids enter as a diagram "
     "input typed [s] of v, indices as topk's second output, and a number computed here becomes an id in 0, ..., "
     "n - 1 with bucket<n>(x)"),
    ("y[i] = embed(bucket(x[i]), T())\n  return y",
     "cannot infer dimension 'n' of 'bucket'; give it explicitly: bucket<n>(...)"),
    ("y[i] = T()[0] * bucket<n>(x[i])\n  return y",
     "takes real numbers ([]) but is given indices ([] of n); turn indices into vectors with gather(ids, table)"),
    ("y[i] = embed(bucketize(x[i]), T())\n  return y",
     "undefined box 'bucketize'; bucket<n>(x) makes a computed number an id in 0, ..., n - 1 (nearest integer, "
     "clamped) for embed or gather"),
    ("y[i] = embed(round(x[i]), T())\n  return y", "undefined box 'round'; floor(x + 0.5) rounds a number; bucket<n>(x)"),
], ids=["real-into-embed", "no-range", "id-as-number", "bucketize", "round"])
def test_misuse_names_the_construct_that_works(tmp_path, capsys, body, message):
    f = tmp_path / "bad.diag"
    f.write_text(HEAD + "diagram B(x: [s]) -> [s, h] {\n  " + body + "\n}\n")
    capsys.readouterr()
    assert main(["check", str(f)]) == 1
    err = capsys.readouterr().err
    assert "bad.diag:5:" in err and message in err, err


def test_ids_given_to_bucket_are_refused_as_ids_already(tmp_path, capsys):
    f = tmp_path / "bad.diag"
    f.write_text(HEAD + "diagram B(x: [s] of n) -> [s, h] {\n  y[i] = embed(bucket<n>(x[i]), T())\n  return y\n}\n")
    capsys.readouterr()
    assert main(["check", str(f)]) == 1
    err = capsys.readouterr().err
    assert ("bad.diag:5:26: error: input 1 of 'bucket' takes a number but is given ids ([] of n) already; give them "
            "to embed(ids, table) or gather(ids, table) as they are") in err, err
