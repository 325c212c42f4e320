"""Generation through the incremental form: ``generate`` and ``stringdiag sample`` give the ids the
whole-window path gives (``cache=False``, ``--no-cache``) for a GPT, a Llama and a recurrent model
(Mamba's stack with a head), batched prompts of two lengths, greedy and sampled, top-k, top-p
and stop ids; and the cached path is the one that runs."""
from __future__ import annotations

from pathlib import Path

import pytest
import torch

import stringdiag.train.run as R
from stringdiag import DiagError
from stringdiag.cli.main import main
from stringdiag.lower.incremental import Incremental
from stringdiag.train.lm import Spec, WholeModel, sources

ROOT = Path(__file__).resolve().parents[1]
LM = ROOT / "gallery" / "lm.diag"
V = 26
# Mamba's stack (gallery/modern/mamba.diag) with an output head: a recurrent language model
MAMBA_LM = f"""dim s : seq
import "{ROOT / 'gallery' / 'modern' / 'mamba.diag'}" as mamba
diagram MambaLM(tokens: [s] of v) -> [s, v] {{
  learn head : [d] -> [v] via linear(bias = false)
  h = mamba.MambaModel(tokens)
  y[i] = head(h[i])
  return y
}}
"""
MAMBA_DIMS = dict(v=V, d=8, e=8, N=4, w=3, rk=2, L=2)
MODELS = {"GPT": (LM, dict(v=V, d=8, h=2, k=4, f=16, L=2)),
          "Llama": (LM, dict(v=V, d=8, g=2, n=2, r=2, f=16, L=2)),
          "MambaLM": (None, MAMBA_DIMS)}
# ALiBi (its bias added to the scores before the mask: attention with keys over every position so
# far, not one fused process), generated through generate only
BLOOM = (ROOT / "gallery" / "modern" / "bloom.diag", dict(v=V, d=8, h=2, k=4, L=2))


def _model(name: str, tmp_path: Path) -> WholeModel:
    path, dims = MODELS[name] if name in MODELS else BLOOM
    if path is None:
        path = tmp_path / "mamba_lm.diag"
        path.write_text(MAMBA_LM)
    src, main_file = sources(path)
    model = R.rebuild(Spec(src, main_file, name, dims)).to(torch.float64)
    gen = torch.Generator().manual_seed(2)
    with torch.no_grad():
        for p in model.parameters():
            p.copy_(torch.randn(p.shape, generator=gen, dtype=torch.float64) * 0.5)
    return model.eval()


@pytest.mark.parametrize("name", sorted(MODELS) + ["BloomForCausalLM"])
def test_generate_with_the_cache_gives_the_ids_of_the_whole_window(name, tmp_path, monkeypatch):
    model = _model(name, tmp_path)
    prompts = [[1, 2, 3], [4, 5, 6], [7, 8, 9, 10, 11]]  # two lengths: two batches
    for settings in (dict(temperature=0), dict(temperature=0.7, top_k=5, seed=4), dict(temperature=1.2, top_p=0.8, seed=5)):
        slow = R.generate(model, prompts, 12, cache=False, **settings)
        steps = []
        real = Incremental.step
        monkeypatch.setattr(Incremental, "step", lambda self, x, st: steps.append(1) or real(self, x, st))
        fast = R.generate(model, prompts, 12, cache=True, **settings)
        monkeypatch.setattr(Incremental, "step", real)
        assert fast == slow, settings
        assert len(steps) == 2 * 11  # one step per token but the last, per batch of one prompt length
        assert all(len(ids) == 12 for ids in fast)
    one = R.generate(model, prompts[0], 4, temperature=0)  # one prompt: a list of ids back
    assert one == R.generate(model, prompts[0], 4, temperature=0, cache=False) and len(one) == 4


def test_a_stop_id_ends_its_own_sequence_and_is_kept(tmp_path):
    model = _model("GPT", tmp_path)
    free = R.generate(model, [[1, 2], [3, 4]], 10, temperature=0)
    stop = free[0][3]
    got = R.generate(model, [[1, 2], [3, 4]], 10, temperature=0, stop=[stop])
    for ids, full in zip(got, free):
        cut = full.index(stop) + 1 if stop in full else len(full)
        assert ids == full[:cut]


def test_within_the_context_the_cache_agrees_and_beyond_it_starts_again_from_half(tmp_path):
    model = _model("Llama", tmp_path)
    prompt, context = [1, 2, 3], 6
    slow = R.generate(model, prompt, 3, temperature=0, context=context, cache=False)
    assert R.generate(model, prompt, 3, temperature=0, context=context) == slow  # 6 ids: all seen by both
    # past the context, the cache reads the last 3 ids again in one pass: written out by hand
    ids, view = list(prompt), list(prompt)  # what the model reads for the next id
    with torch.no_grad():
        for _ in range(8):
            nxt = int(model(torch.tensor([view]))[0, -1].argmax())
            ids.append(nxt)
            view = view + [nxt] if len(view) < context else (view + [nxt])[-(context // 2):]
    assert R.generate(model, prompt, 8, temperature=0, context=context) == ids[3:]


def test_a_model_without_an_incremental_form_generates_without_a_cache_or_is_refused_when_asked(tmp_path):
    src = tmp_path / "bi.diag"
    src.write_text("dim s : seq\ndim v : fixed = 26\ndim d : fixed = 4\n"
                   "diagram Bi(tokens: [s] of v) -> [s, v] {\n  learn E : -> [v, d]\n  x = embed(tokens, E())\n"
                   "  e[i, j] = sum_c x[i, c] * x[j, c]\n  a[i] = softmax(e[i])\n  y[i] = sum_j a[i, j] * x[j]\n"
                   "  z[i, u] = sum_c y[i, c] * E()[u, c]\n  return z\n}\n")
    model = R.rebuild(Spec(*sources(src), "Bi", {"v": 26, "d": 4})).eval()
    assert len(R.generate(model, [1, 2], 3, temperature=0)) == 3  # the whole window each time
    with pytest.raises(DiagError, match="'sdpa' reads every position"):
        R.generate(model, [1, 2], 3, cache=True)


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """A GPT, a Llama and a Mamba language model trained a few steps on the synthetic corpus."""
    out = {}
    folder = tmp_path_factory.mktemp("inc")
    (folder / "mamba_lm.diag").write_text(MAMBA_LM)
    for name, (path, dims) in MODELS.items():
        path = path or folder / "mamba_lm.diag"
        given = ",".join(f"{k}={v}" for k, v in dims.items() if k != "v")
        out[name] = folder / name
        assert main(["train", str(path), "-d", name, "--dims", given, "--data", "synthetic", "--context", "16",
                     "--batch-size", "4", "--max-steps", "2", "--eval-every", "2", "--test-tokens", "50",
                     "--warmup", "1", "-o", str(out[name])]) == 0
    return out


@pytest.mark.parametrize("name", sorted(MODELS))
def test_sample_uses_the_incremental_form_and_no_cache_prints_the_same(name, runs, capsys, monkeypatch):
    # 3 + 12 ids: within the context of 16 the runs were trained with (past it the two paths differ)
    args = ["sample", str(runs[name]), "--prompt", "w01 w02 w03", "--prompt", "w04", "--tokens", "12",
            "--temperature", "0.9", "--top-p", "0.95", "--seed", "1"]
    capsys.readouterr()
    assert main(args + ["--no-cache"]) == 0
    slow = capsys.readouterr().out
    monkeypatch.setattr(R, "_uncached", lambda *a, **k: pytest.fail("the whole-window path ran"))
    assert main(args) == 0
    fast = capsys.readouterr().out
    assert fast == slow and len(fast.splitlines()) == 2 and fast.startswith("w01 w02 w03 | ")


def test_sample_refuses_a_stop_word_outside_the_vocabulary_and_a_bad_top_p(runs, capsys):
    assert main(["sample", str(runs["GPT"]), "--prompt", "w01", "--stop", "nowhere"]) == 1
    assert "error: --stop: 'nowhere' is not a word" in capsys.readouterr().err
    assert main(["sample", str(runs["GPT"]), "--prompt", "w01", "--top-p", "1.5"]) == 2


def test_progress_is_told_every_token_and_a_state_too_large_for_memory_is_refused_first(runs, tmp_path, capsys):
    model = _model("GPT", tmp_path)
    seen = []
    R.generate(model, [1, 2], 5, temperature=0, progress=lambda done, total: seen.append((done, total)))
    assert seen == [(k, 5) for k in range(1, 6)]
    # a save_pretrained folder has no training context: the cache would hold every position
    run = R.load_run(runs["GPT"])
    folder = R.save_pretrained(run.model, tmp_path / "hf", run.tokenizer)
    args = ["sample", str(folder), "--prompt", "w01", "--tokens", str(10 ** 15)]
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(R, "generate", lambda *a, **k: pytest.fail("generation started"))
        assert main(args) == 1
    err = capsys.readouterr().err
    assert "error: these sizes need about" in err and "for the state of 1 sequence(s) at position 1,000,000,000,000,001" in err
    # with the context a run was trained with, the state stays that of its context
    assert main(["sample", str(runs["GPT"]), "--prompt", "w01", "--tokens", "40", "--temperature", "0"]) == 0
