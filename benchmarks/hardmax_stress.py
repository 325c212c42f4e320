"""How often the hardmax construction's generic choices fail (Alcalde, Fantuzzi and Zuazua (2025),
Theorem 2.4, as `stringdiag construct hardmax-classifier` builds it): random instances from the grid
generator of the tests (tokens shared between sequences), N from 1 to 20, d = 2 or 3, each built with
the first seed alone (choose_blocks) and, when that fails, as the command builds it (up to 8 seeds).
Only the NumPy construction runs (no compile), so a few minutes for 300 instances.

    .venv/bin/python benchmarks/hardmax_stress.py [--instances 300] [--repeats]

--repeats adds a repeated token to every other sequence (Remark 2.6's weighted reading).
Prints each failure of the first seed (instance, N, d, the message) and the totals.
"""
from __future__ import annotations

import argparse
from collections import Counter

import numpy as np

from stringdiag.construct import make_instance
from stringdiag.construct.hardmax import _generic_blocks, choose_blocks
from stringdiag.construct.instance import grid_instance
from stringdiag.errors import DiagError


def draw(k: int, repeats: bool):
    rng = np.random.default_rng(k)
    n, d = int(rng.integers(1, 21)), int(rng.integers(2, 4))
    seqs, labels = grid_instance(rng, n, d)
    if repeats:
        seqs = [np.vstack([z, z[:1]]) if j % 2 else z for j, z in enumerate(seqs)]
    return n, d, seqs, labels


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--instances", type=int, default=300)
    ap.add_argument("--repeats", action="store_true")
    args = ap.parse_args(argv)
    first, final, refused = Counter(), 0, 0
    for k in range(args.instances):
        if k and k % 100 == 0:
            print(f"{k} instances: the first seed failed on {sum(first.values())}, the command on {final}", flush=True)
        n, d, seqs, labels = draw(k, args.repeats)
        try:
            inst = make_instance(seqs, labels)
        except DiagError:
            refused += 1  # e.g. two sequences equal as tokens with shares
            continue
        try:
            choose_blocks(inst, 0)
        except DiagError as e:
            first[e.message] += 1
            print(f"instance {k}: N = {n}, d = {d}: first seed: {e.message}", flush=True)
            try:
                _generic_blocks(inst, 0)
            except DiagError as e2:
                final += 1
                print(f"instance {k}: every seed failed: {e2.message}", flush=True)
    built = args.instances - refused
    print(f"{built} instances built ({refused} refused as inputs); the first seed failed on "
          f"{sum(first.values())} ({dict(first)}); the command (8 seeds) failed on {final}")


if __name__ == "__main__":
    main()
