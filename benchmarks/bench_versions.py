"""Benchmark: the same workloads on two checkouts of stringdiag, interleaved, as ratios.

On a shared machine absolute times drift with the load; a ratio of medians measured in
the same run, alternating old and new, does not (much), and the time counted is the
process's own CPU time (``time.process_time``), not the wall clock, so waiting for a
core another job holds is not counted. Each sample is a fresh
subprocess with ``PYTHONPATH`` set to one checkout (so it imports that copy of the
package) and one torch thread; it builds its inputs untimed, runs the workload a few
times and reports the fastest. Rounds alternate old, new, new, old, ... so that a drift
in load falls on both alike. Reported: the median of the rounds for each side and their
ratio new / old (under 1: the new code is faster).

    .venv/bin/python benchmarks/bench_versions.py --old ../base [--new .] [--rounds 5] [--tasks iso rewrite]
    .venv/bin/python benchmarks/bench_versions.py --old ../base --calls   # function calls, not seconds
"""
from __future__ import annotations

import argparse
import gc
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))


def _encoder(layers: int, name: str, **options):
    import stringdiag
    from transformer_source import transformer_source

    return stringdiag.loads(transformer_source(layers, **options), name)


def _best(f, inner: int, fresh=None) -> float:
    """The fastest of ``inner`` runs of ``f``, in CPU seconds; with ``--calls``, the number of
    Python function calls of one run instead (cProfile's count: the same however loaded the
    machine is). ``fresh``, when given, makes ``f``'s argument anew for each run, untimed."""
    if os.environ.get("BENCH_CALLS"):
        import cProfile
        import pstats

        profile = cProfile.Profile()
        profile.runcall(f, *(() if fresh is None else (fresh(),)))
        return pstats.Stats(profile).total_calls
    times = []
    for _ in range(inner):
        args = () if fresh is None else (fresh(),)
        gc.collect()
        t0 = time.process_time()
        f(*args)
        times.append(time.process_time() - t0)
    return min(times)


def task_iso(inner: int) -> dict:
    from stringdiag.graph import iso

    a = _encoder(24, "a.diag")["Encoder"].expand()
    b = _encoder(24, "b.diag")["Encoder"].expand()
    first = _best(lambda: iso.isomorphic(a, b), 1)  # nothing about a or b known yet
    return {"isomorphic 24 layers, first call": first,
            "isomorphic 24 layers": _best(lambda: iso.isomorphic(a, b), inner),
            "canonical_hash 24 layers": _best(lambda: iso.canonical_hash(a), inner)}


def task_rewrite(inner: int) -> dict:
    sys.path.insert(0, str(HERE))
    from bench_rewrite import model
    from stringdiag.rewrite import find_matches, library, rewrite_all

    rule, flat = library()["assoc"], model(24)
    out, n = rewrite_all(flat, rule)
    assert n == 8 * 24, n
    return {"find_matches 24 layers": _best(lambda: find_matches(flat, rule), inner),
            "rewrite_all 24 layers": _best(lambda: rewrite_all(flat, rule), inner)}


def task_check(inner: int) -> dict:
    import stringdiag
    from transformer_source import transformer_source

    stringdiag.loads("dim s : seq\n")
    defs, rep = transformer_source(24), transformer_source(24, repeat=True)
    return {"check+expand 24 layers (definitions)":
            _best(lambda: stringdiag.loads(defs, "e.diag")["Encoder"].expand(), inner),
            "check+expand 24 layers (repeat, unrolled)":
            _best(lambda: stringdiag.loads(rep, "e.diag")["Encoder"].expand(unroll={}), inner)}


def task_info(inner: int) -> dict:
    from stringdiag.cli.summary import summarize

    fresh = lambda: _encoder(24, "e.diag")["Encoder"]  # noqa: E731 (nothing cached from the last run)
    return {"summarize (info) 24 layers": _best(summarize, inner, fresh)}


TASKS = {"iso": task_iso, "rewrite": task_rewrite, "check": task_check, "info": task_info}


def sample(root: Path, task: str, inner: int, calls: bool = False) -> dict:
    env = dict(os.environ, PYTHONPATH=str(root), OMP_NUM_THREADS="1", MKL_NUM_THREADS="1",
               BENCH_CALLS="1" if calls else "")
    out = subprocess.run([sys.executable, __file__, "--child", task, "--inner", str(inner)],
                         env=env, capture_output=True, text=True, check=False)
    if out.returncode != 0:
        sys.exit(f"error: {task} under {root} failed:\n{out.stderr[-2000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def child(task: str, inner: int) -> None:
    import torch

    torch.set_num_threads(1)
    import stringdiag

    assert Path(stringdiag.__file__).resolve().is_relative_to(Path(os.environ["PYTHONPATH"]).resolve())
    print(json.dumps(TASKS[task](inner)))


def _spread(ts: list) -> float:
    """How far apart a side's rounds are, relative to their median: the noise to read a ratio against."""
    return (max(ts) - min(ts)) / statistics.median(ts)


def count_calls(args) -> None:
    for task in args.tasks:
        old, new = sample(args.old, task, 1, calls=True), sample(args.new, task, 1, calls=True)
        for key in old:
            print(f"{key:<44} old {old[key]:>9,} calls  new {new[key]:>9,} calls  new/old {new[key] / old[key]:5.3f}x")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--old", type=Path)
    ap.add_argument("--new", type=Path, default=HERE.parent)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--inner", type=int, default=3)
    ap.add_argument("--tasks", nargs="+", choices=sorted(TASKS), default=sorted(TASKS))
    ap.add_argument("--calls", action="store_true", help="count Python function calls (one round) instead of timing")
    ap.add_argument("--child", choices=sorted(TASKS))
    args = ap.parse_args()
    if args.child:
        return child(args.child, args.inner)
    if args.old is None:
        ap.error("--old is required")
    if args.calls:
        return count_calls(args)
    for task in args.tasks:
        runs: dict[str, dict[str, list]] = {"old": {}, "new": {}}
        for r in range(args.rounds):
            order = ("old", "new") if r % 2 == 0 else ("new", "old")
            for side in order:
                for key, t in sample(args.old if side == "old" else args.new, task, args.inner).items():
                    runs[side].setdefault(key, []).append(t)
        for key in runs["old"]:
            old, new = statistics.median(runs["old"][key]), statistics.median(runs["new"][key])
            spread = max(_spread(runs["old"][key]), _spread(runs["new"][key]))
            print(f"{key:<44} old {old:8.3f} s  new {new:8.3f} s  new/old {new / old:5.2f}x  "
                  f"(spread of the rounds {spread:.0%})", flush=True)


if __name__ == "__main__":
    main()
