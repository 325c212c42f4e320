"""Benchmark: the compiled sliding window against flex_attention, and the window and Longformer
against dense masked SDPA, by CPU time at one torch thread.

1. Forward of ``gallery/taxonomy.diag:SlidingWindowAttention`` compiled (``window_sdpa`` ->
   ``lower/banded.py``) against the same projections followed by ``flex_attention`` compiled by
   ``torch.compile`` with the same ``BlockMask`` (|i - j| < w), at s = 512, 2048, 8192.
2. Forward + backward of the window and of ``gallery/taxonomy_sparse.diag:Longformer`` (the
   window and g global tokens) at s = 512 against the same projections followed by
   ``F.scaled_dot_product_attention`` under the dense [s, s] mask.

Every pair is timed in interleaved rounds (each first in turn), median of the rounds' ratios
(``cpu_clock.pair``); the two agree to float32 round-off first. Rows print as they are measured.

    .venv/bin/python benchmarks/bench_window.py [--rounds 5] [--sizes 512 2048 8192] [--d 64 --w 64 --g 16]
"""
from __future__ import annotations

import argparse
import sys
import warnings
from pathlib import Path

import torch
import torch.nn.functional as F

sys.path.insert(0, str(Path(__file__).resolve().parent))
import cpu_clock as C  # noqa: E402

import stringdiag  # noqa: E402

GALLERY = Path(__file__).resolve().parents[1] / "gallery"


def module(file: str, name: str, dims: dict) -> torch.nn.Module:
    torch.manual_seed(0)
    return stringdiag.compile(stringdiag.load(GALLERY / file)[name], dims=dims, approximator="linear")


def projections(m, x):
    return m.Q(x), m.K(x), m.V(x)


def against_flex(s: int, d: int, w: int, rounds: int) -> None:
    from torch.nn.attention.flex_attention import create_block_mask, flex_attention
    m = module("taxonomy.diag", "SlidingWindowAttention", {"d": d, "k": d, "w": w})
    x = torch.randn(1, s, d)
    mask = create_block_mask(lambda b, h, i, j: (i - j).abs() < w, None, None, s, s, device="cpu")
    flex = torch.compile(flex_attention, dynamic=False)
    scale = d ** -0.5

    def ref():
        q, k, v = (t[:, None] for t in projections(m, x))  # flex wants [batch, heads, s, width]
        return flex(q, k, v, block_mask=mask, scale=scale)[:, 0]

    with torch.no_grad():
        err = (m(x) - ref()).abs().max().item()
        assert err < 1e-4, err
        p = C.pair(lambda: m(x), ref, rounds)
    C.row(f"sliding-window forward, s = {s} (d = k = {d}, w = {w})", "flex_attention, compiled, same BlockMask",
          f"{p.ratio:.2f} ({p.mine * 1e3:.2f} vs {p.ref * 1e3:.2f} ms)", "<= 1.0", p.ratio <= 1.0)


def against_dense(case: str, s: int, d: int, w: int, g: int, rounds: int) -> None:
    file, name = ("taxonomy.diag", "SlidingWindowAttention") if case == "window" else \
        ("taxonomy_sparse.diag", "Longformer")
    m = module(file, name, {"d": d, "k": d, "w": w, **({"g": g} if case != "window" else {})})
    x = torch.randn(1, s, d, requires_grad=True)
    i = torch.arange(s)
    keep = (i[:, None] - i[None, :]).abs() < w
    if case != "window":
        keep = keep | (i[:, None] < g) | (i[None, :] < g)

    def mine():
        m(x).sum().backward()

    def ref():
        F.scaled_dot_product_attention(*projections(m, x), attn_mask=keep).sum().backward()

    with torch.no_grad():
        err = (m(x) - F.scaled_dot_product_attention(*projections(m, x), attn_mask=keep)).abs().max().item()
        assert err < 1e-4, err
    p = C.pair(mine, ref, rounds)
    what = f"w = {w}" + (f", g = {g}" if case != "window" else "")
    C.row(f"{case} fwd+bwd, s = {s} (d = k = {d}, {what})", "dense masked SDPA, same projections",
          f"{p.ratio:.2f} ({p.mine * 1e3:.2f} vs {p.ref * 1e3:.2f} ms)", "<= 1.0", p.ratio <= 1.0)


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--sizes", type=int, nargs="+", default=[512, 2048, 8192])
    ap.add_argument("--d", type=int, default=64, help="model and query/key width")
    ap.add_argument("--w", type=int, default=64, help="window: |i - j| < w")
    ap.add_argument("--g", type=int, default=16, help="Longformer's global tokens")
    ap.add_argument("--no-header", action="store_true")
    a = ap.parse_args(argv)
    torch.set_num_threads(1)
    warnings.filterwarnings("ignore")
    if not a.no_header:
        C.header()
    for s in a.sizes:
        against_flex(s, a.d, a.w, a.rounds)
    for case in ("window", "longformer"):
        against_dense(case, 512, a.d, a.w, a.g, a.rounds)


if __name__ == "__main__":
    main()
