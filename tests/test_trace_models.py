"""Today's models traced whole (tiny random Hugging Face configs: 2 layers, width 64, float64) and
compiled back from the written ``.diag`` and weights file alone, in a fresh Python process that
never sees the model's code: the outputs at two sequence lengths against the models themselves
(with their float32 islands off, so that both sides compute in float64), ``info`` O(s²) for full
attention, no opaque box, the layers one ``repeat``."""
from __future__ import annotations

import contextlib
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from torch import nn

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
    "Qwen2 (sdpa, grouped-query)": lambda: language_model(T.Qwen2Config, T.Qwen2ForCausalLM, num_key_value_heads=2),
    "Qwen2 (eager, grouped-query)": lambda: language_model(T.Qwen2Config, T.Qwen2ForCausalLM, "eager",
                                                           num_key_value_heads=2),
    "Llama (grouped-query)": lambda: language_model(T.LlamaConfig, T.LlamaForCausalLM, num_key_value_heads=2),
}


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


CHECK = r"""
import json, sys, torch
from safetensors.torch import load_file
import stringdiag
from stringdiag.cli.summary import summarize
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
        out[name] = {"errors": errors, "info": str(summarize(d))}
    except Exception as e:  # reported by the test of this model
        out[name] = {"failed": f"{type(e).__name__}: {e}"}
print(json.dumps(out))
"""


@pytest.fixture(scope="module")
def traced(tmp_path_factory):
    """Each model traced here, written out; then all compiled back in one fresh process."""
    from stringdiag import trace

    folder = tmp_path_factory.mktemp("models")
    results, files = {}, {}
    for k, (name, make) in enumerate(MODELS.items()):
        model = make()
        with float32_islands_off():
            t = trace(model, {"input_ids": ids(5, 1), "use_cache": False}, {"input_ids": ids(7, 2), "use_cache": False})
            data = {}
            for s in (5, 6):
                x = ids(s, 3 + s)
                with torch.no_grad():
                    data[f"ids{s}"], data[f"ref{s}"] = x, model(input_ids=x, use_cache=False).contiguous()
        stem = folder / f"m{k}"
        stem.with_suffix(".diag").write_text(t.text)
        write_atomic(str(stem) + ".safetensors", t.weights.tensors(model.state_dict()), {"diagram": t.name}, "w")
        write_atomic(str(stem) + ".data.safetensors", data, {}, "d")
        files[name] = {"diag": str(stem) + ".diag", "weights": str(stem) + ".safetensors", "diagram": t.name,
                       "data": str(stem) + ".data.safetensors", "lengths": [5, 6]}
        results[name] = t
    run = subprocess.run([sys.executable, "-c", CHECK, json.dumps(files)], capture_output=True, text=True, timeout=600)
    assert run.returncode == 0, run.stderr[-3000:]
    fresh = json.loads(run.stdout.strip().splitlines()[-1])
    return {name: (results[name], fresh[name]) for name in MODELS}


@pytest.mark.parametrize("name", list(MODELS))
def test_a_model_compiles_back_from_its_files_alone(traced, name):
    t, fresh = traced[name]
    assert "failed" not in fresh, fresh.get("failed")
    assert max(fresh["errors"]) <= TOL, fresh["errors"]  # two lengths, a process without the model's code
    assert "in the sequence length: O(s^2)" in fresh["info"]  # time: full attention
    assert not t.opaque and "abstract" not in t.text  # nothing left for torch to run
    assert re.search(r"= repeat 2 \w+\(", t.text), "the two layers are one repeat"


def test_learned_positions_are_the_table_read_at_positions(traced):
    gpt2 = traced["GPT-2 (GPT2LMHeadModel)"][0].text
    assert "= positions<s>()" in gpt2 and re.search(r"embed\(bucket<d32>\(\w+\[i\]\), wpe\(\)\)", gpt2)
    bert = traced["BERT (BertModel)"][0].text
    assert re.search(r"embed\(bucket<d2>\(0\), token_type_embeddings\(\)\)", bert)  # token type 0 everywhere
    opt = traced["OPT"][0].text  # OPT's positions: cumsum of a mask of ones, minus one, plus its offset 2
    assert re.search(r"\w+\[i\] = \w+\[i\] \+ 2", opt)


def test_grouped_query_keys_are_repeated_per_group(traced):
    text = traced["Qwen2 (sdpa, grouped-query)"][0].text
    assert re.search(r"\w+_groups\[a, i, b, r\] = \w+\[a, i, b\] \* ones_2\w*\[r\]", text)
    assert "causal_sdpa<s," in text


def test_rope_frequencies_are_a_constant_of_the_weights_file(traced):
    t = traced["Llama (grouped-query)"][0]
    assert "learn inv_freq : -> [d8]" in t.text and "detach(inv_freq()[a])" in t.text
    assert list(t.weights.constants) == ["model.model.rotary_emb.inv_freq@constant"]
    assert t.weights.mapping["model.model.rotary_emb.inv_freq@constant"].endswith("rotary_emb.inv_freq.weight")
