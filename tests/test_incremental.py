"""The incremental form (``compile(..., incremental=True)``): over every diagram of gallery/ and
gallery/modern/, stepped one position at a time (and in blocks), it gives the parallel form's
outputs at every position in float64 with random weights, batch 2, at two lengths; every other
diagram is refused, and the list below says which and why. The GPT of gallery/lm.diag, stepped,
agrees with Hugging Face's GPT2LMHeadModel run with its own key/value cache; the state it keeps
is the documented one (a cache growing with the positions, a recurrent state that does not)."""
from __future__ import annotations

from pathlib import Path

import pytest
import torch

import stringdiag
from helpers import rel_max
from stringdiag import DiagError

GALLERY = Path(__file__).resolve().parents[1] / "gallery"
FILES = sorted(GALLERY.glob("*.diag")) + sorted((GALLERY / "modern").glob("*.diag"))
ALL = [(f, name) for f in FILES for name in stringdiag.load(f)]

# Every gallery diagram with an incremental form, by file (mechanisms.diag: all of its members).
COVERED = {
    "anatomy": ["LinAttPrep", "LinAttApply", "ConcatFF", "M0", "M1"],
    "anatomy_qk": ["LinAttPrepQK"],
    "attention": ["MaskedSelfAttention"],
    "spline_heads": ["SoftmaxHead", "ReluHead", "SoftplusHead"],
    "control": ["TokenFF", "ShortConv", "RunningMean", "CausalMixer"],
    "residual": ["Layer", "ResidualLayer"],
    "derivations": ["Identity"],
    "gpt2": ["GPT2Attn", "GPT2MLP", "GPT2Block"],
    "hardmax": ["MaskedScalarHardmaxBlock"],
    "lm": ["GPT", "GPTUntied", "LlamaAttn", "LlamaMLP", "LlamaBlock", "Llama"],
    "overparam": ["LinPrepFF", "LinPrep", "LinApplyFF", "LinApply", "FF", "FFSwapped", "FFLeftFF", "FFRightFF",
                  "MergeLeftFF", "MergeRightFF"],
    "recurrent": ["LinearRNN", "GLARecurrent", "SSMRecurrent", "SSDAttention", "RetentionChunkwise", "GLAParallel"],
    "similarity": ["CausalLinearAttention"],
    "splines": ["MaskedReluAttention", "DecoderBlock"],
    "sumformer_theorems": ["Eq22Rows"],
    "bloom": ["BloomMLP", "BloomAttention", "BloomBlock", "BloomModel", "BloomForCausalLM"],
    "falcon": ["FalconAttention", "FalconMLP", "FalconDecoderLayer", "FalconModel", "FalconForCausalLM"],
    "gla": ["GLAOut", "GLARecurrent", "GLAParallel"],
    "gpt_neox": ["GPTNeoXAttention", "GPTNeoXMLP", "GPTNeoXLayer", "GPTNeoXModel", "GPTNeoXForCausalLM"],
    "llama": ["LlamaModel", "LlamaForCausalLM"],
    "mamba": ["MambaMixer", "MambaBlock", "MambaModel"],
    "mistral": ["MistralAttention", "MistralDecoderLayer", "MistralModel", "MistralForCausalLM"],
    "mixtral": ["MixtralSparseMoeBlock", "MixtralAttention", "MixtralDecoderLayer", "MixtralModel",
                "MixtralForCausalLM"],
    "retnet": ["MSROut", "MSRRecurrent", "MSRParallel"],
}
WHOLE_FILES = ("mechanisms",)

# Every other gallery diagram, by what its refusal says.
REFUSED = {
    # not a map of one sequence to one sequence (a cell, a norm, a score matrix [s, s], a readout)
    "needs exactly one sequence axis": {
        "anatomy": ["AttPrep", "AttApply"], "anatomy_qk": ["AttPrepQK"], "bahdanau": ["BiRNN", "AttendStep"],
        "derivations": ["Eq1Query"], "hardmax": ["HardmaxReadout"], "lm": ["rmsnorm"],
        "overparam": ["PrepFF", "Prep", "ApplyFF", "Apply", "ConcatFFToken"],
        "recurrent": ["Accumulate", "AccumulateKeys", "GLAStep", "SSMStep", "RetentionStep", "DecayCarry"],
        "splines": ["MaskedReluHeads", "ReluFF"], "sumformer": ["PerformerFeatures"],
        "sumformer_theorems": ["RowFeatures"], "sumformer_experiments": ["Deep"],
        "sumformer_polynomial": ["Lift", "Outer"],
        "taxonomy_linear": ["favor", "dpfp"],
        "bloom": ["bloom_gelu"], "gla": ["log_gate", "GLAHeads"], "mamba": ["silu", "SelectiveStep"],
        "retnet": ["MSRStep"],
        "simd_moves": ["B2Query", "B2Weigh", "B2Sum", "B2Divide", "B2Apply"],
        "t5": ["t5_magnitude_bucket", "t5_bucket", "t5_causal_bucket", "t5_position_bias",
               "t5_causal_position_bias", "T5Attention", "T5DenseReluDense", "T5Block", "T5DecoderBlock"],
    },
    # two sequences (cross attention, encoder-decoder)
    "several sequences": {"attention": ["CrossAttention"], "bahdanau": ["Bahdanau"],
                          "scores": ["ScoreAttention", "DotAttention", "MultiplicativeAttention",
                                     "MappedQueryDotAttention", "AdditiveAttention"],
                          "splines": ["CrossReluHeads", "EncoderDecoderBlock"], "t5": ["T5Decoder", "T5Model"],
                          "spline_encoder": ["CrossPositionalReluHeads", "EncDecSplineBlock"]},
    "it has no inputs": {"derivations": ["ColumnConstantE", "ColumnConstantF", "One"], "bloom": ["alibi"],
                         "retnet": ["decays"]},
    "is an abstract family": {"derivations": ["Eq1PerQuery"], "taxonomy": ["PrimordialAttention"],
                              "simd_moves": ["B2PerQuery"],
                              "taxonomy_gaussian": ["GaussianPriorAttention", "GaussianAttention"],
                              "similarity": ["GenericSimilarityAttention"],
                              "taxonomy_linear": ["NormalisedSimilarityAttention"]},
    # bidirectional: a box reads the whole sequence, later positions included
    "'sdpa' reads every position": {"attention": ["SelfAttention", "MultiHeadAttention"],
                                    "sumformer_theorems": ["SoftmaxHeadOnRows"],
                                    "transformer": ["EncoderLayer", "TransformerEncoder", "EncoderLayerPostNorm"]},
    "'softmax' reads every position": {"taxonomy_gaussian": ["GaussianTransformer", "HardcodedGaussian"],
                                       "hardmax": ["ScalarSoftmaxBlock"]},
    # T5's encoder reads its position bias (queries by keys) as an input of its blocks
    "reads a value of two sequence axes": {"t5": ["T5Encoder", "T5EncoderModel"]},
    "'ssoftmax' reads every position": {"taxonomy": ["GaussianWindowAttention"]},
    "'window_sdpa' reads every position": {"taxonomy": ["SlidingWindowAttention"]},
    "'window_global_sdpa' reads every position": {"taxonomy_sparse": ["Longformer"]},
    "'hardmax' reads every position": {"derivations": ["HardmaxRank1Attention"],
                                       "hardmax": ["HardmaxAttention", "HardmaxBlock", "ScalarHardmaxBlock",
                                                   "WeightedHardmaxAttention", "MultiHeadHardmaxAttention"]},
    "sums over the positions": {"derivations": ["SumformerOuter", "SumformerPair", "LinformerColumnConstant"],
                                "splines": ["ReluAttention", "ReluHeads", "EncoderBlock"],
                                "sumformer": ["Sumformer", "Linformer", "Performer"],
                                "sumformer_experiments": ["PolySumformer", "MLPSumformer"],
                                "sumformer_polynomial": ["SumformerOthers"],
                                "similarity": ["LinearAttention"],
                                "sumformer_theorems": ["SumformerSumRows", "PerformerHeadOnRows"],
                                "taxonomy_linear": ["FastWeightDPFP", "LinearTransformer", "PerformerFAVOR"]},
    "'window' makes values over every position": {"taxonomy_sparse": ["BigBird", "ETC"]},
    "'M' makes values over every position": {"taxonomy_sparse": ["MaskedAttention"]},
    "'E' makes values over every position": {"sumformer_theorems": ["LinformerHeadOnRows"]},
    "is a number computed from the length": {"sumformer_theorems": ["LinformerSumRows"],
                                             "taxonomy_gaussian": ["LocalnessAttention"],
                                             "taxonomy_sparse": ["StarTransformer"]},
    # the chunks of a chunked recurrence are flattened into one axis: a reshape of the sequence
    "'flatten' reads every position": {"recurrent": ["RetentionRecurrent"]},
    # causal, but not covered yet: a mask over the m * c positions of a chunked sequence
    "'causal' makes values over every position": {"recurrent": ["RetentionParallel"]},
    # generic blocks sized only where `construct` chains them (their head counts are generics)
    "is unknown: it is a seq dimension that no input has": {"spline_encoder": [
        "PositionalReluHeads", "SplineBlock", "MaskedPositionalReluHeads", "MaskedSplineBlock"]},
}


def _covered(path: Path, name: str) -> bool:
    return path.stem in WHOLE_FILES or name in COVERED.get(path.stem, ())


def _refusal(path: Path, name: str) -> str | None:
    found = [why for why, per in REFUSED.items() if name in per.get(path.stem, ())]
    assert len(found) <= 1
    return found[0] if found else None


def test_the_lists_name_every_gallery_diagram_once():
    listed = {(f.stem, n) for f, n in ALL if _covered(f, n)} | {(f.stem, n) for f, n in ALL if _refusal(f, n)}
    assert listed == {(f.stem, n) for f, n in ALL}
    assert not any(_covered(f, n) and _refusal(f, n) for f, n in ALL)
    named = {(stem, n) for per in REFUSED.values() for stem, names in per.items() for n in names}
    named |= {(stem, n) for stem, names in COVERED.items() for n in names}
    present = {f.stem for f in FILES}
    assert {(stem, n) for stem, n in named if stem in present} <= {(f.stem, n) for f, n in ALL}  # no name it lacks


def _dims(prog) -> dict[str, int]:
    """Declared defaults, 3 for the rest; a sliding window (w) of 3, narrower than the sequences."""
    dims = {n: decl.default if decl.default is not None else 3 for n, decl in prog.dims.items() if decl.kind == "fixed"}
    return {**dims, "w": 3} if "w" in dims else dims


def _seq(prog, dim) -> bool:
    decl = prog.lookup_dim(dim.name) if dim.name else None
    return decl is not None and decl.kind == "seq"


def _inputs(prog, d, n: int, dims: dict, gen: torch.Generator) -> list[torch.Tensor]:
    xs = []
    for w, ty in zip(d.inputs, d.input_types):
        shape = [n if _seq(prog, dim) else dim.evaluate(dims) for dim in ty]
        ids = d.id_range(w)
        xs.append(torch.randint(0, ids.evaluate(dims), (2, *shape), generator=gen) if ids is not None
                  else torch.randn(2, *shape, generator=gen, dtype=torch.float64))
    return xs


def _pair(prog, d, dims: dict, seed: int):
    """The parallel form with random weights, and the incremental form with the same weights."""
    par = stringdiag.compile(d, dims=dims, dtype=torch.float64).eval()
    gen = torch.Generator().manual_seed(seed)
    with torch.no_grad():  # not the initialisation: layer norms start at 1 and 0
        for p in par.parameters():
            p.copy_(torch.randn(p.shape, generator=gen, dtype=torch.float64) * 0.5)
    inc = stringdiag.compile(d, dims=dims, dtype=torch.float64, incremental=True).eval()
    inc.load_state_dict(par.state_dict())  # strict: the same names and shapes
    return par, inc


def _tuple(y) -> tuple:
    return y if isinstance(y, tuple) else (y,)


@pytest.mark.parametrize("path,name", [(f, n) for f, n in ALL if _covered(f, n)],
                         ids=lambda x: x if isinstance(x, str) else x.stem)
def test_stepping_gives_the_parallel_outputs_at_every_position(path, name):
    """Position by position, then a prompt in one block followed by steps and a last block: the
    outputs at every position equal the parallel form's on the whole sequence, to 1e-12 of the
    largest output (float64), at lengths 4 and 9, batch 2."""
    prog = stringdiag.load(path)
    d, dims = prog[name], _dims(prog)
    par, inc = _pair(prog, d, dims, len(name))
    gen = torch.Generator().manual_seed(7)
    for n in (4, 9):
        xs = _inputs(prog, d, n, dims, gen)
        with torch.no_grad():
            want = _tuple(par(*xs))
            state, steps = inc.initial_state(2), []
            for t in range(n):
                xt = tuple(x.select(1 + a, t) for x, a in zip(xs, inc.in_axes))
                y, state = inc.step(xt if len(xt) > 1 else xt[0], state)
                steps.append(_tuple(y))
            assert state.position == n
            cut = [0, n // 2, n // 2 + 1, n]  # a block, one step, a block
            state, blocks = inc.initial_state(2), []
            for a, b in zip(cut, cut[1:]):
                xb = tuple(x.narrow(1 + ax, a, b - a) for x, ax in zip(xs, inc.in_axes))
                y, state = inc.prefill(xb if len(xb) > 1 else xb[0], state)
                blocks.append(_tuple(y))
        for k, (ref, ax) in enumerate(zip(want, inc.out_axes)):
            stepped = torch.stack([s[k] for s in steps], 1 + ax)
            assert rel_max(stepped, ref) < 1e-12, f"output {k}, length {n}, one position at a time"
            blocked = torch.cat([blk[k] for blk in blocks], 1 + ax)
            assert rel_max(blocked, ref) < 1e-12, f"output {k}, length {n}, in blocks {cut}"


@pytest.mark.parametrize("path,name", [(f, n) for f, n in ALL if _refusal(f, n)],
                         ids=lambda x: x if isinstance(x, str) else x.stem)
def test_a_diagram_without_an_incremental_form_is_refused_with_the_reason(path, name):
    prog = stringdiag.load(path)
    with pytest.raises(DiagError) as e:
        stringdiag.compile(prog[name], dims=_dims(prog), incremental=True)
    assert _refusal(path, name) in e.value.message
    if "reads every position" in e.value.message or "sums over" in e.value.message:
        assert e.value.pos is not None  # the box is named where it is written


def test_bidirectional_attention_is_refused_at_the_box_that_reads_later_positions(tmp_path):
    src = tmp_path / "enc.diag"
    src.write_text("dim s : seq\ndim d : fixed = 4\nlearn Q, K, V : [d] -> [d]\n"
                   "diagram Enc(x: [s, d]) -> [s, d] {\n  q[i] = Q(x[i])\n  kk[j] = K(x[j])\n  v[j] = V(x[j])\n"
                   "  e[i, j] = sum_f q[i, f] * kk[j, f]\n  a[i] = softmax(e[i] / sqrt(d))\n"
                   "  y[i] = sum_j a[i, j] * v[j]\n  return y\n}\n")
    with pytest.raises(DiagError, match="'sdpa' reads every position .* 'Enc' has no incremental form"):
        stringdiag.compile(stringdiag.load(src)["Enc"], incremental=True)
    # the same with the product written apart from the softmax: the sum over j is named, with its line
    src.write_text(src.read_text().replace("softmax(e[i] / sqrt(d))", "relu(e[i])"))
    with pytest.raises(DiagError) as e:
        stringdiag.compile(stringdiag.load(src)["Enc"], incremental=True)
    assert "the sum that makes 'y' sums over the positions of the sequence (index j) with no causal mask" \
        in e.value.message and e.value.pos.line == 10


GPT_DIMS = dict(v=29, d=12, h=3, k=4, f=48, L=2)


def test_gpt_stepped_agrees_with_hugging_face_gpt2_and_its_key_value_cache():
    """An independent reference: GPT2LMHeadModel in float64, fed one token at a time with its own
    key/value cache, against GPT's incremental form with the same (ported) weights."""
    transformers = pytest.importorskip("transformers")
    from test_lm_gallery import GPT2, randomise

    config = transformers.GPT2Config(vocab_size=29, n_embd=12, n_head=3, n_layer=2, n_positions=1024,
                                     resid_pdrop=0.0, attn_pdrop=0.0, embd_pdrop=0.0,
                                     activation_function="gelu_new", tie_word_embeddings=True,
                                     bos_token_id=0, eos_token_id=0)
    ref = transformers.GPT2LMHeadModel(config).to(torch.float64).eval()
    randomise(ref, 3)
    gpt = stringdiag.load(GALLERY / "lm.diag")["GPT"]
    inc = stringdiag.compile(gpt, dims=GPT_DIMS, approximator="linear", dtype=torch.float64, incremental=True)
    stringdiag.load_weights(inc.net, ref.state_dict(), GPT2["map"], transpose=GPT2["transpose"])
    ids = torch.randint(0, 29, (2, 12), generator=torch.Generator().manual_seed(4))
    with torch.no_grad():
        out = ref(ids[:, :5], use_cache=True)
        past, theirs = out.cache, [out.logits]
        ours, state = inc.prefill(ids[:, :5], inc.initial_state(2))
        ours = [ours]
        for t in range(5, 12):
            out = ref(ids[:, t:t + 1], cache=past, use_cache=True)
            past = out.cache
            theirs.append(out.logits)
            y, state = inc.step(ids[:, t], state)
            ours.append(y[:, None])
    assert rel_max(torch.cat(ours, 1), torch.cat(theirs, 1)) < 1e-10


def _state_after(inc, x: torch.Tensor, n: int) -> int:
    state = inc.initial_state(x.shape[0])
    with torch.no_grad():
        for t in range(n):
            _, state = inc.step(x[:, t], state)
    return state.numel()


def test_a_key_value_cache_grows_with_the_positions_and_a_recurrent_state_does_not():
    """GPT holds keys and values of every position, L·2·h·k per position and sequence; the
    recurrent forms (GLA, RetNet, Mamba) hold the same state after 3 positions as after 9."""
    gpt = stringdiag.load(GALLERY / "lm.diag")["GPT"]
    inc = stringdiag.compile(gpt, dims=GPT_DIMS, dtype=torch.float64, incremental=True)
    ids = torch.randint(0, 29, (2, 9))
    per = 2 * 2 * 3 * 4  # L blocks, keys and values, h heads of k
    assert [_state_after(inc, ids, n) for n in (3, 9)] == [2 * 3 * per, 2 * 9 * per]
    for file, name in (("gla", "GLARecurrent"), ("retnet", "MSRRecurrent"), ("mamba", "MambaMixer")):
        prog = stringdiag.load(GALLERY / "modern" / f"{file}.diag")
        d, dims = prog[name], _dims(prog)
        inc = stringdiag.compile(d, dims=dims, dtype=torch.float64, incremental=True)
        (x,) = _inputs(prog, d, 9, dims, torch.Generator().manual_seed(1))
        assert 0 < _state_after(inc, x, 3) == _state_after(inc, x, 9), name


def test_state_and_inputs_that_do_not_fit_are_refused():
    gpt = stringdiag.load(GALLERY / "lm.diag")["GPT"]
    inc = stringdiag.compile(gpt, dims=GPT_DIMS, incremental=True)
    with pytest.raises(DiagError, match="made for a batch of 3"):
        inc.step(torch.zeros(2, dtype=torch.long), inc.initial_state(3))
    with pytest.raises(DiagError, match="at least 1"):
        inc.initial_state(0)
    # the learned positions hold 1024: the 1025th is refused, as the parallel form refuses it
    state = inc.initial_state(1)
    _, state = inc.prefill(torch.zeros(1, 1024, dtype=torch.long), state)
    with pytest.raises(DiagError, match="at most 1024 positions"):
        inc.step(torch.zeros(1, dtype=torch.long), state)


def test_the_documented_step_of_gpt2attn_computes_its_next_position():
    """docs/compiling.md draws one step of GPT2Attn as a diagram of its own (the cache an input and
    an output): given the keys and values of positions 0..n-1, it computes position n of the
    parallel form, and the cache one position longer."""
    import re

    text = (Path(__file__).resolve().parents[1] / "docs" / "compiling.md").read_text()
    (src,) = [b for b in re.findall(r"```diag\n(.*?)```", text, re.DOTALL) if "diagram GPT2AttnStep" in b]
    dims = dict(d=6, h=2, k=3)
    step = stringdiag.compile(stringdiag.loads(src)["GPT2AttnStep"], dims=dims, dtype=torch.float64)
    par, _ = _pair(None, stringdiag.load(GALLERY / "gpt2.diag")["GPT2Attn"], dims, 5)
    step.load_state_dict(par.state_dict())
    x = torch.randn(2, 6, 6, generator=torch.Generator().manual_seed(3), dtype=torch.float64)
    with torch.no_grad():
        proj = {w: getattr(par, w)(x).unflatten(-1, (2, 3)) for w in ("WK", "WV")}  # [2, 6, h, k]
        keys, values = proj["WK"][:, :5], proj["WV"][:, :5]
        y, k2, v2 = step(x[:, 5], keys, values)
        assert rel_max(y, par(x)[:, 5]) < 1e-12
        assert rel_max(k2, proj["WK"]) < 1e-12 and rel_max(v2, proj["WV"]) < 1e-12


MASKED = """dim s : seq
dim d : fixed = 4
learn Q, K, V : [d] -> [d]
diagram Att(x: [s, d]) -> [s, d] {{
  q[i] = Q(x[i])
  kk[j] = K(x[j])
  v[j] = V(x[j])
  e[i, j] = sum_f q[i, f] * kk[j, f]
  mk = causal<s>()
  p = positions<s>()
  {body}
  return y
}}
"""


@pytest.mark.parametrize("body", [
    # later keys: lt(p[i], p[j]) is 1 where j > i
    "m[i, j] = lt(p[i], p[j])\n  y[i] = sum_j relu(where(e, m))[i, j] * v[j]",
    # the causal mask read transposed: key j sees query i >= j
    "y[i] = sum_j relu(e[i, j]) * mk[j, i] * v[j]",
    # a mask that is never zero
    "y[i] = sum_j relu(e[i, j]) * (mk[i, j] + 1) * v[j]",
    # softmax over a row the mask does not reach (it multiplies after the softmax's sum)
    "a[i] = softmax(e[i])\n  y[i] = sum_j a[i, j] * mk[i, j] * v[j]",
    # a running sum along the queries of terms after each key's position (GLA's is before it)
    "sl[j, i] = lt(p[i], p[j]) * e[i, j]\n  c[j] = cumsum(sl[j])\n"
    "  y[i] = sum_j exp(where(c[j, i], mk[i, j])) * v[j]",
], ids=["later-keys", "transposed", "never-zero", "mask-after-softmax", "running-sum-after"])
def test_attention_that_reads_later_positions_is_refused_however_it_is_masked(body, tmp_path):
    """The mask analysis accepts a sum or softmax over the keys only where a causal mask makes the
    later positions' terms zero (or minus infinity before a softmax); these are not causal."""
    src = tmp_path / "att.diag"
    src.write_text(MASKED.format(body=body))
    d = stringdiag.load(src)["Att"]
    with pytest.raises(DiagError, match="no causal mask|reads every position"):
        stringdiag.compile(d, incremental=True)


def test_attention_masked_by_hand_steps_as_its_parallel_form(tmp_path):
    """The same template, causal: a ReLU attention masked by a product, a softmax masked by where
    with a decay added, both stepped equal to the parallel form."""
    src = tmp_path / "att.diag"
    src.write_text(MASKED.format(body="g[i, j] = relu(e[i, j]) * mk[i, j]\n"
                                      "  a[i] = softmax(where(e[i] - relu(p[i] - p) * 0.5, mk[i]))\n"
                                      "  y[i] = sum_j (g[i, j] + a[i, j]) * v[j]"))
    prog = stringdiag.load(src)
    par, inc = _pair(prog, prog["Att"], {}, 1)
    x = torch.randn(2, 6, 4, generator=torch.Generator().manual_seed(2), dtype=torch.float64)
    with torch.no_grad():
        state, ys = inc.initial_state(2), []
        for t in range(6):
            y, state = inc.step(x[:, t], state)
            ys.append(y)
        assert rel_max(torch.stack(ys, 1), par(x)) < 1e-12
