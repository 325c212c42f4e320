"""Masked attention (4.2), which Alcalde, Fantuzzi and Zuazua (2025) pose as an open question in their
conclusion: how do the exact classifiers of Theorem 2.4 (built by `stringdiag construct` for unmasked
hardmax) fare when every block's attention is masked, token i seeing z_1 .. z_i only?
(gallery/hardmax.diag's MaskedScalarHardmaxBlock, the same weights, the tokens in the order given.)

This measures how far the unmasked construction carries over; it does not build a masked one.
Instances as in benchmarks/hardmax_temperature.py: the docs' example, and N = 5, 10, 20 in R^2 from
a small integer grid, ten seeds each; every sequence in its given order and, with --orders K, in K
random orders (the masked model sees order; the unmasked one does not).

    .venv/bin/python benchmarks/hardmax_masked.py [--out gallery/study/hardmax-masked]

writes results.csv (instance, n, seed, order, classified, sequences, collapsed) and prints a summary.
"""
from __future__ import annotations

import argparse
import csv
from pathlib import Path

import numpy as np
import torch

from stringdiag.construct import hardmax_classifier
from stringdiag.construct.artefacts import GALLERY, NAME, READOUT, source, weights
from stringdiag.construct.instance import grid_instance
from stringdiag.elaborate.loader import loads
from stringdiag.lower import compile as lower

ROOT = Path(__file__).resolve().parents[1]
EXAMPLE = ([[[0.0, 1.0], [2.0, 0.5]], [[1.0, 1.0]], [[1.0, 1.0], [0.0, 2.0], [3.0, 1.0]]], ["pos", "neg", "pos"])


def masked_module(con, upto: int | None = None):
    """The constructed chain (its first ``upto`` blocks) with MaskedScalarHardmaxBlock in place of
    ScalarHardmaxBlock, without the readout when ``upto`` is given."""
    blocks = list(con.blocks)[:upto]
    text = source(blocks, con.n, con.instance.d).replace("ScalarHardmaxBlock(", "MaskedScalarHardmaxBlock(")
    if upto is not None:
        text = text.replace(f"  y = {READOUT}(z{len(blocks)})", f"  y = z{len(blocks)}").replace("-> [d] {", "-> [s, d] {")
    prog = loads(text, str(GALLERY.with_name("<constructed>.diag")))
    module = lower(prog[NAME], dims={"d": con.instance.d, "m": 1}, approximator="linear", dtype=torch.float64)
    module.load_state_dict(weights(blocks), strict=True)
    return module


def measure(con, name: str, seed: int, orders: int) -> list[dict]:
    """Per order: sequences in their targets, and sequences collapsed onto one point by the clustering
    block (as unmasked they all are)."""
    full, upto = masked_module(con), 1 + max(k for k, b in enumerate(con.blocks) if b.stage == "clustering")
    tokens = masked_module(con, upto)
    rng, rows = np.random.default_rng(seed), []
    for order in range(orders + 1):
        seqs = [z if order == 0 else z[rng.permutation(len(z))] for z in con.instance.sequences]
        with torch.no_grad():
            out = [full(torch.as_tensor(z)).numpy() for z in seqs]
            mid = [tokens(torch.as_tensor(z)).numpy() for z in seqs]
        hit = sum(con.instance.targets[c].holds(y) for y, c in zip(out, con.instance.labels))
        collapsed = sum(bool(np.abs(m - m[0]).max() <= 1e-9 * max(1.0, np.abs(m).max())) for m in mid)
        rows.append({"instance": name, "n": con.n, "seed": seed, "order": order, "classified": hit,
                     "sequences": con.n, "collapsed": collapsed})
    return rows


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", default=str(ROOT / "gallery" / "study" / "hardmax-masked"))
    ap.add_argument("--orders", type=int, default=3, help="random token orders per instance, besides the given one")
    args = ap.parse_args(argv)
    torch.set_num_threads(1)
    rows = measure(hardmax_classifier(*EXAMPLE), "example", 0, args.orders)
    for n in (5, 10, 20):
        for seed in range(10):
            seqs, labels = grid_instance(np.random.default_rng(1000 * n + seed), n, 2)
            rows += measure(hardmax_classifier(seqs, labels), "random", seed, args.orders)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    with open(out / "results.csv", "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)
    for n in sorted({r["n"] for r in rows}):
        sel = [r for r in rows if r["n"] == n]
        whole = sum(r["classified"] == r["sequences"] for r in sel)
        print(f"N = {n:>2}: {len(sel)} runs; every sequence in its target in {whole}; sequences in their target "
              f"{sum(r['classified'] for r in sel)} of {sum(r['sequences'] for r in sel)}; collapsed by the "
              f"clustering block {sum(r['collapsed'] for r in sel)} of {sum(r['sequences'] for r in sel)}")


if __name__ == "__main__":
    main()
