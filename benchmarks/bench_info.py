"""Benchmark: ``stringdiag info`` on a file whose definitions each use the previous one twice.

    dim d : fixed
    learn F, G : [d] -> [d]
    diagram L0(x: [d]) -> [d] { return G(F(x)) }
    diagram L1(x: [d]) -> [d] { return L0(L0(x)) }
    ...

``Ln`` expands to ``2^(n+1)`` boxes, so ``info`` must never expand: its counts, costs and
learnable boxes are combined per definition (``stringdiag/analysis/combine.py``). We time
``summarize`` (what ``info`` prints) in-process for 10, 20 and 30 levels, with F global
(one weight set) and local to L0 (one weight set per instance: 2^n of them), best of 3,
each on a freshly loaded program (nothing cached from an earlier run).

    .venv/bin/python benchmarks/bench_info.py
"""
from __future__ import annotations

import time

import stringdiag
from stringdiag.cli.summary import summarize


def doubling(levels: int, local: bool) -> str:
    lines = ["dim d : fixed", "learn G : [d] -> [d]"]
    if local:
        lines.append("diagram L0(x: [d]) -> [d] {\n  learn F : [d] -> [d]\n  return G(F(x))\n}")
    else:
        lines.append("learn F : [d] -> [d]\ndiagram L0(x: [d]) -> [d] { return G(F(x)) }")
    lines += [f"diagram L{k}(x: [d]) -> [d] {{ return L{k - 1}(L{k - 1}(x)) }}" for k in range(1, levels + 1)]
    return "\n".join(lines) + "\n"


def run(levels: int, local: bool) -> tuple[float, dict]:
    best, summary = float("inf"), {}
    for _ in range(3):
        prog = stringdiag.loads(doubling(levels, local), "doubling.diag")  # elaborated, not summarised
        d = prog[f"L{levels}"]
        t0 = time.perf_counter()
        summary = summarize(d)
        best = min(best, time.perf_counter() - t0)
    return best, summary


def main() -> None:
    stringdiag.loads("dim s : seq\n")  # load the prelude and grammar outside the timings
    print(f"{'F':<8}{'levels':>7}{'expanded boxes':>16}{'weight sets':>16}{'seconds':>10}{'ms/level':>10}")
    worst = 0.0
    for local in (False, True):
        for levels in (10, 20, 30):
            dt, s = run(levels, local)
            sets = sum(e.get("weight_sets", 1) for e in s["learnable"])
            print(f"{'local' if local else 'global':<8}{levels:>7}{s['boxes']['expanded_total']:>16,}{sets:>16,}"
                  f"{dt:>10.4f}{dt / levels * 1e3:>10.2f}")
            if levels == 30:
                worst = max(worst, dt)
    print(f"30 levels (2^31 boxes expanded): summarize in {worst:.3f} s -> {'PASS' if worst < 1.0 else 'FAIL'} (< 1 s)")


if __name__ == "__main__":
    main()
