"""Today's models traced whole (tiny random Hugging Face configs: 2 layers, width 64, float64) and
compiled back (and drawn) from the written ``.diag`` and weights file alone, in a fresh Python process
that never sees the model's code: the outputs at two sequence lengths against the models themselves
(with their float32 islands off, so that both sides compute in float64), ``info`` O(s²) for full
attention, no opaque box, the layers one ``repeat``."""
from __future__ import annotations

import contextlib
import json
import math
import re
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from torch import nn
from torch.nn import functional as F

transformers = pytest.importorskip("transformers")

import stringdiag  # noqa: E402
from stringdiag.lower.tensorfile import write_atomic  # noqa: E402

TOL = 1e-12
V = 50  # vocabulary


def randomise(module: nn.Module, seed: int = 0) -> nn.Module:
    gen = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for p in module.parameters():
            p.copy_(torch.randn(p.shape, generator=gen, dtype=p.dtype) * 0.3)
    return module


class Output(nn.Module):
    """One tensor of a Hugging Face model's output record (the logits, the last hidden state)."""

    def __init__(self, model: nn.Module, key: str):
        super().__init__()
        self.model, self.key = model, key

    def forward(self, **inputs):
        return getattr(self.model(**inputs), self.key)


def language_model(config_class, model_class, implementation="sdpa", key="logits", **options):
    config = config_class(**{"vocab_size": V, "hidden_size": 64, "num_attention_heads": 4, "intermediate_size": 96,
                             "num_hidden_layers": 2, **options})
    config._attn_implementation = implementation
    return Output(randomise(model_class(config).double().eval()), key)


class DiffAttention(nn.Module):
    """Differential attention (Ye et al. 2024): two softmax maps per head, subtracted."""
    def __init__(self, width=64, heads=4, depth=1):
        super().__init__()
        self.heads, self.head_dim = heads, width // heads // 2
        self.q_proj = nn.Linear(width, width, bias=False)
        self.k_proj = nn.Linear(width, width, bias=False)
        self.v_proj = nn.Linear(width, width, bias=False)
        self.out_proj = nn.Linear(width, width, bias=False)
        self.lambda_init = 0.8 - 0.6 * math.exp(-0.3 * depth)
        self.lambda_q1, self.lambda_k1, self.lambda_q2, self.lambda_k2 = (
            nn.Parameter(torch.randn(self.head_dim) * 0.1) for _ in range(4))
        self.subln = nn.RMSNorm(2 * self.head_dim, eps=1e-5)

    def forward(self, x):
        b, s, _ = x.shape
        h, e = self.heads, self.head_dim
        q = self.q_proj(x).view(b, s, 2 * h, e).transpose(1, 2) * e ** -0.5
        k = self.k_proj(x).view(b, s, 2 * h, e).transpose(1, 2)
        v = self.v_proj(x).view(b, s, h, 2 * e).transpose(1, 2)
        mask = torch.triu(torch.full((s, s), float("-inf"), dtype=x.dtype), 1)
        a = F.softmax(q @ k.transpose(-1, -2) + mask, dim=-1)
        lam1 = torch.exp(torch.sum(self.lambda_q1 * self.lambda_k1))
        lam2 = torch.exp(torch.sum(self.lambda_q2 * self.lambda_k2))
        lam = lam1 - lam2 + self.lambda_init
        a = a.view(b, h, 2, s, s)
        a = a[:, :, 0] - lam * a[:, :, 1]
        o = self.subln(a @ v) * (1 - self.lambda_init)
        return self.out_proj(o.transpose(1, 2).reshape(b, s, h * 2 * e))


class DiffAttn2(nn.Module):
    """The variant with two fused attentions (q, k split into halves by chunk) and lambda re-parametrised."""
    def __init__(self, width=64, heads=4, depth=1):
        super().__init__()
        self.h, self.e = heads, width // heads // 2
        self.qkv = nn.Linear(width, 3 * width)
        self.out = nn.Linear(width, width)
        self.lambda_init = 0.8 - 0.6 * math.exp(-0.3 * depth)
        self.lq = nn.Parameter(torch.randn(2, self.e) * 0.1)
        self.lk = nn.Parameter(torch.randn(2, self.e) * 0.1)
        self.norm = nn.RMSNorm(2 * self.e)

    def forward(self, x):
        b, s, d = x.shape
        q, k, v = self.qkv(x).chunk(3, dim=-1)
        q = q.view(b, s, self.h, 2, self.e).permute(0, 2, 3, 1, 4)
        k = k.view(b, s, self.h, 2, self.e).permute(0, 2, 3, 1, 4)
        v = v.view(b, s, self.h, 2 * self.e).transpose(1, 2)
        a1 = F.scaled_dot_product_attention(q[:, :, 0], k[:, :, 0], v, is_causal=True)
        a2 = F.scaled_dot_product_attention(q[:, :, 1], k[:, :, 1], v, is_causal=True)
        lam = torch.exp((self.lq[0] * self.lk[0]).sum()) - torch.exp((self.lq[1] * self.lk[1]).sum()) + self.lambda_init
        o = self.norm(a1 - lam * a2) * (1 - self.lambda_init)
        return self.out(o.transpose(1, 2).reshape(b, s, d))


class DiffBlock(nn.Module):
    """A pre-norm block around it."""

    def __init__(self, width=64, heads=4, depth=1):
        super().__init__()
        self.norm1, self.norm2 = nn.LayerNorm(width), nn.LayerNorm(width)
        self.attn = DiffAttention(width, heads, depth)
        self.mlp = nn.Sequential(nn.Linear(width, 2 * width), nn.GELU(), nn.Linear(2 * width, width))

    def forward(self, x):
        x = x + self.attn(self.norm1(x))
        return x + self.mlp(self.norm2(x))


T = transformers
MODELS = {  # name -> the module, called with input_ids [batch, length] (and use_cache=False)
    "GPT-2 (GPT2LMHeadModel)": lambda: language_model(T.GPT2Config, T.GPT2LMHeadModel, n_embd=64, n_head=4, n_layer=2,
                                                      n_positions=32, activation_function="gelu_new"),
    "BERT (BertModel)": lambda: language_model(T.BertConfig, T.BertModel, key="last_hidden_state",
                                               max_position_embeddings=32),
    "Gemma (multi-query)": lambda: language_model(T.GemmaConfig, T.GemmaForCausalLM, num_key_value_heads=1,
                                                  head_dim=16),
    "Phi-3 (default: full rotary)": lambda: language_model(T.Phi3Config, T.Phi3ForCausalLM, pad_token_id=0),
    "OPT": lambda: language_model(T.OPTConfig, T.OPTForCausalLM, ffn_dim=96, word_embed_proj_dim=64,
                                  max_position_embeddings=32, pad_token_id=1),
    "GPT-J (rotary on 8 of 16 features)": lambda: language_model(T.GPTJConfig, T.GPTJForCausalLM, n_embd=64, n_head=4,
                                                                 n_layer=2, rotary_dim=8, n_positions=32),
    "Qwen2 (sdpa, grouped-query)": lambda: language_model(T.Qwen2Config, T.Qwen2ForCausalLM, num_key_value_heads=2),
    "Qwen2 (eager, grouped-query)": lambda: language_model(T.Qwen2Config, T.Qwen2ForCausalLM, "eager",
                                                           num_key_value_heads=2),
    "Llama (grouped-query)": lambda: language_model(T.LlamaConfig, T.LlamaForCausalLM, num_key_value_heads=2),
    "OLMo (LayerNorm without gain)": lambda: language_model(T.OlmoConfig, T.OlmoForCausalLM, num_key_value_heads=4),
    "GPT-NeoX (rotary on a quarter)": lambda: language_model(T.GPTNeoXConfig, T.GPTNeoXForCausalLM, rotary_pct=0.25,
                                                             max_position_embeddings=32),
    "Mistral (sliding window 3)": lambda: language_model(T.MistralConfig, T.MistralForCausalLM, num_key_value_heads=2,
                                                         sliding_window=3),
    "ViT (ViTModel, 16 patches and a class token)": lambda: vit(),
    "differential attention (plain torch)": lambda: randomise(Stack(DiffBlock(64, 4, 1), DiffBlock(64, 4, 2)).double()),
    "differential attention, two fused attentions": lambda: randomise(Stack(DiffAttn2(), DiffAttn2()).double()),
}
COST = {"Mistral (sliding window 3)": "O(s·d3)"}  # in the sequence length, where not O(s^2)
IMAGES = {"ViT (ViTModel, 16 patches and a class token)"}  # images of one size: no sequence axis; two batches
NOT_REPEATED = {"differential attention (plain torch)"}  # its layers differ (lambda_init by depth)
PLAIN = {"differential attention (plain torch)", "differential attention, two fused attentions"}  # called with x [batch, length, 64], not token ids
# more of the families, measured for the table of docs/trace.md by `python tests/test_trace_models.py` (not tested:
# each one more is seconds of the suite)
MORE = {
    "Qwen3 (norms on q and k)": lambda: language_model(T.Qwen3Config, T.Qwen3ForCausalLM, num_key_value_heads=2,
                                                       head_dim=16),
    "StableLM": lambda: language_model(T.StableLmConfig, T.StableLmForCausalLM, num_key_value_heads=4),
    "Phi (phi-2)": lambda: language_model(T.PhiConfig, T.PhiForCausalLM),
    "Starcoder2": lambda: language_model(T.Starcoder2Config, T.Starcoder2ForCausalLM, num_key_value_heads=2,
                                         sliding_window=None),
    "Falcon (new architecture, 2 key-value groups)": lambda: language_model(T.FalconConfig, T.FalconForCausalLM,
                                                                            num_kv_heads=2,
                                                                            new_decoder_architecture=True),
    "Gemma 2 (eager: sliding and full layers, soft caps)": lambda: language_model(
        T.Gemma2Config, T.Gemma2ForCausalLM, "eager", num_key_value_heads=2, head_dim=16, sliding_window=4,
        final_logit_softcapping=None),
    "GPT-Neo (eager: a mask buffer)": lambda: language_model(T.GPTNeoConfig, T.GPTNeoForCausalLM, "eager", num_layers=2,
                                                             attention_types=[[["global"], 2]], num_heads=4,
                                                             max_position_embeddings=32),
    "DistilBERT": lambda: language_model(T.DistilBertConfig, T.DistilBertModel, key="last_hidden_state", dim=64,
                                         n_heads=4, n_layers=2, hidden_dim=96, max_position_embeddings=32),
}


def vit() -> nn.Module:
    config = T.ViTConfig(hidden_size=64, num_hidden_layers=2, num_attention_heads=4, intermediate_size=96,
                         image_size=16, patch_size=4, num_channels=3)
    config._attn_implementation = "sdpa"
    return Output(randomise(T.ViTModel(config, add_pooling_layer=False).double().eval()), "last_hidden_state")


class Stack(nn.Module):
    """Layers in sequence (an nn.ModuleList run in a loop)."""

    def __init__(self, *layers: nn.Module):
        super().__init__()
        self.layers = nn.ModuleList(layers)

    def forward(self, x):
        for layer in self.layers:
            x = layer(x)
        return x


@contextlib.contextmanager
def float32_islands_off():
    """Hugging Face computes norms, rotary angles and softmax in float32 whatever the model's dtype;
    the trace drops those casts (with a warning). With them off the reference is all float64."""
    to, flt, softmax = torch.Tensor.to, torch.Tensor.float, torch.nn.functional.softmax

    def to_(self, *a, **k):
        return self if (a and a[0] is torch.float32) or k.get("dtype") is torch.float32 else to(self, *a, **k)

    def softmax_(x, dim=None, dtype=None, **k):
        return softmax(x, dim=dim, **k)
    softmax_.__name__ = "softmax"
    torch.Tensor.to, torch.Tensor.float, torch.nn.functional.softmax = to_, (lambda self: self), softmax_
    try:
        yield
    finally:
        torch.Tensor.to, torch.Tensor.float, torch.nn.functional.softmax = to, flt, softmax


def ids(s: int, seed: int) -> torch.Tensor:
    return torch.randint(0, V, (2, s), generator=torch.Generator().manual_seed(seed))


def example(name: str, s: int, seed: int):
    """The model's input at length s: token ids (with use_cache=False), or x [2, s, 64]."""
    gen = torch.Generator().manual_seed(seed)
    if name in PLAIN:
        return torch.randn(2, s, 64, generator=gen, dtype=torch.float64)
    if name in IMAGES:  # s - 3 images: 2 or 3
        return {"pixel_values": torch.randn(s - 3, 3, 16, 16, generator=gen, dtype=torch.float64)}
    return {"input_ids": ids(s, seed), "use_cache": False}


def forward(model: nn.Module, ex):
    return model(**ex) if isinstance(ex, dict) else model(ex)


CHECK = r"""
import json, sys, torch
from safetensors.torch import load_file
import stringdiag
from stringdiag.cli.summary import summarize
from stringdiag.render.draw import to_svg
out = {}
for name, files in json.loads(sys.argv[1]).items():
    try:
        program = stringdiag.load(files["diag"])
        d = program[files["diagram"]]
        ours = stringdiag.compile(d, dtype=torch.float64)
        ours.load_state_dict(load_file(files["weights"]))
        data = load_file(files["data"])
        errors = []
        for s in files["lengths"]:
            with torch.no_grad():
                y = ours(data[f"ids{s}"])
            ref = data[f"ref{s}"]
            errors.append(((y - ref).abs().max() / ref.abs().max()).item())
        pictures = [to_svg(program[n]) for n in files["render"]]  # the model, and its longest definition
        out[name] = {"errors": errors, "info": str(summarize(d)), "pictures": [p[:5] for p in pictures]}
    except Exception as e:  # reported by the test of this model
        out[name] = {"failed": f"{type(e).__name__}: {e}"}
print(json.dumps(out))
"""


def trace_all(folder: Path, models: dict = MODELS) -> dict:
    """Each model traced here, written out; then all compiled back in one fresh process:
    name -> (the trace, what the fresh process measured)."""
    from stringdiag import trace

    results, files = {}, {}
    for k, (name, make) in enumerate(models.items()):
        model = make()
        with float32_islands_off():
            t = trace(model, example(name, 5, 1), None if name in IMAGES else example(name, 7, 2))
            data = {}
            for s in (5, 6):
                ex = example(name, s, 3 + s)
                with torch.no_grad():
                    data[f"ids{s}"] = next(iter(ex.values())) if isinstance(ex, dict) else ex
                    data[f"ref{s}"] = forward(model, ex).contiguous()
        stem = folder / f"m{k}"
        stem.with_suffix(".diag").write_text(t.text)
        write_atomic(str(stem) + ".safetensors", t.weights.tensors(model.state_dict()), {"diagram": t.name}, "w")
        write_atomic(str(stem) + ".data.safetensors", data, {}, "d")
        files[name] = {"diag": str(stem) + ".diag", "weights": str(stem) + ".safetensors", "diagram": t.name,
                       "data": str(stem) + ".data.safetensors", "lengths": [5, 6],
                       "render": [t.name, _longest(t.text)]}
        results[name] = t
    run = subprocess.run([sys.executable, "-c", CHECK, json.dumps(files)], capture_output=True, text=True, timeout=600)
    assert run.returncode == 0, run.stderr[-3000:]
    fresh = json.loads(run.stdout.strip().splitlines()[-1])
    return {name: (results[name], fresh[name]) for name in models}


def _longest(text: str) -> str:
    """The definition of most lines (the attention, usually): drawn as well as the model."""
    bodies = re.findall(r"^diagram (\w+)\(.*?^}", text, re.MULTILINE | re.DOTALL)
    return max(bodies, key=lambda name: len(re.search(rf"^diagram {name}\(.*?^}}", text, re.M | re.S)[0]))


@pytest.fixture(scope="module")
def traced(tmp_path_factory):
    return trace_all(tmp_path_factory.mktemp("models"))


@pytest.mark.parametrize("name", list(MODELS))
@pytest.mark.slow
def test_a_model_compiles_back_from_its_files_alone(traced, name):
    t, fresh = traced[name]
    assert "failed" not in fresh, fresh.get("failed")
    assert fresh["pictures"] == ["<?xml", "<?xml"]  # drawn from the file alone    assert max(fresh["errors"]) <= TOL, fresh["errors"]  # two lengths, a process without the model's code
    if name in IMAGES:  # a fixed number of patches (1 + 16 tokens): no sequence dimension
        assert "in the sequence length: O(1)" in fresh["info"]
    else:  # time: full attention; a sliding window of 3 (d3) on the band only
        assert f"in the sequence length: {COST.get(name, 'O(s^2)')}" in fresh["info"]
    assert not t.opaque and "abstract" not in t.text  # nothing left for torch to run
    assert re.search(r"= repeat 2 \w+\(", t.text) or name in NOT_REPEATED, "the two layers are one repeat"


def test_learned_positions_are_the_table_read_at_positions(traced):
    gpt2 = traced["GPT-2 (GPT2LMHeadModel)"][0].text
    assert "= positions<s>()" in gpt2 and re.search(r"embed\(bucket<d32>\(\w+\[i\]\), wpe\(\)\)", gpt2)
    bert = traced["BERT (BertModel)"][0].text
    assert re.search(r"embed\(bucket<d2>\(0\), token_type_embeddings\(\)\)", bert)  # token type 0 everywhere
    opt = traced["OPT"][0].text  # OPT's positions: cumsum of a mask of ones, minus one, plus its offset 2
    assert re.search(r"\w+\[i\] = \w+\[i\] \+ 2", opt)


def test_a_sliding_window_mask_is_the_preludes_banded_attention(traced):
    text = traced["Mistral (sliding window 3)"][0].text
    assert "= causal<s>() * window<s, d3>()" in text  # read from the mask's values in every run
    assert re.search(r"attn_output\[a\] = causal_window_sdpa<s, d8 \+ d8, d8 \+ d8, d8 \+ d8, d3>\(", text)


def test_grouped_query_keys_are_repeated_per_group(traced):
    text = traced["Qwen2 (sdpa, grouped-query)"][0].text
    assert re.search(r"\w+_groups\[a, i, b, r\] = \w+\[a, i, b\] \* ones_2\w*\[r\]", text)
    assert "causal_sdpa<s," in text


def test_rope_frequencies_are_a_constant_of_the_weights_file(traced):
    t = traced["Llama (grouped-query)"][0]
    assert "learn inv_freq : -> [d8]" in t.text and "detach(inv_freq()[a])" in t.text
    assert list(t.weights.constants) == ["model.model.rotary_emb.inv_freq@constant"]
    assert t.weights.mapping["model.model.rotary_emb.inv_freq@constant"].endswith("rotary_emb.inv_freq.weight")


def table(results: dict) -> str:
    """The table of docs/trace.md: each model, the lines of its file, its repeats, its error."""
    rows = ["| model | lines | `repeat`s | in the sequence length | largest relative error (lengths 5, 6) |",
            "|---|---|---|---|---|"]
    for name, (t, fresh) in results.items():
        repeats = ", ".join(f"`repeat {m[1]} {m[2]}`" for m in re.finditer(r"= repeat (\d+) (\w+)\(", t.text)) or "none"
        cost = re.search(r"in the sequence length: (O\([^)]*\))", fresh.get("info", ""))
        error = f"{max(fresh['errors']):.1e}" if "errors" in fresh else fresh.get("failed", "")[:60]
        rows.append(f"| {name} | {t.text.count(chr(10))} | {repeats} | {cost[1] if cost else ''} | {error} |")
    return "\n".join(rows)


if __name__ == "__main__":  # python tests/test_trace_models.py: the table of docs/trace.md
    import tempfile

    with tempfile.TemporaryDirectory() as folder:
        print(table(trace_all(Path(folder), {**MODELS, **MORE})))
