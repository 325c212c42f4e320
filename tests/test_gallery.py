"""Every gallery file checks and renders, and every diagram in it (and in gallery/modern/)
computes, compiled, what an independent NumPy evaluation of its graph computes."""
from __future__ import annotations

import math
import re

import xml.etree.ElementTree as ET
from pathlib import Path

import numpy as np
import pytest
import torch
from numpy_eval import Weights, evaluate

import stringdiag
from stringdiag import DiagError
from stringdiag import compile
from stringdiag.render.draw import to_svg

GALLERY = Path(__file__).resolve().parents[1] / "gallery"
FILES = sorted(GALLERY.glob("*.diag"))

# The names the gallery promises, with their inferred signatures.
SIGNATURES = {
    "transformer.diag": {"TransformerEncoder": "[s, v] -> [s, v]"},
    "attention.diag": {
        "SelfAttention": "[s, d] -> [s, d]",
        "MaskedSelfAttention": "[s, d] -> [s, d]",
        "CrossAttention": "[t, d], [s, d] -> [t, d]",
        "MultiHeadAttention": "[s, d] -> [s, d]",
    },
    "similarity.diag": {
        "GenericSimilarityAttention": "[s, d] -> [s, d]",
        "LinearAttention": "[s, d] -> [s, d]",
        "CausalLinearAttention": "[s, d] -> [s, d]",
    },
    "bahdanau.diag": {"Bahdanau": "[s, d], [t, e] -> [t, o]"},
    "gpt2.diag": {"GPT2Block": "[s, d] -> [s, d]"},
    "lm.diag": {n: "[s] of v -> [s, v]" for n in ("GPT", "GPTUntied", "Llama")},
    "splines.diag": {
        "ReluAttention": "[s, d] -> [s, m]",
        "MaskedReluAttention": "[s, d] -> [s, m]",
        "EncoderBlock": "[s, d] -> [s, d]",
        "DecoderBlock": "[s, d] -> [s, d]",
        "EncoderDecoderBlock": "[s, d], [t, d] -> [t, d]",
    },
    "hardmax.diag": {"HardmaxAttention": "[s, d] -> [s, d]", "HardmaxBlock": "[s, d] -> [s, d]",
                     "ScalarHardmaxBlock": "[s, d] -> [s, d]", "HardmaxReadout": "[s, d] -> [d]",
                     "ScalarSoftmaxBlock": "[s, d] -> [s, d]", "WeightedHardmaxAttention": "[s, d], [s] -> [s, d]",
                     "MultiHeadHardmaxAttention": "[s, d] -> [s, d]", "MaskedScalarHardmaxBlock": "[s, d] -> [s, d]"},
    "sumformer_theorems.diag": {**{n: "[s, d] -> [s, d + 2*e + 1]" for n in (
        "Eq22Rows", "SoftmaxHeadOnRows", "SumformerSumRows", "LinformerHeadOnRows", "LinformerSumRows",
        "PerformerHeadOnRows")}, "RowFeatures": "[d + 2*e + 1] -> [p]"},
    "sumformer.diag": {"Sumformer": "[s, d] -> [s, d]", "Linformer": "[s, d] -> [s, d]",
                       "Performer": "[s, d] -> [s, d]"},
    "anatomy.diag": {
        "AttPrep": "[s, d] -> [s, s]",
        "AttApply": "[s, s], [s, d] -> [s, d]",
        "LinAttPrep": "[s, d] -> [s, k], [s, k]",
        "LinAttApply": "[s, k], [s, k], [s, d] -> [s, d]",
        "ConcatFF": "[s, d], [s, d] -> [s, d]",
        "M0": "[s, d] -> [s, d]",
        "M1": "[s, d] -> [s, d]",
    },
    "derivations.diag": {},  # the start, intermediate and target diagrams of gallery/*.deriv
    "simd_moves.diag": {"B2PerQuery": "[s, d] -> [s, d]"},  # App. B.2's moves (gallery/simd_moves.deriv)
    "overparam.diag": {},  # the diagrams the proofs of rewrites (5) and (6) start and end at
    "control.diag": {"TokenFF": "[s, d] -> [s, d]"},
    "residual.diag": {"Layer": "[s, d] -> [s, d]", "ResidualLayer": "[s, d] -> [s, d]"},  # Khatri et al. Def. 3.1
    "sumformer_experiments.diag": {"PolySumformer": "[s, d], [s, e] -> [s, d]",  # Alberti et al. Sec. 5
                                   "MLPSumformer": "[s, d] -> [s, d]"},
    "spline_encoder.diag": {},  # generic blocks that `construct` chains (Lai, Lim and Liu Sec. 3.3)
    "spline_heads.diag": {n: "[s, d] -> [s, d]" for n in ("SoftmaxHead", "ReluHead", "SoftplusHead")},  # Lai et al. 4.2
    "sumformer_polynomial.diag": {},  # generic pieces that `construct sumformer` chains (Alberti et al. Thm 4.1)
    "scores.diag": {n: "[t, d], [s, d] -> [t, d]" for n in (  # the lecture slides' scores
        "ScoreAttention", "DotAttention", "MultiplicativeAttention", "MappedQueryDotAttention", "AdditiveAttention")},
    "anatomy_qk.diag": {"AttPrepQK": "[s, d], [s, d] -> [s, s]", "LinAttPrepQK": "[s, d], [s, d] -> [s, k], [s, k]"},
    "mechanisms.diag": {"M2": "[s, d] -> [s, d]", "M3": "[s, d] -> [s, d]"},  # written by stringdiag enumerate
    "taxonomy.diag": {
        "PrimordialAttention": "[s, d] -> [s, d]",
        "SlidingWindowAttention": "[s, d] -> [s, d]",
        "GaussianWindowAttention": "[s, d] -> [s, d]",
    },
    "taxonomy_linear.diag": {n: "[s, d] -> [s, d]" for n in (
        "NormalisedSimilarityAttention", "LinearTransformer", "PerformerFAVOR", "FastWeightDPFP")},
    "taxonomy_sparse.diag": {n: "[s, d] -> [s, d]" for n in (
        "MaskedAttention", "Longformer", "BigBird", "StarTransformer", "ETC")},
    "recurrent.diag": {**{n: "[s, d] -> [s, d]" for n in (
        "LinearRNN", "GLARecurrent", "GLAParallel", "SSMRecurrent", "SSDAttention")},
        **{n: "[m, c, d] -> [m, c, d]" for n in ("RetentionRecurrent", "RetentionParallel", "RetentionChunkwise")}},
    "taxonomy_gaussian.diag": {n: "[s, d] -> [s, d]" for n in (
        "GaussianPriorAttention", "GaussianTransformer", "HardcodedGaussian", "GaussianAttention",
        "LocalnessAttention")},
}
# files written by a command, drawn as one grid picture by it rather than one picture each
GRIDS = {"mechanisms.diag": "mechanisms.svg"}
ALL = [(f, name) for f in FILES if f.name not in GRIDS for name in stringdiag.load(f)]


def test_every_promised_file_is_there():
    assert sorted(SIGNATURES) == sorted(f.name for f in FILES)


# the works the gallery reproduces, as its header comments cite them (README, References)
CITED = ("Khatri et al.", "Lai, Lim and Liu", "Alcalde, Fantuzzi and Zuazua", "Alberti", "lecture slides", "Radford",
         "Katharopoulos et al.", "Sun et al.", "Yang et al.", "Dao and Gu")  # the last four: issue 23's forms


def cites_a_paper(head: str) -> bool:
    """The header names the work by its authors and says when it appeared (or is the slides)."""
    return any(a in head for a in CITED) and (re.search(r"\b(19|20)\d\d\b", head) is not None
                                              or "lecture slides" in head)


@pytest.mark.parametrize("path", FILES, ids=lambda p: p.name)
def test_file_checks_without_warnings_and_cites_its_source(path):
    prog = stringdiag.load(path)
    assert [w.render("warning") for w in prog.warnings] == []
    assert cites_a_paper(path.read_text().split("\n\n")[0])
    got = {n: prog[n].signature().split(" : ", 1)[1] for n in SIGNATURES[path.name]}
    assert got == SIGNATURES[path.name]


@pytest.mark.parametrize("path,name", ALL, ids=lambda x: x if isinstance(x, str) else x.name)
def test_diagram_renders_to_valid_svg_and_has_a_committed_picture(path, name):
    d = stringdiag.load(path)[name]
    root = ET.fromstring(to_svg(d))
    assert root.tag.endswith("svg")
    committed = path.parent / f"{path.stem}.{name}.svg"
    assert committed.exists(), f"render it: stringdiag render {path} -o gallery/"
    ET.parse(committed)


@pytest.mark.parametrize("name", sorted(GRIDS))
def test_generated_file_has_its_grid_picture(name):
    prog = stringdiag.load(GALLERY / name)
    root = ET.parse(GALLERY / GRIDS[name]).getroot()
    captions = {t.text.split()[0] for t in root.iter() if t.tag.endswith("text") and t.text and t.text[:1] == "M"}
    assert set(prog.own) <= captions  # every mechanism is in the picture


# Every diagram of gallery/ and gallery/modern/, for the value tests (abstract families included:
# compiling one must be refused).
VALUED = [(f, name) for f in sorted(GALLERY.glob("*.diag")) + sorted((GALLERY / "modern").glob("*.diag"))
          for name in stringdiag.load(f)]
# two sizes, each with sequences long enough that a window's edge (|i - j| = w) falls between
# two positions past the g global tokens (w, g: fixed dims, 3 or 4)
SMALL = {"fixed": 3, "seq": {"s": 7, "t": 5, "m": 2}}
LARGE = {"fixed": 4, "seq": {"s": 9, "t": 6, "m": 3}}


def _sizes(prog, d, at: dict) -> tuple[dict, dict]:
    """(the dims to compile with, the seq lengths of the inputs)."""
    fixed = {n: decl.default if decl.default is not None else at["fixed"]
             for n, decl in prog.dims.items() if decl.kind == "fixed"}
    seq = dict(at["seq"])
    # a learnable box over a seq dimension (Linformer's projections) fixes that length
    e = d.expand()
    for b in e.boxes():
        if e.record(b).kind == "learn":
            for w in e.box_outputs(b):
                for dim in e.wire_type(w):
                    for n in dim.names():
                        if prog.lookup_dim(n) and prog.lookup_dim(n).kind == "seq":
                            fixed[n] = seq.get(n, 6)
    if not d.inputs:  # nothing to read a sequence length from: it is given
        fixed.update({n: v for n, v in seq.items() if prog.lookup_dim(n) is not None})
    for g in d.generics:  # a generic definition used alone (a position's count: a seq length)
        fixed.setdefault(g, seq["s"] if g == "n" else at["fixed"])
    return fixed, seq


def _registry(monkeypatch) -> list:
    """The compiled module's weight sets as the compiler registers them (weight set -> module):
    how the reference finds the weights a learnable box computes with."""
    from stringdiag.lower import lower as L

    seen: list = []
    register = L.Lowering.register

    def recording(self, key, make):
        if not any(r is self.registry for r in seen):
            seen.append(self.registry)
        return register(self, key, make)
    monkeypatch.setattr(L.Lowering, "register", recording)
    return seen


def _agree(y: torch.Tensor, ref: np.ndarray) -> float:
    """max |y - ref| / max |ref| over the finite entries; ``inf`` when the shapes, dtypes or the
    places and signs of the entries that are not finite differ."""
    y = y.detach()
    if y.dtype not in (torch.float64, torch.int64) or tuple(y.shape) != ref.shape:
        return math.inf
    y = y.double().numpy()
    for test in (np.isnan, np.isposinf, np.isneginf):
        if not np.array_equal(test(y), test(ref)):
            return math.inf
    fin = np.isfinite(ref)
    if not fin.any():
        return 0.0
    err, scale = np.abs(y[fin] - ref[fin]).max(), np.abs(ref[fin]).max()
    return err / scale if scale else (0.0 if err == 0 else math.inf)


@pytest.mark.parametrize("path,name", VALUED, ids=lambda x: x if isinstance(x, str) else x.name)
def test_diagram_computes_what_an_independent_evaluator_computes(path, name, monkeypatch):
    """Compiled in float64 at two sizes — natively with the fast paths at the smaller, every
    definition opened (``native=False``) at the larger — with random weights and inputs, each
    agrees with the NumPy evaluator of ``tests/numpy_eval.py`` to 1e-9 on every output, and the
    evaluator reads every weight set the module holds."""
    from stringdiag.lower.lower import compile as lower

    prog = stringdiag.load(path)
    d = prog[name]
    e = d.expand()
    if any(e.record(b).kind == "abstract" for b in e.boxes()):
        with pytest.raises(DiagError, match="is an abstract family"):
            compile(d, dims=_sizes(prog, d, SMALL)[0])
        return
    seen = _registry(monkeypatch)
    for at, native in ((SMALL, True), (LARGE, False)):
        fixed, seq = _sizes(prog, d, at)
        seen.clear()
        m = lower(d, dims=fixed, dtype=torch.float64, native=native).eval()
        gen = torch.Generator().manual_seed(len(name))
        with torch.no_grad():
            for p in m.parameters():  # not the initialisation: layer norms start at 1 and 0
                p.copy_(torch.randn(p.shape, generator=gen, dtype=torch.float64) * 0.5)
        sizes = {**seq, **fixed}
        shape = lambda t: tuple(dim.evaluate(sizes) for dim in t)  # noqa: E731
        xs = [torch.randn(2, *shape(t), generator=gen, dtype=torch.float64) if d.id_range(w) is None
              else torch.randint(0, d.id_range(w).evaluate(sizes), (2, *shape(t)), generator=gen)
              for w, t in zip(d.inputs, d.input_types)]
        with torch.no_grad():
            out = m(*xs)
        outs = out if isinstance(out, tuple) else (out,)
        weights = Weights(seen[0] if seen else {})
        with np.errstate(all="ignore"):  # log(0), as the module computes it
            refs = evaluate(d, [x.numpy() for x in xs], sizes, weights)
        batch = (2,) if xs else ()  # a diagram without inputs makes one value
        assert len(outs) == len(refs) == len(d.output_types)
        for k, (y, ref, t) in enumerate(zip(outs, refs, d.output_types)):
            err = _agree(y, np.broadcast_to(ref, (*batch, *shape(t))))
            assert err < 1e-9, f"output {k} at {sizes}, native={native}: relative error {err:.3g}"
        held = {k for k in weights.registry if k[0] in ("learn", "diagram")}
        assert held <= weights.read, f"weight sets the module holds and the diagram never uses: {held - weights.read}"
