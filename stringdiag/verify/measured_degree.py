"""The static degree (``analysis/degree.py``) confirmed numerically on the compiled module.

Two checks, both in float64 with random weights:

- **Along a line inside one linear region.** On ``x0 + tau v`` the branches of the ReLUs
  (and of max, min, hardmax, every comparison), recorded by a ``TorchFunctionMode`` at
  every point, are one pattern on a segment of ``tau``: the longest such runs on a grid
  are taken and re-checked at every sample point. There the map is a polynomial in ``tau``
  of degree at most k: sampled at Chebyshev points and fitted in the Chebyshev basis to
  degree k + 2, the coefficients above k vanish (under 1e-13 of the largest value) and the
  k-th does not. This is the (k+1)-th divided difference vanishing and the k-th not, at
  well-conditioned nodes (equispaced finite differences lose 2^k to noise). It works while
  the top coefficient of a piece stands above float64 noise in a segment of one region:
  up to degree 9 reliably in the tiny blocks of the tests; the coefficients of a degree-27
  piece fall under the noise near degree 12 to 19.
- **By scaling, biases set to zero.** Without biases every block of a ReLU transformer is
  positively homogeneous: ``relu(lambda z) = lambda relu(z)``, so ``f(lambda X, Y) =
  lambda^a f(X, Y)`` with ``a`` the degree in X, exactly, and each ray from the origin lies
  in one linear region, where ``f`` is ``c lambda^a``. The measured ``log(f(lambda x) /
  f(x)) / log lambda``, the same integer for every entry and for two values of lambda,
  confirms degrees far beyond reach of differences (729 needs ``2^729 ~ 1e219``: inside
  float64's range). A map that is not homogeneous says so instead of giving a number.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable, Mapping, Sequence

import numpy as np
import torch
from torch.overrides import TorchFunctionMode

from ..analysis.degree import degree
from ..graph.diagram import Diagram
from ..lower import compile
from .oracle import dim_names, draw
from ..graph.types import DimKind

# torch functions whose result depends on which side of a boundary the input is
_SIGN = {"relu", "relu_", "abs", "sign"}
_PAIR = {"maximum", "minimum"}
_TEST = {"eq", "ne", "gt", "lt", "ge", "le", "__eq__", "__ne__", "__gt__", "__lt__", "__ge__", "__le__"}


class Patterns(TorchFunctionMode):
    """Records the branch every piecewise operation takes (ReLU's sign, max's winner, the
    outcome of a comparison), batch row by batch row, to tell linear regions apart."""

    def __init__(self):
        super().__init__()
        self.seen: list[torch.Tensor] = []

    def __torch_function__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        name = getattr(func, "__name__", "")
        if name in _SIGN:
            self.seen.append(torch.stack([args[0] > 0, args[0] < 0]))
        elif name in _PAIR:
            a, b = torch.broadcast_tensors(args[0], args[1])
            self.seen.append(torch.stack([a > b, a < b]))
        elif name in _TEST and isinstance(out, torch.Tensor):
            self.seen.append(out[None].clone())
        elif name == "amax" and isinstance(out, torch.Tensor):
            self.seen.append((args[0] == torch.amax(args[0], *args[1:2], keepdim=True, **_dim(kwargs)))[None])
        return out


def _dim(kwargs) -> dict:
    return {"dim": kwargs["dim"]} if kwargs and "dim" in kwargs else {}


def _record(f: Callable, xs: Sequence[torch.Tensor]) -> list[torch.Tensor]:
    rec = Patterns()
    with torch.no_grad(), rec:
        f(*xs)
    return rec.seen


def row_patterns(f: Callable, xs: Sequence[torch.Tensor]) -> list[bytes]:
    """For every batch row of the inputs (one point each), the branches it takes, as bytes.
    A recorded tensor carries the batch axis if it grows by one with one more point (an
    axis of the same size that is not the batch, a mask's, stays put)."""
    n = xs[0].shape[0]
    seen = _record(f, xs)
    more = _record(f, [torch.cat([x, x[:1]]) for x in xs])
    parts = [p.transpose(0, 1).reshape(n, -1) for p, q in zip(seen, more)
             if p.dim() > 1 and p.shape[1] == n and q.shape[1] == n + 1]
    if not parts:
        return [b""] * n
    rows = torch.cat(parts, dim=1).numpy()
    return [r.tobytes() for r in rows]


def one_region(f: Callable, xs: Sequence[torch.Tensor]) -> bool:
    """Whether every batch row of the inputs takes the same branches."""
    return len(set(row_patterns(f, xs))) == 1


def regions(f: Callable, xs: list[torch.Tensor], vs: list[torch.Tensor], reach: float = 4.0,
            grid: int = 601) -> list[tuple[float, float]]:
    """The segments of the line ``xs + tau vs``, ``|tau| <= reach``, that one pattern holds
    on at every point of a grid, longest first, each shrunk by a grid step at both ends."""
    taus = np.linspace(-reach, reach, grid)
    pats = row_patterns(f, _points(xs, vs, taus))
    runs, start = [], 0
    for i in range(1, grid + 1):
        if i == grid or pats[i] != pats[start]:
            if i - start >= 4:
                runs.append((taus[start + 1], taus[i - 2]))
            start = i
    return sorted(runs, key=lambda r: r[0] - r[1])


@dataclass(frozen=True)
class Check:
    """One numeric confirmation: of output ``output``'s degree in ``inputs``."""

    output: str
    inputs: str  # "all inputs" or "x"
    claimed: int
    measured: int | None
    method: str  # "line" or "scaling"
    detail: str

    @property
    def ok(self) -> bool:
        return self.measured == self.claimed

    def describe(self) -> str:
        verdict = "confirmed" if self.ok else ("NOT confirmed" if self.measured is not None else "no number")
        return (f"{verdict}: {self.output} of degree {self.claimed} in {self.inputs}, measured {self.measured} "
                f"by {self.method} ({self.detail})")


def _outputs(y) -> list[torch.Tensor]:
    return list(y) if isinstance(y, tuple) else [y]


def line_degree(f: Callable, xs: list[torch.Tensor], move: Sequence[int], claimed: int, gen: torch.Generator,
                out: int = 0, floor: float = 1e-13, tries: int = 6) -> tuple[int | None, str]:
    """The degree of ``f`` (output ``out``) along a random line through ``xs`` moving the
    inputs ``move``, in the longest segments of one linear region (``tries`` of them): the
    highest Chebyshev coefficient above ``floor`` times the largest value, fitting degree
    ``claimed + 2``; the largest such degree over the segments."""
    vs = [torch.randn(x.shape, generator=gen, dtype=x.dtype) if i in move else torch.zeros_like(x)
          for i, x in enumerate(xs)]
    best: tuple[int | None, str] = (None, "no segment of one region found")
    for lo, hi in regions(f, xs, vs)[:tries]:
        got = _segment_degree(f, xs, vs, lo, hi, claimed + 2, out, floor)
        if got[0] is not None and (best[0] is None or got[0] > best[0]):
            best = got
    return best


def _segment_degree(f: Callable, xs: list[torch.Tensor], vs: list[torch.Tensor], lo: float, hi: float, deg: int,
                    out: int, floor: float) -> tuple[int | None, str]:
    nodes = np.cos(np.pi * (np.arange(2 * deg + 2) + 0.5) / (2 * deg + 2))  # Chebyshev points of [-1, 1]
    mid, half = (lo + hi) / 2, (hi - lo) / 2
    if not one_region(f, _points(xs, vs, mid + half * np.concatenate([nodes, np.linspace(-1, 1, 4 * deg + 1)]))):
        return None, "the segment left its region between grid points"
    with torch.no_grad():
        y = _outputs(f(*_points(xs, vs, mid + half * nodes)))[out].reshape(len(nodes), -1).numpy()
    scale = float(np.abs(y).max())
    if scale == 0:
        return None, "the output is zero on the segment"
    size = np.abs(np.polynomial.chebyshev.chebfit(nodes, y, deg)).max(axis=1) / scale
    top = max([j for j in range(deg + 1) if size[j] > floor], default=0)
    shown = ", ".join(f"c{j} {size[j]:.0e}" for j in range(max(top - 1, 0), deg + 1))
    return top, f"segment of length {hi - lo:.2g}; Chebyshev coefficients / scale: {shown}"


def _points(xs: list[torch.Tensor], vs: list[torch.Tensor], taus: np.ndarray) -> list[torch.Tensor]:
    t = torch.tensor(taus, dtype=xs[0].dtype)
    return [x[None] + t.reshape(-1, *[1] * x.dim()) * v[None] for x, v in zip(xs, vs)]


def scaling_degree(f: Callable, xs: list[torch.Tensor], move: Sequence[int], out: int = 0,
                   tol: float = 1e-7) -> tuple[int | None, str]:
    """The degree of positive homogeneity of ``f`` in the inputs ``move``: ``log(f(lambda x)
    / f(x)) / log(lambda)`` for lambda 2 and 1.5, on every entry that is not (nearly) zero; None
    unless x, 1.5 x and 2 x take the same branches and all entries agree on one integer."""
    ray = [torch.stack([x * lam if i in move else x for lam in (1.0, 1.5, 2.0)]) for i, x in enumerate(xs)]
    if not one_region(f, ray):
        return None, "the ray from the origin crossed a region boundary: the map is not homogeneous"
    with torch.no_grad():
        y = _outputs(f(*xs))[out].flatten()
        keep = y.abs() > 1e-6 * y.abs().max()
        if not bool(keep.any()):
            return None, "the output is zero"
        found = set()
        for lam in (2.0, 1.5):
            ys = _outputs(f(*[x * lam if i in move else x for i, x in enumerate(xs)]))[out].flatten()
            ratio = ys[keep] / y[keep]
            if not bool(torch.isfinite(ratio).all()):
                return None, f"f({lam} x) overflows float64"
            if bool((ratio <= 0).any()):
                return None, "not homogeneous: a value changed sign"
            a = torch.log(ratio) / math.log(lam)
            k = round(float(a.mean()))
            if float((a - k).abs().max()) > tol:
                return None, f"not homogeneous: exponents from {float(a.min()):.6g} to {float(a.max()):.6g}"
            found.add(k)
    if len(found) > 1:
        return None, f"not homogeneous: lambda 2 and 1.5 give {sorted(found)}"
    return found.pop(), f"f(lambda x) = lambda^k f(x) for lambda 2 and 1.5 on {int(keep.sum())} entries"


def sizes_for(d: Diagram, fixed: int = 2, seq: int = 3, given: Mapping[str, int] | None = None) -> dict[str, int]:
    """Tiny sizes: every fixed dimension ``fixed``, every sequence length ``seq``."""
    prog = d.program
    out = {}
    for n in dim_names(d.expand()):
        decl = prog.lookup_dim(n) if prog is not None else None
        out[n] = seq if decl is not None and decl.kind is DimKind.SEQ else fixed
    return {**out, **(given or {})}


def confirm(d: Diagram, dims: Mapping[str, int] | None = None, approximator: str = "linear", seed: int = 0,
            lines: int = 8, line_limit: int = 9) -> list[Check]:
    """Every output's static degree, overall and per input, checked on the compiled module:
    along random lines inside one region (up to ``lines``: the largest degree seen must be
    the claim) where the claim is at most ``line_limit``, and by scaling with zero biases."""
    splines = [(out, r, total) for out, r in enumerate(degree(d)) if (total := r.degree) is not None and r.spline]
    if not splines:
        return []  # nothing to confirm (and an abstract box would not compile)
    sizes = sizes_for(d, given=dims)
    gen = torch.Generator().manual_seed(seed)
    torch.manual_seed(seed)
    f = compile(d, dims=sizes, approximator=approximator, dtype=torch.float64)
    draw(f, gen)
    shapes = [tuple(dim.evaluate(sizes) for dim in ty) for ty in d.input_types]
    names = d.input_names or [f"in{k}" for k in range(len(shapes))]
    checks = []
    for out, r, total in splines:
        claims = [("all inputs", list(range(len(names))), total)]
        claims += [(n, [k], (r.per_input or {})[n]) for k, n in enumerate(names)] if len(names) > 1 else []
        for what, move, k in claims:
            if k <= line_limit:
                checks.append(_along_lines(f, shapes, move, k, gen, out, lines, r.name, what))
            checks.append(Check(r.name, what, k, *_scaled(f, shapes, move, out, gen)))
    return checks


def _along_lines(f: Callable, shapes: list[tuple], move: list[int], k: int, gen: torch.Generator, out: int,
                 lines: int, name: str, what: str) -> Check:
    """Random lines through random points until one shows degree ``k`` (or more: then the
    claim is wrong), at most ``lines`` of them; the largest degree seen is the measure."""
    best: tuple[int | None, str] = (None, "no line drawn")
    for n in range(1, lines + 1):
        got = line_degree(f, _draw(shapes, gen), move, k, gen, out)
        if got[0] is not None and (best[0] is None or got[0] > best[0]):
            best = got
        if best[0] is not None and best[0] >= k:
            break
    return Check(name, what, k, best[0], f"{n} random line(s), each inside one linear region", best[1])


def _draw(shapes: list[tuple], gen: torch.Generator) -> list[torch.Tensor]:
    return [torch.randn(*s, generator=gen, dtype=torch.float64) for s in shapes]


def _scaled(f: torch.nn.Module, shapes: list[tuple], move: list[int], out: int,
            gen: torch.Generator, draws: int = 30) -> tuple[int | None, str, str]:
    """Scaling, with fresh weights whose biases are zero and fresh inputs, drawn again while
    the output is zero (a deep ReLU network without biases is often dead); ``f``'s own
    weights are put back after."""
    saved = {n: p.detach().clone() for n, p in f.named_parameters()}
    k, detail = None, "no input drawn"
    try:
        for _ in range(draws):
            draw(f, gen)
            with torch.no_grad():
                for n, p in f.named_parameters():
                    if n.endswith("bias"):
                        p.zero_()
            k, detail = scaling_degree(f, _draw(shapes, gen), move, out)
            if detail != "the output is zero":
                break
    finally:
        with torch.no_grad():
            for n, p in f.named_parameters():
                p.copy_(saved[n])
    return k, "scaling (biases zero)", detail


__all__ = ["confirm", "line_degree", "scaling_degree", "one_region", "regions", "Patterns", "Check", "sizes_for"]
