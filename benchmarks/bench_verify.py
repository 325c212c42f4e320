"""Benchmark: what ``derive --verify`` and ``derive -o x.svg`` cost over ``derive`` alone, as a
user runs them: each command a fresh process, timed by its CPU time (user + system of the child,
``resource.getrusage``), the three interleaved in rounds (each first in turn), the median of the
rounds' ratios. The derivation's start-up (Python, the grammar, the prelude) is in every figure;
importing torch, which only ``--verify`` does, is in that one.

    .venv/bin/python benchmarks/bench_verify.py [--rounds 5] [gallery/sumformer_thm45_performer.deriv ...]

``--before DIR`` (a folder holding an older tree's ``stringdiag/``, ``rules/`` and ``grammars/``:
``git archive REV stringdiag rules grammars | tar -x -C DIR``) times the drawing command of that
code against this tree's, both as ``python -m stringdiag``, interleaved, after one untimed run of
each (their caches warmed).

``--in-process`` adds, first, what importing torch alone costs (a fresh process, less an empty
one) and ``derive --verify`` against ``derive`` within one process after every import and one
untimed run of each: the verification's own work against the derivation's.
"""
from __future__ import annotations

import argparse
import os
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


def child_cpu(args: list[str], env: dict | None = None, cwd: Path = ROOT) -> float:
    """CPU seconds (user + system) of one command run to its end; a failure stops the benchmark."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    subprocess.run(args, cwd=cwd, check=True, stdout=subprocess.DEVNULL, env=env)
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


def torch_import(rounds: int) -> float:
    """Median CPU seconds of importing torch in a fresh process, less those of an empty one."""
    got = []
    for _ in range(rounds):
        got.append(child_cpu([sys.executable, "-c", "import torch"]) - child_cpu([sys.executable, "-c", "pass"]))
    return statistics.median(got)


def in_process(deriv: str, rounds: int) -> None:
    """``derive --verify`` against ``derive`` in this process, after every import (torch, the oracle)
    and one untimed run of each: the verification's own work against the derivation's."""
    import torch

    from stringdiag.derive.derivation import load_derivation
    import stringdiag.verify.oracle  # noqa: F401  (torch's import is not the verification's work)

    torch.set_num_threads(1)
    p = C.pair(lambda: load_derivation(deriv, verify=True), lambda: load_derivation(deriv), rounds)
    C.row(f"`derive --verify` of {Path(deriv).name}, in-process (imports done)",
          f"`derive`'s work ({p.ref:.2f} s CPU)",
          f"{p.ratio:.2f} ({p.mine:.2f} s CPU: verification {p.mine - p.ref:.2f} s)", "-", None)


def before_after(deriv: str, before: str, rounds: int) -> None:
    """The drawing command of the code in ``before`` against this tree's, by child CPU time."""
    with tempfile.TemporaryDirectory() as tmp:
        trees = {"after": str(ROOT), "before": str(Path(before).resolve())}
        env = {name: {**os.environ, "PYTHONPATH": path} for name, path in trees.items()}
        cmd = {name: [sys.executable, "-m", "stringdiag", "derive", str(ROOT / deriv), "-o", f"{name}.svg"]
               for name in trees}  # run in the scratch folder: the checkout is not first on the path
        for name in trees:  # caches warmed
            child_cpu(cmd[name], env[name], Path(tmp))
        got: dict[str, list[float]] = {name: [] for name in trees}
        for r in range(rounds):
            for name in (("after", "before") if r % 2 == 0 else ("before", "after")):
                got[name].append(child_cpu(cmd[name], env[name], Path(tmp)))
                print(f"  round {r + 1}: {name} {got[name][-1]:.2f} s CPU", flush=True)
    ratio = statistics.median(a / b for a, b in zip(got["after"], got["before"]))
    C.row(f"drawing {Path(deriv).name} (`derive -o x.svg`), this code", f"the code in {before}",
          f"{ratio:.2f} ({statistics.median(got['after']):.2f} vs {statistics.median(got['before']):.2f} s CPU)",
          "-", None)


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("derivations", nargs="*", default=DEFAULT)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--no-header", action="store_true")
    ap.add_argument("--before", metavar="DIR", help="time the drawing of an older tree's code against this one")
    ap.add_argument("--in-process", action="store_true",
                    help="also derive --verify against derive in one process, imports done, and torch's import")
    a = ap.parse_args(argv)
    if not a.no_header:
        C.header()
    if a.in_process:
        C.row("importing torch alone (a fresh process, less an empty one)", "-",
              f"{torch_import(a.rounds):.2f} s CPU (median of {a.rounds})", "-", None)
        for deriv in a.derivations:
            in_process(deriv, a.rounds)
    if a.before:
        for deriv in a.derivations:
            before_after(deriv, a.before, a.rounds)
        return
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
