"""Run by tests/test_distributed.py under torchrun: train a small model, save the weights."""
from __future__ import annotations

import os
import sys

import torch

sys.path.insert(0, os.path.dirname(__file__))
from test_train import make, pattern_corpus  # noqa: E402

from stringdiag.train.loop import TrainConfig, train  # noqa: E402

out, batch = sys.argv[1], int(sys.argv[2])
torch.set_num_threads(1)
ids = pattern_corpus()
cfg = TrainConfig(context=12, batch_size=batch, epochs=1, eval_every=1000, warmup=30, max_steps=30,
                  valid_tokens=400)
history = train(make(), ids[:5000], ids[5000:], cfg, out_dir=out, log=lambda s: None)
