"""Benchmark: batched heads against separate heads and against heads batched by hand.

Three versions of the same model, App. C's decoder with M1 heads (gallery/anatomy.diag: MLP
query, key and value maps, causal scaled dot-product attention, the layer norm after AttApply):

- ``batched``: ``LanguageModel`` as ``train`` builds it, the heads of a layer one module with
  stacked weights run by ``torch.vmap`` (train/model.py ``BatchedHeads``);
- ``per-head``: the same model with one compiled module per head, run one after another
  (``batch_heads=False``, the layout before batching);
- ``hand-written``: the heads written in torch with a head axis: each MLP an einsum over stacked
  weights, ``F.scaled_dot_product_attention`` on ``[batch, heads, seq, width]``, a layer norm with
  per-head weights. Same parameter count (asserted).

Each is measured eager and under ``torch.compile``: training tokens per second (forward, backward,
Adam) and, for the compiled model, the wall time of its first training step (``torch.compile``
traces and generates code then). Rounds alternate between the models (``torch._dynamo.reset()``
before each compile) and the medians are reported; one torch thread.

    .venv/bin/python benchmarks/bench_heads.py [--steps 10] [--rounds 3] [--compile-rounds 3]
        [--no-compile] [--vocab 10000]
"""
from __future__ import annotations

import argparse
import statistics
import time
from pathlib import Path

import torch
import torch.nn.functional as F
from torch import nn

import stringdiag
from stringdiag.train.model import LanguageModel

GALLERY = Path(__file__).resolve().parents[1] / "gallery"
CONFIG = {"vocab": 10000, "d_model": 128, "n_layers": 2, "n_heads": 4, "approximator": "mlp"}
BATCH, CONTEXT = 32, 35


class StackedMLP(nn.Module):
    """h MLPs [w] -> [w] -> [w] (ReLU) with stacked weights, applied to ``[..., h, w]``."""

    def __init__(self, h: int, w: int):
        super().__init__()
        self.w1, self.b1 = nn.Parameter(torch.randn(h, w, w) * w ** -0.5), nn.Parameter(torch.zeros(h, w))
        self.w2, self.b2 = nn.Parameter(torch.randn(h, w, w) * w ** -0.5), nn.Parameter(torch.zeros(h, w))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = torch.relu(torch.einsum("...hi,hoi->...ho", x, self.w1) + self.b1)
        return torch.einsum("...hi,hoi->...ho", y, self.w2) + self.b2


class HandHeads(nn.Module):
    """M1's h heads batched by hand: ``[b, s, h * w]`` -> ``[b, s, h * w]``."""

    def __init__(self, h: int, w: int):
        super().__init__()
        self.h = h
        self.q, self.k, self.v = (StackedMLP(h, w) for _ in range(3))
        self.gain, self.bias = nn.Parameter(torch.ones(h, w)), nn.Parameter(torch.zeros(h, w))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.unflatten(-1, (self.h, -1))                                   # [b, s, h, w]
        q, k, v = (f(x).transpose(-3, -2) for f in (self.q, self.k, self.v))  # [b, h, s, w]
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True).transpose(-3, -2)
        y = F.layer_norm(y, y.shape[-1:]) * self.gain + self.bias
        return y.flatten(-2)


def hand_written(head) -> LanguageModel:
    model = LanguageModel(head, **CONFIG)
    h = CONFIG["n_heads"]
    for layer in model.layers:
        layer.heads = HandHeads(h, CONFIG["d_model"] // h)
    return model


def parameters(model: nn.Module) -> int:
    return sum(p.numel() for p in model.parameters())


def step(model: nn.Module, opt: torch.optim.Optimizer, x: torch.Tensor) -> None:
    logits = model(x[:, :-1])
    loss = F.cross_entropy(logits.reshape(-1, CONFIG["vocab"]), x[:, 1:].reshape(-1))
    opt.zero_grad()
    loss.backward()
    opt.step()


def measure(model: nn.Module, steps: int, compiled: bool) -> tuple[float, float | None]:
    """Tokens per second over ``steps`` steps after two warm-up steps, and (compiled) the first step's time."""
    x = torch.randint(CONFIG["vocab"], (BATCH, CONTEXT + 1), generator=torch.Generator().manual_seed(0))
    if compiled:
        torch._dynamo.reset()
        model = torch.compile(model)
    opt = torch.optim.Adam(model.parameters(), lr=1e-4)
    t0 = time.perf_counter()
    step(model, opt, x)
    first = time.perf_counter() - t0 if compiled else None
    step(model, opt, x)
    t0 = time.perf_counter()
    for _ in range(steps):
        step(model, opt, x)
    return steps * BATCH * CONTEXT / (time.perf_counter() - t0), first


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=10)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--compile-rounds", type=int, default=None, help="rounds of the compiled models (default --rounds)")
    ap.add_argument("--no-compile", action="store_true")
    ap.add_argument("--vocab", type=int, default=CONFIG["vocab"], help="a small one shows the heads' share better")
    args = ap.parse_args()
    CONFIG["vocab"] = args.vocab
    torch.set_num_threads(1)
    head = stringdiag.load(GALLERY / "anatomy.diag")["M1"]
    torch.manual_seed(0)
    models = {"batched": LanguageModel(head, **CONFIG), "per-head": LanguageModel(head, **CONFIG, batch_heads=False),
              "hand-written": hand_written(head)}
    assert all(layer.batched for layer in models["batched"].layers), "M1 must batch"
    n = {name: parameters(m) for name, m in models.items()}
    assert len(set(n.values())) == 1, f"not the same architecture: {n}"
    modes = [False] if args.no_compile else [False, True]
    runs: dict[tuple[str, bool], list[tuple[float, float | None]]] = {(m, c): [] for m in models for c in modes}
    rounds = {False: args.rounds, True: args.rounds if args.compile_rounds is None else args.compile_rounds}
    for k in range(max(rounds.values())):
        for compiled in modes:
            for name, model in models.items():
                if k < rounds[compiled]:
                    runs[name, compiled].append(measure(model, args.steps, compiled))
    base = {c: statistics.median(t for t, _ in runs["hand-written", c]) for c in modes}
    print(f"M1, {CONFIG['n_layers']} layers x {CONFIG['n_heads']} heads, d_model {CONFIG['d_model']}, "
          f"vocabulary {CONFIG['vocab']:,}, batch {BATCH} x {CONTEXT}, {n['batched']:,} parameters; "
          f"1 torch thread; median of {rounds[False]} rounds (compiled: {rounds[True]}) of {args.steps} steps")
    print("| model | mode | tokens/s | vs hand-written | first compiled step (s) |")
    print("|---|---|---:|---:|---:|")
    for (name, compiled), results in runs.items():
        tps = statistics.median(t for t, _ in results)
        first = statistics.median(f for _, f in results) if compiled else None
        print(f"| {name} | {'compiled' if compiled else 'eager'} | {tps:,.0f} | {tps / base[compiled]:.2f}x | "
              f"{'' if first is None else f'{first:.1f}'} |")


if __name__ == "__main__":
    main()
