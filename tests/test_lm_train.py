"""Training a whole language model (``[s] of v -> [s, v]``) with ``stringdiag train``, and back
from the run: sizes never guessed, ``load_run``, ``sample``, ``save_pretrained`` /
``from_pretrained`` (issue 20). Runs use the synthetic corpus (26 words) and a few steps."""
from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file

import stringdiag
import stringdiag.train.run
from stringdiag import DiagError
from stringdiag.cli.main import main
from stringdiag.data import load_corpus
from stringdiag.train.lm import Spec, WholeModel, sizes, sources
from stringdiag.train.run import Tokenizer, from_pretrained, generate, load_run, save_pretrained

ROOT = Path(__file__).resolve().parent.parent
LM = str(ROOT / "gallery" / "lm.diag")
TINY = "d=8,h=2,k=4,f=16,L=1"
UNSIZED = """dim s : seq
dim v : fixed
dim d, w : fixed
learn E : -> [v, d]
diagram Bag(t: [s] of v) -> [s, v] {
  learn M : [d] -> [d]
  x = embed(t, E())
  y[i] = M(x[i])
  z[i, u] = sum_c y[i, c] * E()[u, c]
  return z
}
"""
PEEK = """dim s : seq
dim v, d : fixed = 8
learn E : -> [v, d]
diagram Peek(t: [s] of v) -> [s, v] {
  x = embed(t, E())
  y[i, c] = x[i, c] + sum_j x[j, c]
  z[i, u] = sum_c y[i, c] * E()[u, c]
  return z
}
"""


def test_every_unsized_dimension_is_refused_by_name(tmp_path, capsys):
    d = stringdiag.loads(UNSIZED, "bag.diag")["Bag"]
    with pytest.raises(DiagError, match=r"no size and no default: d; give them with --dims"):
        sizes(d, {}, 26)
    assert sizes(d, {"d": 5}, 26).dims == {"v": 26, "d": 5}  # w is used nowhere: not needed
    with pytest.raises(DiagError, match="'v' is the vocabulary's size, 26 here"):
        sizes(d, {"d": 5, "v": 7}, 26)
    (tmp_path / "bag.diag").write_text(UNSIZED)
    assert main(["train", str(tmp_path / "bag.diag"), "-d", "Bag", "--data", "synthetic", "-o",
                 str(tmp_path / "run")]) == 1
    assert "error: 'Bag' has fixed dimension(s) with no size and no default: d" in capsys.readouterr().err


def test_defaults_are_the_files_and_the_sizes_line_says_so():
    d = stringdiag.load(LM)["GPT"]
    got = sizes(d, {"d": 32}, 26)
    assert got.dims == {"v": 26, "d": 32, "L": 2, "h": 4, "k": 16, "f": 256}
    assert got.line() == "sizes: v 26, d 32, L 2 (default), h 4 (default), k 16 (default), f 256 (default)"


def test_head_recipe_options_and_models_that_see_the_future_are_refused(tmp_path, capsys):
    assert main(["train", LM, "-d", "GPT", "--layers", "3", "--data", "synthetic", "-o", str(tmp_path / "a")]) == 1
    assert "error: --layers builds the head recipe's model around a head" in capsys.readouterr().err
    (tmp_path / "peek.diag").write_text(PEEK)
    assert main(["train", str(tmp_path / "peek.diag"), "-d", "Peek", "--data", "synthetic", "-o",
                 str(tmp_path / "b")]) == 1
    assert "'Peek' is not causal" in capsys.readouterr().err


@pytest.mark.parametrize("option, error", [
    (["--d-model", "999"], "--d-model builds the head recipe's model; 'GPT' has its own width d, which the "
                           "learning-rate schedule follows: give --dims d=999"),
    (["--heads", "2"], "--heads builds the head recipe's model around a head"),
    (["--d-ff", "64"], "--d-ff builds the head recipe's model around a head"),
    (["--norm-after", ""], "--norm-after builds the head recipe's model around a head"),
    (["--dims", "q=3"], "--dims: 'q' is not a fixed dimension that 'GPT' uses (it takes v, d, L, h, k, f)"),
    (["--dims", "g=3"], "--dims: 'g' is not a fixed dimension that 'GPT' uses"),  # Llama's, in the same file
    (["--dims", "s=3"], "--dims: 's' is not a fixed dimension that 'GPT' uses"),  # the sequence: run time's
])
def test_options_a_whole_model_does_not_use_are_refused(tmp_path, capsys, option, error):
    out = tmp_path / "run"
    assert main(["train", LM, "-d", "GPT", *option, "--data", "synthetic", "-o", str(out)]) == 1
    err = capsys.readouterr().err
    assert err.startswith(f"error: {error}") and err.count("\n") == 1
    assert not out.exists()


def test_the_dims_a_whole_model_takes_are_those_it_sizes():
    d = stringdiag.load(LM)["GPT"]
    taken = sizes(d, {}, 26).dims  # the reference: what the built model is sized by
    from stringdiag.cli.train_lm import check_options
    from stringdiag.cli.main import parse

    for name in [*d.program.dims, "q"]:
        args = parse(["train", LM, "-d", "GPT", "--dims", f"{name}={taken.get(name, 3)}"])
        if name in taken:
            assert check_options(args, d) == {name: taken[name]}
        else:
            with pytest.raises(DiagError, match=f"'{name}' is not a fixed dimension that 'GPT' uses"):
                check_options(args, d)


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("lm") / "gpt"
    assert main(["train", LM, "-d", "GPT", "--dims", TINY, "--data", "synthetic", "--context", "8",
                 "--batch-size", "8", "--max-steps", "12", "--eval-every", "6", "--test-tokens", "200",
                 "--warmup", "5", "-o", str(out)]) == 0
    return out


def test_a_run_reads_back_as_the_model_it_checkpointed(run_dir):
    run = load_run(run_dir)
    assert isinstance(run.model, WholeModel) and not run.model.training
    assert run.context == 8 and run.tokenizer.words[:2] == ("<eos>", "<unk>") and len(run.tokenizer.words) == 26
    result = json.loads((run_dir / "result.json").read_text())
    assert result["kind"] == "lm" and result["steps"] == 12 and result["test_tokens"] == 200
    corpus = load_corpus("synthetic")  # the baseline on the same 200 targets, counted here
    p = (torch.bincount(corpus.train, minlength=26).double() + 1) / (corpus.train.numel() + 26)
    assert result["unigram_scored_ppl"] == pytest.approx(math.exp(-p[corpus.test[1:201]].log().mean().item()))
    state = load_file(str(run_dir / "checkpoint.safetensors"))
    saved = {k.removeprefix("model."): v for k, v in state.items() if k.startswith("model.")}
    assert saved.keys() == run.model.state_dict().keys()
    assert all(torch.equal(saved[k], v) for k, v in run.model.state_dict().items())


def test_sampling_is_reproducible_and_greedy_at_temperature_zero(run_dir, capsys):
    run = load_run(run_dir)
    prompt = run.tokenizer.encode("w01 w02 w03")
    assert prompt == [run.tokenizer.words.index(w) for w in ("w01", "w02", "w03")]
    ids = list(prompt)
    with torch.no_grad():
        for _ in range(5):  # greedy, written out
            ids.append(int(run.model(torch.tensor([ids[-8:]]))[0, -1].argmax()))
    assert generate(run.model, prompt, 5, temperature=0, context=8) == ids[3:]
    assert generate(run.model, torch.tensor(prompt), 5, temperature=0, context=8) == ids[3:]  # a tensor prompt too
    assert generate(run.model, prompt, 5, top_k=1, context=8, seed=3) == ids[3:]  # one candidate: the argmax
    a, b = (generate(run.model, prompt, 6, temperature=1.5, seed=7, context=8) for _ in range(2))
    assert a == b
    assert main(["sample", str(run_dir), "--prompt", "w01 w02 w03", "--tokens", "5", "--temperature", "0"]) == 0
    assert capsys.readouterr().out == f"w01 w02 w03 | {run.tokenizer.decode(ids[3:])}\n"


def test_save_pretrained_round_trips_in_the_hugging_face_layout(run_dir, tmp_path, capsys):
    run = load_run(run_dir)
    model = run.model.to(torch.float64)
    folder = save_pretrained(model, tmp_path / "hf", run.tokenizer)
    assert sorted(p.name for p in folder.iterdir()) == ["config.json", "model.safetensors", "modeling_stringdiag.py",
                                                       "tokenizer.json"]
    config = json.loads((folder / "config.json").read_text())
    assert config["model_type"] == "stringdiag" and config["architectures"] == ["GPT"]
    assert "diagram GPT(tokens: [s] of v) -> [s, v]" in config["stringdiag"]["sources"]["lm.diag"]
    assert "GPT2Block" in config["stringdiag"]["sources"]["gpt2.diag"]  # its import travels with it
    again, tok = from_pretrained(folder)
    t = torch.randint(0, 26, (3, 8), generator=torch.Generator().manual_seed(0))
    assert next(again.parameters()).dtype == torch.float64 and tok == run.tokenizer
    assert torch.equal(again(t), model(t))
    assert main(["sample", str(folder), "--prompt", "w05", "--tokens", "3", "--seed", "2"]) == 0
    prompt = tok.encode("w05")
    assert capsys.readouterr().out == f"w05 | {tok.decode(generate(again, prompt, 3, seed=2))}\n"
    data = bytearray((folder / "model.safetensors").read_bytes())
    data[-3] ^= 0xFF  # one flipped bit in the last tensor
    (folder / "model.safetensors").write_bytes(bytes(data))
    with pytest.raises(DiagError, match="do not match their checksum"):
        from_pretrained(folder)
    config["stringdiag"]["dims"]["d"] = "8; import os"  # a config is data: a bad one is refused, never run
    (folder / "config.json").write_text(json.dumps(config))
    with pytest.raises(DiagError, match="bad sizes"):
        from_pretrained(folder)
    config["stringdiag"]["dims"]["d"], config["stringdiag"]["sources"]["../x.diag"] = 8, ""
    (folder / "config.json").write_text(json.dumps(config))
    with pytest.raises(DiagError, match="leaves its folder"):
        from_pretrained(folder)


def test_sources_hold_the_file_and_its_imports_and_rebuild_the_same_model():
    texts, main_key = sources(LM)
    assert main_key == "lm.diag" and sorted(texts) == ["gpt2.diag", "lm.diag"]
    d = stringdiag.load(LM)["Llama"]
    spec = Spec(texts, main_key, "Llama", sizes(d, {"d": 8, "r": 2, "f": 12, "L": 1}, 26).dims, "linear", 8)
    torch.manual_seed(0)
    a = WholeModel(d, spec)
    b = stringdiag.train.run.rebuild(Spec.from_json(json.loads(json.dumps(spec.to_json()))))
    b.load_state_dict(a.state_dict())
    t = torch.randint(0, 26, (2, 6), generator=torch.Generator().manual_seed(1))
    assert torch.equal(a(t), b(t))


def test_load_run_refuses_what_is_not_a_language_model_run(tmp_path):
    with pytest.raises(DiagError, match="holds no training run"):
        load_run(tmp_path)
    assert Tokenizer(("a", "b"), "words").encode("b a c") == [1, 0, 0]  # no <unk> in the vocabulary: id 0


def test_an_approximator_that_reaches_no_map_is_refused(tmp_path, capsys):
    from stringdiag.cli.train_lm import approximator_used

    lm = stringdiag.load(LM)
    dims = {"v": 26, "d": 8, "L": 1, "h": 2, "k": 4, "f": 16, "g": 2, "n": 2, "r": 2, "theta": 10000}
    counts = {name: {p: sum(t.numel() for t in stringdiag.compile(lm[name], dims=dims, approximator=p).parameters())
                     for p in ("linear", "mlp")} for name in ("GPT", "Llama")}
    assert counts["GPT"]["linear"] != counts["GPT"]["mlp"] and approximator_used(lm["GPT"], dims)
    assert counts["Llama"]["linear"] == counts["Llama"]["mlp"] and not approximator_used(lm["Llama"], dims)
    out = tmp_path / "run"
    assert main(["train", LM, "-d", "Llama", "--approximator", "linear", "--dims", "d=8,r=2", "--data", "synthetic",
                 "-o", str(out)]) == 1
    assert capsys.readouterr().err == ("error: --approximator linear would change nothing: every learnable map of "
                                       "'Llama' names its own approximator (via ...)\n")
    assert not out.exists()
