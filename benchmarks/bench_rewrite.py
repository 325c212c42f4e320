"""Benchmark: apply associativity at every match in a generated 48-layer model.

The model is benchmarks/transformer_source.py's encoder (8 heads per layer, expanded to
primitive boxes) with each head's softmax replaced by a kernel feature map,
``y_i = sum_j (phi(q_i) . phi(k_j)) v_j`` — the O(s^2) form of linear attention. Rewriting
every head with ``assoc`` (rules/contraction.rules) turns it into
``phi(q_i) . (sum_j phi(k_j) v_j^T)``, O(s). We time finding every match, and the whole
pass (index, matching, re-checking and rewriting each match), at 12, 24 and 48 layers.

    .venv/bin/python benchmarks/bench_rewrite.py
"""
from __future__ import annotations

import gc
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import stringdiag  # noqa: E402
from stringdiag.analysis.complexity import analyse  # noqa: E402
from stringdiag.rewrite import find_matches, library, rewrite_all  # noqa: E402
from transformer_source import transformer_source  # noqa: E402

SOFTMAX = """  e[i, j] = sum_f q[i, f] * k[j, f]
  a = softmax(e / sqrt(dh))
  y[i] = sum_j a[i, j] * w[j]"""
KERNEL = """  a[i, j] = sum_f elu1(q)[i, f] * elu1(k)[j, f]
  y[i] = sum_j a[i, j] * w[j]"""


def model(layers: int) -> stringdiag.Diagram:
    src = transformer_source(layers, heads=8)
    assert SOFTMAX in src, "transformer_source's head changed; update this benchmark"
    src = src.replace(SOFTMAX, KERNEL)
    return stringdiag.loads(src, "encoder.diag")["Encoder"].expand()


def run(flat: stringdiag.Diagram, rule) -> tuple[float, float, int, int, stringdiag.Diagram]:
    gc.collect()  # start each timing from a clean heap: the collector's pauses are part of the work
    t0 = time.perf_counter()
    n_matches = len(find_matches(flat, rule))
    t1 = time.perf_counter()
    out, n = rewrite_all(flat, rule)
    t2 = time.perf_counter()
    return t1 - t0, t2 - t1, n_matches, n, out


def main() -> None:
    rule = library()["assoc"]
    print(f"{'layers':>7}{'boxes':>8}{'matches':>9}{'find s':>9}{'rewrite-all s':>15}{'us/box':>8}")
    results = {}
    for layers in (12, 24, 48):
        flat = model(layers)
        best = min((run(flat, rule) for _ in range(3)), key=lambda r: r[1])
        find, whole, n_matches, n, out = best
        results[layers] = (len(flat), whole, n)
        print(f"{layers:>7}{len(flat):>8}{n_matches:>9}{find:>9.3f}{whole:>15.3f}{whole / len(flat) * 1e6:>8.1f}")
    boxes, whole, n = results[48]
    before, after = analyse(flat), analyse(out)
    print(f"48 vs 12 layers: {boxes / results[12][0]:.1f}x boxes, {whole / results[12][1]:.1f}x time")
    print(f"complexity in s: time {before.seq_time} -> {after.seq_time}, memory {before.seq_memory} -> "
          f"{after.seq_memory}")
    ok = boxes >= 5000 and n == 8 * 48 and whole < 2.0 and after.seq_time == "s"
    print(f"48-layer model: {boxes} boxes, {n} rewrites in {whole:.2f} s -> {'PASS' if ok else 'FAIL'} (< 2 s)")
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
