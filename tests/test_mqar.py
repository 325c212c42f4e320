"""Multi-query associative recall: the generated task checked by brute force, training that scores
only the answers, and a study that reports accuracy."""
from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from stringdiag.cli.main import main
from stringdiag.data.mqar import Examples, mqar, parse_spec
from stringdiag.errors import DiagError
from stringdiag.train.loop import TrainConfig, recall, train

ROOT = Path(__file__).resolve().parents[1]
ANATOMY = str(ROOT / "gallery" / "anatomy.diag")

pytestmark = pytest.mark.usefixtures("one_thread")


@pytest.mark.parametrize("sizes", [dict(pairs=3, queries=2, keys=5, values=7, train=50, valid=5, test=5, seed=1),
                                   dict(pairs=8, queries=8, keys=8, values=3, train=40, valid=5, test=5, seed=2)])
def test_every_answer_is_the_value_paired_with_its_query(sizes):
    task = mqar(**sizes)
    p, q, k, v = sizes["pairs"], sizes["queries"], sizes["keys"], sizes["values"]
    assert task.vocab[:k] == [f"k{i}" for i in range(k)] and len(task.vocab) == k + v
    for ex in (task.train, task.valid, task.test):
        assert ex.windows.shape[1] == 2 * (p + q) and ex.scored.shape == (ex.windows.shape[0], 2 * (p + q) - 1)
        for seq, scored in zip(ex.windows.tolist(), ex.scored.tolist()):
            pairs = {}
            for i in range(p):
                key, value = seq[2 * i], seq[2 * i + 1]
                assert 0 <= key < k and k <= value < k + v and key not in pairs   # distinct keys
                pairs[key] = value
            asked = [seq[2 * p + 2 * j] for j in range(q)]
            assert len(set(asked)) == q and set(asked) <= set(pairs)
            for j, key in enumerate(asked):
                assert seq[2 * p + 2 * j + 1] == pairs[key]
            # the scored targets are exactly the answers: target t is seq[t + 1]
            assert [t for t, s in enumerate(scored) if s] == [2 * p + 2 * j for j in range(q)]


def test_the_task_depends_only_on_its_seed():
    a, b, c = mqar(train=20, seed=3), mqar(train=20, seed=3), mqar(train=20, seed=4)
    assert torch.equal(a.test.windows, b.test.windows) and not torch.equal(a.test.windows, c.test.windows)


class Fixed(torch.nn.Module):
    """Logits that always favour one token (a model with known answers)."""

    def __init__(self, vocab: int, favourite: int):
        super().__init__()
        self.vocab, self.favourite = vocab, favourite

    def forward(self, x):
        logits = torch.zeros(*x.shape, self.vocab)
        logits[..., self.favourite] = 1.0
        return logits


def test_recall_counts_right_answers_and_their_perplexity():
    task = mqar(pairs=4, queries=4, keys=4, values=3, train=10, valid=5, test=30, seed=5)
    model = Fixed(len(task.vocab), favourite=5)          # always says v1
    score, accuracy = recall(model, task.test, batch_size=7)
    answers = task.test.windows[:, 1:][task.test.scored]
    assert accuracy == pytest.approx(float((answers == 5).double().mean()))
    e = torch.exp(torch.tensor(1.0, dtype=torch.float64))
    logp_fav, logp_other = torch.log(e / (e + 6)), torch.log(1 / (e + 6))
    nll = -torch.where(answers == 5, logp_fav, logp_other).mean()
    assert score.perplexity == pytest.approx(float(torch.exp(nll)), rel=1e-6) and score.scored == answers.numel()


def test_unscored_targets_do_not_move_the_weights():
    """Training on Examples uses only the scored targets: changing an unscored last token (a target
    that no position reads as input) leaves the trained weights bit for bit the same."""
    g = torch.Generator().manual_seed(0)
    windows = torch.randint(10, (64, 9), generator=g)
    scored = torch.rand(64, 8, generator=g) < 0.5
    scored[:, -1] = False
    other = windows.clone()
    other[:, -1] = (other[:, -1] + 1) % 10

    class Tiny(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.embed, self.out = torch.nn.Embedding(10, 8), torch.nn.Linear(8, 10)
            self.config = {"d_model": 8}

        def forward(self, x):
            return self.out(self.embed(x).cumsum(1))

    weights = []
    for w in (windows, other):
        cfg = TrainConfig(context=8, batch_size=16, epochs=1, eval_every=100, seed=0)
        model = {}
        train(lambda: model.setdefault("m", Tiny()), Examples(w, scored), Examples(w[:8], scored[:8]), cfg,
              log=lambda s: None)
        weights.append(torch.cat([p.detach().flatten() for p in model["m"].parameters()]))
    assert torch.equal(weights[0], weights[1])


def test_mqar_specs_are_checked():
    assert parse_spec("pairs=4,queries=2").pairs == 4
    for bad, why in (("pairs=4,queries=5", "queries <= pairs"), ("width=3", "NAME one of"),
                     ("pairs=x", "NAME=INTEGER"), ("pairs=70", "queries <= pairs <= keys")):
        with pytest.raises(DiagError, match=why):
            parse_spec(bad)


@pytest.mark.slow
def test_a_study_on_mqar_reports_accuracy(tmp_path, capsys):
    out = tmp_path / "s"
    assert main(["study", ANATOMY, "-d", "M1", "--task", "mqar", "--mqar", "pairs=2,queries=2,keys=4,values=4,"
                 "train=64,valid=16,test=32", "--layers", "1", "--d-model", "8", "--heads", "2", "--batch-size", "16",
                 "--max-steps", "3", "--eval-every", "3", "--approximator", "linear", "--timing-steps", "1",
                 "-o", str(out)]) == 0
    result = json.loads((out / "M1-L1" / "result.json").read_text())
    assert 0.0 <= result["test_acc"] <= 1.0 and result["test_tokens"] == 64 and result["unigram_test_ppl"] is None
    summary = (out / "summary.csv").read_text().splitlines()
    assert summary[1].startswith("M1,dot,1,1,") and ",test_acc," in summary[1]
    assert "mean difference in test accuracy, in points" in (out / "verdict.txt").read_text()
    config = json.loads((out / "study.json").read_text())
    assert config["recipe"]["task"] == "mqar" and config["recipe"]["context"] == 7
    assert main(["study", ANATOMY, "-d", "M1", "--mqar", "pairs=2", "-o", str(tmp_path / "t")]) == 2
    assert "--mqar gives the sizes of --task mqar" in capsys.readouterr().err
