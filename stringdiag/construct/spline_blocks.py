"""The encoder blocks of Lai, Lim and Liu's constructions (2024, Sec. 3.3) as numbers.

A block is gallery/spline_encoder.diag's ``SplineBlock``: h one-wide ReLU heads whose queries, keys
and values are A x_i + B[i] (position-dependent biases, (4)), then a one-layer ReLU network
A2 ReLU(A1 z + b1) + b2 on every token. Tokens are rows (the seed's columns). Three kinds of block
make every construction: *gather* (Lemma 3.6's first layer: every entry of X and the constant 1
into every position's own block of features), *products* (Lemma 3.6's second layer: products of
two features of a position's block, x y = x y⁺ - x (-y)⁺), and *network* (Lemma 3.7: any one-layer
network applied at every position, its input gathered by heads that copy x_j to position j).
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np


@dataclass(frozen=True)
class SplineLayer:
    """One encoder block's weights; ``aq, ak, av`` are (h, a), ``bq, bk, bv`` (p, h)."""

    stage: str
    note: str
    aq: np.ndarray = field(repr=False)
    ak: np.ndarray = field(repr=False)
    av: np.ndarray = field(repr=False)
    bq: np.ndarray = field(repr=False)
    bk: np.ndarray = field(repr=False)
    bv: np.ndarray = field(repr=False)
    a1: np.ndarray = field(repr=False)
    b1: np.ndarray = field(repr=False)
    a2: np.ndarray = field(repr=False)
    b2: np.ndarray = field(repr=False)

    @property
    def dims(self) -> tuple[int, int, int, int]:
        """(input width a, heads h, hidden width w, output width b): SplineBlock's generics."""
        return self.aq.shape[1], self.aq.shape[0], self.a1.shape[0], self.a2.shape[0]


class Heads:
    """Zeroed head weights to fill in: h heads reading a-wide tokens at p positions."""

    def __init__(self, a: int, h: int, p: int):
        self.aq, self.ak, self.av = (np.zeros((h, a)) for _ in range(3))
        self.bq, self.bk, self.bv = (np.zeros((p, h)) for _ in range(3))

    def layer(self, stage: str, note: str, net: tuple[np.ndarray, ...]) -> SplineLayer:
        return SplineLayer(stage, note, self.aq, self.ak, self.av, self.bq, self.bk, self.bv, *net)


def linear_net(m: np.ndarray) -> tuple[np.ndarray, ...]:
    """A one-layer ReLU network computing z -> m z exactly: z = ReLU(z) - ReLU(-z) (Lemma 3.6's proof)."""
    h = m.shape[1]
    return np.vstack([np.eye(h), -np.eye(h)]), np.zeros(2 * h), np.hstack([m, -m]), np.zeros(m.shape[0])


def gather(n: int, p: int, out: np.ndarray | None = None) -> SplineLayer:
    """Lemma 3.6's alpha_1 and phi_1: position j gets (1, every entry of X) in its block j of width
    1 + np (feature 0 the constant, feature 1 + j'n + i the entry x[i, j']), zero elsewhere.
    ``out`` (c, p(1 + np)), if given, is applied after (the linear map l of Theorem 3.8's proof)."""
    width = 1 + n * p
    heads = Heads(n, p * width, p)
    for j in range(p):
        for mu in range(width):
            c = j * width + mu
            heads.bq[j, c] = 1.0                       # B_Q = E_1j: only query j sees this head
            if mu == 0:
                heads.bv[0, c] = heads.bk[0, c] = 1.0  # B_V = B_K = E_11: the value 1 at key 1
            else:
                jj, i = divmod(mu - 1, n)
                heads.av[c, i] = 1.0                   # A_V = E_1i: feature i of every key
                heads.bk[jj, c] = 1.0                  # B_K = E_1j': only key j' counts
    m = np.eye(p * width) if out is None else out
    return heads.layer("gather", f"1 and the {n * p} entries of X at every position (Lemma 3.6, alpha_1)",
                       linear_net(m))


def products(width: int, pairs: list[tuple[int, int]], p: int, out: np.ndarray | None = None,
             note: str = "") -> SplineLayer:
    """Lemma 3.6's alpha_2 and phi_2 on a block-diagonal input (block width ``width``, feature 0 the
    constant 1): output block j holds feature mu times feature nu of block j for each pair, as
    x_mu x_nu⁺ - x_mu (-x_nu)⁺ (one head each; none for the second when nu is the constant)."""
    signed = [(t, mu, nu, s) for t, (mu, nu) in enumerate(pairs) for s in ((1.0,) if nu == 0 else (1.0, -1.0))]
    heads = Heads(p * width, p * len(signed), p)
    m = np.zeros((p * len(pairs), p * len(signed)))
    for j in range(p):
        for r, (t, mu, nu, s) in enumerate(signed):
            c = j * len(signed) + r
            heads.av[c, j * width + mu] = 1.0          # A_V = E_1mu: the value is feature mu ...
            heads.bk[j, c] = 1.0                       # ... of key j alone (B_K = E_1j)
            heads.aq[c, j * width + nu] = s            # A_Q = +-E_1nu: the score is (+-x_nu)⁺ at query j
            m[j * len(pairs) + t, c] = s
    return heads.layer("products", note or f"{len(pairs)} products of two features (Lemma 3.6, alpha_2)",
                       linear_net(m if out is None else out @ m))


def network(a1, b1, a2, b2, p: int, stage: str = "network", note: str = "") -> SplineLayer:
    """Lemma 3.7: the one-layer network A2 ReLU(A1 x + b1) + b2 at every position, as an encoder block.
    Head (i, j) copies x[i] of position j to position j alone (A_V = E_1i, B_K = B_Q = E_1j);
    psi sums the heads of each feature, so phi_1 = phi . psi has A1 psi as its first layer."""
    a = a1.shape[1]
    heads = Heads(a, a * p, p)
    psi = np.zeros((a, a * p))
    for i in range(a):
        for j in range(p):
            c = i * p + j
            heads.av[c, i] = heads.bk[j, c] = heads.bq[j, c] = 1.0
            psi[i, c] = 1.0
    net = (np.asarray(a1, float) @ psi, np.asarray(b1, float), np.asarray(a2, float), np.asarray(b2, float))
    return heads.layer(stage, note or f"a one-layer network {a} -> {a2.shape[0]} at every position (Lemma 3.7)",
                       net)
