"""Benchmark: training throughput (tokens per second) of compiled language models.

Each model is the App. C decoder with heads compiled from a gallery diagram (M1, scaled
dot-product attention; M0, linear attention). The reference, measured in the same run, is
the same decoder with M1's heads written by hand: MLP query, key and value maps as the
compiler's ``mlp`` policy builds them, ``F.scaled_dot_product_attention`` with the causal
mask, and App. C's extra layer norm after the head — the same architecture and parameter
count as compiled M1 (asserted), so the M1 ratio is what compiling a diagram costs.
Rounds alternate between the models, so that drift on a busy machine hits all of them.

    .venv/bin/python benchmarks/bench_lm.py [--steps 20] [--rounds 3]
"""
from __future__ import annotations

import argparse
import statistics
import time
from pathlib import Path

import torch
import torch.nn.functional as F

import stringdiag
from stringdiag.lower.approximators import mlp
from stringdiag.train.model import LanguageModel

GALLERY = Path(__file__).resolve().parents[1] / "gallery"
CONFIG = {"vocab": 10000, "d_model": 128, "n_layers": 2, "n_heads": 4, "approximator": "mlp"}


class HandHead(torch.nn.Module):
    """Compiled M1 written by hand: AttPrep's Q, K and AttApply's V as MLPs, causal scaled
    dot-product attention, then the layer norm App. C puts after AttApply."""

    def __init__(self, d: int):
        super().__init__()
        self.q, self.k, self.v = (mlp(d, d) for _ in range(3))
        self.norm = torch.nn.LayerNorm(d)

    def forward(self, x):
        return self.norm(F.scaled_dot_product_attention(self.q(x), self.k(x), self.v(x), is_causal=True))


def hand_written(head) -> LanguageModel:
    model = LanguageModel(head, **CONFIG)
    d = CONFIG["d_model"] // CONFIG["n_heads"]
    for layer in model.layers:
        layer.heads = torch.nn.ModuleList(HandHead(d) for _ in range(CONFIG["n_heads"]))
    return model


def parameters(model: torch.nn.Module) -> int:
    return sum(p.numel() for p in model.parameters())


def tokens_per_second(model: torch.nn.Module, steps: int, batch: int = 32, context: int = 35):
    vocab = CONFIG["vocab"]
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
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args()
    torch.manual_seed(0)
    prog = stringdiag.load(GALLERY / "anatomy.diag")
    models = {name: LanguageModel(prog[name], **CONFIG) for name in ("M1", "M0")}
    models["hand-written M1 (SDPA)"] = hand_written(prog["M1"])
    assert parameters(models["hand-written M1 (SDPA)"]) == parameters(models["M1"]), "not the same architecture"
    runs: dict[str, list[float]] = {name: [] for name in models}
    for _ in range(args.rounds):
        for name, m in models.items():
            runs[name].append(tokens_per_second(m, args.steps))
    base = statistics.median(runs["hand-written M1 (SDPA)"])
    for name, tps in runs.items():
        t = statistics.median(tps)
        print(f"{name:<26} {t:10,.0f} tokens/s   ({t / base:.2f}x the hand-written M1)")


if __name__ == "__main__":
    main()
