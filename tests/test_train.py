"""Language models built from diagrams: causality, evaluation coverage, exact resume."""
from __future__ import annotations

import dataclasses
import math

import pytest
import torch
import torch.nn.functional as F

import stringdiag
from stringdiag import DiagError
from stringdiag.train import checkpoint
from stringdiag.train.loop import TrainConfig, evaluate, train
from stringdiag.train.model import LanguageModel

HEADS = stringdiag.loads("""\
dim s : seq
dim d, k : fixed
diagram Masked(x: [s, d]) -> [s, d] {
  learn Q, K : [d] -> [k]
  learn V : [d] -> [d]
  e[i, j] = sum_f Q(x)[i, f] * K(x)[j, f]
  a = softmax(where(e / sqrt(k), causal<s>()))
  y[i] = sum_j a[i, j] * V(x)[j]
  return y
}
diagram Unmasked(x: [s, d]) -> [s, d] {
  learn Q, K : [d] -> [k]
  e[i, j] = sum_f Q(x)[i, f] * K(x)[j, f]
  a = softmax(e)
  y[i] = sum_j a[i, j] * x[j]
  return y
}
diagram Wrong(x: [s, d]) -> [s] {
  return sum(x)
}
""", "heads.diag")


def pattern_corpus(n: int = 6000, vocab: int = 12, seed: int = 0) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    base = torch.arange(vocab).repeat(n // vocab + 1)[:n]
    noise = torch.randint(vocab, (n,), generator=g)
    return torch.where(torch.rand(n, generator=g) < 0.1, noise, base)


def make(head: str = "Masked", **kw):
    return lambda: LanguageModel(HEADS[head], vocab=12, d_model=16, n_layers=1, n_heads=2,
                                 approximator="linear", **kw)


def test_model_shapes_and_parameter_sharing():
    torch.manual_seed(0)
    m = make()()
    logits = m(torch.randint(12, (3, 9)))
    assert logits.shape == (3, 9, 12)
    # two heads, each with its own Q, K, V: one compiled diagram whose weights are stacked over the heads
    assert m.layers[0].heads.n_heads == 2 and m.layers[0].heads.head.Q.weight.shape == (2, 8, 8)
    assert not torch.equal(m.layers[0].heads.head.Q.weight[0], m.layers[0].heads.head.Q.weight[1])


def test_non_causal_head_is_refused():
    with pytest.raises(DiagError, match="'Unmasked' is not causal"):
        make("Unmasked")()


def test_head_of_the_wrong_type_is_refused():
    with pytest.raises(DiagError, match=r"type must be \[s, d\] -> \[s, d\]"):
        make("Wrong")()


class Bigram(torch.nn.Module):
    """Predicts from the previous token only: every stride must give the same perplexity."""

    config = {"d_model": 4}

    def __init__(self, table: torch.Tensor):
        super().__init__()
        self.table = table

    def forward(self, x):
        return self.table[x]


@pytest.mark.parametrize("stride", [1, 3, 8])
def test_evaluation_scores_every_target_once(stride):
    g = torch.Generator().manual_seed(1)
    table = torch.randn(12, 12, generator=g, dtype=torch.float64)
    ids = torch.randint(12, (101,), generator=g)
    direct = F.cross_entropy(table[ids[:-1]], ids[1:], reduction="mean").item()
    assert evaluate(Bigram(table), ids, context=8, stride=stride) == pytest.approx(math.exp(direct), rel=1e-12)


def test_an_evaluation_past_its_deadline_says_how_much_it_scored():
    import time

    from stringdiag.train.loop import score

    g = torch.Generator().manual_seed(1)
    table = torch.randn(12, 12, generator=g, dtype=torch.float64)
    ids = torch.randint(12, (401,), generator=g)
    whole = score(Bigram(table), ids, context=8, stride=1, batch_size=50)
    assert whole.scored == whole.total == 400
    cut = score(Bigram(table), ids, context=8, stride=1, batch_size=50, deadline=time.monotonic())
    assert cut.total == 400 and 0 < cut.scored < 400  # one batch, then the deadline had passed
    # the first batch of stride-1 windows, scored directly
    first = torch.arange(cut.scored)
    direct = F.cross_entropy(table[ids[first]], ids[first + 1], reduction="mean").item()
    assert cut.perplexity == pytest.approx(math.exp(direct), rel=1e-12)


def test_training_lowers_perplexity_and_resumes_exactly(tmp_path):
    ids = pattern_corpus()
    train_ids, valid = ids[:5000], ids[5000:]
    cfg = TrainConfig(context=12, batch_size=16, epochs=2, eval_every=40, warmup=30, valid_tokens=None)
    torch.manual_seed(0)
    untrained = evaluate(make()(), valid, 12)
    whole = train(make(), train_ids, valid, cfg, out_dir=tmp_path / "a", log=lambda s: None)
    assert whole.rows[-1]["valid_ppl"] < 0.5 * untrained
    train(make(), train_ids, valid, dataclasses.replace(cfg, max_steps=40), out_dir=tmp_path / "b",
          log=lambda s: None)
    resumed = train(make(), train_ids, valid, cfg, out_dir=tmp_path / "b", resume=True, log=lambda s: None)
    a = checkpoint.read_meta(tmp_path / "a" / "checkpoint.safetensors")
    b = checkpoint.read_meta(tmp_path / "b" / "checkpoint.safetensors")
    assert a["step"] == b["step"] == whole.rows[-1]["step"]
    ma, mb = make()(), make()()
    checkpoint.load(tmp_path / "a" / "checkpoint.safetensors", ma)
    checkpoint.load(tmp_path / "b" / "checkpoint.safetensors", mb)
    for (na, pa), (nb, pb) in zip(ma.state_dict().items(), mb.state_dict().items()):
        assert na == nb and torch.equal(pa, pb), na
    assert resumed.rows[-1]["valid_ppl"] == whole.rows[-1]["valid_ppl"]
    assert (tmp_path / "a" / "log.csv").read_text().splitlines()[0].startswith("step,epoch,train_loss,valid_ppl")


def test_checkpoint_is_not_a_pickle_and_is_checked(tmp_path):
    m = make()()
    opt = torch.optim.Adam(m.parameters())
    path = tmp_path / "c.safetensors"
    checkpoint.save(path, m, opt, {"step": 3})
    assert path.read_bytes()[8:9] == b"{"  # safetensors: a length, then a JSON header; no pickle
    other = LanguageModel(HEADS["Masked"], vocab=12, d_model=16, n_layers=2, n_heads=2, approximator="linear")
    with pytest.raises(DiagError, match="does not fit this model"):
        checkpoint.load(path, other)
    (tmp_path / "junk.safetensors").write_bytes(b"not a checkpoint")
    with pytest.raises(DiagError, match="is not a stringdiag checkpoint"):
        checkpoint.read_meta(tmp_path / "junk.safetensors")


def test_a_layer_norm_follows_every_att_apply_inside_the_head():
    import pathlib

    from stringdiag.train.model import stabilised

    anatomy = stringdiag.load(pathlib.Path(__file__).resolve().parents[1] / "gallery" / "anatomy.diag")
    head = stabilised(anatomy["M1"])
    (apply,) = [b for b in head.boxes() if head.record(b).op == "AttApply"]
    (w,) = head.box_outputs(apply)
    assert [head.record(r).op for r, _ in head.consumers(w)] == ["layernorm"]
    assert head.output_types == anatomy["M1"].output_types
    torch.manual_seed(0)
    m = LanguageModel(anatomy["M1"], vocab=12, d_model=16, n_layers=1, n_heads=2, approximator="linear")
    norms = [mod for mod in m.layers[0].heads.modules() if isinstance(mod, torch.nn.LayerNorm)]
    assert len(norms) == 1 and norms[0].normalized_shape == (8,)
    plain = LanguageModel(HEADS["Masked"], vocab=12, d_model=16, n_layers=1, n_heads=2, approximator="linear")
    assert not [mod for mod in plain.layers[0].heads.modules() if isinstance(mod, torch.nn.LayerNorm)]


def test_validation_keeps_to_the_time_budget(monkeypatch):
    """A spent budget leaves validation one batch (scored within what is left), not the whole set."""
    import stringdiag.train.loop as loop

    seen = []
    real = loop.score

    def spy(*args, **kw):
        seen.append(kw.get("deadline"))
        return real(*args, **kw)

    monkeypatch.setattr(loop, "score", spy)
    ids = pattern_corpus()
    cfg = TrainConfig(context=12, batch_size=16, epochs=1, eval_every=1000, warmup=30, valid_tokens=None,
                      time_budget=1e-9)  # spent after the first step
    train(make(), ids[:2000], ids[5000:], cfg, log=lambda s: None)
    assert seen and all(d is not None for d in seen)
    cfg = dataclasses.replace(cfg, time_budget=None, max_steps=1)
    seen.clear()
    train(make(), ids[:2000], ids[5000:], cfg, log=lambda s: None)
    assert seen == [None]  # no budget: the whole validation set
