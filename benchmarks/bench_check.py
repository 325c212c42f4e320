"""Benchmark: check a generated 48-layer transformer encoder (>= 5,000 boxes expanded).

"Check" is what ``stringdiag check`` does (parse, type-check, elaborate every diagram)
followed by expanding the encoder into primitive boxes. We also time 12 and 24 layers
in the same run and report time per box, since every pass should be near-linear.

    .venv/bin/python benchmarks/bench_check.py
"""
from __future__ import annotations

import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import stringdiag  # noqa: E402
from transformer_source import transformer_source  # noqa: E402


def check(src: str) -> tuple[float, int, int]:
    t0 = time.perf_counter()
    prog = stringdiag.loads(src, "encoder.diag")
    flat = prog["Encoder"].expand()
    dt = time.perf_counter() - t0
    return dt, len(flat), len(src.splitlines())


def best_of(n: int, src: str) -> tuple[float, int, int]:
    runs = [check(src) for _ in range(n)]
    return min(runs, key=lambda r: r[0])


def main() -> None:
    stringdiag.loads("dim s : seq\n")  # load the prelude and grammar outside the timings
    print(f"{'variant':<28}{'layers':>7}{'lines':>7}{'boxes':>8}{'seconds':>9}{'us/box':>8}")
    results = {}
    for flat in (False, True):
        for layers in (12, 24, 48):
            dt, boxes, lines = best_of(3, transformer_source(layers, flat=flat))
            name = "inline (flat source)" if flat else "definitions (Layer x N)"
            results[(flat, layers)] = (dt, boxes)
            print(f"{name:<28}{layers:>7}{lines:>7}{boxes:>8}{dt:>9.3f}{dt / boxes * 1e6:>8.1f}")
    for flat in (False, True):
        (t12, b12), (t48, b48) = results[(flat, 12)], results[(flat, 48)]
        print(f"{'flat' if flat else 'nested'}: 48 vs 12 layers: {b48 / b12:.1f}x boxes, {t48 / t12:.1f}x time")
    dt48, boxes48 = results[(False, 48)]
    ok = boxes48 >= 5000 and dt48 < 2.0 and results[(True, 48)][0] < 2.0
    print(f"48-layer encoder: {boxes48} boxes expanded, checked in {dt48:.2f} s "
          f"(flat source: {results[(True, 48)][0]:.2f} s) -> {'PASS' if ok else 'FAIL'} (< 2 s)")
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
