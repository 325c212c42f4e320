"""Benchmark: training throughput (tokens per second) of compiled language models.

Each model is the App. C decoder with heads compiled from a gallery diagram; the
reference in the same run is the same decoder with a hand-written causal
scaled-dot-product head (``F.scaled_dot_product_attention``), so the ratio is what
compiling a diagram costs.

    .venv/bin/python benchmarks/bench_lm.py [--steps 20]
"""
from __future__ import annotations

import argparse
import time
from pathlib import Path

import torch
import torch.nn.functional as F

import stringdiag
from stringdiag.train.model import LanguageModel

GALLERY = Path(__file__).resolve().parents[1] / "gallery"


class HandHead(torch.nn.Module):
    def __init__(self, d: int):
        super().__init__()
        self.q, self.k, self.v = (torch.nn.Linear(d, d) for _ in range(3))

    def forward(self, x):
        return F.scaled_dot_product_attention(self.q(x), self.k(x), self.v(x), is_causal=True)


def tokens_per_second(model: torch.nn.Module, steps: int, batch: int = 32, context: int = 35, vocab: int = 10000):
    opt = torch.optim.Adam(model.parameters(), lr=1e-4)
    x = torch.randint(vocab, (batch, context + 1))
    for k in range(steps + 2):
        if k == 2:
            t0 = time.perf_counter()
        logits = model(x[:, :-1])
        loss = F.cross_entropy(logits.reshape(-1, vocab), x[:, 1:].reshape(-1))
        opt.zero_grad()
        loss.backward()
        opt.step()
    return steps * batch * context / (time.perf_counter() - t0)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=20)
    args = ap.parse_args()
    torch.manual_seed(0)
    prog = stringdiag.load(GALLERY / "anatomy.diag")
    results = {}
    for name in ("M1", "M0"):
        m = LanguageModel(prog[name], vocab=10000, d_model=128, n_layers=2, n_heads=4, approximator="mlp")
        results[name] = tokens_per_second(m, args.steps)
    ref = LanguageModel(prog["M1"], vocab=10000, d_model=128, n_layers=2, n_heads=4, approximator="mlp")
    for layer in ref.layers:
        layer.heads = torch.nn.ModuleList(HandHead(32) for _ in range(4))
        layer.head_norms = None
    results["hand-written SDPA heads"] = tokens_per_second(ref, args.steps)
    base = results["hand-written SDPA heads"]
    for name, tps in results.items():
        print(f"{name:<26} {tps:10,.0f} tokens/s   ({tps / base:.2f}x the hand-written reference)")


if __name__ == "__main__":
    main()
