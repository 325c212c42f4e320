"""Benchmark: a derivation whose every step doubles the diagram (relu is idempotent:
``apply idem everywhere`` makes every relu two), and the oracle's cost over the gallery.

Doubling: the CPU time of each step, per box it makes. A rewrite keeps the index's levels in
time proportional to what it changes (``rewrite/index.py``), so the time per box made stays
flat as the diagram grows; before, every rewrite raised the levels of everything downstream
and the time per box grew with the diagram (12 steps: 3.2 s; after: 1.6 s).

Verify: CPU seconds of ``derive --verify`` for each gallery derivation that has equalities
to check, in process, the rules and the prelude loaded once beforehand.

    .venv/bin/python benchmarks/bench_doubling.py
"""
from __future__ import annotations

import sys
import tempfile
import time
from pathlib import Path

from stringdiag.derive.derivation import load_derivation

ROOT = Path(__file__).resolve().parents[1]
RULE = "rule idem(x: []) -> [] {\n  return relu(x)\n} == {\n  return relu(relu(x))\n}\n"
START = "dim d : fixed\ndiagram M(x: [d]) -> [d] {\n  y[i] = relu(x[i])\n  return y\n}\n"


def doubling(steps: int) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        (Path(tmp) / "idem.rules").write_text(RULE)
        (Path(tmp) / "m.diag").write_text(START)
        d = Path(tmp) / "d.deriv"
        d.write_text('use "idem.rules"\nstart m.diag:M\n' + "apply idem everywhere\n" * steps)
        t = time.process_time()
        last = [t]
        marks = []

        def log(_line: str) -> None:
            now = time.process_time()
            marks.append(now - last[0])
            last[0] = now

        load_derivation(d, log=log)
    print(f"{'step':>4} {'boxes':>7} {'CPU s':>7} {'us/box':>7}")
    for k, dt in enumerate(marks, 1):
        print(f"{k:>4} {2 ** k:>7} {dt:>7.3f} {dt / 2 ** k * 1e6:>7.1f}")


def verify() -> None:
    load_derivation(ROOT / "gallery" / "sumformer.deriv", verify=True)  # torch, the library: once
    print(f"\n{'derivation':<40} {'CPU s':>7}")
    for path in sorted((ROOT / "gallery").glob("*.deriv")):
        t = time.process_time()
        deriv = load_derivation(path, verify=True)
        if any(s.verified is not None for s in deriv.steps):
            print(f"{path.name:<40} {time.process_time() - t:>7.2f}")


if __name__ == "__main__":
    doubling(int(sys.argv[1]) if len(sys.argv) > 1 else 13)
    verify()
