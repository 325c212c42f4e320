"""A resumed run's clock goes on from its checkpoint: the log's ``seconds`` and the time ``train``
reports count every session, while the weights still resume bit for bit."""
from __future__ import annotations

import csv
import json
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch
from safetensors import safe_open

import stringdiag
from stringdiag.train import loop
from stringdiag.train.loop import TrainConfig, train
from stringdiag.train.model import LanguageModel

ANATOMY = Path(__file__).resolve().parents[1] / "gallery" / "anatomy.diag"
CFG = dict(context=8, batch_size=4, warmup=5, eval_every=2, valid_tokens=40, device="cpu")


def tokens(n: int = 1500) -> torch.Tensor:
    return torch.randint(12, (n,), generator=torch.Generator().manual_seed(0))


def small() -> LanguageModel:
    return LanguageModel(stringdiag.load(ANATOMY)["M1"], vocab=12, d_model=16, n_layers=1, n_heads=2,
                         approximator="linear")


class Clock:
    """A clock under the test's control: ``now`` seconds, wall and CPU alike."""

    def __init__(self) -> None:
        self.now = 1000.0

    def read(self) -> float:
        return self.now


@pytest.fixture
def clock(monkeypatch) -> Clock:
    c = Clock()
    fake = SimpleNamespace(time=c.read, process_time=c.read, monotonic=c.read)
    monkeypatch.setattr(loop, "time", fake)
    return c


def _ticking(c: Clock, per_step: float):
    """``small`` whose every forward pass takes ``per_step`` seconds on the fake clock."""
    def make():
        m = small()
        m.register_forward_hook(lambda *_: setattr(c, "now", c.now + per_step))
        return m
    return make


def _checkpoint_meta(run: Path) -> dict:
    with safe_open(str(run / "checkpoint.safetensors"), framework="pt") as f:
        return json.loads(f.metadata()["stringdiag"])


def test_time_accumulates_across_resumes(tmp_path, clock):
    data, valid = tokens(), tokens(200)
    first = train(_ticking(clock, 2.0), data, valid, TrainConfig(**CFG, max_steps=4), out_dir=tmp_path,
                  log=lambda _: None)
    assert first.wall_seconds > 0 and first.cpu_seconds == first.wall_seconds
    clock.now += 500.0  # the hours between two sessions are no training time
    more = train(_ticking(clock, 2.0), data, valid, TrainConfig(**CFG, max_steps=6), out_dir=tmp_path,
                 resume=True, log=lambda _: None)
    session = more.wall_seconds - first.wall_seconds
    assert 0 < session < first.wall_seconds  # two steps (and a validation) after four: the total grew
    assert more.cpu_seconds == more.wall_seconds
    assert _checkpoint_meta(tmp_path)["elapsed"] == {"wall": more.wall_seconds, "cpu": more.cpu_seconds}
    with open(tmp_path / "log.csv") as f:
        seconds = [float(r["seconds"]) for r in csv.DictReader(f)]
    assert seconds == sorted(seconds) and seconds[-1] == round(more.wall_seconds, 1)
    assert [r["seconds"] for r in more.rows[:2]] == [r["seconds"] for r in first.rows]


def test_resume_stays_bit_identical(tmp_path):
    whole = train(small, tokens(), tokens(200), TrainConfig(**CFG, max_steps=6), log=lambda _: None)
    train(small, tokens(), tokens(200), TrainConfig(**CFG, max_steps=4), out_dir=tmp_path, log=lambda _: None)
    resumed = train(small, tokens(), tokens(200), TrainConfig(**CFG, max_steps=6), out_dir=tmp_path, resume=True,
                    log=lambda _: None)
    assert [r["train_loss"] for r in resumed.rows] == [r["train_loss"] for r in whole.rows]


def test_a_checkpoint_without_recorded_time_goes_on_from_its_log(tmp_path, clock):
    from safetensors.torch import load_file, save_file

    data, valid = tokens(), tokens(200)
    first = train(_ticking(clock, 2.0), data, valid, TrainConfig(**CFG, max_steps=4), out_dir=tmp_path,
                  log=lambda _: None)
    path = tmp_path / "checkpoint.safetensors"
    meta = _checkpoint_meta(tmp_path)
    del meta["elapsed"]  # what runs wrote before the time was kept
    save_file(load_file(str(path)), str(path), metadata={"stringdiag": json.dumps(meta)})
    more = train(_ticking(clock, 2.0), data, valid, TrainConfig(**CFG, max_steps=6), out_dir=tmp_path,
                 resume=True, log=lambda _: None)
    assert more.wall_seconds > first.rows[-1]["seconds"]
