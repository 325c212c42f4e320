"""Sumformer, Sec. 5 Figs. 1-2 (Alberti, Dern, Thesing and Kutyniok 2023). Fig. 1: a Polynomial and
an MLP Sumformer trained on equivariant functions, n = 5 tokens of width d = 4 in [0, 1]^d, 2,000
training points, the relative L2 validation error every 5 epochs. Fig. 2 (``--sweep``): the MLP
Sumformer's best validation error as its latent width d' grows exponentially, n = 3, for several
token widths d, on Fig. 2's g (scaled down here: fewer d and d' than the paper's ten d).

Both models are gallery/sumformer_experiments.diag's, compiled by stringdiag: psi a ReLU network
of five hidden layers of 50 nodes in both; phi the monomial map of Theorem 4.1's continuous proof
(every x^alpha with 1 <= |alpha| <= n: C(n + d, d) - 1 = 125 of them) in the Polynomial Sumformer,
a ReLU network of the same shape to the same latent width d' = 125 in the MLP Sumformer.

The paper's text does not say which four functions it used ("two polynomial-type and two
non-polynomial-type", defined by semi-invariant g(x_i, X)); the four below are ours, the first
being Fig. 2's g written for n = 5. Training: Adam (learning rate 1e-3), batches of 50, 500
validation points, one torch thread, float32; every setting is an option.

    .venv/bin/python benchmarks/sumformer_fig1.py [--epochs 200] [--out gallery/study/sumformer-fig1]
    .venv/bin/python benchmarks/sumformer_fig1.py --sweep [--epochs 100] [--sweep-d 1 2 4 8]
        [--sweep-e 1 4 16 64]

writes results.csv (function, model, epoch, relative L2 validation error, seconds) and fig1.png;
with --sweep, sweep.csv (d, d', best error, C(n + d, d) - 1) and fig2.png.
"""
from __future__ import annotations

import argparse
import csv
import itertools
import math
import time
from pathlib import Path
from typing import Callable

import torch

import stringdiag

ROOT = Path(__file__).resolve().parents[1]
DIAG = ROOT / "gallery" / "sumformer_experiments.diag"


def exponents(d: int, n: int) -> list[tuple[int, ...]]:
    """Every alpha in N^d with 1 <= |alpha| <= n (Theorem 4.1's monomials), by degree."""
    return [a for k in range(1, n + 1) for a in itertools.product(range(k + 1), repeat=d) if sum(a) == k]


def monomials(x: torch.Tensor, alphas: list[tuple[int, ...]]) -> torch.Tensor:
    """phi(x) = (x^alpha)_alpha on the last axis: [..., d] -> [..., len(alphas)]."""
    a = torch.tensor(alphas, dtype=x.dtype)  # [e, d]
    return torch.prod(x.unsqueeze(-2) ** a, dim=-1)


def _others(x: torch.Tensor) -> torch.Tensor:
    return x.sum(dim=-2, keepdim=True) - x  # sum over j != i, per token i


# f(X)_i = g(x_i, X), equivariant; products and powers componentwise
FUNCTIONS: dict[str, Callable[[torch.Tensor], torch.Tensor]] = {
    "polynomial: x_i + 7 x_i^2 + 3 x_i (sum_{j!=i} x_j)^3": lambda x: x + 7 * x ** 2 + 3 * x * _others(x) ** 3,
    "polynomial: x_i * sum_j x_j^2 - (sum_j x_j)^2 / n": lambda x: (x * (x ** 2).sum(-2, keepdim=True)
                                                                     - x.sum(-2, keepdim=True) ** 2 / x.shape[-2]),
    "non-polynomial: sin(2 pi x_i) * mean_j cos(pi x_j)": lambda x: (torch.sin(2 * math.pi * x)
                                                                     * torch.cos(math.pi * x).mean(-2, keepdim=True)),
    "non-polynomial: exp(-4 (x_i - mean_j x_j)^2)": lambda x: torch.exp(-4 * (x - x.mean(-2, keepdim=True)) ** 2),
}


def relative_l2(pred: torch.Tensor, y: torch.Tensor) -> float:
    return float(torch.linalg.vector_norm(pred - y) / torch.linalg.vector_norm(y))


def run(name: str, f: Callable, model: str, args, alphas, n: int, d: int, e: int) -> list[tuple[int, float, float]]:
    """One training run: (epoch, validation error, seconds) every ``args.every`` epochs."""
    gen = torch.Generator().manual_seed(args.seed)
    xtr = torch.rand(args.train, n, d, generator=gen)
    xva = torch.rand(args.valid, n, d, generator=gen)
    ytr, yva = f(xtr), f(xva)
    prog = stringdiag.load(DIAG)
    dims = {"d": d, "e": e, "w": args.width}
    torch.manual_seed(args.seed)
    net = stringdiag.compile(prog["PolySumformer" if model == "polynomial" else "MLPSumformer"], dims=dims)
    feats = (lambda x: (x, monomials(x, alphas))) if model == "polynomial" else (lambda x: (x,))
    mtr, mva = feats(xtr), feats(xva)
    opt = torch.optim.Adam(net.parameters(), lr=args.lr)
    out, start = [], time.process_time()
    for epoch in range(1, args.epochs + 1):
        order = torch.randperm(args.train, generator=gen)
        for b in range(0, args.train, args.batch):
            idx = order[b:b + args.batch]
            loss = torch.mean((net(*(m[idx] for m in mtr)) - ytr[idx]) ** 2)
            opt.zero_grad()
            loss.backward()
            opt.step()
        if epoch % args.every == 0:
            with torch.no_grad():
                err = relative_l2(net(*mva), yva)
            out.append((epoch, err, time.process_time() - start))
            print(f"{model:10s} {name[:40]:40s} d {d} d' {e} epoch {epoch:4d}  relative L2 {err:.4f}", flush=True)
    return out


def figure(rows: list[dict], path: Path) -> None:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    names = list(dict.fromkeys(r["function"] for r in rows))
    fig, axes = plt.subplots(1, len(names), figsize=(4 * len(names), 3.4), sharey=False)
    for ax, name in zip(axes, names):
        for model, style in (("polynomial", "-"), ("mlp", "--")):
            pts = [(int(r["epoch"]), float(r["error"])) for r in rows if r["function"] == name and r["model"] == model]
            ax.plot(*zip(*pts), style, label=f"{model} Sumformer")
        ax.set_yscale("log")
        ax.set_title(name.split(": ", 1)[1], fontsize=8)
        ax.set_xlabel("epoch")
    axes[0].set_ylabel("relative L2 validation error")
    axes[0].legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def sweep(args) -> None:
    """Fig. 2: best validation error of the MLP Sumformer over d' for each d, n = 3."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    n, g = 3, next(iter(FUNCTIONS.items()))
    rows = []
    for d in args.sweep_d:
        for e in args.sweep_e:
            best = min(err for _, err, _ in run(g[0], g[1], "mlp", args, None, n, d, e))
            rows.append({"d": d, "d_latent": e, "best_error": f"{best:.6g}", "proof_d_latent": math.comb(n + d, d) - 1})
    with open(args.out / "sweep.csv", "w", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)
    fig, ax = plt.subplots(figsize=(5.5, 3.6))
    for d in args.sweep_d:
        pts = [(int(r["d_latent"]), float(r["best_error"])) for r in rows if r["d"] == d]
        line, = ax.plot(*zip(*pts), "o-", label=f"d = {d}")
        ax.axvline(math.comb(n + d, d) - 1, color=line.get_color(), linestyle=":", linewidth=1)
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xlabel("latent width d' (dotted: C(n + d, d) - 1 of Theorem 4.1)")
    ax.set_ylabel("best relative L2 validation error")
    ax.set_title(f"MLP Sumformer, n = {n}, {args.epochs} epochs", fontsize=9)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(args.out / "fig2.png", dpi=110)
    print(f"wrote {args.out / 'sweep.csv'} and {args.out / 'fig2.png'}")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--n", type=int, default=5)
    p.add_argument("--d", type=int, default=4)
    p.add_argument("--train", type=int, default=2000)
    p.add_argument("--valid", type=int, default=500)
    p.add_argument("--width", type=int, default=50)
    p.add_argument("--epochs", type=int, default=100)
    p.add_argument("--every", type=int, default=5)
    p.add_argument("--batch", type=int, default=50)
    p.add_argument("--lr", type=float, default=1e-3)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--out", type=Path, default=ROOT / "gallery" / "study" / "sumformer-fig1")
    p.add_argument("--sweep", action="store_true", help="Fig. 2 instead: the MLP Sumformer over d', n = 3")
    p.add_argument("--sweep-d", type=int, nargs="+", default=[1, 2, 4, 8])
    p.add_argument("--sweep-e", type=int, nargs="+", default=[1, 4, 16, 64])
    args = p.parse_args()
    torch.set_num_threads(1)
    args.out.mkdir(parents=True, exist_ok=True)
    if args.sweep:
        sweep(args)
        return
    alphas = exponents(args.d, args.n)
    assert len(alphas) == math.comb(args.n + args.d, args.d) - 1
    rows = []
    for name, f in FUNCTIONS.items():
        for model in ("polynomial", "mlp"):
            for epoch, err, secs in run(name, f, model, args, alphas, args.n, args.d, len(alphas)):
                rows.append({"function": name, "model": model, "epoch": epoch, "error": f"{err:.6g}",
                             "cpu_seconds": f"{secs:.1f}"})
    with open(args.out / "results.csv", "w", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)
    figure(rows, args.out / "fig1.png")
    print(f"wrote {args.out / 'results.csv'} and {args.out / 'fig1.png'}")


if __name__ == "__main__":
    main()
