"""Benchmark: checking gallery/linearize.deriv (every step matched, rewritten and checked,
the target compared up to isomorphism), without and with numerical verification.

One-time costs (the grammar, the prelude, the rule library) are measured apart from the
check itself, which is what a user re-running a derivation pays.

    .venv/bin/python benchmarks/bench_derive.py
"""
from __future__ import annotations

import importlib
import statistics
import sys
import time
from pathlib import Path

import stringdiag
from stringdiag.derive.derivation import load_derivation
from stringdiag.rewrite.rule import library

DERIV = Path(__file__).resolve().parents[1] / "gallery" / "linearize.deriv"


def main() -> None:
    t0 = time.perf_counter()
    stringdiag.loads("dim s : seq\n")
    library()
    startup = time.perf_counter() - t0
    times = []
    for _ in range(7):
        t = time.perf_counter()
        load_derivation(DERIV)
        times.append(time.perf_counter() - t)
    t = time.perf_counter()
    importlib.import_module("stringdiag.verify.oracle")  # torch: checking alone never imports it
    torch_import = time.perf_counter() - t
    t = time.perf_counter()
    load_derivation(DERIV, verify=True)
    verify = time.perf_counter() - t
    check = statistics.median(times)
    print(f"start-up (grammar, prelude, rules/): {startup:.3f} s, once per process")
    print(f"checking {DERIV.name}: median {check:.3f} s over {len(times)} runs (first run {times[0]:.3f} s)")
    print(f"with --verify (compiles and evaluates both sides of 4 equalities): {verify:.2f} s "
          f"(after importing torch, {torch_import:.2f} s, which checking alone never does)")
    ok = max(times) < 0.5
    print(f"-> {'PASS' if ok else 'FAIL'} (every run under 0.5 s)")
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
