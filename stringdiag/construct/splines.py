"""Lai, Lim and Liu (2024), Sec. 3.3, made concrete: encoders with weights written from the proofs of
Lemma 3.6 (the quadratic Veronese map), Lemma 3.7 (a one-layer network as an encoder block) and
Theorem 3.8 (a max-definable function, the form (16) every spline takes if the Pierce–Birkhoff
conjecture holds, as an encoder). Each is compiled from its ``.diag`` chain and checked against
its target function on random inputs; nothing is trained.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

import numpy as np
import torch

from ..errors import DiagError
from . import encoder_file
from .maxdef import MaxMin, evaluate
from .veronese import first_level, levels, veronese_pairs
from .spline_blocks import SplineLayer, gather, network, products

LIMIT = 20_000_000  # numbers in the weights: refused above this, before anything is built
DRAWS = 16


@dataclass(frozen=True)
class Encoder:
    """A constructed encoder, the compiled module, and how far it is from its target."""

    kind: str
    n: int
    p: int
    layers: tuple[SplineLayer, ...]
    source: str = field(repr=False)
    weights: dict[str, torch.Tensor] = field(repr=False)
    module: Any = field(repr=False, compare=False)
    error: float
    monomials: tuple = field(default=(), repr=False)

    @property
    def parameters(self) -> int:
        return sum(int(v.numel()) for v in self.weights.values())

    @property
    def heads(self) -> list[int]:
        return [layer.dims[1] for layer in self.layers]


def _size(a: int, h: int, w: int, b: int) -> int:
    return 3 * h * a + 3 * encoder_file.HELD * h + w * h + w + b * w + b


def _guard(estimate: int, what: str) -> None:
    if estimate > LIMIT:
        raise DiagError(f"{what} would need about {estimate:,} weights (limit {LIMIT:,}): choose fewer "
                        "features, positions or a lower degree")


def _positions(n: int, p: int) -> None:
    if not (1 <= n and 1 <= p <= encoder_file.HELD):
        raise DiagError(f"X must have n >= 1 features and 1 <= p <= {encoder_file.HELD} positions "
                        f"(the blocks' position tables hold {encoder_file.HELD}); got n = {n}, p = {p}")


def check(module, target: Callable[[np.ndarray], np.ndarray], n: int, p: int, seed: int) -> float:
    """Largest |encoder(X) - target(X)| / max(1, |target(X)|) over random X with N(0, 1) entries."""
    rng, worst = np.random.default_rng(seed), 0.0
    for _ in range(DRAWS):
        x = rng.standard_normal((p, n))
        with torch.no_grad():
            got = module(torch.as_tensor(x)).numpy()
        want = target(x)
        worst = max(worst, float(np.abs(got - want).max() / max(1.0, float(np.abs(want).max()))))
    if not worst < 1e-8:
        raise DiagError(f"internal: the constructed encoder is {worst:.2g} from its target (a bug in the construction)")
    return worst


def _finish(kind, n, p, layers, title, target, seed, monomials=()) -> Encoder:
    text = encoder_file.source(layers, n, title, "MaskedSplineBlock" if kind == "spline-decoder" else "SplineBlock")
    state = encoder_file.weights(layers)
    module = encoder_file.in_memory(text, state)
    return Encoder(kind, n, p, tuple(layers), text, state, module, check(module, target, n, p, seed), monomials)


def veronese(n: int, p: int, seed: int = 0) -> Encoder:
    """Lemma 3.6: epsilon_2 = phi_2 . alpha_2 . phi_1 . alpha_1, position j holding v_2(X) in its block j."""
    _positions(n, p)
    width = 1 + n * p
    count = width * (width + 1) // 2  # pairs of v_1's features: v_2's monomials
    _guard(_size(n, p * width, 2 * p * width, p * width) + _size(p * width, 2 * p * count, 4 * p * count, p * count),
           "the quadratic Veronese encoder")
    pairs, monos = veronese_pairs(n * p)
    layers = [gather(n, p), products(width, pairs, p, note=f"v_2(X): the {len(pairs)} monomials of degree <= 2 "
                                     "(Lemma 3.6, alpha_2)")]
    e = np.array(monos, dtype=float)

    def target(x):
        v = np.prod(x.reshape(-1)[None, :] ** e, axis=1)
        return np.kron(np.eye(p), v)  # block j of position j

    title = [f"The quadratic Veronese map v_2 of an n x p = {n} x {p} X as a two-layer ReLU encoder",
             "(Lai, Lim and Liu (2024), Lemma 3.6): position j holds v_2(X) in its block j."]
    return _finish("veronese", n, p, layers, title, target, seed, tuple(monos))


def nn_block(a1, b1, a2, b2, p: int, seed: int = 0) -> Encoder:
    """Lemma 3.7: the one-layer network A2 ReLU(A1 x + b1) + b2 on every token, as one encoder block."""
    a1, b1, a2, b2 = (np.asarray(t, dtype=np.float64) for t in (a1, b1, a2, b2))
    if not (a1.ndim == 2 and b1.shape == (a1.shape[0],) and a2.ndim == 2 and a2.shape[1] == a1.shape[0]
            and b2.shape == (a2.shape[0],)):
        raise DiagError("the network's shapes do not fit: A1 (w, n), b1 (w), A2 (m, w), b2 (m)")
    n = a1.shape[1]
    _positions(n, p)
    _guard(_size(n, n * p, a1.shape[0], a2.shape[0]), "the encoder block")
    layer = network(a1, b1, a2, b2, p)
    target = lambda x: np.maximum(x @ a1.T + b1, 0.0) @ a2.T + b2  # noqa: E731
    title = [f"A one-layer ReLU network {n} -> {a2.shape[0]} (hidden width {a1.shape[0]}) on each of {p} tokens "
             "as one encoder block", "(Lai, Lim and Liu (2024), Lemma 3.7)."]
    return _finish("nn-block", n, p, [layer], title, target, seed)


def spline_encoder(entries: list[list[MaxMin]], n: int, p: int, seed: int = 0, causal: bool = False) -> Encoder:
    """Theorem 3.8: f with f(X)[r, j] = entries[r][j] = max_i min_l xi (16) as an encoder: monomials by
    products (Lemma 3.6's layers), the polynomials by the last one's linear map, then min and max
    by one-layer networks, each an encoder block by Lemma 3.7. ``causal``: Corollary 3.10, an
    autoregressive f as a decoder, the same weights in masked heads (a head copying a later
    position's entry gives 0 there, and an autoregressive entry never reads it)."""
    _positions(n, p)
    r = len(entries)
    if not r or any(len(row) != p for row in entries):
        raise DiagError(f"the function needs r >= 1 rows of p = {p} entries, one per position")
    if causal:
        _autoregressive(entries, n)
    layers, monos = _layers(entries, n, p)
    target = lambda x: np.array([[evaluate(row[j], x) for row in entries] for j in range(p)])  # noqa: E731
    what = ("an autoregressive", "decoder", "Corollary 3.10") if causal else ("a", "encoder", "Theorem 3.8")
    title = [f"{what[0].capitalize()} max-definable function of an n x p = {n} x {p} X with {r} output row(s), "
             f"degree {max(f.degree() for row in entries for f in row)}, as a ReLU {what[1]}",
             f"(Lai, Lim and Liu (2024), {what[2]}: every such spline, if the Pierce-Birkhoff conjecture holds)."]
    return _finish(f"spline-{what[1]}", n, p, layers, title, target, seed, tuple(monos))


def _layers(entries: list[list[MaxMin]], n: int, p: int) -> tuple[list[SplineLayer], list]:
    """Theorem 3.8's blocks for entries in the n p variables of n-wide tokens, and the monomials formed."""
    wide = 2 ** math.ceil(math.log2(max(len(f.terms) for row in entries for f in row)))
    deep = 2 ** math.ceil(math.log2(max(len(t) for row in entries for f in row for t in f.terms)))
    wanted = {e for row in entries for f in row for t in f.terms for q in t for e, _ in q}
    plan = levels(wanted, n * p)
    monos = plan[-1][0] if plan else first_level(n * p)
    ell = _combine(entries, monos, p, wide, deep)
    return _products(n, p, plan, ell) + _reductions(len(entries), wide, deep, p), monos


def spline_encoder_decoder(entries: list[list[MaxMin]], n: int, m: int, p: int, seed: int = 0):
    """The remark after Corollary 3.10: f(X, Y) with entry j reading all of X and y_1..y_j, as an
    encoder-decoder (construct/encdec_splines.py; our reconstruction)."""
    from .encdec_splines import encoder_decoder

    _positions(n + m, p)
    if not entries or any(len(row) != p for row in entries):
        raise DiagError(f"the function needs r >= 1 rows of p = {p} entries, one per position")
    _autoregressive(entries, n + m, first=n)
    layers, _ = _layers(entries, n + m, p)
    _guard(sum(_size(*layer.dims) for layer in layers) * 3, "the spline's encoder-decoder")
    return encoder_decoder(entries, layers, n, m, p, seed)


def _autoregressive(entries: list[list[MaxMin]], n: int, first: int = 0) -> None:
    """(8): entry j of every row may read positions 1..j only of the features from ``first`` on (of n);
    with ``first`` > 0, the features before it (X's, beside Y's) may be read at every position."""
    for r, row in enumerate(entries):
        for j, f in enumerate(row):
            late = [v for t in f.terms for q in t for e, _ in q for v, k in enumerate(e)
                    if k and v // n > j and v % n >= first]
            if late and first:
                raise DiagError(f"f[{r}][{j}] reads y[{late[0] % n - first + 1},{late[0] // n + 1}], a later position "
                                "of Y: f is not partially autoregressive")
            if late:
                raise DiagError(f"f[{r}][{j}] reads x[{late[0] % n + 1},{late[0] // n + 1}], a later position: f is not "
                                "autoregressive, so Corollary 3.10 does not apply (use spline-encoder)")


def _combine(entries, monos, p: int, wide: int, deep: int) -> np.ndarray:
    """l: block j's monomials -> the polynomials of position j's entries, laid out (row, max term, min
    term), padded to powers of two by repeating the last term (min(a, a) = a, max(a, a) = a)."""
    at = {m: k for k, m in enumerate(monos)}
    ell = np.zeros((len(entries) * wide * deep, p * len(monos)))
    for r, row in enumerate(entries):
        for j, f in enumerate(row):
            for i in range(wide):
                term = f.terms[min(i, len(f.terms) - 1)]
                for k in range(deep):
                    for e, c in term[min(k, len(term) - 1)]:
                        ell[(r * wide + i) * deep + k, j * len(monos) + at[e]] += c
    return ell


def _products(n: int, p: int, plan, ell: np.ndarray) -> list[SplineLayer]:
    width = len(first_level(n * p))
    sizes = [_size(n, p * width, 2 * p * width, ell.shape[0] if not plan else p * width)]
    for monos, pairs in plan:
        sizes.append(_size(p * width, 2 * p * len(pairs), 4 * p * len(pairs), p * len(pairs)))
        width = len(monos)
    _guard(sum(sizes), "the spline's encoder")
    if not plan:
        return [gather(n, p, out=ell)]
    layers, width = [gather(n, p)], len(first_level(n * p))
    for k, (monos, pairs) in enumerate(plan):
        last = k == len(plan) - 1
        note = f"{len(monos) - 1} monomials of degree <= {2 ** (k + 1)}" + (", then the polynomials" if last else "")
        layers.append(products(width, pairs, p, out=ell if last else None, note=note))
        width = len(monos)
    return layers


def _pairwise(groups: int, size: int, sign: float) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """One layer: min (sign -1) or max (sign +1) of neighbours in each group of ``size``:
    a + sign ReLU(sign (b - a)) = ReLU(a) - ReLU(-a) + sign ReLU(sign (b - a))."""
    half = size // 2
    a1 = np.zeros((3 * groups * half, groups * size))
    a2 = np.zeros((groups * half, 3 * groups * half))
    for g in range(groups):
        for t in range(half):
            o, a, b = g * half + t, g * size + 2 * t, g * size + 2 * t + 1
            a1[3 * o, a], a1[3 * o + 1, a] = 1.0, -1.0
            a1[3 * o + 2, b], a1[3 * o + 2, a] = sign, -sign
            a2[o, 3 * o:3 * o + 3] = (1.0, -1.0, sign)
    return a1, np.zeros(a1.shape[0]), a2, np.zeros(a2.shape[0])


def _reductions(r: int, wide: int, deep: int, p: int) -> list[SplineLayer]:
    layers = []
    for size, groups, sign, what in ((deep, r * wide, -1.0, "min"), (wide, r, 1.0, "max")):
        while size > 1:
            layers.append(network(*_pairwise(groups, size, sign), p, stage=what,
                                  note=f"{what} of pairs, {groups * size} -> {groups * size // 2} (Lemma 3.7)"))
            size //= 2
    return layers


def write(enc: Encoder, out: str | Path) -> tuple[Path, Path]:
    """Write the encoder to directory ``out``, then compile what was written and compare it again."""
    meta = {"construction": enc.kind, "n": enc.n, "p": enc.p, "blocks": len(enc.layers), "heads": enc.heads}
    diag, tensors = encoder_file.write(Path(out), enc.source, enc.weights, meta)
    from safetensors.torch import load_file

    module = encoder_file.build(None, diag, dict(load_file(str(tensors))))
    x = torch.as_tensor(np.random.default_rng(1).standard_normal((enc.p, enc.n)))
    with torch.no_grad():
        if not torch.allclose(module(x), enc.module(x), rtol=0, atol=1e-12):
            raise DiagError(f"internal: {diag} does not compute what was constructed")
    return diag, tensors
