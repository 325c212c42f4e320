"""gallery/modern/ against Hugging Face (random small configs built here, nothing downloaded)
and hand-written float64 references: each member checks, renders, compiles, loads the
reference's weights with one map per layer (``{layer}``), and agrees with it on the forward
pass and on the gradient of every weight; ``info --json`` reports its true cost.

Precision, by reference: where a Hugging Face class computes in the dtype it is given, the
agreement is float64's (1e-10). Several cast to float32 inside a float64 run: every eager
attention but T5's and Falcon's its softmax (``softmax(..., dtype=float32)``), Llama's and
Mistral's RMSNorm and T5's layer norm their variance, Llama, Mistral, GPT-NeoX and Falcon their
rotary angles, Mamba its A, B and input (``.float()``). Those agree at float32's precision, 1e-5
relative (their errors are 9e-9 to 5e-6); and each port whose casts name ``torch.float32`` or
``torch.float`` runs again with them meaning float64 (``TorchWithoutFloat32``), agreeing at 1e-10
(errors 3e-16 to 6e-13).
Mamba's ``.float()`` cannot be taken out so; its mixer agrees in float64 with a reference written
here from the paper instead."""
from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

import stringdiag
from stringdiag.cli.main import main
from helpers import agreement, rel_max

MODERN = Path(__file__).resolve().parent.parent / "gallery" / "modern"
V, S = 29, 9
F64 = 1e-10   # float64 throughout
F32 = 1e-5    # a reference that casts to float32 inside


def randomise(module: torch.nn.Module, seed: int, scale: float = 0.5) -> None:
    gen = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for p in module.parameters():
            p.copy_(torch.randn(p.shape, generator=gen, dtype=p.dtype) * scale)


def compiled(file: str, name: str, dims: dict) -> torch.nn.Module:
    return stringdiag.compile(stringdiag.load(str(MODERN / file))[name], dims=dims, approximator="linear",
                              dtype=torch.float64)


def token_ids(seed: int = 5) -> torch.Tensor:
    return torch.randint(0, V, (2, S), generator=torch.Generator().manual_seed(seed))


def logits(ref: torch.nn.Module, t: torch.Tensor) -> torch.Tensor:
    return ref(t).logits


def hidden(ref: torch.nn.Module, t: torch.Tensor) -> torch.Tensor:
    return ref(input_ids=t).last_hidden_state


def ours_on(module: torch.nn.Module, t: torch.Tensor) -> torch.Tensor:
    return module(t)


def ported(ref: torch.nn.Module, file: str, name: str, dims: dict, mapping: dict | None,
           output=logits, mine=ours_on) -> tuple[float, float]:
    """Compile ``file``'s ``name``, load ``ref``'s weights by ``mapping``, run both on the same
    token ids (``output`` runs the reference, ``mine`` ours): (forward error, worst gradient error
    over every weight). The same random cotangent is pulled back through both; the reference's
    gradients are carried to our names by the map that carried its weights (``load_weights`` into
    a second compile), so each of ours is compared."""
    ours, twin = (compiled(file, name, dims) for _ in range(2))
    stringdiag.load_weights(ours, ref.state_dict(), mapping)
    t = token_ids()
    return agreement(ours, twin, ref, mine(ours, t), output(ref, t), mapping)


def cost(capsys, file: str, name: str) -> dict:
    capsys.readouterr()
    assert main(["info", str(MODERN / file), "-d", name, "--json"]) == 0
    return json.loads(capsys.readouterr().out)["complexity"]


class TorchWithoutFloat32:
    """``torch`` as a Hugging Face modelling module sees it, with ``float32`` (and ``float``) meaning
    float64: its casts to float32 inside a float64 run (``.to(torch.float32)``,
    ``softmax(..., dtype=torch.float32)``, rotary frequencies in ``dtype=torch.float``) become
    no-ops, and nothing else changes. Set before the model is built (its rotary buffer is made
    then); the reference is then float64 throughout, and so is the agreement."""
    float32 = float = torch.float64

    def __getattr__(self, name):
        return getattr(torch, name)


def reference_dtype(transformers, family: str, in_float64: bool, monkeypatch) -> float:
    """The tolerance for a port to ``transformers.models.FAMILY``: float64's when its float32
    casts are taken out, float32's as it is."""
    if in_float64:
        module = getattr(transformers.models, family)
        monkeypatch.setattr(getattr(module, f"modeling_{family}"), "torch", TorchWithoutFloat32())
        return F64
    return F32


def checks_and_renders(tmp_path, capsys, file: str) -> None:
    """The file checks and every diagram in it renders; the pictures committed for it
    (``gallery/modern.FILE.NAME.svg``) are what render draws today, byte for byte. Its values are
    tests/test_gallery.py's (every diagram against an independent evaluator)."""
    assert main(["check", str(MODERN / file)]) == 0
    assert main(["render", str(MODERN / file), "-o", str(tmp_path)]) == 0
    capsys.readouterr()
    stem = Path(file).stem
    drawn = {p.name for p in tmp_path.glob("*.svg")}
    assert drawn == {f"{stem}.{name}.svg" for name in stringdiag.load(str(MODERN / file))}
    committed = sorted(MODERN.parent.glob(f"modern.{stem}.*.svg"))
    assert committed, f"no picture of {file} in gallery/ (gallery/PICTURES draws them)"
    for picture in committed:
        mine = tmp_path / picture.name.removeprefix("modern.")
        assert mine.read_bytes() == picture.read_bytes(), f"{picture.name} is stale: make pictures"


# -- Llama --------------------------------------------------------------------------------------------
# one map for one decoder layer, {layer} its number: ports LlamaForCausalLM's every layer
LLAMA_MAP = {
    "model.embed_tokens.weight": "model.embed_tokens.weight", "model.norm.weight": "model.norm.gain.weight",
    "lm_head.weight": "lm_head.weight",
    **{f"model.layers.{{layer}}.self_attn.{p}_proj.weight": f"model.layers.{{layer}}.LlamaAttn_1.W{p.upper()}.weight"
       for p in "qkvo"},
    "model.layers.{layer}.mlp.*_proj.weight": "model.layers.{layer}.LlamaMLP_1.*.weight",
    "model.layers.{layer}.input_layernorm.weight": "model.layers.{layer}.n1.gain.weight",
    "model.layers.{layer}.post_attention_layernorm.weight": "model.layers.{layer}.n2.gain.weight",
}


def test_llama_checks_and_renders(tmp_path, capsys):
    checks_and_renders(tmp_path, capsys, "llama.diag")


@pytest.mark.parametrize("theta, in_float64", [(10000, False), (500000, False), (500000, True)])
def test_a_two_layer_hugging_face_llama_ports_with_one_map_per_layer(theta, in_float64, monkeypatch):
    """float32's precision as it is (LlamaRMSNorm, the rotary angles and the eager softmax cast to
    float32); float64's with those casts taken out."""
    transformers = pytest.importorskip("transformers")
    tol = reference_dtype(transformers, "llama", in_float64, monkeypatch)
    config = transformers.LlamaConfig(vocab_size=V, hidden_size=16, intermediate_size=24, num_hidden_layers=2,
                                      num_attention_heads=4, num_key_value_heads=2, rope_theta=theta,
                                      rms_norm_eps=1e-6, tie_word_embeddings=False, attention_bias=False)
    config._attn_implementation = "eager"
    ref = transformers.LlamaForCausalLM(config).to(torch.float64).eval()
    randomise(ref, 2)
    dims = dict(v=V, d=16, g=2, n=2, r=2, f=24, L=2, theta=theta)
    fwd, grad = ported(ref, "llama.diag", "LlamaForCausalLM", dims, LLAMA_MAP)
    assert fwd < tol and grad < tol, (fwd, grad)


def test_llama_costs_s_squared_in_its_attention_only(capsys):
    c = cost(capsys, "llama.diag", "LlamaForCausalLM")
    assert c["time"] == "s^2·L·g·n·r + s·L·d·g·n·r + s·L·d·f + s·d·v" and c["seq_time"] == "s^2"


# -- Mistral ------------------------------------------------------------------------------------------
# Llama's names, the attention called MistralAttention_1
MISTRAL_MAP = {src: dst.replace("LlamaAttn_1", "MistralAttention_1") for src, dst in LLAMA_MAP.items()}


def test_mistral_checks_and_renders(tmp_path, capsys):
    checks_and_renders(tmp_path, capsys, "mistral.diag")


@pytest.mark.parametrize("in_float64", [False, True])
def test_a_two_layer_hugging_face_mistral_with_a_sliding_window_ports_with_one_map_per_layer(in_float64, monkeypatch):
    """Precision as Llama's. The window (3) is shorter than the sequence (9): a wrong mask (causal
    alone, or |i - j| < w both ways) changes the answer by far more than 1e-5."""
    transformers = pytest.importorskip("transformers")
    tol = reference_dtype(transformers, "mistral", in_float64, monkeypatch)
    config = transformers.MistralConfig(vocab_size=V, hidden_size=16, intermediate_size=24, num_hidden_layers=2,
                                        num_attention_heads=4, num_key_value_heads=2, rope_theta=10000.0,
                                        sliding_window=3, rms_norm_eps=1e-6, tie_word_embeddings=False)
    config._attn_implementation = "eager"
    ref = transformers.MistralForCausalLM(config).to(torch.float64).eval()
    randomise(ref, 3)
    dims = dict(v=V, d=16, g=2, n=2, r=2, f=24, L=2, w=3, theta=10000)
    fwd, grad = ported(ref, "mistral.diag", "MistralForCausalLM", dims, MISTRAL_MAP)
    assert fwd < tol and grad < tol, (fwd, grad)
    wide = compiled("mistral.diag", "MistralForCausalLM", {**dims, "w": S})  # causal alone
    stringdiag.load_weights(wide, ref.state_dict(), MISTRAL_MAP)
    t = token_ids()
    assert rel_max(wide(t), ref(t).logits) > 1e-3  # the window matters at these sizes


def test_mistral_costs_its_window_not_s_squared_in_the_stack_too(capsys):
    """O(s·w) in the attention, in one layer, and in the 2-layer stack (a repeat's body is
    costed on its mask's support too), the head s·d·v."""
    assert cost(capsys, "mistral.diag", "MistralAttention")["time"] == "s·w·g·n·r + s·d·g·n·r"
    c = cost(capsys, "mistral.diag", "MistralForCausalLM")
    assert c["time"] == "s·w·L·g·n·r + s·L·d·g·n·r + s·L·d·f + s·d·v", c
    assert c["memory"] == "s·w·L·g·n + s·L·g·n·r + s·L·d + s·L·f + s·v + d·v", c
    assert c["seq_time"] == "s·w" and c["seq_memory"] == "s·w"


def called(module: torch.nn.Module) -> set:
    """Every function the compiled module's fx graphs call (its repeat's copies included)."""
    return {n.target for m in module.modules() if isinstance(m, torch.fx.GraphModule)
            for n in m.graph.nodes if n.op == "call_function"}


def dense_causal_window(q, k, v, w: int, scale: float) -> torch.Tensor:
    """The reference: the whole [s, s] score matrix, masked outside i - w < j <= i."""
    i = torch.arange(q.shape[-2])
    keep = (i[None, :] <= i[:, None]) & (i[:, None] - i[None, :] < w)
    return torch.softmax((q @ k.transpose(-1, -2) * scale).masked_fill(~keep, float("-inf")), dim=-1) @ v


@settings(max_examples=25, deadline=None)
@given(s=st.integers(1, 11), w=st.integers(1, 14), f=st.integers(1, 3), e=st.integers(1, 3),
       seed=st.integers(0, 2**16))
def test_causal_window_attention_is_dense_masked_attention_values_and_gradients(s, w, f, e, seed):
    """Windows narrower than, equal to and wider than the sequence (then causal attention), w = 1
    (the diagonal); two query heads reading one key and value head (grouped-query attention)."""
    from stringdiag.lower import primitives as P
    g = torch.Generator().manual_seed(seed)
    q = torch.randn(2, 2, s, f, generator=g, dtype=torch.float64, requires_grad=True)
    k, v = (torch.randn(2, 1, s, n, generator=g, dtype=torch.float64, requires_grad=True) for n in (f, e))
    y, ref = P.causal_window_attention(q, k, v, w, 0.7), dense_causal_window(q, k, v, w, 0.7)
    assert rel_max(y, ref) < F64
    gy = torch.randn(y.shape, generator=g, dtype=torch.float64)
    for a, b in zip(torch.autograd.grad(y, (q, k, v), gy), torch.autograd.grad(ref, (q, k, v), gy)):
        assert rel_max(a, b) < F64


def test_causal_window_attention_holds_no_s_by_s_matrix():
    """Every tensor it saves for the backward pass is O(s·w), not O(s^2)."""
    from stringdiag.lower import primitives as P
    s, w, sizes = 512, 4, []
    q, k, v = (torch.randn(s, 2, dtype=torch.float64, requires_grad=True) for _ in range(3))
    with torch.autograd.graph.saved_tensors_hooks(lambda t: sizes.append(t.numel()) or t, lambda t: t):
        P.causal_window_attention(q, k, v, w, 1.0).sum()
    assert sizes and max(sizes) <= 2 * s * w * 2


@pytest.mark.parametrize("w", [1, 3, S, 50])
def test_the_compiled_mistral_is_banded_and_agrees_with_its_dense_form(w):
    """The causal window is computed on the band (rules/fastpath.rules' causal_window_sdpa ->
    the native causal_window_attention): no [s, s] mask is built; and the module agrees with the
    same diagram compiled without fast paths (the dense masked softmax), forward and gradients."""
    from stringdiag.lower import primitives as P
    dims = dict(v=V, d=16, g=2, n=2, r=2, f=24, L=2, w=w, theta=10000)
    banded = compiled("mistral.diag", "MistralForCausalLM", dims)
    dense = stringdiag.compile(stringdiag.load(str(MODERN / "mistral.diag"))["MistralForCausalLM"], dims=dims,
                               approximator="linear", dtype=torch.float64, fast=False)
    assert P.causal_window_attention in called(banded) and not {P.causal, P.window} & called(banded)
    assert P.causal_window_attention not in called(dense) and {P.causal, P.window} <= called(dense)
    randomise(banded, 4)
    dense.load_state_dict(banded.state_dict())
    y, want = banded(token_ids()), dense(token_ids())
    assert rel_max(y, want) < F64
    cot = torch.randn(y.shape, generator=torch.Generator().manual_seed(2), dtype=torch.float64)
    (y * cot).sum().backward()
    (want * cot).sum().backward()
    theirs = dict(dense.named_parameters())
    assert max(rel_max(p.grad, theirs[n].grad) for n, p in banded.named_parameters()) < F64


# -- GPT-NeoX -----------------------------------------------------------------------------------------
def test_gpt_neox_checks_and_renders(tmp_path, capsys):
    checks_and_renders(tmp_path, capsys, "gpt_neox.diag")


@pytest.mark.parametrize("in_float64", [False, True])
def test_a_two_layer_hugging_face_gpt_neox_ports_by_its_own_names(in_float64, monkeypatch):
    """Parallel attention and feed-forward, rotary on 2 of each head's 8 features. The diagram's
    names are Hugging Face's (gpt_neox.layers.{layer}.attention.query_key_value.weight ...): no
    map at all. float32's precision as it is (the rotary angles and the eager softmax cast),
    float64's without those casts."""
    transformers = pytest.importorskip("transformers")
    tol = reference_dtype(transformers, "gpt_neox", in_float64, monkeypatch)
    config = transformers.GPTNeoXConfig(vocab_size=V, hidden_size=16, intermediate_size=24, num_hidden_layers=2,
                                        num_attention_heads=2, rotary_pct=0.25, rotary_emb_base=10000,
                                        hidden_act="gelu", use_parallel_residual=True, attention_bias=True,
                                        tie_word_embeddings=False)
    config._attn_implementation = "eager"
    ref = transformers.GPTNeoXForCausalLM(config).to(torch.float64).eval()
    assert ref.gpt_neox.layers[0].attention.rotary_ndims == 2
    randomise(ref, 4)
    fwd, grad = ported(ref, "gpt_neox.diag", "GPTNeoXForCausalLM", dict(v=V, d=16, h=2, rh=1, p=6, f=24, L=2), None)
    assert fwd < tol and grad < tol, (fwd, grad)


def test_gpt_neox_costs_s_squared_in_its_attention(capsys):
    c = cost(capsys, "gpt_neox.diag", "GPTNeoXForCausalLM")
    assert c["time"] == "s^2·L·h·p + s^2·L·h·rh + s·L·d·h·p + s·L·d·h·rh + s·L·d·f + s·d·v", c


# -- Falcon -------------------------------------------------------------------------------------------
# Falcon's and BLOOM's blocks carry Hugging Face's names; only the tied table is global here
TIED_MAP = {"transformer.word_embeddings.weight": "word_embeddings.weight", "lm_head.weight": None}


def test_falcon_checks_and_renders(tmp_path, capsys):
    checks_and_renders(tmp_path, capsys, "falcon.diag")


@pytest.mark.parametrize("in_float64", [False, True])
def test_a_two_layer_hugging_face_falcon_with_multi_query_attention_ports(in_float64, monkeypatch):
    """Multi-query attention (4 query heads, one key/value head), parallel attention and
    feed-forward from one layer norm, the tied head: the names are Hugging Face's but for the
    global table. float32's precision as it is (the rotary angles), float64's without that cast."""
    transformers = pytest.importorskip("transformers")
    tol = reference_dtype(transformers, "falcon", in_float64, monkeypatch)
    config = transformers.FalconConfig(vocab_size=V, hidden_size=16, num_hidden_layers=2, num_attention_heads=4,
                                       multi_query=True, parallel_attn=True, new_decoder_architecture=False,
                                       alibi=False, bias=False, layer_norm_epsilon=1e-5, activation="gelu",
                                       tie_word_embeddings=True)
    config._attn_implementation = "eager"
    ref = transformers.FalconForCausalLM(config).to(torch.float64).eval()
    assert ref.transformer.h[0].self_attention.num_kv_heads == 1
    randomise(ref, 20)
    fwd, grad = ported(ref, "falcon.diag", "FalconForCausalLM", dict(v=V, d=16, h=4, kh=2, L=2), TIED_MAP)
    assert fwd < tol and grad < tol, (fwd, grad)


def test_falcon_costs_its_one_key_head_once(capsys):
    """The key and value projections are one head's (s·d·kh), beside the queries' s·d·h·kh."""
    c = cost(capsys, "falcon.diag", "FalconForCausalLM")
    assert c["time"] == "s^2·L·h·kh + s·L·d·h·kh + s·L·d^2 + s·d·v", c


# -- BLOOM --------------------------------------------------------------------------------------------


def test_bloom_checks_and_renders(tmp_path, capsys):
    checks_and_renders(tmp_path, capsys, "bloom.diag")


@pytest.mark.parametrize("in_float64", [False, True])
def test_a_two_layer_hugging_face_bloom_with_alibi_ports(in_float64, monkeypatch):
    """ALiBi over 4 heads (slopes 2^-2, 2^-4, 2^-6, 2^-8: exact in float32 too), the tied head.
    As it is, float32's precision: the eager softmax casts; with that cast taken out, float64's
    (forward 3.5e-16, gradient 6e-13: BLOOM's GELU backward is its own closed form)."""
    transformers = pytest.importorskip("transformers")
    tol = reference_dtype(transformers, "bloom", in_float64, monkeypatch)
    config = transformers.BloomConfig(vocab_size=V, hidden_size=16, n_layer=2, n_head=4, layer_norm_epsilon=1e-5,
                                      hidden_dropout=0.0, attention_dropout=0.0, tie_word_embeddings=True)
    ref = transformers.BloomForCausalLM(config).to(torch.float64).eval()
    randomise(ref, 7)
    fwd, grad = ported(ref, "bloom.diag", "BloomForCausalLM", dict(v=V, d=16, h=4, k=4, L=2), TIED_MAP)
    assert fwd < tol and grad < tol, (fwd, grad)

ALIBI = """import "bloom.diag"
diagram Bias(x: [s]) -> [h, s, s] {
  b = alibi<h, s>()
  y[a, i, j] = b[a, i, j] + 0 * x[j]
  return y
}
"""


def test_alibi_is_the_papers_linear_bias_with_geometric_slopes():
    """Press et al.'s bias -m_a (i - j), m_a = 2^(-8 (a + 1) / h), written here from the paper."""
    bias = stringdiag.compile(stringdiag.loads(ALIBI, str(MODERN / "alibi_test.diag"))["Bias"], dims=dict(h=8),
                              dtype=torch.float64)
    got = bias(torch.zeros(6, dtype=torch.float64))
    i = torch.arange(6, dtype=torch.float64)
    slopes = torch.tensor([2.0 ** (-8 * (a + 1) / 8) for a in range(8)], dtype=torch.float64)
    want = -slopes[:, None, None] * (i[:, None] - i[None, :])
    assert torch.equal(got, want)


def test_bloom_costs_its_biases_as_its_scores(capsys):
    """The ALiBi biases cost what the scores do (s^2 per head), no more."""
    c = cost(capsys, "bloom.diag", "BloomForCausalLM")
    assert c["time"] == "s^2·L·h·k + s·L·d·h·k + s·L·d^2 + s·d·v", c
    assert c["memory"] == "s^2·L·h + s·L·h·k + s·L·d + s·v + d·v", c


# -- T5 -----------------------------------------------------------------------------------------------
# one block of either stack ({stack}: encoder or decoder); the tied embeddings are shared's
T5_STACK = {
    "shared.weight": "shared.weight", "{stack}.embed_tokens.weight": None,
    "{stack}.block.0.layer.0.SelfAttention.relative_attention_bias.weight": "{stack}.relative_attention_bias.weight",
    **{f"{{stack}}.block.{{layer}}.layer.0.SelfAttention.{p}.weight":
       f"{{stack}}.block.{{layer}}.SelfAttention.W{p.upper()}.weight" for p in "qkvo"},
    "{stack}.block.{layer}.layer.0.layer_norm.weight": "{stack}.block.{layer}.n0.gain.weight",
    "{stack}.final_layer_norm.weight": "{stack}.final_layer_norm.gain.weight",
}
T5_MAP = {**T5_STACK,  # the encoder's blocks: self-attention, then the feed-forward
          "encoder.block.{layer}.layer.1.DenseReluDense.*.weight": "encoder.block.{layer}.DenseReluDense.*.weight",
          "encoder.block.{layer}.layer.1.layer_norm.weight": "encoder.block.{layer}.n1.gain.weight"}
T5_MODEL_MAP = {**T5_MAP,  # the decoder's: self-attention, cross-attention, the feed-forward
                **{f"decoder.block.{{layer}}.layer.1.EncDecAttention.{p}.weight":
                   f"decoder.block.{{layer}}.EncDecAttention.W{p.upper()}.weight" for p in "qkvo"},
                "decoder.block.{layer}.layer.1.layer_norm.weight": "decoder.block.{layer}.n1.gain.weight",
                "decoder.block.{layer}.layer.2.DenseReluDense.*.weight":
                "decoder.block.{layer}.DenseReluDense.*.weight",
                "decoder.block.{layer}.layer.2.layer_norm.weight": "decoder.block.{layer}.n2.gain.weight"}
T5_DIMS = dict(v=V, d=16, h=2, k=4, f=24, nb=8, md=20, L=2)
BUCKETS = """import "t5.diag"
diagram Buckets(x: [s]) -> [s], [s] {
  y[i] = t5_bucket<nb, md>(x[i])
  z[i] = t5_causal_bucket<nb, md>(x[i])
  return y, z
}
"""


def test_t5_checks_and_renders(tmp_path, capsys):
    checks_and_renders(tmp_path, capsys, "t5.diag")


@pytest.mark.parametrize("nb, md", [(8, 20), (32, 128)])
def test_t5_buckets_are_hugging_faces_over_relative_positions_both_ways_and_causal(nb, md):
    transformers = pytest.importorskip("transformers")
    rp = torch.arange(-300, 301)
    bucket = transformers.models.t5.modeling_t5.T5Attention._relative_position_bucket
    ours = stringdiag.compile(stringdiag.loads(BUCKETS, str(MODERN / "buckets_test.diag"))["Buckets"],
                              dims=dict(nb=nb, md=md), dtype=torch.float64)
    both, causal = ours(rp.to(torch.float64))
    assert torch.equal(both, bucket(rp, bidirectional=True, num_buckets=nb, max_distance=md).to(torch.float64))
    assert torch.equal(causal, bucket(rp, bidirectional=False, num_buckets=nb, max_distance=md).to(torch.float64))


@pytest.mark.parametrize("in_float64", [False, True])
def test_a_two_block_hugging_face_t5_encoder_ports_with_one_map_per_block(in_float64, monkeypatch):
    """8 buckets up to distance 20 over 9 positions: exact, logarithmic and both halves are used.
    float32's precision as it is (T5LayerNorm computes its variance in float32), float64's
    without that cast."""
    transformers = pytest.importorskip("transformers")
    tol = reference_dtype(transformers, "t5", in_float64, monkeypatch)
    config = transformers.T5Config(vocab_size=V, d_model=16, d_kv=4, d_ff=24, num_layers=2, num_heads=2,
                                   relative_attention_num_buckets=8, relative_attention_max_distance=20,
                                   dropout_rate=0.0, layer_norm_epsilon=1e-6, feed_forward_proj="relu",
                                   is_encoder_decoder=False, use_cache=False)
    config._attn_implementation = "eager"
    ref = transformers.T5EncoderModel(config).to(torch.float64).eval()
    randomise(ref, 8)
    fwd, grad = ported(ref, "t5.diag", "T5EncoderModel", T5_DIMS, T5_MAP, hidden)
    assert fwd < tol and grad < tol, (fwd, grad)


def decoded(ref: torch.nn.Module, t: torch.Tensor) -> torch.Tensor:
    """T5Model's decoder output for target ids that differ from the source (reversed)."""
    return ref(input_ids=t, decoder_input_ids=t.flip(-1)).last_hidden_state


def decoding(module: torch.nn.Module, t: torch.Tensor) -> torch.Tensor:
    return module(t, t.flip(-1))


@pytest.mark.parametrize("in_float64", [False, True])
def test_a_two_block_hugging_face_t5_encoder_decoder_ports_with_one_map_per_block(in_float64, monkeypatch):
    """Encoder and decoder, the decoder's causal buckets and its cross-attention; precision as
    the encoder's."""
    transformers = pytest.importorskip("transformers")
    tol = reference_dtype(transformers, "t5", in_float64, monkeypatch)
    config = transformers.T5Config(vocab_size=V, d_model=16, d_kv=4, d_ff=24, num_layers=2, num_decoder_layers=2,
                                   num_heads=2, relative_attention_num_buckets=8, relative_attention_max_distance=20,
                                   dropout_rate=0.0, layer_norm_epsilon=1e-6, feed_forward_proj="relu", use_cache=False)
    config._attn_implementation = "eager"
    ref = transformers.T5Model(config).to(torch.float64).eval()
    randomise(ref, 19)
    fwd, grad = ported(ref, "t5.diag", "T5Model", T5_DIMS, T5_MODEL_MAP, decoded, decoding)
    assert fwd < tol and grad < tol, (fwd, grad)


def test_t5_computes_its_position_bias_once_for_every_block_by_a_lookup(capsys):
    """The bucketed bias is a lookup at each bucket (bucket<nb> then embed), s^2·h as Hugging
    Face's gather, with no s^2·h·nb of a one-hot read of the table; once per stack, not once per
    block. The blocks' attention is s^2·L·h·k, and the bias's s^2·h lies within it."""
    for name in ("t5_position_bias", "t5_causal_position_bias"):
        assert cost(capsys, "t5.diag", name)["time"] == "h·n^2"
    c = cost(capsys, "t5.diag", "T5EncoderModel")
    assert c["time"] == "s^2·L·h·k + s·L·d·h·k + s·L·d·f + d·v + h·nb", c
    c = cost(capsys, "t5.diag", "T5Model")  # each stack's bias once; the cross-attention s·t
    assert c["time"] == ("s^2·L·h·k + t^2·L·h·k + s·t·L·h·k + s·L·d·h·k + t·L·d·h·k"
                         " + s·L·d·f + t·L·d·f + d·v + h·nb"), c


def test_t5_reads_its_bias_table_by_a_lookup_not_a_one_hot_product():
    """The compiled bias is the table looked up at int64 buckets (``bucket`` then ``embed``), and
    no value outside the blocks holds s·s·nb entries (a one-hot read compares every (i, j) with
    every bucket): the largest is the embedding table itself."""
    from torch.fx.passes.shape_prop import ShapeProp

    from stringdiag.lower import primitives as P
    m = compiled("t5.diag", "T5EncoderModel", T5_DIMS)
    assert {P.bucket, P.embed} <= {n.target for n in m.graph.nodes if n.op == "call_function"}
    ShapeProp(m).propagate(token_ids())
    sizes = {n.name: n.meta["tensor_meta"].shape.numel() for n in m.graph.nodes
             if hasattr(n.meta.get("tensor_meta"), "shape")}
    assert max(sizes.values()) == V * T5_DIMS["d"] < S * S * T5_DIMS["nb"], sizes


# -- Mamba --------------------------------------------------------------------------------------------
MAMBA_MAP = {
    "embeddings.weight": "embeddings.weight", "norm_f.weight": "norm_f.gain.weight",
    "layers.{layer}.norm.weight": "layers.{layer}.norm.gain.weight",
    "layers.{layer}.mixer.conv1d.bias": "layers.{layer}.mixer.conv1d_bias.weight",
    "layers.{layer}.mixer.conv1d.weight": "layers.{layer}.mixer.conv1d.weight",
    "layers.{layer}.mixer.A_log": "layers.{layer}.mixer.A_log.weight",
    "layers.{layer}.mixer.D": "layers.{layer}.mixer.D.weight",
    "layers.{layer}.mixer.*_proj.*": "layers.{layer}.mixer.*_proj.*",
}
MAMBA_DIMS = dict(v=V, d=8, e=16, N=4, w=4, rk=2, L=2)


def selective_scan_block(x: torch.Tensor, p: dict) -> torch.Tensor:
    """Gu and Dao's Mamba mixer (Algorithm 2 inside Fig. 3), written here in float64 from the
    paper: in_proj to (x, z); depthwise causal conv1d of width w, SiLU; dt = softplus(dt_proj(.)),
    B, C from x_proj; h_t = exp(dt A) h_{t-1} + dt B x_t, y_t = C h_t + D x_t; y SiLU(z); out_proj."""
    e, w = p["conv1d.weight"].shape[0], p["conv1d.weight"].shape[-1]
    xz = x @ p["in_proj.weight"].t()
    u, z = xz[..., :e], xz[..., e:]
    padded = torch.nn.functional.pad(u.transpose(1, 2), (w - 1, 0))
    conv = torch.stack([sum(padded[:, c, t + j] * p["conv1d.weight"][c, 0, j] for j in range(w))
                        for t in range(x.shape[1]) for c in range(e)], -1).view(x.shape[0], x.shape[1], e)
    u = torch.nn.functional.silu(conv + p["conv1d_bias.weight"])
    rk = p["dt_proj.weight"].shape[1]
    n = (p["x_proj.weight"].shape[0] - rk) // 2
    dbc = u @ p["x_proj.weight"].t()
    dt = torch.nn.functional.softplus(dbc[..., :rk] @ p["dt_proj.weight"].t() + p["dt_proj.bias"])
    B, C = dbc[..., rk:rk + n], dbc[..., rk + n:]
    A = -torch.exp(p["A_log.weight"])
    h = torch.zeros(x.shape[0], e, n, dtype=x.dtype)
    ys = []
    for t in range(x.shape[1]):
        h = torch.exp(dt[:, t, :, None] * A) * h + dt[:, t, :, None] * B[:, t, None, :] * u[:, t, :, None]
        ys.append((h * C[:, t, None, :]).sum(-1) + p["D.weight"] * u[:, t])
    y = torch.stack(ys, 1) * torch.nn.functional.silu(z)
    return y @ p["out_proj.weight"].t()


def test_mamba_checks_and_renders(tmp_path, capsys):
    checks_and_renders(tmp_path, capsys, "mamba.diag")


def test_the_mamba_mixer_is_the_papers_selective_scan_in_float64():
    ours = compiled("mamba.diag", "MambaMixer", MAMBA_DIMS)
    randomise(ours, 9)
    x = torch.randn(2, S, 8, generator=torch.Generator().manual_seed(10), dtype=torch.float64, requires_grad=True)
    y = ours(x)
    params = dict(ours.named_parameters())
    want = selective_scan_block(x, params)
    assert rel_max(y, want) < F64
    w = torch.randn(y.shape, generator=torch.Generator().manual_seed(11), dtype=torch.float64)
    got = torch.autograd.grad((y * w).sum(), [x, *params.values()])
    ref = torch.autograd.grad((want * w).sum(), [x, *params.values()])
    assert max(rel_max(a, b) for a, b in zip(got, ref)) < F64


def test_a_two_block_hugging_face_mamba_ports_with_one_map_per_block():
    """MambaMixer's sequential path (no CUDA kernels here). float32's precision: it casts A, B
    and the input to float32 (A_log.float(), B.float()), and MambaRMSNorm its variance."""
    transformers = pytest.importorskip("transformers")
    config = transformers.MambaConfig(vocab_size=V, hidden_size=8, state_size=4, num_hidden_layers=2, expand=2,
                                      conv_kernel=4, time_step_rank=2, use_bias=False, use_conv_bias=True,
                                      hidden_act="silu", layer_norm_epsilon=1e-6, residual_in_fp32=False)
    ref = transformers.MambaModel(config).to(torch.float64).eval()
    randomise(ref, 12)
    fwd, grad = ported(ref, "mamba.diag", "MambaModel", MAMBA_DIMS, MAMBA_MAP, hidden)
    assert fwd < F32 and grad < F32, (fwd, grad)


def test_mamba_costs_its_convolution_s_w_and_its_scan_s_e_n(capsys):
    """Linear in s: the convolution s·e·w (not the s^2·e of a banded matrix), the scan s·N·e."""
    c = cost(capsys, "mamba.diag", "MambaModel")
    assert c["time"] == "s·L·N·e + s·L·d·e + s·L·e·rk + s·L·e·w + d·v", c
    assert c["seq_time"] == "s" and c["seq_memory"] == "s"


# -- RetNet: multi-scale retention, parallel and recurrent ---------------------------------------------
RETNET_DIMS = dict(dm=8, h=3, k=4, d=5)


def multi_scale_retention(x: torch.Tensor, p: dict, h: int) -> torch.Tensor:
    """Sun et al.'s MSR written here in float64 from the paper: per head (Q K^T o D) V with
    D_ij = gamma_a^(i - j) (j <= i), gamma_a = 1 - 2^(-5 - a); torch's GroupNorm(h, h d) over the
    concatenated heads at each position; (swish(X W_G) o Y) W_O."""
    s = x.shape[1]
    q = (x @ p["WQ.weight"].t()).unflatten(-1, (h, -1)).transpose(1, 2)   # [b, h, s, k]
    k = (x @ p["WK.weight"].t()).unflatten(-1, (h, -1)).transpose(1, 2)
    v = (x @ p["WV.weight"].t()).unflatten(-1, (h, -1)).transpose(1, 2)   # [b, h, s, d]
    gamma = 1 - 2.0 ** (-5 - torch.arange(h, dtype=x.dtype))
    i = torch.arange(s, dtype=x.dtype)
    diff = i[:, None] - i[None, :]
    decay = torch.where(diff >= 0, gamma[:, None, None] ** diff.clamp(min=0), torch.zeros(()))
    heads = ((q @ k.transpose(-1, -2)) * decay) @ v                         # [b, h, s, d]
    cat = heads.transpose(1, 2).flatten(-2)                                 # [b, s, h d]
    y = torch.nn.functional.group_norm(cat.flatten(0, 1), h, p["GNW.weight"].flatten(),   # each position apart
                                       p["GNB.weight"].flatten(), eps=1e-5).view(cat.shape)
    return (torch.nn.functional.silu(x @ p["WG.weight"].t()) * y) @ p["WO.weight"].t()


def test_retnet_checks_and_renders(tmp_path, capsys):
    checks_and_renders(tmp_path, capsys, "retnet.diag")


def both_forms_are_the_papers(file: str, forms: tuple[str, str], dims: dict, reference, seed: int) -> None:
    """The parallel and the recurrent form, sharing one state dict, against the paper's layer
    written in the test: values and every weight's gradient, float64."""
    par, rec = (compiled(file, name, dims) for name in forms)
    randomise(par, seed)
    rec.load_state_dict(par.state_dict())
    x = torch.randn(2, S, 8, generator=torch.Generator().manual_seed(seed + 1), dtype=torch.float64)
    params = dict(par.named_parameters())
    want = reference(x, params)
    w = torch.randn(want.shape, generator=torch.Generator().manual_seed(seed + 2), dtype=torch.float64)
    ref_grads = torch.autograd.grad((want * w).sum(), list(params.values()))
    for form in (par, rec):
        y = form(x)
        assert rel_max(y, want) < F64
        got = torch.autograd.grad((y * w).sum(), [dict(form.named_parameters())[n] for n in params])
        assert max(rel_max(a, b) for a, b in zip(got, ref_grads)) < F64


def test_multi_scale_retention_parallel_and_recurrent_are_the_papers_in_float64():
    both_forms_are_the_papers("retnet.diag", ("MSRParallel", "MSRRecurrent"), RETNET_DIMS,
                              lambda x, p: multi_scale_retention(x, p, 3), 13)


def test_retention_is_s_squared_in_parallel_and_linear_recurrently(capsys):
    par, rec = (cost(capsys, "retnet.diag", name) for name in ("MSRParallel", "MSRRecurrent"))
    assert par["seq_time"] == "s^2" and par["time"] == "s^2·d·h + s^2·h·k + s·d·dm·h + s·dm·h·k", par
    assert rec["seq_time"] == "s" and rec["seq_memory"] == "s", rec
    assert rec["time"] == "s·d·dm·h + s·d·h·k + s·dm·h·k", rec


# -- gated linear attention, parallel and recurrent -------------------------------------------------------
GLA_DIMS = dict(dm=8, h=2, k=3, d=4, ra=2)


def gated_linear_attention(x: torch.Tensor, p: dict, h: int) -> torch.Tensor:
    """Yang et al.'s GLA layer written here in float64 from the paper, as a loop over positions:
    alpha_t = sigmoid(x_t W_a1 W_a2 + b)^(1/16), S_t = Diag(alpha_t) S_{t-1} + k_t^T v_t,
    o_t = q_t S_t per head; RMSNorm per head (eps 1e-5); (swish(x W_r) o norm(o)) W_O."""
    def heads(w):
        return (x @ w.t()).unflatten(-1, (h, -1))                           # [b, s, h, .]
    q, k, v, r = heads(p["WQ.weight"]), heads(p["WK.weight"]), heads(p["WV.weight"]), x @ p["WR.weight"].t()
    gate = (x @ p["WA1.weight"].t()) @ p["WA2.weight"].t() + p["WA2.bias"]
    alpha = torch.sigmoid(gate).unflatten(-1, (h, -1)) ** (1 / 16)
    state = torch.zeros(x.shape[0], h, k.shape[-1], v.shape[-1], dtype=x.dtype)
    outs = []
    for t in range(x.shape[1]):
        state = alpha[:, t, :, :, None] * state + k[:, t, :, :, None] * v[:, t, :, None, :]
        outs.append((q[:, t, :, :, None] * state).sum(-2))                 # [b, h, d]
    o = torch.stack(outs, 1)
    o = o / torch.sqrt((o * o).mean(-1, keepdim=True) + 1e-5) * p["NW.weight"]
    return (torch.nn.functional.silu(r) * o.flatten(-2)) @ p["WO.weight"].t()


def test_gla_checks_and_renders(tmp_path, capsys):
    checks_and_renders(tmp_path, capsys, "gla.diag")


def test_gated_linear_attention_parallel_and_recurrent_are_the_papers_in_float64():
    both_forms_are_the_papers("gla.diag", ("GLAParallel", "GLARecurrent"), GLA_DIMS,
                              lambda x, p: gated_linear_attention(x, p, 2), 16)


def test_gated_linear_attention_is_s_squared_in_parallel_and_linear_recurrently(capsys):
    par, rec = (cost(capsys, "gla.diag", name) for name in ("GLAParallel", "GLARecurrent"))
    assert par["seq_time"] == "s^2" and par["seq_memory"] == "s^2", par
    assert rec["seq_time"] == "s" and rec["seq_memory"] == "s", rec
    assert rec["time"] == "s·d·dm·h + s·d·h·k + s·dm·h·k + s·h·k·ra + s·dm·ra", rec
