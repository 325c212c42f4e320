"""Benchmark: Mistral's causal sliding-window attention compiled banded vs dense.

Both are ``gallery/modern/mistral.diag:MistralAttention`` (grouped-query attention with rotary
positions under ``causal<s>() * window<s, w>()``), compiled twice with the same weights:

- banded: the default compile (``rules/fastpath.rules``' ``causal_window_sdpa`` ->
  ``primitives.causal_window_attention``: each block of min(w, s) queries meets its own keys and
  the block before, no s x s matrix);
- dense: ``compile(..., fast=False)``, the diagram as written (the [s, s] mask and scores).

Forward + backward on one sequence, timed interleaved in rounds, median of repeats, torch at one
thread. Memory: the bytes autograd saves for the backward pass (``saved_tensors_hooks``) and the
largest tensor among them, a measure of the activations each form holds.

    .venv/bin/python benchmarks/bench_causal_window.py [--s 2048] [--w 128]
"""
from __future__ import annotations

import argparse
import statistics
from pathlib import Path

import torch

import stringdiag
from bench_attention import timeit  # noqa: E402  (median of repeats after a warm-up; run from benchmarks/)

FILE = Path(__file__).resolve().parents[1] / "gallery" / "modern" / "mistral.diag"
DIMS = dict(d=64, g=2, n=2, r=8, theta=10000)  # 4 query heads, 2 key/value heads of width 16


def saved(fn) -> tuple[int, int]:
    """(bytes saved for the backward pass, the largest saved tensor's bytes) of one forward."""
    sizes: list[int] = []

    def pack(t):
        sizes.append(t.numel() * t.element_size())
        return t

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        fn()
    return sum(sizes), max(sizes)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--s", type=int, default=2048)
    ap.add_argument("--w", type=int, default=128)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--rounds", type=int, default=2)
    args = ap.parse_args()
    torch.set_num_threads(1)
    torch.manual_seed(0)
    d = stringdiag.load(FILE)["MistralAttention"]
    dims = {**DIMS, "w": args.w}
    banded = stringdiag.compile(d, dims=dims, approximator="linear")
    dense = stringdiag.compile(d, dims=dims, approximator="linear", fast=False)
    dense.load_state_dict(banded.state_dict())
    x = torch.randn(1, args.s, DIMS["d"], requires_grad=True)
    with torch.no_grad():
        err = (banded(x) - dense(x)).abs().max().item()
    assert err < 1e-4, err  # the same numbers, up to float32 rounding

    def run(m):
        return lambda: m(x).sum().backward()

    got = [(timeit(run(banded), args.repeat), timeit(run(dense), args.repeat)) for _ in range(args.rounds)]
    tb, td = (statistics.median(g[i] for g in got) for i in (0, 1))
    (mb, lb), (md, ld) = saved(lambda: banded(x)), saved(lambda: dense(x))
    mib = 2 ** 20
    print(f"s = {args.s}, w = {args.w}, float32, forward + backward, 1 thread "
          f"(median of {args.repeat} x {args.rounds} rounds, interleaved); max |banded - dense| = {err:.1e}")
    print(f"banded: {tb * 1e3:7.1f} ms, saved for backward {mb / mib:6.1f} MiB (largest {lb / mib:5.1f} MiB)")
    print(f"dense:  {td * 1e3:7.1f} ms, saved for backward {md / mib:6.1f} MiB (largest {ld / mib:5.1f} MiB)")
    print(f"banded / dense: time {tb / td:.2f}x, memory {mb / md:.2f}x")


if __name__ == "__main__":
    main()
