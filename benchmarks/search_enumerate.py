"""Would the search's hash-consing speed up the enumerator's reduction? Counted and timed.

``derive --find`` keeps one state per diagram up to isomorphism (the canonical hash). The
enumerator reduces by rewriting every ordered wiring of its surviving members; this script
builds each of those wirings for gallery/anatomy.diag's five generators under the
best-supported reading (``bench_enumerate.py``'s ``BEST``, rules/absorb.rules and
rules/merge.rules) and counts how many distinct canonical hashes they have — the work a
hash-cons could save — beside the CPU time of hashing them and of the whole pipeline (median of
interleaved repeats, 1 torch thread).

    python benchmarks/search_enumerate.py [--repeats 3] [--write benchmarks/search_enumerate.md]
"""
from __future__ import annotations

import argparse
import statistics
import time
from pathlib import Path

import stringdiag
from stringdiag.enumerate.build import build
from stringdiag.enumerate.reading import Reading
from stringdiag.enumerate.space import generators, wirings
from stringdiag.enumerate.stages import enumerate_space
from stringdiag.graph.iso import canonical_hash
from stringdiag.rewrite.rule import load_rules

from bench_enumerate import BEST, NAMES, ROOT


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--write", default=None, help="also write the table to this Markdown file")
    args = ap.parse_args()
    import torch

    torch.set_num_threads(1)
    prog = stringdiag.load(ROOT / "gallery" / "anatomy.diag")
    defns = [prog[n] for n in NAMES]
    rules = load_rules(ROOT / "rules" / "absorb.rules") + load_rules(ROOT / "rules" / "merge.rules")
    gens, stream = generators(defns)
    lines = ["| --max | ordered wirings | distinct canonical hashes | hashing CPU s | whole pipeline CPU s |",
             "|---|---|---|---|---|"]
    for bound in (4, 5):
        reading = Reading(bound, **BEST)
        ordered = list(wirings(gens, stream, reading.max, reading.copy, reading.once))
        hashing, whole, distinct = [], [], 0
        for _ in range(args.repeats):  # interleaved: the two costs measured in the same rounds
            t = time.process_time()
            distinct = len({canonical_hash(build(w, gens, "w")) for w in ordered})
            hashing.append(time.process_time() - t)
            t = time.process_time()
            enumerate_space(defns, reading, rules)
            whole.append(time.process_time() - t)
        lines.append(f"| {bound} | {len(ordered)} | {distinct} | {statistics.median(hashing):.2f} | "
                     f"{statistics.median(whole):.2f} |")
    text = "\n".join(lines) + "\n"
    print(text)
    if args.write:
        Path(args.write).write_text(text)


if __name__ == "__main__":
    main()
