"""gallery/lm.diag's whole language models against Hugging Face: a randomly initialised tiny
GPT2LMHeadModel and LlamaForCausalLM (configs built here, nothing downloaded) loaded into GPT
and Llama with ``load_weights``, one map per model (``*`` the layer), logits compared.

GPT-2 computes in the dtype it is given: float64 throughout, agreement to 1e-10 (logits and the
gradient of the tied table, which sums the embedding's and the head's). Llama computes its
RMSNorm and its rotary angles in float32 whatever the dtype (``LlamaRMSNorm`` casts to float32;
the rotary embedding runs its product in float32): agreement at float32's precision, 1e-5."""
from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

import stringdiag
from helpers import rel_max

GALLERY = Path(__file__).resolve().parent.parent / "gallery"
V, S = 29, 9


def randomise(module: torch.nn.Module, seed: int) -> None:
    gen = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for p in module.parameters():
            p.copy_(torch.randn(p.shape, generator=gen, dtype=p.dtype) * 0.5)


def compiled(name: str, dims: dict) -> torch.nn.Module:
    return stringdiag.compile(stringdiag.load(str(GALLERY / "lm.diag"))[name], dims=dims, approximator="linear",
                              dtype=torch.float64)


def token_ids() -> torch.Tensor:
    return torch.randint(0, V, (2, S), generator=torch.Generator().manual_seed(5))


# Hugging Face's GPT-2 names -> the compiled GPT's: the shipped map (benchmarks/bench_generate.py reads it too)
GPT2 = json.loads((GALLERY / "lm.gpt2.json").read_text())


def test_hugging_face_gpt2_lm_head_model_ports_into_gpt_tied_head_and_all():
    transformers = pytest.importorskip("transformers")
    config = transformers.GPT2Config(vocab_size=V, n_embd=12, n_head=3, n_layer=2, n_positions=1024,
                                     resid_pdrop=0.0, attn_pdrop=0.0, embd_pdrop=0.0,
                                     activation_function="gelu_new", tie_word_embeddings=True,
                                     bos_token_id=0, eos_token_id=0)
    config._attn_implementation = "eager"
    ref = transformers.GPT2LMHeadModel(config).to(torch.float64).eval()
    randomise(ref, 1)
    ours = compiled("GPT", dict(v=V, d=12, h=3, k=4, f=48, L=2))
    stringdiag.load_weights(ours, ref.state_dict(), GPT2["map"], transpose=GPT2["transpose"])
    t = token_ids()
    y, y_ref = ours(t), ref(t).logits
    assert rel_max(y, y_ref) < 1e-10
    w = torch.randn(y.shape, generator=torch.Generator().manual_seed(6), dtype=torch.float64)
    (y * w).sum().backward()
    (y_ref * w).sum().backward()
    mine = dict(ours.named_parameters())
    assert rel_max(mine["wte.weight"].grad, ref.transformer.wte.weight.grad) < 1e-10
    assert rel_max(mine["y.1.attn.WQ.weight"].grad,
                          ref.transformer.h[1].attn.c_attn.weight.grad[:, :12].t()) < 1e-10


LLAMA_MAP = {
    "model.embed_tokens.weight": "embed_tokens.weight", "lm_head.weight": "lm_head.weight",
    **{f"model.layers.*.self_attn.{p}_proj.weight": f"y.*.LlamaAttn_1.W{p.upper()}.weight" for p in "qkvo"},
    "model.layers.*.mlp.*_proj.weight": "y.*.LlamaMLP_1.*.weight",
    "model.layers.*.input_layernorm.weight": "y.*.n1.gain.weight",
    "model.layers.*.post_attention_layernorm.weight": "y.*.n2.gain.weight",
    "model.norm.weight": "rmsnorm_1.gain.weight",
}


@pytest.mark.parametrize("theta", [10000, 500000])
def test_hugging_face_llama_for_causal_lm_ports_into_llama(theta):
    transformers = pytest.importorskip("transformers")
    config = transformers.LlamaConfig(vocab_size=V, hidden_size=16, intermediate_size=24, num_hidden_layers=2,
                                      num_attention_heads=4, num_key_value_heads=2, rope_theta=theta,
                                      rms_norm_eps=1e-6, tie_word_embeddings=False, attention_bias=False)
    config._attn_implementation = "eager"
    ref = transformers.LlamaForCausalLM(config).to(torch.float64).eval()
    randomise(ref, 2)
    ours = compiled("Llama", dict(v=V, d=16, g=2, n=2, r=2, f=24, L=2, theta=theta))
    stringdiag.load_weights(ours, ref.state_dict(), LLAMA_MAP)
    t = token_ids()
    err = rel_max(ours(t), ref(t).logits)
    print(f"Llama theta={theta}: relative error {err:.2e}")
    assert err < 1e-5
