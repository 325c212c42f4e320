"""Theorem 4.1 of Alberti, Dern, Thesing and Kutyniok (2023), the continuous proof, made concrete: an
equivariant polynomial f(X)_i = g(x_i; the other tokens) as a Polynomial Sumformer
S(X)_i = psi(x_i, Sigma), Sigma = sum_k phi(x_k), with phi every monomial x^alpha, 1 <= |alpha| <= n (36).

g is split by the powers x_i^alpha of the token's own coordinates; each coefficient r_alpha is a
polynomial of the others symmetric in them, so (Theorem 2.12) a polynomial sigma_alpha of their power
sums Sigma - phi(x_i). sigma_alpha's coefficients are found by solving a linear system on random
points over the products of power sums of low enough degree (the theorem says a solution exists; the
system is checked to be solved exactly on fresh points), and psi is (17). Nothing is trained.
"""
from __future__ import annotations

import itertools
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch

from ..errors import DiagError
from ..elaborate.loader import load, loads
from ..lower import compile as lower
from ..lower.tensorfile import write_atomic
from ..resources import shipped
from ..syntax.source import write_atomic as write_text
from .maxdef import MaxMin

GALLERY = shipped("gallery/sumformer_polynomial.diag")
NAME, LIMIT, DRAWS = "PolynomialSumformer", 4_000_000, 16


@dataclass(frozen=True)
class PolySumformer:
    n: int
    d: int
    latent: int  # d' = C(n + d, d) - 1
    degree: int  # psi's degree in (x_i, Sigma - phi(x_i))
    source: str = field(repr=False)
    weights: dict[str, torch.Tensor] = field(repr=False)
    module: Any = field(repr=False, compare=False)
    error: float = 0.0
    terms: int = 0  # nonzero coefficients of psi

    @property
    def parameters(self) -> int:
        return sum(int(v.numel()) for v in self.weights.values())


def exponents(d: int, low: int, high: int) -> list[tuple[int, ...]]:
    """Every alpha in N^d with low <= |alpha| <= high, by degree then reverse-lexicographic."""
    return [a for k in range(low, high + 1) for a in sorted(
        (a for a in itertools.product(range(k + 1), repeat=d) if sum(a) == k), reverse=True)]


def _values(poly: dict, x: np.ndarray) -> np.ndarray:
    """A polynomial over the n d entries (token-major) at points x (m, n, d)."""
    flat = x.reshape(len(x), -1)
    return sum(c * np.prod(flat ** np.array(e), axis=1) for e, c in poly.items())


def _split(poly: dict, d: int) -> dict[tuple, dict]:
    """g = sum_alpha x_1^alpha r_alpha(others): r_alpha by alpha, over the others' entries."""
    out: dict[tuple, dict] = {}
    for e, c in poly.items():
        out.setdefault(tuple(e[:d]), {})[tuple(e[d:])] = c
    return out


def _power_sums(others: np.ndarray, betas) -> np.ndarray:
    """P_beta = sum over the others of y^beta, (m, e)."""
    return np.stack([np.prod(others ** np.array(b), axis=2).sum(axis=1) for b in betas], axis=1)


def _sigma(r: dict, n: int, d: int, betas, rng) -> dict[tuple, float]:
    """sigma with r(Y) = sigma(P(Y)): coefficients over products of power sums (exponents gamma)."""
    top = max((sum(e) for e in r), default=0)
    weight = [sum(b) for b in betas]
    gammas = [g for k in range(top + 1) for g in itertools.product(range(k + 1), repeat=len(betas))
              if sum(g) == k and sum(w * x for w, x in zip(weight, g)) <= top]
    gammas = list(dict.fromkeys(gammas))

    def system(m):
        others = rng.uniform(-1, 1, size=(m, n - 1, d))
        p = _power_sums(others, betas)
        a = np.stack([np.prod(p ** np.array(g), axis=1) for g in gammas], axis=1)
        return a, _values(r, others)

    a, b = system(3 * len(gammas) + 20)
    coef = np.linalg.lstsq(a, b, rcond=None)[0]
    a2, b2 = system(64)
    if np.abs(a2 @ coef - b2).max() > 1e-8 * max(1.0, np.abs(b2).max()):
        raise DiagError("g is not a polynomial of the other tokens' power sums: is it symmetric in the other tokens?")
    return {g: float(c) for g, c in zip(gammas, coef) if abs(c) > 1e-12}


def _semi_invariant(polys: list[dict], n: int, d: int, rng) -> None:
    x = rng.uniform(-1, 1, size=(8, n, d))
    for perm in itertools.islice(itertools.permutations(range(1, n)), 24):
        y = x[:, [0, *perm], :]
        for poly in polys:
            if not np.allclose(_values(poly, x), _values(poly, y), rtol=1e-10, atol=1e-10):
                raise DiagError("g is not symmetric in the other tokens (tokens 2..n), so f is not equivariant "
                                "(Lemma 2.9): Theorem 4.1 does not apply")


def _index(factors: list[int], base: int, power: int) -> int:
    """The position in the flattened ``power``-th tensor power of a ``base``-wide vector of the
    product of the given factor positions, padded with position 0 (the constant 1)."""
    idx = 0
    for f in factors + [0] * (power - len(factors)):
        idx = idx * base + f
    return idx


def _phi(n: int, d: int, betas) -> np.ndarray:
    """(36): row beta picks x^beta from the n-th tensor power of [1, x]."""
    out = np.zeros((len(betas), (d + 1) ** n))
    for r, b in enumerate(betas):
        out[r, _index([1 + c for c in range(d) for _ in range(b[c])], d + 1, n)] = 1.0
    return out


def _psi(pieces: list[dict], d: int, betas, degree: int) -> np.ndarray:
    """(17): output c's coefficient of x^alpha prod_beta P_beta^gamma_beta on the tensor power of
    [1, x, Sigma - phi(x)] (x at positions 1..d, power sum beta at d + 1 + its place)."""
    base = 1 + d + len(betas)
    out = np.zeros((len(pieces), base ** degree))
    for c, piece in enumerate(pieces):
        for (alpha, gamma), coef in piece.items():
            factors = [1 + k for k in range(d) for _ in range(alpha[k])]
            factors += [1 + d + k for k in range(len(betas)) for _ in range(gamma[k])]
            out[c, _index(factors, base, degree)] += coef
    return out


def source(n: int, d: int, e: int, degree: int) -> str:
    lines = [f"# A Polynomial Sumformer computing a given equivariant polynomial of {n} tokens in R^{d}, with",
             "# weights from the continuous proof of Theorem 4.1 (Alberti, Dern, Thesing and Kutyniok 2023).",
             "# Written by `stringdiag construct sumformer`; weights in sumformer.safetensors (float64).",
             'import "sumformer_polynomial.diag"', "", f"diagram {NAME}(x: [s, {d}]) -> [s, {d}] {{",
             f"  learn Phi : [{(d + 1) ** n}] -> [{e}] via linear(bias = false)   # (36): x^alpha, 1 <= |alpha| <= {n}",
             f"  learn Psi : [{(1 + d + e) ** degree}] -> [{d}] via linear(bias = false)   # (17): the sigma_alpha",
             f"  u1[k] = Lift<{d}>(x[k])"]
    lines += [f"  u{k}[j] = Outer<{(d + 1) ** (k - 1)}, {d + 1}>(u{k - 1}[j], u1[j])" for k in range(2, n + 1)]
    lines += [f"  m[k] = Phi(u{n}[k])                       # phi(x_k)",
              f"  o = SumformerOthers<{d}, {e}>(x, m)       # x_i and Sigma - phi(x_i)",
              f"  z1[i] = Lift<{d + e}>(o[i])"]
    lines += [f"  z{k}[i] = Outer<{(1 + d + e) ** (k - 1)}, {1 + d + e}>(z{k - 1}[i], z1[i])" for k in range(2, degree + 1)]
    return "\n".join(lines + [f"  y[i] = Psi(z{max(degree, 1)}[i])", "  return y", "}", ""])


def _compile(text: str | None, file: Path, state: dict[str, torch.Tensor]):
    prog = loads(text, str(file)) if text is not None else load(file)
    module = lower(prog[NAME], approximator="linear", dtype=torch.float64)
    if {k: v.shape for k, v in module.state_dict().items()} != {k: v.shape for k, v in state.items()}:
        raise DiagError("internal: the constructed weights do not match the compiled module's parameters")
    module.load_state_dict(state, strict=True)
    return module


def _check(module, polys: list[dict], n: int, d: int, rng) -> float:
    """|S(X) - f(X)| relative, f(X)_i = g(x_i; the others in order), on random X in [-1, 1]^(n x d)."""
    worst = 0.0
    for _ in range(DRAWS):
        x = rng.uniform(-1, 1, size=(n, d))
        want = np.array([[_values(p, np.concatenate([x[i:i + 1], np.delete(x, i, 0)])[None])[0] for p in polys]
                         for i in range(n)])
        with torch.no_grad():
            got = module(torch.as_tensor(x)).numpy()
        worst = max(worst, float(np.abs(got - want).max() / max(1.0, float(np.abs(want).max()))))
    if not worst < 1e-7:
        raise DiagError(f"internal: the constructed Sumformer is {worst:.2g} from f (a bug in the construction)")
    return worst


def sumformer(entries: list[MaxMin], n: int, d: int, seed: int = 0) -> PolySumformer:
    """f(X)_i = (g_1, ..., g_d)(x_i; others), each g_c a polynomial in x[c, k] (token 1 the own token)."""
    if len(entries) != d or any(len(f.terms) != 1 or len(f.terms[0]) != 1 for f in entries):
        raise DiagError(f"give d = {d} polynomials g (one per output coordinate), without max or min")
    if n < 2:
        raise DiagError("a Sumformer needs n >= 2 tokens")
    polys = [dict(f.terms[0][0]) for f in entries]
    latent = math.comb(n + d, d) - 1
    degree = max(1, max((sum(e) for p in polys for e in p), default=1))
    if (d + 1) ** n + (1 + d + latent) ** degree > LIMIT // max(d, latent):
        raise DiagError(f"phi's and psi's tensor powers would need about {(1 + d + latent) ** degree:,} features: "
                        "choose fewer tokens or a lower degree")
    betas = exponents(d, 1, n)
    rng = np.random.default_rng(seed)
    _semi_invariant(polys, n, d, rng)
    pieces = [{(alpha, g): c for alpha, r in _split(p, d).items() for g, c in _sigma(r, n, d, betas, rng).items()}
              for p in polys]
    state = {"Phi.weight": torch.as_tensor(_phi(n, d, betas)),
             "Psi.weight": torch.as_tensor(_psi(pieces, d, betas, degree))}
    text = source(n, d, len(betas), degree)
    module = _compile(text, GALLERY.with_name("<constructed>.diag"), state)
    error = _check(module, polys, n, d, rng)
    return PolySumformer(n, d, len(betas), degree, text, state, module, error, sum(len(p) for p in pieces))


def write(con: PolySumformer, out: str | Path) -> tuple[Path, Path]:
    """OUT/sumformer.diag, OUT/sumformer_polynomial.diag and OUT/sumformer.safetensors, compiled back."""
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    write_text(out / "sumformer_polynomial.diag", GALLERY.read_text(encoding="utf-8"))
    write_text(out / "sumformer.diag", con.source)
    meta = {"construction": "sumformer", "n": con.n, "d": con.d, "latent": con.latent, "degree": con.degree}
    write_atomic(out / "sumformer.safetensors", con.weights, meta, "weights file")
    from safetensors.torch import load_file

    module = _compile(None, out / "sumformer.diag", dict(load_file(str(out / "sumformer.safetensors"))))
    x = torch.as_tensor(np.random.default_rng(1).uniform(-1, 1, size=(con.n, con.d)))
    with torch.no_grad():
        if not torch.allclose(module(x), con.module(x), rtol=0, atol=1e-12):
            raise DiagError(f"internal: {out / 'sumformer.diag'} does not compute what was constructed")
    return out / "sumformer.diag", out / "sumformer.safetensors"
