"""The input files of ``construct nn-block`` and ``construct spline-encoder`` (plain JSON; no torch)."""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from ..errors import DiagError
from .maxdef import MaxMin, parse

NETWORK_FORMAT = """\
nn-block's FILE.json: a one-layer ReLU network phi(x) = A2 ReLU(A1 x + b1) + b2 applied to every token,
  {"A1": [[1, -1], [0.5, 2]], "b1": [0, 1], "A2": [[1, 1]], "b2": [0.5]}
(A1 is w x n, A2 is m x w; the tokens are n wide)."""

FUNCTION_FORMAT = """\
spline-encoder's FILE.json: f(X) for X with n features and p positions (tokens), one string per
entry of f(X) (r rows, each with p entries: entry [r][j] is output feature r at position j):
  {"n": 1, "p": 2, "f": [["max(min(x[1,1]^2, x[1,2] + 1), x[1,1]*x[1,2] - 1)", "x[1,2]^3 - x[1,1]"]]}
Each entry is max(min(P, ...), ...), min(P, ...) or a polynomial P, the form (16) that every spline has
if the Pierce-Birkhoff conjecture holds; P is written with numbers, x[i,j] (feature i at position j,
1-based), + - * and ^ with a whole power. spline-encoder-decoder's adds "m", the decoder input Y's
features, and its entries may read y[i,j] too: entry j may read all of X but Y's positions 1..j only
(partially autoregressive): {"n": 1, "m": 1, "p": 2, "f": [["x[1,2]*y[1,1]", "max(y[1,2], x[1,1])"]]}"""


def _json(path: str | Path, what: str):
    try:
        return json.loads(Path(path).read_text(encoding="utf-8"))
    except OSError as e:
        raise DiagError(f"cannot read {what} {path}: {e.strerror or e}") from None
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        raise DiagError(f"{path}: not JSON: {e}") from None


def _matrix(raw, name: str, ndim: int) -> np.ndarray:
    try:
        arr = np.array(raw, dtype=np.float64)
    except (TypeError, ValueError):
        arr = None
    if arr is None or arr.ndim != ndim or arr.size == 0 or not np.isfinite(arr).all():
        raise DiagError(f"{name} must be a non-empty {'matrix' if ndim == 2 else 'vector'} of finite numbers")
    return arr


def read_network(path: str | Path) -> tuple[np.ndarray, ...]:
    raw = _json(path, "the network")
    if not isinstance(raw, dict) or set(raw) != {"A1", "b1", "A2", "b2"}:
        raise DiagError(f"{path}: expected an object with exactly A1, b1, A2, b2 (see --help)")
    return tuple(_matrix(raw[k], f"{path}: {k}", 2 if k[0] == "A" else 1) for k in ("A1", "b1", "A2", "b2"))


def read_function(path: str | Path, pair: bool = False) -> tuple[list[list[MaxMin]], int, int, int]:
    """The entries, n, p, and m (Y's features; 0 unless ``pair``, the encoder-decoder's input)."""
    raw = _json(path, "the function")
    keys = {"n", "m", "p", "f"} if pair else {"n", "p", "f"}
    if not isinstance(raw, dict) or set(raw) != keys:
        raise DiagError(f"{path}: expected an object with exactly {', '.join(sorted(keys))} (see --help)")
    n, m, p, rows = raw["n"], raw.get("m", 1), raw["p"], raw["f"]
    if not all(isinstance(v, int) and not isinstance(v, bool) and v >= 1 for v in (n, m, p)):
        raise DiagError(f"{path}: {'n, m' if pair else 'n'} and p must be positive integers")
    if not (isinstance(rows, list) and rows and all(isinstance(r, list) and len(r) == p for r in rows)):
        raise DiagError(f"{path}: f must be a non-empty list of rows, each with p = {p} entries")
    if not all(isinstance(s, str) for r in rows for s in r):
        raise DiagError(f"{path}: every entry of f must be a string such as \"max(min(x[1,1], 1), 0)\"")
    m = m if pair else 0
    return [[parse(s, n, p, f"{path}: f[{r}][{j}]", m) for j, s in enumerate(row)] for r, row in enumerate(rows)], n, p, m

SUMFORMER_FORMAT = """\
sumformer's FILE.json: an equivariant polynomial f(X)_i = g(x_i; the other tokens) of n tokens in R^d,
  {"n": 3, "d": 1, "g": ["x[1,1] + 7*x[1,1]^2 + 3*x[1,1]*(x[1,2] + x[1,3])^3"]}
one polynomial per output coordinate, in x[c,k] (coordinate c of token k, 1-based): token 1 is the
token the output belongs to, tokens 2..n the others, and g must be symmetric in the others."""


def read_sumformer(path: str | Path) -> tuple[list[MaxMin], int, int]:
    raw = _json(path, "the function")
    if not isinstance(raw, dict) or set(raw) != {"n", "d", "g"}:
        raise DiagError(f"{path}: expected an object with exactly n, d and g (see --help)")
    n, d, g = raw["n"], raw["d"], raw["g"]
    if not all(isinstance(v, int) and not isinstance(v, bool) and v >= 1 for v in (n, d)):
        raise DiagError(f"{path}: n and d must be positive integers")
    if not (isinstance(g, list) and len(g) == d and all(isinstance(s, str) for s in g)):
        raise DiagError(f"{path}: g must be a list of d = {d} strings, one polynomial per output coordinate")
    return [parse(s, d, n, f"{path}: g[{c}]") for c, s in enumerate(g)], n, d
