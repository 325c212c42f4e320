"""gallery/modern/mixtral.diag against Hugging Face's Mixtral (random small configs built here,
nothing downloaded): the sparse MoE block and a 2-layer MixtralForCausalLM ported with one map
per decoder layer (``{layer}``), forward and the gradient of every weight; a hand-written float64
reference for the block; ``info`` counts the k chosen experts, not all e.

Precision: Hugging Face's router computes its softmax in float32 whatever the dtype
(``router_logits.float()``), and the whole model also its rotary angles, RMSNorm variance and
eager attention softmax: as it is, the agreement is float32's (1e-5 relative). Each port runs
again with those casts taken out (``without_float32``: ``torch.float32`` and ``torch.float`` mean
float64 in the modelling module, and the router's logits keep float64 through ``.float()``), and
then agrees at float64's precision (1e-10). Against the hand-written float64 reference the block
agrees to 1e-12."""
from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F

import stringdiag
from stringdiag.cli.main import main

transformers = pytest.importorskip("transformers")
from transformers.models.mixtral import modeling_mixtral as hf  # noqa: E402
from helpers import agreement, rel_max

FILE = Path(__file__).resolve().parent.parent / "gallery" / "modern" / "mixtral.diag"
V, S = 29, 9
F64 = 1e-10  # float64 throughout
F32 = 1e-5   # the reference as it is: it casts to float32 inside
SIZES = dict(v=V, d=16, g=2, n=2, r=2, f=12, L=2, e=5, k=2, w=3, theta=10000)
BLOCK_MAP = {"gate.weight": "gate.weight", "experts.*": "*.weight"}  # one MixtralSparseMoeBlock
LAYER_MAP = {  # one decoder layer, {layer} its number: ports every layer
    "model.embed_tokens.weight": "model.embed_tokens.weight", "model.norm.weight": "model.norm.gain.weight",
    "lm_head.weight": "lm_head.weight",
    "model.layers.{layer}.self_attn.*.weight": "model.layers.{layer}.MixtralAttention_1.*.weight",
    "model.layers.{layer}.mlp.gate.weight": "model.layers.{layer}.MixtralSparseMoeBlock_1.gate.weight",
    "model.layers.{layer}.mlp.experts.*": "model.layers.{layer}.MixtralSparseMoeBlock_1.*.weight",
    "model.layers.{layer}.*_layernorm.weight": "model.layers.{layer}.*_layernorm.gain.weight",
}


class TorchWithoutFloat32:
    """``torch`` as the modelling module sees it, ``float32`` (and ``float``) meaning float64: its
    casts inside a float64 run (``.to(torch.float32)``, ``softmax(..., dtype=torch.float32)``, the
    rotary frequencies' ``dtype=torch.float``) become no-ops. Set before the model is built."""
    float32 = float = torch.float64

    def __getattr__(self, name):
        return getattr(torch, name)


class KeepsFloat64(torch.Tensor):
    """A tensor whose ``.float()`` is itself: the router's logits, which it casts so."""

    def float(self, *args, **kwargs):  # type: ignore[override]
        return self


class FunctionalKeepingFloat64:
    """``torch.nn.functional`` as the modelling module names it (``F``, the router's only use):
    ``F.linear`` gives logits that keep float64 through ``.float()``."""

    def __getattr__(self, name):
        return getattr(F, name)

    @staticmethod
    def linear(*args, **kwargs):
        return F.linear(*args, **kwargs).as_subclass(KeepsFloat64)


def tolerance(in_float64: bool, monkeypatch) -> float:
    """float64's with Hugging Face's float32 casts taken out, float32's as it is."""
    if not in_float64:
        return F32
    monkeypatch.setattr(hf, "torch", TorchWithoutFloat32())
    monkeypatch.setattr(hf, "F", FunctionalKeepingFloat64())
    return F64


def config(window: int = 3):
    c = transformers.MixtralConfig(vocab_size=V, hidden_size=16, intermediate_size=12, num_hidden_layers=2,
                                   num_attention_heads=4, num_key_value_heads=2, num_local_experts=5,
                                   num_experts_per_tok=2, sliding_window=window, rope_theta=10000.0,
                                   rms_norm_eps=1e-6, tie_word_embeddings=False, router_jitter_noise=0.0)
    c._attn_implementation = "eager"
    c._experts_implementation = "eager"  # the loop over the chosen experts (grouped_mm needs float32)
    return c


def randomise(module: torch.nn.Module, seed: int, scale: float = 0.5) -> None:
    gen = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for p in module.parameters():
            p.copy_(torch.randn(p.shape, generator=gen, dtype=p.dtype) * scale)


def compiled(name: str, **dims) -> torch.nn.Module:
    return stringdiag.compile(stringdiag.load(str(FILE))[name], dims={**SIZES, **dims}, approximator="linear",
                              dtype=torch.float64)


def block_reference(x, gate, gate_up, down, k):
    """Mixtral's block by hand in float64: softmax over the k largest router logits, each chosen
    expert's SwiGLU (gate and up the halves of gate_up_proj) weighted by it."""
    v, ids = torch.topk(x @ gate.T, k, dim=-1)
    w = torch.softmax(v, dim=-1)
    f = gate_up.shape[1] // 2
    out = torch.zeros_like(x)
    for j in range(k):
        gu = gate_up[ids[..., j]]  # [..., 2f, d]
        h = torch.einsum("...fd,...d->...f", gu, x)
        swiglu = F.silu(h[..., :f]) * h[..., f:]
        out = out + w[..., j, None] * torch.einsum("...df,...f->...d", down[ids[..., j]], swiglu)
    return out


def test_mixtral_checks_and_renders(tmp_path, capsys):
    assert main(["check", str(FILE)]) == 0
    assert main(["render", str(FILE), "-o", str(tmp_path)]) == 0
    capsys.readouterr()
    assert len(list(tmp_path.glob("*.svg"))) == 5


@pytest.mark.parametrize("in_float64", [False, True])
def test_the_sparse_moe_block_is_hugging_faces(in_float64, monkeypatch):
    tol = tolerance(in_float64, monkeypatch)
    ref = hf.MixtralSparseMoeBlock(config()).to(torch.float64).eval()
    randomise(ref, 2)
    ours, twin = compiled("MixtralSparseMoeBlock"), compiled("MixtralSparseMoeBlock")
    stringdiag.load_weights(ours, ref.state_dict(), BLOCK_MAP)
    x = torch.randn(2, S, 16, generator=torch.Generator().manual_seed(3), dtype=torch.float64)
    y = ours(x)
    p = {n.split(".")[0]: t for n, t in ours.named_parameters()}
    assert rel_max(y, block_reference(x, p["gate"], p["gate_up_proj"], p["down_proj"], 2)) < 1e-12
    fwd, grad = agreement(ours, twin, ref, y, ref(x), BLOCK_MAP)
    assert fwd < tol and grad < tol, (fwd, grad)
    one = compiled("MixtralSparseMoeBlock", k=1)  # the number chosen matters at these sizes
    stringdiag.load_weights(one, ref.state_dict(), BLOCK_MAP)
    assert rel_max(one(x), ref(x)) > 1e-2


@pytest.mark.parametrize("in_float64", [False, True])
def test_a_two_layer_hugging_face_mixtral_ports_with_one_map_per_layer(in_float64, monkeypatch):
    """The window (3) is shorter than the sequence (9), and 2 of 5 experts run per token."""
    tol = tolerance(in_float64, monkeypatch)
    ref = transformers.MixtralForCausalLM(config()).to(torch.float64).eval()
    randomise(ref, 4)
    ours, twin = compiled("MixtralForCausalLM"), compiled("MixtralForCausalLM")
    stringdiag.load_weights(ours, ref.state_dict(), LAYER_MAP)
    t = torch.randint(0, V, (2, S), generator=torch.Generator().manual_seed(5))
    fwd, grad = agreement(ours, twin, ref, ours(t), ref(t).logits, LAYER_MAP)
    assert fwd < tol and grad < tol, (fwd, grad)


def cost(capsys, name: str) -> dict:
    capsys.readouterr()
    assert main(["info", str(FILE), "-d", name, "--json"]) == 0
    return json.loads(capsys.readouterr().out)["complexity"]


def test_info_counts_the_chosen_experts_not_all_of_them(capsys):
    """The experts cost s·d·f·k (k chosen of e); the router s·d·e; the weights d·e·f once."""
    assert cost(capsys, "MixtralSparseMoeBlock")["time"] == "s·d·f·k + s·d·e + d·e·f"
    c = cost(capsys, "MixtralDecoderLayer")
    assert c["time"] == "s·w·g·n·r + s·d·g·n·r + s·d·f·k + s·d·e + d·e·f", c
    assert c["seq_time"] == "s·w"


def test_the_compiled_mixtral_attention_is_banded_as_info_counts_it():
    """The attention is computed on its causal window (rules/fastpath.rules' causal_window_sdpa ->
    the native causal_window_attention), no [s, s] mask built; the HF port above then checks it."""
    from stringdiag.lower import primitives as P
    m = compiled("MixtralForCausalLM")
    called = {n.target for mod in m.modules() if isinstance(mod, torch.fx.GraphModule)
              for n in mod.graph.nodes if n.op == "call_function"}
    assert P.causal_window_attention in called and not {P.causal, P.window} & called
