"""Benchmark: what ``derive --verify`` and ``derive -o x.svg`` cost over ``derive`` alone, as a
user runs them: each command a fresh process, timed by its CPU time (user + system of the child,
``resource.getrusage``), the three interleaved in rounds (each first in turn), the median of the
rounds' ratios. The derivation's start-up (Python, the grammar, the prelude) is in every figure;
importing torch, which only ``--verify`` does, is in that one.

    .venv/bin/python benchmarks/bench_verify.py [--rounds 5] [gallery/sumformer_thm45_performer.deriv ...]
"""
from __future__ import annotations

import argparse
import resource
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import cpu_clock as C  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
CLI = [str(Path(sys.executable).with_name("stringdiag"))]  # the installed command, as a user runs it
DEFAULT = ["gallery/sumformer_thm45_performer.deriv", "gallery/bahdanau_to_vaswani.deriv"]


def child_cpu(args: list[str]) -> float:
    """CPU seconds (user + system) of one command run to its end; a failure stops the benchmark."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    subprocess.run(args, cwd=ROOT, check=True, stdout=subprocess.DEVNULL)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def measure(deriv: str, rounds: int) -> dict[str, list[float]]:
    with tempfile.TemporaryDirectory() as tmp:
        ways = {"derive": [*CLI, "derive", deriv], "verify": [*CLI, "derive", deriv, "--verify"],
                "draw": [*CLI, "derive", deriv, "-o", str(Path(tmp) / "x.svg")]}
        got: dict[str, list[float]] = {name: [] for name in ways}
        names = list(ways)
        for r in range(rounds):
            for name in names[r % 3:] + names[:r % 3]:
                got[name].append(child_cpu(ways[name]))
    return got


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("derivations", nargs="*", default=DEFAULT)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--no-header", action="store_true")
    a = ap.parse_args(argv)
    if not a.no_header:
        C.header()
    for deriv in a.derivations:
        got = measure(deriv, a.rounds)
        base = statistics.median(got["derive"])
        for name, goal, bound in (("verify", "<= 2", 2.0), ("draw", "<= 1.5", 1.5)):
            ratio = statistics.median(x / y for x, y in zip(got[name], got["derive"]))
            what = f"`derive --verify` of {Path(deriv).name}" if name == "verify" else \
                f"drawing {Path(deriv).name} (`derive -o x.svg`)"
            C.row(what, f"`derive` ({base:.2f} s CPU)",
                  f"{ratio:.2f} ({statistics.median(got[name]):.2f} s CPU)", goal, ratio <= bound)


if __name__ == "__main__":
    main()
