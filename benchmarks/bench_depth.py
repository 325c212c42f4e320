"""Benchmark: ``check`` (and ``info``) against the depth of nested definitions.

Two families of source:

- the doubling chain: ``D1`` uses ``D2`` twice, ``D2`` uses ``D3`` twice, ... down to ``Dn``,
  which holds one learnable box (its expansion has ``2^(n-1)`` boxes);
- an N-layer encoder written as separate lines (``benchmarks/transformer_source.py``,
  ``flat=True``: every layer's boxes in one diagram).

Each command's work is timed in-process, as the CLI does it on a freshly parsed program: parse
and elaborate, then ``check``'s compilability report (``cli/check.py: report_obstacles``) or
``info``'s summaries (``cli/summary.py``) of every diagram of the file. ``check`` and ``info``
run interleaved on the same sources; the median of the repeats is reported, with the time per
level (``ms/level``: near-constant means linear growth) and ``check / info``.

    .venv/bin/python benchmarks/bench_depth.py            # depths 4 .. 64, encoders of 24 .. 192 layers
    .venv/bin/python benchmarks/bench_depth.py --quick    # fewer sizes
"""
from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import stringdiag  # noqa: E402
from stringdiag.cli.check import report_obstacles  # noqa: E402
from stringdiag.cli.summary import summarize  # noqa: E402
from transformer_source import transformer_source  # noqa: E402


def doubling(depth: int) -> str:
    """``D1`` .. ``Dn``, each using the next twice; ``Dn`` holds one learnable box."""
    lines = ["dim d : fixed", f"diagram D{depth}(x: [d]) -> [d] {{", "  learn F : [d] -> [d]", "  return F(x)", "}"]
    for k in range(depth - 1, 0, -1):
        lines.append(f"diagram D{k}(x: [d]) -> [d] {{ return D{k + 1}(x) + D{k + 1}(x) }}")
    return "\n".join(lines) + "\n"


def check(text: str) -> None:
    prog = stringdiag.loads(text, "bench.diag")
    report_obstacles(prog, lambda error, severity: None)


def info(text: str) -> None:
    prog = stringdiag.loads(text, "bench.diag")
    for name in prog.own:
        summarize(prog[name])


def timed(fn, text: str) -> float:
    t0 = time.perf_counter()
    fn(text)
    return time.perf_counter() - t0


def table(title: str, unit: str, cases: list[tuple[int, str]], repeats: int) -> None:
    print(f"\n{title}")
    print(f"{unit:>8}{'check s':>10}{'ms/level':>10}{'info s':>10}{'ms/level':>10}{'check/info':>12}")
    for n, text in cases:
        runs: dict = {check: [], info: []}
        for _ in range(repeats):
            for fn in (check, info):  # interleaved: the machine's load falls on both alike
                runs[fn].append(timed(fn, text))
        c, i = statistics.median(runs[check]), statistics.median(runs[info])
        print(f"{n:>8}{c:>10.3f}{1000 * c / n:>10.2f}{i:>10.3f}{1000 * i / n:>10.2f}{c / i:>12.2f}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="fewer sizes")
    quick = ap.parse_args().quick
    stringdiag.loads("dim s : seq\n")  # the prelude and grammar loaded outside the timings
    depths = (4, 16, 64) if quick else (4, 8, 16, 32, 64)
    layers = (24, 96) if quick else (24, 48, 96, 192)
    repeats = 3
    table("doubling chain (D_k uses D_k+1 twice; 2^(depth-1) boxes expanded)", "depth",
          [(n, doubling(n)) for n in depths], repeats)
    table("encoder written as separate lines (transformer_source flat=True, 8 heads)", "layers",
          [(n, transformer_source(n, flat=True)) for n in layers], repeats)


if __name__ == "__main__":
    main()
