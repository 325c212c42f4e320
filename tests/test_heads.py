"""Batched heads (train/model.py's BatchedHeads): the h heads of a layer as one module with
stacked weights must compute, differentiate, initialise and train exactly as h separate
compiled heads do, in float64, and read checkpoints written with separate heads."""
from __future__ import annotations

from pathlib import Path

import pytest
import torch
import torch.nn.functional as F

import stringdiag
from stringdiag.data.corpus import lm_windows
from stringdiag.train.loop import TrainConfig, train
from stringdiag.train.model import BatchedHeads, LanguageModel

ANATOMY = stringdiag.load(Path(__file__).resolve().parents[1] / "gallery" / "anatomy.diag")
SPARSE = stringdiag.load(Path(__file__).resolve().parents[1] / "gallery" / "taxonomy_sparse.diag")


@pytest.fixture
def float64():
    was = torch.get_default_dtype()
    torch.set_default_dtype(torch.float64)
    yield
    torch.set_default_dtype(was)


def model(head: str, batch: bool, seed: int = 0, **kw) -> LanguageModel:
    torch.manual_seed(seed)
    return LanguageModel(ANATOMY[head], vocab=12, d_model=16, n_layers=2, n_heads=4, approximator="mlp",
                         batch_heads=batch, **kw)


def per_head_as_stacked(tensors: dict[str, torch.Tensor], n: int) -> dict[str, torch.Tensor]:
    """Tensors named in the per-head layout (``layers.0.heads.3.W``) in the batched one
    (``layers.0.heads.head.W``, head 3 its row 3), gathered by hand: the reference."""
    out = {}
    for k, v in tensors.items():
        parts = k.split(".")
        if len(parts) > 3 and parts[2] == "heads":
            if parts[3] == "0":
                prefix, rest = ".".join(parts[:3]), ".".join(parts[4:])
                out[f"{prefix}.head.{rest}"] = torch.stack([tensors[f"{prefix}.{i}.{rest}"] for i in range(n)])
        else:
            out[k] = v
    return out


@pytest.mark.parametrize("head", ["M0", "M1"])
def test_batched_heads_equal_separate_heads_in_value_and_gradient(head, float64):
    sep, bat = model(head, False), model(head, True)
    assert all(layer.batched for layer in bat.layers) and not any(layer.batched for layer in sep.layers)
    want = per_head_as_stacked(sep.state_dict(), 4)  # the same seed draws the same weights
    got = bat.state_dict()
    assert set(got) == set(want) and all(torch.equal(got[k], want[k]) for k in got)
    tokens = torch.randint(12, (3, 9), generator=torch.Generator().manual_seed(1))
    ys, yb = sep(tokens), bat(tokens)
    torch.testing.assert_close(yb, ys, rtol=1e-12, atol=1e-12)
    target = torch.randint(12, (3, 9), generator=torch.Generator().manual_seed(2))
    for m, y in ((sep, ys), (bat, yb)):
        F.cross_entropy(y.reshape(-1, 12), target.reshape(-1)).backward()
    stacked = per_head_as_stacked({k: p.grad for k, p in sep.named_parameters()}, 4)
    for k, p in bat.named_parameters():
        torch.testing.assert_close(p.grad, stacked[k], rtol=1e-10, atol=1e-12)


CFG = dict(context=8, batch_size=4, warmup=5, eval_every=1, valid_tokens=40, seed=5)


def corpus() -> torch.Tensor:
    return torch.randint(12, (2000,), generator=torch.Generator().manual_seed(3))


def run(head: str, batch: bool, tmp: Path | None = None, steps: int = 4, resume: bool = False) -> list[float]:
    ids = corpus()
    history = train(lambda: model(head, batch, CFG["seed"]), ids, ids[:200], TrainConfig(**CFG, max_steps=steps),
                    out_dir=tmp, resume=resume, log=lambda _: None)
    return [r["train_loss"] for r in history.rows]


def by_hand(head: str, steps: int) -> list[float]:
    """The training loop as it was before heads were batched, written out: separate heads, the
    rate set on Adam's groups by hand each step, the batches of the seed's permutation."""
    torch.manual_seed(CFG["seed"])
    m = model(head, False, CFG["seed"])
    opt = torch.optim.Adam(m.parameters(), lr=0.0, betas=(0.9, 0.98), eps=1e-9, weight_decay=1e-4)
    windows = lm_windows(corpus(), CFG["context"], CFG["context"] // 2)
    per_epoch = windows.shape[0] // CFG["batch_size"]
    g = torch.Generator().manual_seed(CFG["seed"] * 100003)
    order = torch.randperm(windows.shape[0], generator=g)[: per_epoch * CFG["batch_size"]].view(per_epoch, -1)
    losses = []
    for step in range(1, steps + 1):
        for group in opt.param_groups:
            group["lr"] = 16 ** -0.5 * min(step ** -0.5, step * CFG["warmup"] ** -1.5)
        batch = windows[order[step - 1]]
        loss = F.cross_entropy(m(batch[:, :-1]).reshape(-1, 12), batch[:, 1:].reshape(-1))
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    return losses


def test_head_mode_training_is_unchanged_by_batching(float64):
    """Same seed, same float64 losses step by step: initialisation, random numbers and updates
    are those of separate heads trained by the loop as it was (written out by hand here)."""
    want = by_hand("M1", 4)
    got = run("M1", True)
    assert len(got) == 4 and len(set(got)) == 4
    torch.testing.assert_close(torch.tensor(got), torch.tensor(want), rtol=1e-12, atol=0)
    torch.testing.assert_close(torch.tensor(run("M1", False)), torch.tensor(want), rtol=1e-12, atol=0)


def test_a_per_head_checkpoint_resumes_batched(tmp_path, float64):
    """A run written with separate heads (before batching) continues with batched heads exactly
    as it would have continued with separate ones: weights and Adam's moments are stacked."""
    whole = run("M0", False, steps=4)
    run("M0", False, tmp_path, steps=2)
    resumed = run("M0", True, tmp_path, steps=4, resume=True)
    torch.testing.assert_close(torch.tensor(resumed), torch.tensor(whole), rtol=1e-12, atol=0)


def test_a_head_drawing_random_numbers_keeps_separate_heads():
    """BigBird draws its random keys when it runs: under vmap every head would draw its own, so
    its heads stay separate modules (and the model still works)."""
    torch.manual_seed(0)
    m = LanguageModel(SPARSE["BigBird"], vocab=12, d_model=16, n_layers=1, n_heads=2, approximator="linear",
                      dims={"w": 2, "g": 1, "r": 1, "k": 8}, check_causal=False)
    assert not m.layers[0].batched and len(m.layers[0].heads) == 2
    assert m(torch.randint(12, (2, 7))).shape == (2, 7, 12)


def test_batched_heads_stack_each_weight_on_a_leading_head_axis():
    torch.manual_seed(0)
    heads = [stringdiag.compile(ANATOMY["M1"], dims={"d": 8, "k": 8}) for _ in range(3)]
    b = BatchedHeads(heads)
    for name, p in b.head.named_parameters():
        assert p.shape[0] == 3 and torch.equal(p[1], heads[1].get_parameter(name))
    x = torch.randn(2, 5, 24)
    want = torch.cat([h(s) for h, s in zip(heads, x.chunk(3, -1))], -1)
    torch.testing.assert_close(b(x), want)
