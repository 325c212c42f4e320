"""The static permutation verdict (``analysis/equivariance.py``) confirmed on the compiled module.

For each sequence dimension: float64 weights and inputs drawn at random (token ids as ids),
every input permuted along each of its axes of the dimension by one random permutation pi
(never the identity), and each output compared with pi applied to the old output
(equivariant) and with the old output itself (invariant), in three draws. An output that
satisfies either everywhere is that; the diagram's measured verdict is made from its
outputs' as the static one is
(``analysis.equivariance.overall``), and the two are compared. Learnable boxes are affine (the
``linear`` policy): tiny ReLU networks at random are often dead, and a constant output is both.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping

import torch

from ..analysis.equivariance import OrderVerdict, equivariance, overall
from ..errors import DiagError
from ..graph.diagram import Diagram
from ..lower import compile
from .measured_degree import sizes_for
from .oracle import draw
from ..graph.types import DimKind

TOL = 1e-9  # relative to the output's largest entry: float64 sums reordered by the permutation


@dataclass(frozen=True)
class Measured:
    """One dimension: the verdict measured, the static one, and the largest relative gaps."""

    dim: str
    measured: OrderVerdict
    claimed: OrderVerdict
    equivariance_gap: float  # max over draws and outputs of |f(pi x) - pi f(x)| / max |f(x)|
    invariance_gap: float    # the same for |f(pi x) - f(x)|
    draws: int

    @property
    def agrees(self) -> bool:
        return self.measured is self.claimed

    def describe(self) -> str:
        what = "confirmed" if self.agrees else f"DISAGREES: the static pass says {self.claimed.value}"
        return (f"{self.dim}: measured {self.measured.value}, {what} (permuted inputs, {self.draws} draws in "
                f"float64: |f(pi x) - pi f(x)| {self.equivariance_gap:.1e}, |f(pi x) - f(x)| "
                f"{self.invariance_gap:.1e}, relative)")


def _permute(x: torch.Tensor, axes: list[int], perm: torch.Tensor) -> torch.Tensor:
    for a in axes:
        x = x.index_select(a + 1, perm)  # + 1: the batch axis
    return x


def _axes(types, s: str) -> list[list[int]]:
    return [[k for k, dim in enumerate(t) if dim.name == s] for t in types]


def _inputs(d: Diagram, sizes: Mapping[str, int], gen: torch.Generator, batch: int) -> list[torch.Tensor]:
    xs = []
    for w, t in zip(d.inputs, d.input_types):
        shape = (batch, *(dim.evaluate(sizes) for dim in t))
        ids = d.id_range(w)
        if ids is not None:
            xs.append(torch.randint(0, ids.evaluate(sizes), shape, generator=gen))
        else:
            xs.append(torch.randn(shape, generator=gen, dtype=torch.float64))
    return xs


def _outs(y) -> list[torch.Tensor]:
    return list(y) if isinstance(y, (tuple, list)) else [y]


def _gap(a: torch.Tensor, b: torch.Tensor) -> float:
    scale = float(b.abs().max()) if b.numel() else 0.0
    return float((a - b).abs().max()) / max(scale, 1e-300) if a.numel() else 0.0


def measure(d: Diagram, dims: Mapping[str, int] | None = None, seq: int | None = None, draws: int = 3,
            seed: int = 0) -> list[Measured]:
    """Each sequence dimension of ``d``'s inputs, measured and compared with the static verdict.
    Sequences are longer than twice every declared size (a window of width w covers the whole
    of a shorter one, and then a mask over positions hides nothing), at least 7 long.
    Raises :class:`DiagError` when the diagram does not compile (an abstract family, say)."""
    claims = equivariance(d)
    if not claims:
        return []
    decls = d.program.dims.items() if d.program is not None else ()
    declared = {n for n, decl in decls if decl.default is not None}
    if seq is None:
        seq = max([7] + [2 * int(decl.default) + 1 for _, decl in decls
                         if decl.kind is DimKind.FIXED and isinstance(decl.default, int)])
    sizes = {n: v for n, v in sizes_for(d, seq=seq, given=dims).items() if n not in declared or n in (dims or {})}
    gen = torch.Generator().manual_seed(seed)
    torch.manual_seed(seed)
    f = compile(d, dims=sizes, approximator="linear", dtype=torch.float64)
    f.eval()
    full = {**{n: decl.default for n, decl in d.program.dims.items() if decl.default is not None}, **sizes} \
        if d.program is not None else sizes
    found = []
    for claim in claims:
        s = claim.dim
        in_axes, out_axes = _axes(d.input_types, s), _axes(d.output_types, s)
        n = full[s]
        equi = [True] * len(d.outputs)
        inv = [True] * len(d.outputs)
        egap = igap = 0.0
        for _ in range(draws):
            draw(f, gen)
            xs = _inputs(d, full, gen, 2)
            perm = torch.randperm(n, generator=gen)
            while n > 1 and bool((perm == torch.arange(n)).all()):
                perm = torch.randperm(n, generator=gen)
            with torch.no_grad():
                y0 = _outs(f(*xs))
                y1 = _outs(f(*[_permute(x, a, perm) for x, a in zip(xs, in_axes)]))
            for k, (a, b, axes) in enumerate(zip(y0, y1, out_axes)):
                e, i = _gap(b, _permute(a, axes, perm)), _gap(b, a)
                egap, igap = max(egap, e), max(igap, i)
                equi[k] &= e <= TOL
                inv[k] &= i <= TOL
        measured = overall([(equi[k] if axes else inv[k], inv[k]) for k, axes in enumerate(out_axes)])
        found.append(Measured(s, measured, claim.verdict, egap, igap, draws))
    return found


def confirm(d: Diagram, dims: Mapping[str, int] | None = None) -> list[str]:
    """One line per sequence dimension for ``info --equivariance --confirm``."""
    try:
        found = measure(d, dims)
    except DiagError as e:
        return [f"nothing confirmed numerically: {e}"]
    return [m.describe() for m in found] or ["nothing to confirm: no sequence dimension in the inputs"]


__all__ = ["measure", "confirm", "Measured", "TOL"]
