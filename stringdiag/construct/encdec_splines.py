"""Partially autoregressive splines as encoder-decoders (Lai, Lim and Liu 2024, the remark after
Corollary 3.10: "a similar construction can be extended"; the paper gives no more, so this is our
reconstruction, labelled as one). f(X, Y) has entry j reading all of X and y_1 .. y_j (Sec. 1.7's
partially autoregressive form). Built as Sec. 1.8's encoder-decoder: one encoder block, then blocks
tau_i = phi_i(gamma_i(E, beta_i(tau_{i-1}))):

- the encoder puts 1 and every entry of X at every position of E (heads whose query bias is 1
  everywhere, a broadcast where Lemma 3.6's gather uses E_1j);
- block 1: beta is Lemma 3.6's gather on Y with the decoder's mask (y at a later position gives 0), and
  gamma's heads bring X's entries in (value an entry of E at key 1, score beta's constant 1 of block j),
  and pass beta's entries y through as y⁺ and (-y)⁺ (value 1 at key 1, query +-y); phi recombines them
  into the gather layout of the tokens [x_j, y_j], block j at position j;
- every later block is a layer of Corollary 3.10's decoder (products, min, max) on that layout, its
  masked heads as beta, gamma passing each head through as h⁺ and (-h)⁺, phi its network with
  A1 [I, -I] in front.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch

from ..errors import DiagError
from . import encoder_file
from .maxdef import MaxMin, evaluate
from .spline_blocks import Heads, SplineLayer, gather, linear_net

DRAWS = 16


@dataclass(frozen=True)
class EncDecLayer:
    """One encoder-decoder block: beta's masked heads (``beta``, its network unused), gamma's heads and
    phi's network (``gamma``)."""

    beta: SplineLayer = field(repr=False)
    gamma: SplineLayer = field(repr=False)

    @property
    def dims(self) -> tuple[int, int, int, int, int]:
        """(a, h, g, w, b): beta's input width and heads, gamma's heads, phi's hidden and output widths."""
        return self.beta.dims[0], self.beta.dims[1], self.gamma.dims[1], self.gamma.dims[2], self.gamma.dims[3]


@dataclass(frozen=True)
class EncoderDecoder:
    n: int
    m: int
    p: int
    encoder: SplineLayer
    layers: tuple[EncDecLayer, ...]
    source: str = field(repr=False)
    weights: dict[str, torch.Tensor] = field(repr=False)
    module: Any = field(repr=False, compare=False)
    error: float

    @property
    def parameters(self) -> int:
        return sum(int(v.numel()) for v in self.weights.values())


def _none(h: int) -> tuple[np.ndarray, ...]:
    return np.zeros((0, h)), np.zeros(0), np.zeros((0, 0)), np.zeros(0)


def broadcast(n: int, p: int) -> SplineLayer:
    """The encoder block: every position holds 1 and the n p entries of X (feature 1 + j'n + i is x[i, j'])."""
    width = 1 + n * p
    heads = Heads(n, width, p)
    heads.bq[:, :] = 1.0                               # every query sees every head
    heads.bv[0, 0] = heads.bk[0, 0] = 1.0              # the constant: value 1 at key 1
    for mu in range(1, width):
        jj, i = divmod(mu - 1, n)
        heads.av[mu, i] = 1.0                          # A_V = E_1i ...
        heads.bk[jj, mu] = 1.0                         # ... of key j' alone
    return heads.layer("encoder", f"1 and the {n * p} entries of X at every position", linear_net(np.eye(width)))


def cross(a: int, e: int, g: int, p: int) -> Heads:
    """Zeroed gamma heads: queries read a-wide decoder tokens, keys and values e-wide encoder tokens."""
    heads = Heads(a, g, p)
    heads.ak, heads.av = np.zeros((g, e)), np.zeros((g, e))
    return heads


def first_block(n: int, m: int, p: int, out: np.ndarray | None) -> EncDecLayer:
    """beta: the masked gather of Y; gamma: X's entries and y⁺, (-y)⁺ into position j's block of the
    tokens [x_j, y_j]; phi: that layout (then ``out``, Theorem 3.8's map l, when given)."""
    beta = gather(m, p)
    wy, width, w = 1 + m * p, 1 + (n + m) * p, n + m
    is_y = lambda nu: nu > 0 and (nu - 1) % w >= n  # noqa: E731
    cols = [(j, nu, s) for j in range(p) for nu in range(width) for s in ((1.0, -1.0) if is_y(nu) else (1.0,))]
    heads = cross(p * wy, 1 + n * p, len(cols), p)
    mix = np.zeros((p * width, len(cols)))
    for c, (j, nu, s) in enumerate(cols):
        heads.bk[0, c] = 1.0                           # key 1 alone
        mix[j * width + nu, c] = s
        jj, i = divmod(nu - 1, w)
        if is_y(nu):                                   # y[i - n, j']: +-beta's entry, value 1
            heads.av[c, 0] = 1.0
            heads.aq[c, j * wy + 1 + jj * m + (i - n)] = s
        else:                                          # the constant or x[i, j']: a value of E, score 1 at j
            heads.av[c, 0 if nu == 0 else 1 + jj * n + i] = 1.0
            heads.aq[c, j * wy] = 1.0                  # beta's constant of block j: 1 at position j only
    net = linear_net(mix if out is None else out @ mix)
    gamma = heads.layer("gather", f"1, X's {n * p} entries and Y's {m * p} (masked) at every position", net)
    return EncDecLayer(beta, gamma)


def lift(layer: SplineLayer, e: int, p: int) -> EncDecLayer:
    """A decoder layer as an encoder-decoder block: its heads as beta, gamma passing each head h through
    as h⁺ and (-h)⁺ (value 1 at key 1, A_Q = +-E_h), phi its network on h⁺ - (-h)⁺."""
    h = layer.dims[1]
    heads = cross(h, e, 2 * h, p)
    heads.av[:, 0] = 1.0
    heads.bk[0, :] = 1.0
    heads.aq[:h, :], heads.aq[h:, :] = np.eye(h), -np.eye(h)
    net = (np.hstack([layer.a1, -layer.a1]), layer.b1, layer.a2, layer.b2)
    beta = SplineLayer(layer.stage, layer.note, layer.aq, layer.ak, layer.av, layer.bq, layer.bk, layer.bv, *_none(h))
    return EncDecLayer(beta, heads.layer(layer.stage, layer.note, net))


def source(enc: SplineLayer, layers: list[EncDecLayer], n: int, m: int, title: list[str]) -> str:
    a, h, w, b = enc.dims
    out = layers[-1].dims[4]
    lines = [f"# {t}" for t in title] + [
        "# Written by `stringdiag construct`; weights in encoder.safetensors (float64).",
        'import "spline_encoder.diag"', "", f"diagram {encoder_file.NAME}(x: [s, {n}], y0: [t, {m}]) -> [t, {out}] {{",
        f"  e = SplineBlock<{a}, {h}, {w}, {b}>(x)    # {enc.stage}: {enc.note}"]
    for k, layer in enumerate(layers, 1):
        dims = ", ".join(map(str, (layer.dims[0], b, *layer.dims[1:])))
        lines.append(f"  y{k} = EncDecSplineBlock<{dims}>(e, y{k - 1})    # {layer.gamma.stage}: {layer.gamma.note}")
    return "\n".join(lines + [f"  return y{len(layers)}", "}", ""])


def _heads(prefix: str, layer: SplineLayer) -> dict[str, np.ndarray]:
    out = {f"{prefix}A{k.upper()}.weight": getattr(layer, f"a{k}") for k in "qkv"}
    for k in "qkv":
        table = getattr(layer, f"b{k}")
        held = np.zeros((encoder_file.HELD, table.shape[1]))
        held[:table.shape[0]] = table
        out[f"{prefix}B{k.upper()}.weight"] = held
    return out


def _net(prefix: str, layer: SplineLayer) -> dict[str, np.ndarray]:
    return {prefix + "A1.weight": layer.a1, prefix + "A1.bias": layer.b1, prefix + "A2.weight": layer.a2,
            prefix + "A2.bias": layer.b2}


def weights(enc: SplineLayer, layers: list[EncDecLayer]) -> dict[str, torch.Tensor]:
    """The parameters by the compiled names: ``e.z.*`` and ``e.A*`` the encoder's, ``yk.beta.*`` beta's,
    ``yk.z.*`` gamma's, ``yk.A*`` phi's."""
    out = _heads("e.z.", enc) | _net("e.", enc)
    for k, layer in enumerate(layers, 1):
        out |= _heads(f"y{k}.beta.", layer.beta) | _heads(f"y{k}.z.", layer.gamma) | _net(f"y{k}.", layer.gamma)
    return {k: torch.as_tensor(np.ascontiguousarray(v), dtype=torch.float64).clone() for k, v in out.items()}


def check(module, entries: list[list[MaxMin]], n: int, m: int, p: int, seed: int) -> float:
    """Largest relative |module(X, Y) - f(X, Y)| over random X, Y with N(0, 1) entries."""
    rng, worst = np.random.default_rng(seed), 0.0
    for _ in range(DRAWS):
        x, y = rng.standard_normal((p, n)), rng.standard_normal((p, m))
        with torch.no_grad():
            got = module(torch.as_tensor(x), torch.as_tensor(y)).numpy()
        z = np.hstack([x, y])
        want = np.array([[evaluate(row[j], z) for row in entries] for j in range(p)])
        worst = max(worst, float(np.abs(got - want).max() / max(1.0, float(np.abs(want).max()))))
    if not worst < 1e-8:
        raise DiagError(f"internal: the constructed encoder-decoder is {worst:.2g} from its target")
    return worst


def encoder_decoder(entries, layers: list[SplineLayer], n: int, m: int, p: int, seed: int = 0) -> EncoderDecoder:
    """The encoder-decoder from Corollary 3.10's decoder ``layers`` on the tokens [x_j, y_j] (the first a
    gather, possibly with Theorem 3.8's map l), compiled and compared with f."""
    enc = broadcast(n, p)
    e = 1 + n * p
    first, width = layers[0], 1 + (n + m) * p
    ell = first.a2[:, :p * width]  # the gather's network is linear_net(l): A2 = [l, -l] (l = I without one)
    ed = [first_block(n, m, p, ell)] + [lift(layer, e, p) for layer in layers[1:]]
    title = [f"A partially autoregressive max-definable function of X ({n} x {p}) and Y ({m} x {p}) as a ReLU "
             "encoder-decoder", "(Lai, Lim and Liu (2024), the remark after Corollary 3.10; our reconstruction)."]
    text = source(enc, ed, n, m, title)
    state = weights(enc, ed)
    module = encoder_file.in_memory(text, state)
    return EncoderDecoder(n, m, p, enc, tuple(ed), text, state, module, check(module, entries, n, m, p, seed))


def write(con: EncoderDecoder, out: str | Path) -> tuple[Path, Path]:
    """Write it to directory ``out``, then compile what was written and compare it again."""
    meta = {"construction": "spline-encoder-decoder", "n": con.n, "m": con.m, "p": con.p, "blocks": 1 + len(con.layers)}
    diag, tensors = encoder_file.write(Path(out), con.source, con.weights, meta)
    from safetensors.torch import load_file

    module = encoder_file.build(None, diag, dict(load_file(str(tensors))))
    rng = np.random.default_rng(1)
    xs = (torch.as_tensor(rng.standard_normal((con.p, con.n))), torch.as_tensor(rng.standard_normal((con.p, con.m))))
    with torch.no_grad():
        if not torch.allclose(module(*xs), con.module(*xs), rtol=0, atol=1e-12):
            raise DiagError(f"internal: {diag} does not compute what was constructed")
    return diag, tensors
