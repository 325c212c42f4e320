"""Porting real models: weights from ``torch.nn.TransformerEncoderLayer`` and from a randomly
initialised Hugging Face ``GPT2Block`` loaded into compiled gallery diagrams with
``stringdiag.load_weights``, then outputs and gradients compared in float64.

The references are the libraries' own modules (not ours), every parameter randomised so that
no layer norm gain of one or zero bias hides a misplaced tensor. Gradients are of one scalar
loss with respect to the inputs and to every ported parameter; for a reference tensor that
packs several of ours (``in_proj_weight``, ``c_attn``) the gradients of ours are put back in
its layout here, by hand, from the mapping written out below.
"""
from __future__ import annotations

from pathlib import Path

import pytest
import torch
from torch import nn

import stringdiag
from helpers import rel_max

GALLERY = Path(__file__).resolve().parent.parent / "gallery"
TOL = 1e-10


def randomise(module: nn.Module, seed: int) -> None:
    gen = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for p in module.parameters():
            p.copy_(torch.randn(p.shape, generator=gen, dtype=p.dtype) * 0.5)


def compare(ours: nn.Module, ref: nn.Module, run_ref, x: torch.Tensor, mapping: dict, transposed: set) -> None:
    """Forward and gradients of ``sum(y * w)`` agree; ``mapping`` names, for each reference
    parameter, the list of ours it was cut into (along the first axis, after a transpose)."""
    w = torch.randn(x.shape, generator=torch.Generator().manual_seed(7), dtype=torch.float64)
    results = []
    for run in (ours, run_ref):
        xg = x.clone().requires_grad_(True)
        y = run(xg)
        (y * w).sum().backward()
        results.append((y.detach(), xg.grad))
    (y1, gx1), (y2, gx2) = results
    assert rel_max(y1, y2) < TOL, f"outputs: relative error {rel_max(y1, y2):.3g}"
    assert rel_max(gx1, gx2) < TOL, f"input gradients: relative error {rel_max(gx1, gx2):.3g}"
    mine = dict(ours.named_parameters())
    assert sorted(n for names in mapping.values() for n in names) == sorted(mine), "every parameter is ported"
    for name, p in ref.named_parameters():
        g = torch.cat([mine[n].grad for n in mapping[name]])
        g = g.t() if name in transposed else g
        assert rel_max(g, p.grad) < TOL, f"gradient of {name}: relative error {rel_max(g, p.grad):.3g}"


def compiled(file: str, name: str, dims: dict) -> nn.Module:
    prog = stringdiag.load(str(GALLERY / file))
    return stringdiag.compile(prog[name], dims=dims, approximator="linear", dtype=torch.float64)


# -- torch.nn.TransformerEncoderLayer into gallery/transformer.diag ------------------------------------
# EncoderLayer is pre-norm (x + Att(LN(x)), Khatri et al. Example 2.1) with a ReLU feed-forward;
# EncoderLayerPostNorm is Vaswani et al.'s LN(x + Att(x)) with the exact GELU.
TORCH_MAP = {
    "self_attn.in_proj_weight": ["WQ.weight", "WK.weight", "WV.weight"],
    "self_attn.in_proj_bias": ["WQ.bias", "WK.bias", "WV.bias"],
    "self_attn.out_proj.weight": ["WO.weight"], "self_attn.out_proj.bias": ["WO.bias"],
    "linear1.weight": ["W1.weight"], "linear1.bias": ["W1.bias"],
    "linear2.weight": ["W2.weight"], "linear2.bias": ["W2.bias"],
    "norm1.weight": ["n1.weight"], "norm1.bias": ["n1.bias"],
    "norm2.weight": ["n2.weight"], "norm2.bias": ["n2.bias"],
}


@pytest.mark.parametrize("name, norm_first, activation", [("EncoderLayer", True, "relu"),
                                                           ("EncoderLayerPostNorm", False, "gelu")])
def test_torch_transformer_encoder_layer_ports_into_the_gallery(name, norm_first, activation):
    h, dh, df = 2, 3, 8
    ref = nn.TransformerEncoderLayer(h * dh, h, dim_feedforward=df, dropout=0.0, activation=activation,
                                     batch_first=True, norm_first=norm_first, dtype=torch.float64)
    randomise(ref, 1)
    ours = compiled("transformer.diag", name, dict(h=h, dh=dh, dm=h * dh, df=df))
    stringdiag.load_weights(ours, ref.state_dict(), {  # as the README writes it
        "self_attn.in_proj_*": ["WQ.*", "WK.*", "WV.*"], "self_attn.out_proj.*": "WO.*",
        "linear1.*": "W1.*", "linear2.*": "W2.*", "norm1.*": "n1.*", "norm2.*": "n2.*"})
    x = torch.randn(2, 5, h * dh, generator=torch.Generator().manual_seed(2), dtype=torch.float64)
    compare(ours, ref, ref, x, TORCH_MAP, set())


# -- Hugging Face GPT2Block into gallery/gpt2.diag GPT2Block ------------------------------------------
GPT2_MAP = {  # Conv1D stores [in, out]: the .weight of c_attn, c_proj and c_fc are transposed
    "ln_1.weight": ["ln1.weight"], "ln_1.bias": ["ln1.bias"],
    "attn.c_attn.weight": ["attn.WQ.weight", "attn.WK.weight", "attn.WV.weight"],
    "attn.c_attn.bias": ["attn.WQ.bias", "attn.WK.bias", "attn.WV.bias"],
    "attn.c_proj.weight": ["attn.WO.weight"], "attn.c_proj.bias": ["attn.WO.bias"],
    "ln_2.weight": ["ln2.weight"], "ln_2.bias": ["ln2.bias"],
    "mlp.c_fc.weight": ["mlp.fc.weight"], "mlp.c_fc.bias": ["mlp.fc.bias"],
    "mlp.c_proj.weight": ["mlp.proj.weight"], "mlp.c_proj.bias": ["mlp.proj.bias"],
}
GPT2_TRANSPOSED = {"attn.c_attn.weight", "attn.c_proj.weight", "mlp.c_fc.weight", "mlp.c_proj.weight"}


@pytest.fixture(scope="module")
def gpt2():
    """transformers' GPT2Block and GPT2Config (imported once: the import takes seconds)."""
    pytest.importorskip("transformers")
    from transformers import GPT2Config
    from transformers.models.gpt2.modeling_gpt2 import GPT2Block

    return GPT2Block, GPT2Config


def test_hugging_face_gpt2_block_ports_into_the_gallery_gpt2_block(gpt2):
    block_class, config_class = gpt2
    h, k = 3, 4
    config = config_class(n_embd=h * k, n_head=h, n_layer=1, resid_pdrop=0.0, attn_pdrop=0.0, embd_pdrop=0.0,
                          activation_function="gelu_new")
    config._attn_implementation = "eager"  # the written-out softmax(q k^T / sqrt(k) + mask) v
    ref = block_class(config, layer_idx=0).to(torch.float64)
    randomise(ref, 3)
    ours = compiled("gpt2.diag", "GPT2Block", dict(h=h, k=k, d=h * k, f=4 * h * k))
    stringdiag.load_weights(ours, ref.state_dict(), {
        "ln_*.*": "ln*.*",
        "attn.c_attn.*": ["attn.WQ.*", "attn.WK.*", "attn.WV.*"],
        "attn.c_proj.*": "attn.WO.*",
        "mlp.c_*.*": "mlp.*.*",
    }, transpose=["*.c_*.weight"])
    s = 5
    mask = torch.zeros(s, s, dtype=torch.float64).masked_fill(~torch.ones(s, s, dtype=torch.bool).tril(),
                                                              float("-inf"))

    def run_ref(x):
        return ref(x, attention_mask=mask[None, None])

    x = torch.randn(2, s, h * k, generator=torch.Generator().manual_seed(4), dtype=torch.float64)
    compare(ours, ref, run_ref, x, GPT2_MAP, GPT2_TRANSPOSED)


# -- a stack ports with the map of one layer ----------------------------------------------------------
STACK = """import "stringdiag:gallery/gpt2.diag"
diagram Stack(x: [s, d]) -> [s, d] {
  y = repeat 2 GPT2Block(x)
  return y
}
"""
LAYER_MAP = {"ln_*.*": "ln*.*", "attn.c_attn.*": ["attn.WQ.*", "attn.WK.*", "attn.WV.*"],
             "attn.c_proj.*": "attn.WO.*", "mlp.c_*.*": "mlp.*.*"}  # the one-layer map of the test above


def test_a_stack_names_each_copy_as_one_layer_alone_prefixed_by_its_number():
    dims = dict(h=2, k=3, d=6, f=12)
    one = set(compiled("gpt2.diag", "GPT2Block", dims).state_dict())
    stack = stringdiag.compile(stringdiag.loads(STACK)["Stack"], dims=dims, approximator="linear")
    assert set(stack.state_dict()) == {f"y.{n}.{name}" for n in (0, 1) for name in one}


def test_a_two_layer_hugging_face_stack_ports_with_the_map_of_one_layer(gpt2):
    block_class, config_class = gpt2
    h, k = 2, 3
    config = config_class(n_embd=h * k, n_head=h, n_layer=2, resid_pdrop=0.0, attn_pdrop=0.0, embd_pdrop=0.0,
                          activation_function="gelu_new")
    config._attn_implementation = "eager"
    ref = nn.ModuleDict({"h": nn.ModuleList([block_class(config, layer_idx=i) for i in range(2)])}).to(torch.float64)
    randomise(ref, 5)
    ours = stringdiag.compile(stringdiag.loads(STACK)["Stack"], dims=dict(h=h, k=k, d=h * k, f=4 * h * k),
                              approximator="linear", dtype=torch.float64)
    stack_map = {"h.{layer}." + src: ([f"y.{{layer}}.{t}" for t in to] if isinstance(to, list) else f"y.{{layer}}.{to}")
                 for src, to in LAYER_MAP.items()}
    stringdiag.load_weights(ours, ref.state_dict(), stack_map, transpose=["h.*.*.c_*.weight"])
    s = 5
    mask = torch.zeros(s, s, dtype=torch.float64).masked_fill(~torch.ones(s, s, dtype=torch.bool).tril(),
                                                              float("-inf"))

    def run_ref(x):
        for block in ref["h"]:
            x = block(x, attention_mask=mask[None, None])
            x = x[0] if isinstance(x, tuple) else x
        return x

    x = torch.randn(2, s, h * k, generator=torch.Generator().manual_seed(6), dtype=torch.float64)
    y, want = ours(x), run_ref(x)
    assert rel_max(y, want) < TOL, f"relative error {rel_max(y, want):.3g}"


def test_a_placeholder_must_match_the_same_part_twice_and_be_named_by_its_source():
    from stringdiag.lower.porting import _target
    assert _target("a.3.b.3.w", {"a.{n}.b.{n}.*": "x.{n}.*"}) == "x.3.w"
    assert _target("a.3.b.4.w", {"a.{n}.b.{n}.*": "x.{n}.*"}) == "a.3.b.4.w"  # not matched: its own name
    with pytest.raises(stringdiag.DiagError, match="which its source does not"):
        _target("a.3.w", {"a.{n}.w": "x.{m}.w"})
