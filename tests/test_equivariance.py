"""``info --equivariance``: the static permutation verdict (analysis/equivariance.py) against a
numeric check written here — permute the inputs of the compiled float64 module along every axis
of the dimension and compare the outputs with the permuted and with the unpermuted old ones —
over the gallery's diagrams, and on small programs made to exercise each rule."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from stringdiag import compile, load, loads
from stringdiag.analysis.equivariance import OrderVerdict, equivariance
from stringdiag.errors import DiagError

ROOT = Path(__file__).resolve().parents[1]
GALLERY = ROOT / "gallery"
# every diagram of these files (mechanisms.diag's 30 are causal, as anatomy.diag's are; lm.diag and
# modern/ are covered by their blocks in docs/theorems.md and by the slower cases below)
FILES = ["anatomy.diag", "attention.diag", "bahdanau.diag", "control.diag", "derivations.diag", "gpt2.diag",
         "hardmax.diag", "overparam.diag", "recurrent.diag", "similarity.diag", "splines.diag", "sumformer.diag",
         "sumformer_theorems.diag", "sumformer_experiments.diag", "taxonomy.diag", "taxonomy_gaussian.diag", "taxonomy_linear.diag",
         "taxonomy_sparse.diag", "transformer.diag"]
SEQ = 9  # longer than twice every window in the gallery, so that no mask covers everything


def _sizes(d) -> dict[str, int]:
    """3 for each fixed dimension without a declared size, SEQ for each sequence dimension."""
    from stringdiag.verify.oracle import dim_names

    prog = d.program
    sizes = {}
    for n in dim_names(d.expand()):
        decl = prog.lookup_dim(n)
        if decl is not None and decl.default is not None:
            sizes[n] = decl.default
        else:
            sizes[n] = SEQ if decl is not None and decl.kind == "seq" else 3
    return sizes


def numeric(d, s: str, draws: int = 2) -> OrderVerdict | None:
    """The verdict measured: None when the diagram does not compile (an abstract family)."""
    sizes = _sizes(d)
    try:
        # affine learnable boxes: tiny random ReLU networks are often dead, and a constant output is both
        f = compile(d, dims=sizes, approximator="linear", dtype=torch.float64)
    except DiagError:
        return None
    gen = torch.Generator().manual_seed(1)
    equi = [True] * len(d.outputs)
    inv = [True] * len(d.outputs)
    out_axes = [[k + 1 for k, dim in enumerate(t) if dim.name == s] for t in d.output_types]
    for _ in range(draws):
        with torch.no_grad():
            for p in f.parameters():
                scale = p.shape[-1] ** -0.5 if p.dim() >= 2 else 0.5  # N(0, 1/fan_in): no exp overflows
                p.copy_(torch.randn(p.shape, generator=gen, dtype=torch.float64) * scale)
        xs, pxs = [], []
        perm = torch.tensor([(i * 4 + 3) % SEQ for i in range(SEQ)])  # a fixed derangement of SEQ
        for w, t in zip(d.inputs, d.input_types):
            shape = (2, *(dim.evaluate(sizes) for dim in t))
            ids = d.id_range(w)
            x = (torch.randint(0, ids.evaluate(sizes), shape, generator=gen) if ids is not None
                 else torch.randn(shape, generator=gen, dtype=torch.float64))
            px = x
            for k, dim in enumerate(t):
                if dim.name == s:
                    px = px.index_select(k + 1, perm)
            xs.append(x)
            pxs.append(px)
        with torch.no_grad():
            y0, y1 = f(*xs), f(*pxs)
        y0 = y0 if isinstance(y0, tuple) else (y0,)
        y1 = y1 if isinstance(y1, tuple) else (y1,)
        for k, (a, b) in enumerate(zip(y0, y1)):
            pa = a
            for ax in out_axes[k]:
                pa = pa.index_select(ax, perm)
            scale = float(a.abs().max()) + 1e-300
            equi[k] &= torch.allclose(b, pa, rtol=0, atol=1e-9 * scale)
            inv[k] &= torch.allclose(b, a, rtol=0, atol=1e-9 * scale)
    if all(inv):
        return OrderVerdict.INVARIANT
    if all(equi[k] if out_axes[k] else inv[k] for k in range(len(equi))):
        return OrderVerdict.EQUIVARIANT
    return OrderVerdict.NEITHER


def _cases(files):
    for name in files:
        prog = load(str(GALLERY / name))
        for dname, d in prog.diagrams.items():
            for e in equivariance(d):
                yield pytest.param(d, e, id=f"{name}:{dname}:{e.dim}")


@pytest.fixture(scope="module")
def gallery_cases():
    return list(_cases(FILES))


def test_gallery_verdicts_match_permuted_modules(gallery_cases):
    seen = {v: 0 for v in OrderVerdict}
    wrong = []
    for case in gallery_cases:
        d, e = case.values
        got = numeric(d, e.dim)
        if got is None:
            continue
        seen[got] += 1
        if got is not e.verdict:
            wrong.append(f"{case.id}: static {e.verdict.value}, measured {got.value} ({e.text()})")
    assert not wrong, "\n".join(wrong)
    # every verdict occurs, so that the comparison is not vacuous
    assert seen[OrderVerdict.EQUIVARIANT] >= 20 and seen[OrderVerdict.INVARIANT] >= 4 and seen[OrderVerdict.NEITHER] >= 20, seen


def _verdicts(src: str, name: str) -> dict[str, OrderVerdict]:
    return {e.dim: e.verdict for e in equivariance(loads(src)[name])}


PROGRAM = """
dim s, t : seq
dim d : fixed
learn F : [d] -> [d]
learn G : [d + d] -> [d]
learn T : -> [s, d]
diagram Pool(x: [s, d]) -> [d] {
  y[i] = F(x[i])
  return sum_i y[i]
}
diagram Broadcast(x: [s, d]) -> [s, d] {
  p = Pool(x)
  y[i] = G(cat(x[i], p))
  return y
}
diagram Positions(x: [s, d]) -> [s, d] {
  p = Pool(x)
  e = posenc<s, d>()
  y[i] = e[i] + p
  return y
}
diagram Counted(x: [s, d]) -> [s] {
  return cumsum(ones<s>())
}
diagram Learned(x: [s, d]) -> [s, d] {
  return x + T()
}
diagram Reversed(x: [s, d]) -> [s, d] {
  return reverse(x)
}
diagram Max(x: [s, d]) -> [d] {
  m[f] = amax(x[:, f])
  return m
}
diagram Pair(x: [s, d], y: [t, d]) -> [s, d] {
  e[i, j] = sum_f x[i, f] * y[j, f]
  a[i] = hardmax(e[i])
  o[i] = sum_j a[i, j] * y[j]
  return o
}
"""


@pytest.mark.parametrize("name, expect", [
    ("Pool", {"s": OrderVerdict.INVARIANT}),
    ("Broadcast", {"s": OrderVerdict.EQUIVARIANT}),          # a pooled invariant beside each position
    ("Positions", {"s": OrderVerdict.INVARIANT}),            # a table of positions plus an invariant: unchanged
    ("Counted", {"s": OrderVerdict.INVARIANT}),              # cumsum of ones is the positions: held, not moved
    ("Learned", {"s": OrderVerdict.NEITHER}),
    ("Reversed", {"s": OrderVerdict.NEITHER}),
    ("Max", {"s": OrderVerdict.INVARIANT}),
    ("Pair", {"s": OrderVerdict.EQUIVARIANT, "t": OrderVerdict.INVARIANT}),
])
def test_rules_on_small_programs(name, expect):
    assert _verdicts(PROGRAM, name) == expect
    d = loads(PROGRAM)[name]
    for s, v in expect.items():
        assert numeric(d, s) is v, (name, s)


def test_reasons_name_the_box_and_its_chain():
    prog = load(str(GALLERY / "lm.diag"))
    (e,) = equivariance(prog["LlamaBlock"])
    assert e.verdict is OrderVerdict.NEITHER
    assert "positions of s" in e.text() and "LlamaAttn" in e.text() and "rope" in e.text()
    (e,) = equivariance(load(str(GALLERY / "control.diag"))["RunningMean"])
    assert e.text().startswith("s: neither: a cumulative sum along s, at cumsum (")
    (e,) = equivariance(load(str(GALLERY / "recurrent.diag"))["LinearRNN"])
    assert "a scan along s" in e.text()
    (e,) = equivariance(load(str(GALLERY / "sumformer.diag"))["Linformer"])
    assert "a learned table over positions of s" in e.text()


def _cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "stringdiag", *args], capture_output=True, text=True, cwd=ROOT)


def test_cli_equivariance_and_confirm():
    r = _cli("info", "gallery/attention.diag", "-d", "CrossAttention", "--equivariance", "--confirm")
    assert r.returncode == 0, r.stderr
    assert "permutation: t: equivariant" in r.stdout and "permutation: s: invariant" in r.stdout
    assert "t: measured equivariant, confirmed" in r.stdout and "s: measured invariant, confirmed" in r.stdout
    r = _cli("info", "gallery/control.diag", "-d", "ShortConv", "--equivariance", "--json")
    assert r.returncode == 0, r.stderr
    (e,) = json.loads(r.stdout)["equivariance"]
    assert e["verdict"] == "neither" and e["outputs"][0]["at"].startswith("causal_conv (gallery/control.diag:")
    r = _cli("info", "gallery/similarity.diag", "-d", "GenericSimilarityAttention", "--equivariance", "--confirm")
    assert r.returncode == 0 and "nothing confirmed numerically" in r.stdout and "abstract family" in r.stdout
    r = _cli("info", "gallery/nope.diag", "--equivariance")
    assert r.returncode == 1 and "error:" in r.stderr and "Traceback" not in r.stderr
