"""Benchmark: compiled attention vs hand-written PyTorch, measured in the same run.

1. Compiled ``MultiHeadAttention`` (gallery/attention.diag, ``linear`` policy) against
   ``torch.nn.MultiheadAttention`` with the same weights: s=512, d=256, 4 heads,
   batch 8, forward + backward. Reported as a ratio of median times.
2. Causal linear attention (gallery/similarity.diag) against causal softmax attention
   at s = 2048, 4096, 8192: time per doubling of s.
3. Compile time of the 12-layer, 8-head encoder of benchmarks/transformer_source.py
   (expansion, the fast-path rules, lowering).

    .venv/bin/python benchmarks/bench_attention.py [--quick]
"""
from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import torch

import stringdiag
from stringdiag import compile

sys.path.insert(0, str(Path(__file__).resolve().parent))
from transformer_source import transformer_source  # noqa: E402

GALLERY = Path(__file__).resolve().parents[1] / "gallery"


def timeit(fn, repeat: int, warmup: int = 2) -> float:
    for _ in range(warmup):
        fn()
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def mha(repeat: int) -> float:
    prog = stringdiag.load(GALLERY / "attention.diag")
    diagram = prog["MultiHeadAttention"]
    dims = {"d": 256, "h": 4, "k": 64}  # model width, heads, width per head
    torch.manual_seed(0)
    m = compile(diagram, dims=dims, approximator="linear")
    ref = torch.nn.MultiheadAttention(256, 4, batch_first=True)
    x = torch.randn(8, 512, 256, requires_grad=True)

    def run_compiled():
        m(x).sum().backward()

    def run_ref():
        ref(x, x, x, need_weights=False)[0].sum().backward()

    with torch.no_grad():  # the same weights in both
        ref.in_proj_weight.copy_(torch.cat([m.WQ.weight, m.WK.weight, m.WV.weight]))
        ref.in_proj_bias.copy_(torch.cat([m.WQ.bias, m.WK.bias, m.WV.bias]))
        ref.out_proj.weight.copy_(m.WO.weight)
        ref.out_proj.bias.copy_(m.WO.bias)
    rounds = []
    for _ in range(3):  # interleave, so that drift on a noisy machine hits both
        rounds.append((timeit(run_compiled, repeat), timeit(run_ref, repeat)))
    tc = statistics.median(r[0] for r in rounds)
    tr = statistics.median(r[1] for r in rounds)
    print(f"MultiHeadAttention fwd+bwd (s=512, d=256, h=4, batch 8): compiled {tc * 1e3:.1f} ms, "
          f"nn.MultiheadAttention {tr * 1e3:.1f} ms, ratio {tc / tr:.3f}")
    return tc / tr


def scaling(quick: bool) -> None:
    prog = stringdiag.load(GALLERY / "similarity.diag")
    att = stringdiag.load(GALLERY / "attention.diag")
    lin = compile(prog["CausalLinearAttention"], dims={"d": 64, "k": 64}, approximator="linear")
    soft = compile(att["MaskedSelfAttention"], dims={"d": 64, "k": 64}, approximator="linear")
    sizes = (1024, 2048, 4096) if quick else (2048, 4096, 8192)
    rows = []
    for s in sizes:
        x = torch.randn(1, s, 64)
        with torch.no_grad():
            tl = timeit(lambda x=x: lin(x), 5, 2)
            ts = timeit(lambda x=x: soft(x), 5, 2)
        rows.append((s, tl, ts))
        print(f"s={s:5d}: causal linear {tl * 1e3:8.1f} ms   causal softmax {ts * 1e3:8.1f} ms")
    for (s0, l0, q0), (s1, l1, q1) in zip(rows, rows[1:]):
        print(f"  {s0} -> {s1}: linear x{l1 / l0:.2f}, softmax x{q1 / q0:.2f}")


def compile_time(repeat: int) -> None:
    encoder = stringdiag.loads(transformer_source(12, heads=8), "encoder.diag")["Encoder"]
    dims = {"v": 100, "dm": 64, "dh": 8, "df": 128}
    t = timeit(lambda: compile(encoder, dims=dims, approximator="linear"), repeat, warmup=1)
    print(f"compile the 12-layer, 8-head encoder: {t * 1e3:.0f} ms")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true")
    args = ap.parse_args()
    torch.set_num_threads(max(torch.get_num_threads(), 1))
    ratio = mha(5 if args.quick else 10)
    scaling(args.quick)
    compile_time(3 if args.quick else 5)
    sys.exit(0 if ratio <= 1.10 else 1)


if __name__ == "__main__":
    main()
