"""Benchmark: start-up of commands that evaluate nothing, as a ratio to a bare ``python -c pass``.

Each command is a fresh process (the interpreter that runs this file, ``-m stringdiag.cli.main``),
timed by its CPU time (user + system, from ``os.wait4``: wall time on a shared machine measures
the neighbours; ``render``'s includes Graphviz's ``dot``, which it runs and waits for). The reference ``python -c pass`` runs in the same rounds, interleaved with the
commands; each figure is the median over the rounds, and each ratio the median of the per-round
ratios. The caches (the prelude's and the rule library's syntax trees) are warmed first: one round with
``--cold`` empties a private cache directory before every command instead. ``--old TREE`` runs every
command from another checkout too (a ``git archive`` copy, with its own cache), the two alternating
in each round, and adds the median of the per-round ratios new / old (under 1: this checkout is faster).

    .venv/bin/python benchmarks/bench_startup.py [--rounds 9] [--cold] [--old ../base]
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


def cpu_seconds(args: list[str], env: dict, root: Path = ROOT) -> float:
    """User + system CPU time of one run of the interpreter with ``args``, in checkout ``root``."""
    proc = subprocess.Popen([sys.executable, *args], cwd=root, env=env, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    _, _, usage = os.wait4(proc.pid, 0)
    proc.returncode = 0  # reaped above
    return usage.ru_utime + usage.ru_stime


def environment(root: Path, cache: Path) -> dict:
    """The environment a checkout's commands run in: its own package and cache; bytecode written by
    the warm-up round, as an installed wheel has it compiled (a PYTHONDONTWRITEBYTECODE shell would
    otherwise charge recently edited modules their compilation)."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    return env | {"XDG_CACHE_HOME": str(cache), "PYTHONPATH": str(root)}


def measure(trees: dict[str, Path], rounds: int, cold: bool) -> dict:
    """CPU seconds and ratios to ``python -c pass`` of every command, by tree and command: each round
    runs every command, the trees alternating (the first tree first in even rounds)."""
    scratch = Path(tempfile.mkdtemp(prefix="stringdiag-bench-"))
    caches = {tree: scratch / f"cache-{i}" for i, tree in enumerate(trees)}
    envs = {tree: environment(root, caches[tree]) for tree, root in trees.items()}
    commands = {name: [a.replace("{scratch}", str(scratch)) for a in args] for name, args in COMMANDS.items()}
    for tree, root in trees.items():  # warm the caches (and the OS's file cache)
        for args in commands.values():
            cpu_seconds(args, envs[tree], root)
    times = {tree: {name: [] for name in COMMANDS} for tree in trees}
    ratios = {tree: {name: [] for name in COMMANDS} for tree in trees}
    for r in range(rounds):
        order = list(trees) if r % 2 == 0 else list(trees)[::-1]
        for name, args in commands.items():  # interleaved: the reference in every round
            for tree in order:
                if cold:
                    shutil.rmtree(caches[tree] / "stringdiag", ignore_errors=True)
                times[tree][name].append(cpu_seconds(args, envs[tree], trees[tree]))
        for tree in trees:
            base = times[tree]["python -c pass"][-1]
            for name in COMMANDS:
                ratios[tree][name].append(times[tree][name][-1] / base)
    shutil.rmtree(scratch, ignore_errors=True)
    return {"times": times, "ratios": ratios}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=9)
    ap.add_argument("--cold", action="store_true", help="empty the cache before every command")
    ap.add_argument("--old", type=Path, help="another checkout to run alternately (e.g. a git archive copy)")
    opts = ap.parse_args()
    trees = {"new": ROOT} | ({"old": opts.old.resolve()} if opts.old else {})
    got = measure(trees, opts.rounds, opts.cold)
    med = statistics.median
    if not opts.old:
        print(f"{'command':<44}{'cpu ms (median)':>16}{'x python -c pass':>18}")
        for name in COMMANDS:
            print(f"{name:<44}{med(got['times']['new'][name]) * 1e3:>16.0f}{med(got['ratios']['new'][name]):>18.1f}")
    else:
        print(f"{'command':<44}{'old ms':>8}{'x pass':>8}{'new ms':>8}{'x pass':>8}{'new/old':>9}")
        for name in COMMANDS:
            old, new = got["times"]["old"][name], got["times"]["new"][name]
            print(f"{name:<44}{med(old) * 1e3:>8.1f}{med(got['ratios']['old'][name]):>8.2f}{med(new) * 1e3:>8.1f}"
                  f"{med(got['ratios']['new'][name]):>8.2f}{med(b / a for a, b in zip(old, new)):>9.3f}")
    print(f"({opts.rounds} rounds, {'cold' if opts.cold else 'warm'} caches, {sys.executable}"
          f"{f'; old: {opts.old}' if opts.old else ''})")


if __name__ == "__main__":
    main()
