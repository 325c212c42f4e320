"""A region of a diagram written back as the body of a ``specialise`` step.

The region is read per element of the SIMD boxes the hole sat in (its *outer* labels): each
wire's axes are followed from the hole's inputs, and an axis that carries an outer label is
dropped from every statement. Each box becomes one statement in the language's own forms
(``sum_{..} a * b``, ``op<dims>(args)``, ``x[i, :]``), learnables local to the target are
declared in the body. What cannot be written so (a loop, a sum over an outer label) gives
``None``: the search then has no candidate, never a wrong one — and whatever is written is
checked again by the isomorphism with the target.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from ..graph.box import Global, Kind, Local
from ..graph.diagram import Diagram
from ..graph.types import Dim


class Unwritable(Exception):
    """The region has a box this printer does not write."""


@dataclass
class Region:
    """Boxes of ``d`` between ``inputs`` (wire, and per axis its outer label or None) and ``output``."""

    d: Diagram
    boxes: list[int]
    inputs: list[tuple[int, tuple]]
    output: int
    outer_out: tuple  # the output wire's axes: its outer labels, then None for each local axis
    dims: dict[str, Dim] = field(default_factory=dict)  # instantiated dims back to the hole's generics


class _Writer:
    def __init__(self, region: Region, params: list[str]):
        self.r, self.d = region, region.d
        self.outer: dict[int, tuple] = {w: ax for w, ax in region.inputs}
        self.names: dict[int, str] = {w: p for (w, _), p in zip(region.inputs, params)}
        self.lines: list[str] = []
        self.decls: dict[str, str] = {}

    def dim(self, x: Dim) -> str:
        return str(x.substitute(self.r.dims)) if self.r.dims else str(x)

    def write(self) -> str:
        for b in self.r.boxes:
            self.box(b)
        if self.outer.get(self.r.output) != self.r.outer_out:
            raise Unwritable("the output's axes are not the hole's")
        body = [*self.decls.values(), *self.lines, f"return {self.names[self.r.output]}"]
        return "{\n" + "".join(f"  {line}\n" for line in body) + "}"

    def labels(self, b: int) -> dict[str, str]:
        """Each label of box ``b`` read from an outer axis: which outer label it is."""
        rec = self.d.record(b)
        seen: dict[str, str] = {}
        summed = {lab for lab, _ in rec.summed}
        for w, axes in self.d.box_inputs(b):
            if w not in self.outer:
                raise Unwritable("the region reads a wire from outside")
            for lab, out in zip(axes, self.outer[w]):
                if out is None:
                    continue
                if not isinstance(lab, str) or lab in summed or seen.get(lab, out) != out:
                    raise Unwritable("an outer axis is summed, sliced or read twice")
                seen[lab] = out
        return seen

    def box(self, b: int) -> None:
        rec = self.d.record(b)
        if rec.loop is not None:
            raise Unwritable("a loop")
        outer = self.labels(b)
        local = {lab: f"i{k}" for k, (lab, _) in enumerate(rec.simd + rec.summed) if lab not in outer}
        expr = self.expression(b, local)
        outs = self.d.box_outputs(b)
        inner = [local[lab] for lab, _ in rec.simd if lab not in outer]
        targets = []
        for w in outs:
            name = f"w{w}"
            self.names[w] = name
            n_local = len(self.d.wire_type(w)) - len(rec.simd)
            self.outer[w] = tuple(outer.get(lab) for lab, _ in rec.simd) + (None,) * n_local
            targets.append(name + (f"[{', '.join(inner)}]" if inner else ""))
        self.lines.append(f"{', '.join(targets)} = {expr}")

    def arg(self, w: int, axes: tuple, local: dict) -> str:
        keep = [a for a, out in zip(axes, self.outer[w]) if out is None]
        ints = [a for a in keep if isinstance(a, int)]
        if ints != sorted(ints):
            raise Unwritable("a local axis read out of order")
        if any(isinstance(a, str) and a not in local for a in keep):
            raise Unwritable("an outer index reads a wire made outside it")
        index = [local[a] if isinstance(a, str) else ":" for a in keep]
        while index and index[-1] == ":":
            index.pop()
        return self.names[w] + (f"[{', '.join(index)}]" if index else "")

    def expression(self, b: int, local: dict) -> str:
        rec = self.d.record(b)
        args = [self.arg(w, axes, local) for w, axes in self.d.box_inputs(b)]
        gen = f"<{', '.join(self.dim(x) for _, x in rec.generics)}>" if rec.generics else ""
        if rec.kind is Kind.CONTRACT:
            summed = [local[lab] for lab, _ in rec.summed]
            head = "" if not summed else (f"sum_{summed[0]} " if len(summed) == 1 else f"sum_{{{', '.join(summed)}}} ")
            return head + " * ".join(args)
        if rec.kind is Kind.CONST:
            return f"({rec.op})"
        if rec.kind is Kind.REINDEX:
            return args[0]
        if not rec.op.isidentifier():
            raise Unwritable(f"a box named {rec.op!r}")
        if rec.kind is Kind.LEARN and isinstance(rec.weights, Local) and rec.ref is not None:
            self.decls[rec.op] = rec.ref.signature()
        elif rec.kind is Kind.LEARN and not isinstance(rec.weights, Global):
            raise Unwritable("a learnable of an instance")
        return f"{rec.op}{gen}({', '.join(args)})"


def write_body(region: Region, params: list[str]) -> str:
    """The region as ``{ ... }`` with ``params`` as the names of its inputs; raises
    :class:`Unwritable` where it cannot be written."""
    return _Writer(region, params).write()


__all__ = ["Region", "Unwritable", "write_body"]
