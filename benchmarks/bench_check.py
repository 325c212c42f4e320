"""Benchmark: check a 48-layer transformer encoder (>= 5,000 boxes expanded).

"Check" is what ``stringdiag check`` does (parse, type-check, elaborate every diagram)
followed by expanding the encoder into primitive boxes. The encoder is written three ways
(benchmarks/transformer_source.py): as one line ``x = repeat N Layer(x0)`` (the headline:
unrolled into its copies by ``expand(unroll={})``, so it expands to the same boxes), as N
lines ``x{n} = Layer(x{n-1})``, and flat (every box of every layer in one diagram). We also
time 12 and 24 layers and report time per box, since every pass should be near-linear, and
the repeat source checked without unrolling (its stack stays one box, as ``info`` and
``compile`` read it). Variants are interleaved; medians of the repeats.

    .venv/bin/python benchmarks/bench_check.py
"""
from __future__ import annotations

import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import stringdiag  # noqa: E402
from transformer_source import transformer_source  # noqa: E402

REPEATS = 5
VARIANTS = {  # name -> (source options, expand options)
    "repeat (one line), unrolled": ({"repeat": True}, {"unroll": {}}),
    "definitions (Layer x N)": ({}, {}),
    "inline (flat source)": ({"flat": True}, {}),
    "repeat, kept as one box": ({"repeat": True}, {}),
}


def check(src: str, options: dict) -> tuple[float, int, int]:
    t0 = time.perf_counter()
    prog = stringdiag.loads(src, "encoder.diag")
    flat = prog["Encoder"].expand(**options)
    dt = time.perf_counter() - t0
    return dt, len(flat), len(src.splitlines())


def main() -> None:
    stringdiag.loads("dim s : seq\n")  # load the prelude and grammar outside the timings
    sources = {(name, n): transformer_source(n, **VARIANTS[name][0]) for name in VARIANTS for n in (12, 24, 48)}
    runs: dict[tuple, list] = {key: [] for key in sources}
    for _ in range(REPEATS):  # interleaved: every variant in every round
        for (name, n), src in sources.items():
            runs[(name, n)].append(check(src, VARIANTS[name][1]))
    print(f"{'variant':<30}{'layers':>7}{'lines':>7}{'boxes':>8}{'seconds':>9}{'us/box':>8}")
    results = {}
    for (name, n), rs in runs.items():
        dt, boxes, lines = statistics.median(r[0] for r in rs), rs[0][1], rs[0][2]
        results[(name, n)] = (dt, boxes)
        print(f"{name:<30}{n:>7}{lines:>7}{boxes:>8}{dt:>9.3f}{dt / boxes * 1e6:>8.1f}")
    for name in VARIANTS:
        (t12, b12), (t48, b48) = results[(name, 12)], results[(name, 48)]
        print(f"{name}: 48 vs 12 layers: {b48 / b12:.1f}x boxes, {t48 / t12:.1f}x time")
    head = "repeat (one line), unrolled"
    dt48, boxes48 = results[(head, 48)]
    ref = results[("definitions (Layer x N)", 48)][0]
    ok = boxes48 >= 5000 and dt48 < 2.0
    print(f"48-layer encoder (x = repeat 48 Layer(x0)): {boxes48} boxes expanded, checked in {dt48:.2f} s "
          f"({dt48 / ref:.2f}x the 48-line source in this run) -> {'PASS' if ok else 'FAIL'} (< 2 s)")
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
