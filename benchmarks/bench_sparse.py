"""Benchmark: sliding-window (and Longformer) attention compiled sparse vs dense masked SDPA.

Both compute softmax(q k^T / sqrt(k), masked to |i - j| < w) v on the same q, k, v:

- sliding window: ``gallery/taxonomy.diag:SlidingWindowAttention`` compiled by stringdiag
  (the fast path ``window_sdpa`` -> ``primitives.window_attention``: keys and values
  unfolded into windows of 2w - 1 positions, no s x s matrix);
- dense masked: ``F.scaled_dot_product_attention`` with the [s, s] boolean window mask, on
  the compiled module's own projections (the reference a user would write).

The same for Longformer's mask (the window and G global tokens, ``gallery/taxonomy_sparse.diag:
Longformer``, compiled through ``window_global_sdpa`` -> ``primitives.window_global_attention``)
against SDPA with that [s, s] mask.

For each s (doubling), forward + backward, the two are timed interleaved in rounds, median
of repeats, torch at one thread; the table shows time per doubling of s (t(s) / t(s/2)):
about 2 for a linear cost, about 4 for a quadratic one.

    .venv/bin/python benchmarks/bench_sparse.py [--quick]
"""
from __future__ import annotations

import argparse
import statistics
from pathlib import Path

import torch
import torch.nn.functional as F

import stringdiag
from stringdiag import compile

from bench_attention import timeit  # noqa: E402  (median of repeats after a warm-up; run from benchmarks/)

GALLERY = Path(__file__).resolve().parents[1] / "gallery"
D, K, W, G = 16, 16, 16, 16  # model width, query/key width, window (|i - j| < W), global tokens


def runners(s: int, file: str, name: str, mask_of) -> tuple:
    """Forward + backward of the compiled sparse module and of the dense masked reference."""
    model = compile(stringdiag.load(GALLERY / file)[name], dims={"d": D, "k": K, "w": W, "g": G},
                    approximator="linear")
    x = torch.randn(1, s, D, requires_grad=True)
    i = torch.arange(s)
    mask = mask_of(i[:, None], i[None, :])

    def sparse():
        model(x).sum().backward()

    def dense():
        q, k, v = model.Q(x), model.K(x), model.V(x)
        F.scaled_dot_product_attention(q, k, v, attn_mask=mask).sum().backward()

    with torch.no_grad():  # the same numbers (up to float32 rounding)
        err = (model(x) - F.scaled_dot_product_attention(model.Q(x), model.K(x), model.V(x), attn_mask=mask))
        assert err.abs().max().item() < 1e-4, err.abs().max().item()
    return sparse, dense


CASES = {  # name: (file, diagram, mask)
    "window": ("taxonomy.diag", "SlidingWindowAttention", lambda i, j: (i - j).abs() < W),
    "longformer": ("taxonomy_sparse.diag", "Longformer", lambda i, j: ((i - j).abs() < W) | (i < G) | (j < G)),
}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true", help="s up to 4096, fewer repeats")
    args = ap.parse_args()
    torch.set_num_threads(1)
    torch.manual_seed(0)
    sizes = (512, 1024, 2048, 4096) if args.quick else (512, 1024, 2048, 4096, 8192)
    repeat, rounds = (3, 2) if args.quick else (5, 3)
    for case, (file, name, mask_of) in CASES.items():
        rows = []
        for s in sizes:
            sparse, dense = runners(s, file, name, mask_of)
            got = [(timeit(sparse, repeat), timeit(dense, repeat)) for _ in range(rounds)]  # interleaved
            rows.append((s, statistics.median(g[0] for g in got), statistics.median(g[1] for g in got)))
        table(case, rows, repeat, rounds)


def table(case: str, rows: list, repeat: int, rounds: int) -> None:
    extra = f", {G} global tokens" if case == "longformer" else ""
    print(f"{case}: fwd+bwd, d={D}, k={K}, window |i - j| < {W}{extra}, batch 1, torch 1 thread, "
          f"median of {repeat} x {rounds} rounds")
    print(f"{'s':>6}  {case + ' (ms)':>16}  {'x per doubling':>14}  {'dense masked (ms)':>17}  {'x per doubling':>14}")
    for n, (s, tb, td) in enumerate(rows):
        rb = f"{tb / rows[n - 1][1]:.2f}" if n else "-"
        rd = f"{td / rows[n - 1][2]:.2f}" if n else "-"
        print(f"{s:>6}  {tb * 1e3:>16.2f}  {rb:>14}  {td * 1e3:>17.2f}  {rd:>14}")


if __name__ == "__main__":
    main()
