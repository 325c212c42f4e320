"""``stringdiag.trace``: a PyTorch module traced into a .diag that checks, draws, is costed by
``info``, and compiles back (loaded with the module's weights by the trace's weight map) to a
module equal to the original in float64 on two sequence lengths. The references are the
modules themselves (Hugging Face's GPT2Block and LlamaDecoderLayer, random small configs)."""
from __future__ import annotations

import contextlib
from pathlib import Path

import pytest
import torch
from torch import nn

from stringdiag.analysis.complexity import analyse
from stringdiag.errors import DiagError
from stringdiag.trace import trace
from helpers import rel_max

TOL = 1e-10
ROOT = Path(__file__).resolve().parent.parent


def randomise(module: nn.Module, seed: int = 0) -> nn.Module:
    gen = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for p in module.parameters():
            p.copy_(torch.randn(p.shape, generator=gen, dtype=p.dtype) * 0.5)
    return module


def causal_mask(b: int, s: int) -> torch.Tensor:
    keep = torch.ones(s, s, dtype=torch.bool).tril()
    return torch.zeros(s, s, dtype=torch.float64).masked_fill(~keep, float("-inf")).expand(b, 1, s, s)


def round_trip(module: nn.Module, example, tensors, run_ours=None, tol: float = TOL):
    """Trace on lengths 5 and 7; the trace checks, has a cost, compiles and loads; outputs agree."""
    t = trace(module, example(5), example(7))
    d = t.program[t.name]
    assert analyse(d).time  # info's cost
    ours = t.compile(dtype=torch.float64)
    t.weights.load(ours, module.state_dict())
    for s in (5, 6):
        ex = example(s)
        y = ours(*tensors(ex))
        ref = module(**ex) if isinstance(ex, dict) else module(ex)
        assert rel_max(y, ref) < tol, (s, rel_max(y, ref))
    return t


class Unsupported(nn.Module):
    def __init__(self, width: int = 6):
        super().__init__()
        self.norm = nn.LayerNorm(width)
        self.up = nn.Linear(width, 2 * width)
        self.down = nn.Linear(2 * width, width, bias=False)

    def forward(self, x):
        h = self.down(torch.relu(self.up(self.norm(x))))
        return x + torch.cummax(h, dim=1).values  # no box for cummax in the language


def test_an_unsupported_operation_is_a_marked_box_warned_at_its_line():
    m = randomise(Unsupported().double())
    t = round_trip(m, lambda s: torch.randn(2, s, 6, dtype=torch.float64), lambda x: (x,))
    assert "abstract op_cummax : [s, d6] -> [s, d6]   # NOT EXPRESSIBLE" in t.text
    line = next(k for k, text in enumerate(Path(__file__).read_text().splitlines(), 1) if "torch.cummax(h" in text)
    assert t.warnings == [f"{__file__}:{line}: warning: 'cummax' is not expressible in the language (the language "
                          "has no box for it); kept as the marked box 'op_cummax' (abstract in the file; Traced.compile runs it with torch)"]
    assert "learn up : [d6] -> [d12] via linear(bias = true)" in t.text
    assert "learn down : [d12] -> [d6] via linear(bias = false)" in t.text


class Layer(nn.Module):
    def __init__(self, width: int = 6):
        super().__init__()
        self.ff = nn.Linear(width, width)

    def forward(self, x):
        return x + torch.tanh(self.ff(x))


class Stack(nn.Module):
    def __init__(self):
        super().__init__()
        self.layers = nn.ModuleList([Layer(), Layer(), Layer()])

    def forward(self, x):
        for layer in self.layers:
            x = layer(x)
        return x * 2


def test_module_list_layers_in_sequence_are_one_repeat_with_weights_per_layer():
    m = randomise(Stack().double())
    t = round_trip(m, lambda s: torch.randn(2, s, 6, dtype=torch.float64), lambda x: (x,))
    assert "layers_2 = repeat 3 Layer(x_)" in t.text
    assert t.weights.mapping["layers.1.ff.weight"] == "layers_2.1.ff.weight"


@pytest.mark.parametrize("norm_first, activation", [(True, "relu"), (False, "gelu")])
def test_torch_transformer_encoder_layer_round_trips(norm_first, activation):
    m = randomise(nn.TransformerEncoderLayer(12, 3, 20, dropout=0.0, activation=activation, batch_first=True,
                                             norm_first=norm_first, dtype=torch.float64), 1)
    t = round_trip(m, lambda s: torch.randn(2, s, 12, dtype=torch.float64), lambda x: (x,))
    x = "norm1" if norm_first else "src"
    assert f"self_attn = MultiheadAttention({x}, {x}, {x})" in t.text
    assert "oh[a] = sdpa<s, s, d4, d4, d4>(qh[a], kh[a], vh[a])" in t.text  # the prelude's attention, per head
    first = "norm1 = layernorm_eps(src, 0.00001)" in t.text
    assert first == norm_first
    assert t.weights.mapping["self_attn.in_proj_weight"] == ["self_attn.WQ.weight", "self_attn.WK.weight",
                                                              "self_attn.WV.weight"]


def test_multihead_attention_round_trips_with_its_averaged_weights():
    m = randomise(nn.MultiheadAttention(12, 3, batch_first=True, dtype=torch.float64), 2)
    gen = torch.Generator().manual_seed(3)
    xs = {s: tuple(torch.randn(2, s, 12, generator=gen, dtype=torch.float64) for _ in range(3)) for s in (5, 6, 7)}
    t = trace(m, xs[5], xs[7])
    ours = t.compile(dtype=torch.float64)
    t.weights.load(ours, m.state_dict())
    for s in (5, 6):
        for y, ref in zip(ours(*xs[s]), m(*xs[s])):
            assert rel_max(y, ref) < TOL
    assert "w[i, j] = (sum_a att[a, i, j]) / d3" in t.text


@pytest.fixture(scope="module")
def hf():
    pytest.importorskip("transformers")
    from transformers import GPT2Config, LlamaConfig
    from transformers.models.gpt2.modeling_gpt2 import GPT2Block
    from transformers.models.llama.modeling_llama import LlamaDecoderLayer, LlamaRotaryEmbedding

    return GPT2Config, GPT2Block, LlamaConfig, LlamaDecoderLayer, LlamaRotaryEmbedding


def test_hugging_face_gpt2_block_round_trips(hf):
    config_class, block_class = hf[0], hf[1]
    config = config_class(n_embd=12, n_head=3, n_layer=1, resid_pdrop=0.0, attn_pdrop=0.0, embd_pdrop=0.0,
                          activation_function="gelu_new")
    config._attn_implementation = "eager"
    m = randomise(block_class(config, layer_idx=0).double(), 3)

    def example(s):
        return {"hidden_states": torch.randn(2, s, 12, dtype=torch.float64), "attention_mask": causal_mask(2, s)}
    t = round_trip(m, example, lambda e: (e["hidden_states"], e["attention_mask"][:, 0]))
    assert "learn c_attn : [d3 * d4] -> [d3 * d4 + d3 * d4 + d3 * d4] via linear(bias = true)" in t.text
    assert "ln_1 = layernorm_eps(hidden_states, 0.00001)" in t.text
    assert t.weights.transpose == ["attn.c_attn.weight", "attn.c_proj.weight", "mlp.c_fc.weight", "mlp.c_proj.weight"]


def test_gpt2_block_with_scaled_dot_product_attention_is_the_preludes_causal_attention(hf):
    config_class, block_class = hf[0], hf[1]
    config = config_class(n_embd=12, n_head=3, n_layer=1, resid_pdrop=0.0, attn_pdrop=0.0, activation_function="gelu_new")
    config._attn_implementation = "sdpa"  # no mask given: Hugging Face asks torch for is_causal=True
    m = randomise(block_class(config, layer_idx=0).double(), 4)
    t = round_trip(m, lambda s: torch.randn(2, s, 12, dtype=torch.float64), lambda x: (x,))
    assert ("attn_output[a] = causal_sdpa<s, d4, d4, d4>(query_states_2[:, a], key_states_2[:, a], value_states_2[:, a])"
            in t.text)
    assert not t.warnings


class MaskedAttention(nn.Module):
    """F.scaled_dot_product_attention with a boolean mask and a scale of its own: written out."""

    def __init__(self):
        super().__init__()
        self.qkv = nn.Linear(8, 24)

    def forward(self, x, keep):
        q, k, v = self.qkv(x).unflatten(-1, (3, 2, 4)).permute(2, 0, 3, 1, 4)
        o = torch.nn.functional.scaled_dot_product_attention(q, k, v, attn_mask=keep, scale=0.3)
        return o.transpose(1, 2).flatten(2)


def test_attention_with_a_mask_and_a_scale_is_written_out():
    m = randomise(MaskedAttention().double(), 6)
    gen = torch.Generator().manual_seed(8)

    def example(s):
        keep = torch.rand(2, 1, s, s, generator=gen) < 0.7
        keep |= torch.eye(s, dtype=torch.bool)  # every query sees one key at least
        return {"x": torch.randn(2, s, 8, generator=gen, dtype=torch.float64), "keep": keep}
    t = round_trip(m, example, lambda e: (e["x"], e["keep"][:, 0].double()))
    assert "o_weights[a, i] = softmax(where(o_scores[a, i] * 0.3, keep[i]))" in t.text  # named for the source's o


class EagerAttention(nn.Module):
    """Attention as model code writes it by hand: softmax(q kᵀ / sqrt(d)) v, heads by view and transpose."""

    def __init__(self):
        super().__init__()
        self.q, self.k, self.v = nn.Linear(12, 12), nn.Linear(12, 12), nn.Linear(12, 12)

    def forward(self, x):
        b, s, _ = x.shape
        q, k, v = (f(x).view(b, s, 3, 4).transpose(1, 2) for f in (self.q, self.k, self.v))
        a = torch.softmax(q @ k.transpose(-2, -1) / 4 ** 0.5, dim=-1)
        return (a @ v).transpose(1, 2).reshape(b, s, 12)


def test_the_eager_softmax_attention_pattern_is_the_preludes_attention():
    m = randomise(EagerAttention().double(), 7)
    t = round_trip(m, lambda s: torch.randn(2, s, 12, dtype=torch.float64), lambda x: (x,))
    assert "matmul_1[a] = sdpa<s, s, d4, d4, d4>(view[:, a], view_1[:, a], view_2[:, a])" in t.text
    assert "softmax" not in t.text


@contextlib.contextmanager
def casts_off():
    """Llama computes its norms and softmax in float32 whatever the input's dtype; the trace drops
    those casts (with a warning). With them off, the reference is all float64."""
    to, softmax = torch.Tensor.to, torch.nn.functional.softmax

    def to_(self, *a, **k):
        return self if (a and a[0] is torch.float32) or k.get("dtype") is torch.float32 else to(self, *a, **k)
    torch.Tensor.to = to_

    def softmax_(x, dim=None, dtype=None, **k):
        return softmax(x, dim=dim, **k)
    softmax_.__name__ = "softmax"  # the softmax the tracer knows
    torch.nn.functional.softmax = softmax_
    try:
        yield
    finally:
        torch.Tensor.to, torch.nn.functional.softmax = to, softmax


@pytest.mark.parametrize("implementation", ["eager", "sdpa"])
def test_llama_decoder_layer_round_trips(hf, implementation):
    """Eager: the mask an input, added to the scores; sdpa (no mask): the prelude's causal_sdpa."""
    config_class, layer_class, rotary = hf[2], hf[3], hf[4]
    config = config_class(hidden_size=12, num_attention_heads=3, num_key_value_heads=3, intermediate_size=20,
                          head_dim=4, num_hidden_layers=1)
    config._attn_implementation = implementation
    m = randomise(layer_class(config, 0).double(), 5)
    rot = rotary(config)
    gen = torch.Generator().manual_seed(1)
    eager = implementation == "eager"

    def example(s):
        x = torch.randn(2, s, 12, generator=gen, dtype=torch.float64)
        cos, sin = rot(x, torch.arange(s)[None].expand(2, s))
        mask = {"attention_mask": causal_mask(2, s)} if eager else {}
        return {"hidden_states": x, **mask, "position_embeddings": (cos, sin)}  # the diagram's inputs, in order

    def tensors(e):
        return (e["hidden_states"], *((e["attention_mask"][:, 0],) if eager else ()), *e["position_embeddings"])
    with casts_off():
        t = round_trip(m, example, tensors)
    with_casts = round_trip(m, example, tensors, tol=1e-5)  # with Llama's float32 casts: float32's rounding
    assert any("a cast from torch.float64 to torch.float32 is dropped" in w for w in with_casts.warnings)
    assert "learn weight : -> [d3 * (d2 + d2)]" in t.text  # RMSNorm's gain
    assert "cat(neg[a, i], x1[a, i])" in t.text  # rotate_half: halves by slices (its x1, x2), then cat
    assert ("causal_sdpa<s, d2 + d2, d2 + d2, d2 + d2>" in t.text) != eager


def test_a_whole_two_layer_llama_for_causal_lm_round_trips(hf):
    """Token ids in, logits out: embed, RoPE from the module's inv_freq (a constant in the weights file),
    Hugging Face's causal mask (None: the layers' attention is causal by itself), two layers as one
    repeat, the final norm, the head."""
    from transformers import LlamaForCausalLM

    config = hf[2](vocab_size=50, hidden_size=12, num_attention_heads=3, num_key_value_heads=3, intermediate_size=20,
                   head_dim=4, num_hidden_layers=2, tie_word_embeddings=False)
    config._attn_implementation = "sdpa"
    m = randomise(LlamaForCausalLM(config).double(), 9)
    gen = torch.Generator().manual_seed(2)

    def example(s):
        return {"input_ids": torch.randint(0, 50, (2, s), generator=gen), "use_cache": False, "return_dict": False}

    class Logits(nn.Module):  # the reference's logits alone (it returns a tuple)
        def __init__(self):
            super().__init__()
            self.m = m

        def forward(self, **e):
            return self.m(**e)[0]
    with casts_off():
        t = round_trip(Logits(), example, lambda e: (e["input_ids"],))
    assert "diagram LlamaForCausalLM(input_ids: [s] of d50) -> [s, d50]" in t.text
    assert "layers_1 = repeat 2 LlamaDecoderLayer(embed_tokens_2, rotary_emb, rotary_emb_1)" in t.text
    assert "causal_sdpa<s, d2 + d2, d2 + d2, d2 + d2>" in t.text
    assert "learn inv_freq : -> [d2]" in t.text and "detach(inv_freq()[a])" in t.text  # stored, never trained


def test_the_command_writes_a_file_that_checks_and_renders(tmp_path, capsys):
    from stringdiag.cli.main import main

    src = tmp_path / "mymodel.py"
    src.write_text("import torch\nfrom torch import nn\n\n\nclass Block(nn.Module):\n"
                   "    def __init__(self, width=8):\n        super().__init__()\n        self.up = nn.Linear(width, width)\n"
                   "    def forward(self, x):\n        return x + torch.cummax(self.up(x), dim=1).values\n")
    out = tmp_path / "block.diag"
    assert main(["trace", f"{src}:Block", "--kwargs", '{"width": 4}', "--example", "2x5x4", "--example", "2x7x4",
                 "-o", str(out), "--weights", str(tmp_path / "w.safetensors")]) == 0
    assert f"{src}:10: warning: 'cummax' is not expressible" in capsys.readouterr().err
    assert main(["check", str(out)]) == 0
    assert main(["render", str(out), "-o", str(tmp_path / "b.svg")]) == 0
    assert (tmp_path / "b.svg").read_text().startswith("<?xml")
    assert main(["trace", f"{src}:Nope", "--example", "2x5x4", "-o", str(out)]) == 2
    assert "has no 'Nope'" in capsys.readouterr().err
    assert main(["trace", f"{src}:Block", "--example", "2x5x3", "-o", str(out)]) == 1  # Linear(8, 8) on width 3
    assert capsys.readouterr().err.startswith(f"error: tracing {src}:Block on the examples: Block fails when called on "
                                              "example_inputs: RuntimeError: mat1 and mat2 shapes")
    assert main(["trace", f"{src}:Block", "--example", "2x5x8", "-o", "/proc/no/such/dir/x.diag"]) == 2  # before any work
    assert capsys.readouterr().err.startswith("error: argument -o/--output: cannot write /proc/no/such/dir/x.diag")
    # --config is a file of options elsewhere (train): here it is refused, naming --kwargs
    assert main(["trace", f"{src}:Block", "--config", "x.toml", "--example", "2x5x8", "-o", str(out)]) == 2
    assert "the callable's keyword arguments are --kwargs JSON" in capsys.readouterr().err
    assert main(["trace", f"{src}:Block", "--kwargs", "[4]", "--example", "2x5x8", "-o", str(out)]) == 2
    assert "--kwargs: expected a JSON object" in capsys.readouterr().err


class Functional(nn.Module):
    """A module's own tensors used through torch.nn.functional, not through submodules."""

    def __init__(self):
        super().__init__()
        self.w, self.b = nn.Parameter(torch.randn(4, 6)), nn.Parameter(torch.randn(4))
        self.v = nn.Parameter(torch.randn(4, 6))

    def forward(self, x):
        return torch.nn.functional.linear(x, self.w, self.b) + torch.nn.functional.linear(x, self.v)


def test_functional_linear_is_a_contraction_with_the_modules_tensors():
    m = randomise(Functional().double())
    t = round_trip(m, lambda s: torch.randn(2, s, 6, dtype=torch.float64), lambda x: (x,))
    assert not t.warnings and "op_" not in t.text
    assert "sum_z x_[i, z] * w_()[a, z] + b_()[a]" in t.text and "sum_z x_[i, z] * v_()[a, z]" in t.text


class Branching(nn.Module):
    """Python that branches on data: no diagram says it."""

    def __init__(self):
        super().__init__()
        self.f = nn.Linear(4, 4)

    def forward(self, x):
        if x.sum() > 0:
            return self.f(x)
        return x


class Rolled(nn.Module):
    """An operation the language lacks, run with a size of the example (half the length)."""

    def __init__(self):
        super().__init__()
        self.f = nn.Linear(4, 4)

    def forward(self, x):
        return torch.roll(self.f(x), shifts=x.shape[1] // 2, dims=1)


def _line(text: str) -> int:
    return next(k for k, line in enumerate(Path(__file__).read_text().splitlines(), 1) if text in line)


def test_a_branch_on_data_fails_in_one_line_naming_the_models_source_line():
    with pytest.raises(DiagError) as e:
        trace(Branching(), torch.randn(2, 5, 4), torch.randn(2, 7, 4))
    assert str(e.value).splitlines() == [f"{__file__}:{_line('if x.sum() > 0:')}: the module's Python branches on the "
                                         "values of a tensor (an if or a while on data); a diagram has no such branch: "
                                         "cannot trace it"]


def test_an_opaque_box_that_would_fix_the_examples_length_is_refused_at_its_line():
    with pytest.raises(DiagError) as e:
        trace(Rolled(), torch.randn(2, 5, 4), torch.randn(2, 7, 4))
    assert str(e.value).startswith(f"{__file__}:{_line('torch.roll(self.f(x)')}: 'roll' is not expressible")
    assert "'floordiv' = 2, a size of this example that changes with the batch or the length" in str(e.value)


def test_trace_is_a_function_of_the_package():
    import stringdiag

    assert "trace" in stringdiag.__all__ and callable(stringdiag.trace)
    t = stringdiag.trace(Layer().double(), torch.randn(2, 5, 6, dtype=torch.float64))
    assert t.name == "Layer" and not t.opaque


class BufferMasked(nn.Module):
    """Attention masked by a boolean buffer sliced to the length (GPT-Neo's), through torch.where."""

    def __init__(self):
        super().__init__()
        self.qkv = nn.Linear(6, 18)
        self.register_buffer("bias", torch.ones(16, 16, dtype=torch.bool).tril(), persistent=False)

    def forward(self, x):
        q, k, v = self.qkv(x).chunk(3, dim=-1)
        s = x.shape[1]
        scores = torch.where(self.bias[:s, :s], q @ k.transpose(-1, -2), torch.finfo(x.dtype).min)
        return torch.softmax(scores, dim=-1) @ v


def test_a_mask_buffer_sliced_by_the_length_is_the_causal_mask():
    m = randomise(BufferMasked().double(), 11)
    t = round_trip(m, lambda s: torch.randn(2, s, 6, dtype=torch.float64), lambda x: (x,))
    assert "= causal<s>()" in t.text and "where(" in t.text and not t.opaque
