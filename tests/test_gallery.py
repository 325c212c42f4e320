"""Every gallery file checks, renders, and every diagram in it compiles and runs."""
from __future__ import annotations

import re

import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
import torch

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
                     "ScalarHardmaxBlock": "[s, d] -> [s, d]", "HardmaxReadout": "[s, d] -> [d]"},
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
    "overparam.diag": {},  # the diagrams the proofs of rewrites (5) and (6) start and end at
    "control.diag": {"TokenFF": "[s, d] -> [s, d]"},
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


def _sizes(prog, d) -> tuple[dict, dict]:
    fixed = {n: 4 for n, decl in prog.dims.items() if decl.kind == "fixed"}
    seq = {"s": 6, "t": 5, "m": 3}
    # a learnable box over a seq dimension (Linformer's projections) fixes that length
    for b in d.expand().boxes():
        node = d.expand().box(b)
        if node["box"] == "learn":
            for w in d.expand().box_outputs(b):
                for dim in d.expand().wire_type(w):
                    for n in dim.names():
                        if prog.lookup_dim(n) and prog.lookup_dim(n).kind == "seq":
                            fixed[n] = seq.get(n, 6)
    if not d.inputs:  # nothing to read a sequence length from: it is given
        fixed.update({n: v for n, v in seq.items() if prog.lookup_dim(n) is not None})
    return fixed, seq


@pytest.mark.parametrize("path,name", ALL, ids=lambda x: x if isinstance(x, str) else x.name)
def test_diagram_compiles_and_runs_on_random_input(path, name):
    prog = stringdiag.load(path)
    d = prog[name]
    fixed, seq = _sizes(prog, d)
    if any(d.expand().box(b)["box"] == "abstract" for b in d.expand().boxes()):
        with pytest.raises(DiagError, match="is an abstract family"):
            compile(d, dims=fixed)
        return
    torch.manual_seed(0)
    m = compile(d, dims=fixed, approximator="mlp", dtype=torch.float64)
    sizes = {**seq, **fixed}
    for g in d.generics:
        sizes.setdefault(g, 3)

    def shape(t):
        return tuple(dim.evaluate(sizes) for dim in t)

    xs = [torch.randn(2, *shape(t), dtype=torch.float64) if d.id_range(w) is None  # token ids: integers
          else torch.randint(0, d.id_range(w).evaluate(sizes), (2, *shape(t))) for w, t in zip(d.inputs, d.input_types)]
    out = m(*xs)
    outs = out if isinstance(out, tuple) else (out,)
    batch = (2,) if xs else ()  # a diagram without inputs makes one value
    assert [tuple(o.shape) for o in outs] == [(*batch, *shape(t)) for t in d.output_types]
    assert all(torch.isfinite(o).all() for o in outs)
