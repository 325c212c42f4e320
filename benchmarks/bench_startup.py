"""Benchmark: start-up of commands that evaluate nothing, as a ratio to a bare ``python -c pass``.

Each command is a fresh process (the interpreter that runs this file, ``-m stringdiag.cli.main``),
timed by its CPU time (user + system, from ``os.wait4``: wall time on a shared machine measures
the neighbours; ``render``'s includes Graphviz's ``dot``, which it runs and waits for). The reference ``python -c pass`` runs in the same rounds, interleaved with the
commands; each figure is the median over the rounds, and each ratio the median of the per-round
ratios. The caches (the prelude's and the rule library's syntax trees) are warmed first: one round with
``--cold`` empties a private cache directory before every command instead.

    .venv/bin/python benchmarks/bench_startup.py [--rounds 9] [--cold]
"""
from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
COMMANDS = {
    "python -c pass": ["-c", "pass"],
    "stringdiag --version": ["-m", "stringdiag.cli.main", "--version"],
    "stringdiag check --frob (usage error)": ["-m", "stringdiag.cli.main", "check", "--frob", "x.diag"],
    "stringdiag derive attention.diag (kind)": ["-m", "stringdiag.cli.main", "derive", "gallery/attention.diag"],
    "stringdiag check gallery/attention.diag": ["-m", "stringdiag.cli.main", "check", "gallery/attention.diag"],
    "stringdiag info -d SelfAttention": ["-m", "stringdiag.cli.main", "info", "gallery/attention.diag",
                                         "-d", "SelfAttention"],
    "stringdiag derive gallery/linearize.deriv": ["-m", "stringdiag.cli.main", "derive", "gallery/linearize.deriv"],
    "stringdiag render -d SelfAttention -o X.svg": ["-m", "stringdiag.cli.main", "render", "gallery/attention.diag",
                                                   "-d", "SelfAttention", "-o", "{scratch}/attention.svg"],
}


def cpu_seconds(args: list[str], env: dict) -> float:
    """User + system CPU time of one run of the interpreter with ``args``."""
    proc = subprocess.Popen([sys.executable, *args], cwd=ROOT, env=env, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    _, _, usage = os.wait4(proc.pid, 0)
    proc.returncode = 0  # reaped above
    return usage.ru_utime + usage.ru_stime


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=9)
    ap.add_argument("--cold", action="store_true", help="empty the cache before every command")
    opts = ap.parse_args()
    cache = Path(tempfile.mkdtemp(prefix="stringdiag-bench-"))
    # bytecode written by the warm-up round, as an installed wheel has it compiled (a
    # PYTHONDONTWRITEBYTECODE shell would otherwise charge recently edited modules their compilation)
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    env |= {"XDG_CACHE_HOME": str(cache), "PYTHONPATH": str(ROOT)}
    commands = {name: [a.replace("{scratch}", str(cache)) for a in args] for name, args in COMMANDS.items()}
    for args in commands.values():  # warm the caches (and the OS's file cache)
        cpu_seconds(args, env)
    times: dict[str, list[float]] = {name: [] for name in COMMANDS}
    ratios: dict[str, list[float]] = {name: [] for name in COMMANDS}
    for _ in range(opts.rounds):
        base = None
        for name, args in commands.items():  # interleaved: the reference in every round
            if opts.cold:
                shutil.rmtree(cache / "stringdiag", ignore_errors=True)
            t = cpu_seconds(args, env)
            base = t if base is None else base
            times[name].append(t)
            ratios[name].append(t / base)
    shutil.rmtree(cache, ignore_errors=True)
    print(f"{'command':<44}{'cpu ms (median)':>16}{'x python -c pass':>18}")
    for name in COMMANDS:
        print(f"{name:<44}{statistics.median(times[name]) * 1e3:>16.0f}{statistics.median(ratios[name]):>18.1f}")
    print(f"({opts.rounds} rounds, {'cold' if opts.cold else 'warm'} caches, {sys.executable})")


if __name__ == "__main__":
    main()
