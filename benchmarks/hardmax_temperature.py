"""Remark 2.3 of Alcalde, Fantuzzi and Zuazua (2025): softmax attention at a small temperature behaves
like hardmax. The exact classifiers of Theorem 2.4 (built by `stringdiag construct`) are compiled again
with every block's hardmax replaced by softmax(e / tau) (gallery/hardmax.diag's ScalarSoftmaxBlock,
the same weights) and run on the sequences they were built for, for tau from 10 down to 1e-8.

Instances: the three sequences of docs/theorems.md, and random ones as tests/test_construct_hardmax.py
draws them (tokens from a small integer grid, so sequences share tokens; 3 labels), N = 5, 10 and 20 in
R^2, ten seeds each. For each instance and tau: how many sequences land in their target ball, and the
largest distance between a softmax readout and the hardmax one.

    .venv/bin/python benchmarks/hardmax_temperature.py [--out gallery/study/hardmax-temperature]

writes results.csv (instance, n, seed, tau, classified, sequences, largest distance) and temperature.png.
"""
from __future__ import annotations

import argparse
import csv
from pathlib import Path

import numpy as np
import torch

from stringdiag.construct.instance import grid_instance
from stringdiag.construct import hardmax_classifier, make_instance
from stringdiag.construct.artefacts import GALLERY, NAME, source, weights
from stringdiag.elaborate.loader import loads
from stringdiag.lower import compile as lower

ROOT = Path(__file__).resolve().parents[1]
TAUS = [10.0, 1.0, 0.3, 0.1, 0.03, 0.01, 1e-3, 1e-4, 1e-6, 1e-8]
EXAMPLE = ([[[0.0, 1.0], [2.0, 0.5]], [[1.0, 1.0]], [[1.0, 1.0], [0.0, 2.0], [3.0, 1.0]]], ["pos", "neg", "pos"])


instance = grid_instance  # the random instances: token sets from a small grid pool


def softmax_module(con):
    """The constructed chain with ScalarSoftmaxBlock in place of ScalarHardmaxBlock, hardmax's weights."""
    text = source(list(con.blocks), con.n, con.instance.d).replace("ScalarHardmaxBlock(", "ScalarSoftmaxBlock(")
    prog = loads(text, str(GALLERY.with_name("<constructed>.diag")))
    module = lower(prog[NAME], dims={"d": con.instance.d, "m": 1}, approximator="linear", dtype=torch.float64)
    state = weights(list(con.blocks))
    state |= {f"z{k}.tau.weight": torch.ones((), dtype=torch.float64) for k in range(1, len(con.blocks) + 1)}
    module.load_state_dict(state, strict=True)
    return module


def sweep(con, name: str, seed: int) -> list[dict]:
    module, rows = softmax_module(con), []
    taus = [p for p in module.state_dict() if p.endswith("tau.weight")]
    for tau in TAUS:
        module.load_state_dict({p: torch.tensor(tau, dtype=torch.float64) for p in taus}, strict=False)
        with torch.no_grad():
            out = np.array([module(torch.as_tensor(z)).numpy() for z in con.instance.sequences])
        hit = sum(con.instance.targets[c].holds(y) for y, c in zip(out, con.instance.labels))
        rows.append({"instance": name, "n": con.n, "seed": seed, "tau": tau, "classified": hit,
                     "sequences": con.n, "largest_distance": float(np.abs(out - con.readouts).max())})
    return rows


def figure(rows: list[dict], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (a, b) = plt.subplots(1, 2, figsize=(9, 3.4))
    for n in sorted({r["n"] for r in rows if r["instance"] != "example"}):
        sel = [r for r in rows if r["n"] == n and r["instance"] != "example"]
        dist = np.array([[r["largest_distance"] for r in sel if r["tau"] == t] for t in TAUS])
        frac = np.array([np.mean([r["classified"] / r["sequences"] for r in sel if r["tau"] == t]) for t in TAUS])
        a.plot(TAUS, np.median(dist, axis=1), marker="o", label=f"N = {n} (median, range)")
        a.fill_between(TAUS, dist.min(axis=1), dist.max(axis=1), alpha=0.2)
        b.plot(TAUS, frac, marker="o", label=f"N = {n}")
    a.set_yscale("symlog", linthresh=1e-6)
    a.set(xscale="log", ylim=(0, None), xlabel="temperature tau", ylabel="|softmax readout - hardmax readout|")
    b.set(xscale="log", xlabel="temperature tau", ylabel="fraction of sequences in their target", ylim=(-0.05, 1.05))
    for ax in (a, b):
        ax.invert_xaxis()
        ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, default=ROOT / "gallery" / "study" / "hardmax-temperature")
    args = ap.parse_args()
    torch.set_num_threads(1)
    rows = sweep(hardmax_classifier(*EXAMPLE), "example", 0)
    for n in (5, 10, 20):
        for seed in range(10):
            inst = make_instance(*instance(np.random.default_rng(1000 * n + seed), n))
            rows += sweep(hardmax_classifier(inst.sequences, list(inst.labels), inst.targets), "random", seed)
    args.out.mkdir(parents=True, exist_ok=True)
    with open(args.out / "results.csv", "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)
    figure(rows, args.out / "temperature.png")
    for t in TAUS:
        sel = [r for r in rows if r["tau"] == t and r["instance"] != "example"]
        full = sum(r["classified"] == r["sequences"] for r in sel)
        d = [r["largest_distance"] for r in sel]
        ex = next(r for r in rows if r["tau"] == t and r["instance"] == "example")
        print(f"tau {t:g}: {full}/{len(sel)} instances fully classified, distance median {np.median(d):.2g} "
              f"max {max(d):.2g}; example {ex['classified']}/3, {ex['largest_distance']:.2g}")


if __name__ == "__main__":
    main()
