"""The incremental form's attention whose causal mask other boxes read (ALiBi's bias, a decay
matrix, ReLU attention): values of two sequence axes hold the new positions (rows) by every
position so far (columns), the per-position values read as keys come from a cache
(``roles.py`` plans which), and a sum or softmax over the columns is accepted only where a causal
mask makes the terms after each row's position vanish, followed box by box (``_scalar_flag``)."""
from __future__ import annotations

import operator
from enum import Enum
from typing import Any

import torch
from torch import fx

from ..errors import DiagError
from ..graph.box import Kind
from ..graph.types import Dim, DimKind
from ..graph.weights import weight_key
from . import primitives as P
from . import roles as R
from .approximators import LearnableTensor
from .lower import LETTERS, Lowering, PrimitiveCall, _axis_bounds
from .param_names import ident as N_ident
from .caches import KeyCache, RunningByKey, mask_at, positions_at, rows_in_roles
from .table import PRIMITIVES, ROW_WISE, STEPS


class Masked(Enum):
    """What the entries after each row's position are, in a value of rows by columns."""

    ZERO = "zero"
    MINUS_INF = "-inf"
    POSITION = "position"  # not a mask: the value is the index along one axis (positions<s>)


Z, NEG, POS = Masked.ZERO, Masked.MINUS_INF, Masked.POSITION
_POSITIONAL = frozenset({"positions", "ones", "zeros", "causal", "window"})


def _scalar_flag(op: str, flags: list, c) -> tuple | None:
    """The mask an elementwise process keeps: a product with a zero is zero; where(x, mask)
    is minus infinity where the mask is zero; exp, relu, sigmoid and softplus of minus infinity
    are zero; a sum with minus infinity is minus infinity, a sum of zeros zero."""
    fz = [f for f in flags if f and f[0] == Z]
    fn = [f for f in flags if f and f[0] == NEG]
    if op == "mul" and fz:
        return fz[0]
    if op == "where" and len(flags) == 2 and flags[1] and flags[1][0] == Z:
        return (NEG, flags[1][1], flags[1][2])
    if op == "add" and fn:
        return fn[0]
    if op in ("add", "sub") and flags and len(fz) == len(flags) and len({f[1:] for f in fz}) == 1:
        return fz[0]  # zero plus zero
    if op == "sub" and flags and flags[0] and flags[0][0] == NEG and not (len(flags) > 1 and flags[1]):
        return flags[0]
    if op == "div" and flags and flags[0] and flags[0][0] == NEG and c is not None and (c.literal(1) or 0) > 0:
        return flags[0]
    if op in ("exp", "relu", "sigmoid", "softplus") and flags and flags[0] and flags[0][0] == NEG:
        return (Z, flags[0][1], flags[0][2])
    if op in ("relu", "neg") and flags and flags[0] and flags[0][0] == Z:
        return flags[0]
    if op == "lt" and len(flags) == 2 and all(f and f[0] == POS for f in flags) and c is not None \
            and c.low.roles.get(flags[0][1]) == R.A and c.low.roles.get(flags[1][1]) == R.N:
        return (Z, flags[1][1], flags[0][1])  # lt(p[j], p[i]) is zero where key j >= query i
    return None


class _Call(PrimitiveCall):
    """A primitive's call, its SIMD labels sized by their roles (the new positions, or all)."""

    def spread(self, y: fx.Node) -> fx.Node:
        read = {a for _, axes in self.low.d.box_inputs(self.b) for a in axes if isinstance(a, str)}
        if all(lab in read for lab, _ in self.node.simd):
            return y
        return self.method("expand", y, -1, *[self.low.label_size(lab, dim) for lab, dim in self.node.simd])


class KeysLowering(Lowering):
    """The lowering's part for values read over every position so far (role A); the
    incremental lowering (``incremental.StepLowering``) is this class with the new positions'."""

    def aligned(self, b: int) -> list[fx.Node]:
        """Lowering.aligned, each input read as its port's role asks (one wire may be read twice:
        p[i] - p[j], the new positions and all of them)."""
        if not getattr(self, "ports", None):
            return super().aligned(b)
        saved = dict(self.env)
        try:
            out = []
            for port, (w, _) in enumerate(self.d.box_inputs(b)):
                self.env[w] = self.ports[port]
                out.append(super().aligned(b)[port])
            return out
        finally:
            self.env.update(saved)

    def contract(self, b: int) -> fx.Node:
        if not getattr(self, "ports", None):
            return super().contract(b)
        node = self.d.record(b)
        letters = iter(LETTERS)
        sym = {lab: next(letters) for lab, _ in tuple(node.simd) + tuple(node.summed)}
        n_local = len(self.d.local_out_type(b, 0))
        local = [next(letters) for _ in range(n_local)]
        subs, args = [], []
        for port, (w, axes) in enumerate(self.d.box_inputs(b)):
            subs.append("..." + "".join(sym[a] if isinstance(a, str) else local[a] for a in axes))
            args.append(self.ports[port])
        out = "..." + "".join(sym[lab] for lab, _ in node.simd) + "".join(local)
        return self.g.call_function(torch.einsum, (",".join(subs) + "->" + out, *args),
                                    name=N_ident(self.out_name(b) or "einsum"))

    def _out_roles(self, b: int, k: int, labels: dict, local: tuple) -> tuple:
        node, w = self.d.record(b), self.d.box_outputs(b)[k]
        n = len(node.simd) - (1 if node.scan and k == 0 else 0)
        ax = self.axes[w]
        head = [labels.get(lab, R.N) if ax[i] else None for i, (lab, _) in enumerate(node.simd[:n])]
        tail = [(local[i] if k == 0 and i < len(local) and local[i] is not None else R.N) if ax[n + i] else None
                for i in range(len(ax) - n)]
        return tuple(head + tail)

    def value(self, b: int, w: int, roles: tuple) -> fx.Node:
        """Wire ``w`` read in ``roles``: as lowered, or, for a diagram's input, as given (and
        cached when read over every position so far)."""
        if (w, roles) not in self.venv and w in self.d.inputs:
            new = tuple(R.N if a else None for a in self.axes[w])
            self.venv[(w, new)] = self.env[w]
            self._keep(w, new)
        if (w, roles) not in self.venv:
            raise self.refuse(b, "reads a value of two sequence axes over every position so far, which comes "
                              "in for the new positions only")
        return self.venv[(w, roles)]

    def _keep(self, w: int, new: tuple) -> None:
        """A cached wire: its new positions appended to what the earlier ones left (role A)."""
        if w in self.plan.cached and R.A not in new and (w, new) in self.venv:
            axis = 1 + self.axes[w].index(True)
            full = tuple(R.A if a else None for a in self.axes[w])
            self.venv[(w, full)] = self.g.call_module(self.slot(KeyCache), (self.venv[(w, new)], axis))


    def full_size(self) -> fx.Node:
        """t0 + m: the positions so far, the new ones included."""
        return self.g.call_function(operator.add, (self.g.call_module(self.clock_attr(), ()), self._named_seq()))

    def _named_seq(self) -> Any:
        prog = self.src.program
        names = [n for n in self.seq if (decl := prog.lookup_dim(n)) is not None and decl.kind is DimKind.SEQ]
        return self.seq[names[0]] if names else self.size(Dim.var(next(iter(self.seq))))

    def label_size(self, lab: str, dim: Dim) -> Any:
        return self.full_size() if self.roles.get(lab) == R.A else self.size(dim)

    def reindex(self, b: int) -> fx.Node:
        (x,) = self.aligned(b)
        sizes = [self.label_size(lab, dim) for lab, dim in self.d.record(b).simd]
        n_local = len(self.d.local_in_type(b, 0))
        return self.g.create_node("call_method", "expand", (x, -1, *sizes, *([-1] * n_local)),
                                  name=N_ident(self.out_name(b) or "r"))

    def primitive(self, b: int) -> fx.Node:
        node = self.d.record(b)
        entry = PRIMITIVES.get(node.op)
        if entry is None:
            raise DiagError(f"fixed process '{node.op}' has no implementation to compile; define it as a "
                            "diagram", node.pos)
        return entry(_Call(self, b))

    def lower_keys(self, b: int, ins: list, outs: list) -> fx.Node:
        """A box that reads or makes values over every position so far (role A)."""
        d, node = self.d, self.d.record(b)
        if node.kind is Kind.ABSTRACT:
            return Lowering.lower_box(self, b)  # refused, as the parallel form refuses it
        flags = [self._in_flag(b, p, roles) for p, roles in enumerate(ins)]
        why = self.crossing(b)
        out_flag = None
        if node.op == "cumsum" and node.kind is Kind.FIXED and ins[0][-1] == R.N and flags[0] \
                and flags[0][0] == Z and flags[0][1] == 0 and self.roles.get(flags[0][2]) == R.A:
            col = 1 + [lab for lab, _ in node.simd].index(flags[0][2])
            y = self.g.call_module(self.slot(RunningByKey), (self.aligned(b)[0], col))
            self.flags[(d.box_outputs(b)[0], outs[0])] = (Z, self._out_axis(b, 0), self._out_axis(b, flags[0][2]))
            return y
        if node.loop is not None or node.op in STEPS and node.op not in _POSITIONAL:
            raise self.refuse(b, "reads every position so far in a way its incremental form does not keep")
        if not d.box_inputs(b) and node.kind is Kind.FIXED and node.op in _POSITIONAL:
            y = self._positional(b, outs[0])
            if node.op == "causal" and outs[0] == (R.N, R.A):
                out_flag = (Z, 0, 1)
        elif not d.box_inputs(b) and node.kind is Kind.LEARN and any(_axis_bounds(node)):
            y = self._table(b, outs[0])
        elif node.kind is Kind.CONTRACT:
            out_flag = self._summed(b, flags)
            y = self.contract(b)
        elif node.op in ROW_WISE and node.kind in (Kind.FIXED, Kind.DIAGRAM):
            f = flags[0]
            row = [lab for lab, _ in node.simd if self.roles.get(lab) == R.N]
            if not (f and f[0] == NEG and f[2] == 0 and len(row) == 1 and f[1] == row[0]):
                raise self.refuse(b, "reads every position so far with no causal mask on it (later positions "
                                  "would count)")
            y = self.primitive(b)
            out_flag = (Z, row[0], 0)
        elif why is not None:
            raise self.refuse(b, why)
        else:
            y = {Kind.CONST: self.constant, Kind.CONTRACT: self.contract, Kind.LEARN: self.learnable,
                 Kind.RANDOM: self.random, Kind.REINDEX: self.reindex}.get(node.kind, self.primitive)(b)
            out_flag = _scalar_flag(node.op, flags, _Call(self, b) if node.kind is Kind.FIXED else None)
            if node.kind is Kind.REINDEX:
                out_flag = flags[0]
        if out_flag is not None and out_flag[0] is not POS and len(d.box_outputs(b)) == 1:
            kind, row, col = out_flag
            where = self._out_axis(b, row), self._out_axis(b, col)
            if None not in where:
                self.flags[(d.box_outputs(b)[0], outs[0])] = (kind, *where)
        return y

    def _in_flag(self, b: int, p: int, roles: tuple):
        """Input p's mask, as (Z or NEG, row, column) in the box's own terms (labels, local axes)."""
        w, ax = self.d.box_inputs(b)[p]
        f = self.flags.get((w, roles))
        return None if f is None else (f[0], ax[f[1]], None if f[2] is None else ax[f[2]])

    def _out_axis(self, b: int, ref) -> int | None:
        node = self.d.record(b)
        labels = [lab for lab, _ in node.simd]
        if isinstance(ref, str):
            return labels.index(ref) if ref in labels else None
        return len(labels) + ref

    def _summed(self, b: int, flags: list):
        """A product summed over every position so far: sound only where a factor is zero after
        each new position (a causal mask), so that the positions not yet seen would add nothing."""
        node = self.d.record(b)
        summed = {lab for lab, dim in node.summed if self.stream(dim)}
        for j in summed:
            if not any(f and f[0] == Z and f[2] == j and self.roles.get(f[1]) == R.N for f in flags):
                raise self.refuse(b, f"sums over the positions of the sequence (index {j}) with no causal "
                                  "mask on the sum (later positions would count)")
        kept = [f for f in flags if f and f[0] == Z and f[1] not in summed and f[2] not in summed]
        return kept[0] if kept else None

    def _positional(self, b: int, roles: tuple) -> fx.Node:
        """positions, ones, zeros, causal, window over the positions each axis's role says."""
        node = self.d.record(b)
        c = _Call(self, b)
        spans = [(self.g.call_module(self.clock_attr(), ()), self._named_seq()) if r == R.N else (0, self.full_size())
                 for r in roles if r is not None]
        if node.op in ("ones", "zeros"):
            return c.call(P.filled, (spans[0][1],), float(node.op == "ones"), c.ref)
        if node.op == "positions":
            return c.call(positions_at, *spans[0], c.ref)
        w = c.static("w") if node.op == "window" else None
        return c.call(mask_at, node.op, spans[0], spans[1], w, c.ref)

    def _table(self, b: int, roles: tuple) -> fx.Node:
        node = self.d.record(b)
        (shape,) = self.local_shapes(b, True)
        mod = self.register(weight_key(node), lambda: LearnableTensor(shape))
        t = self.g.create_node("call_module", mod, (), name=N_ident(self.out_name(b) or node.op))
        bounds, ty = _axis_bounds(node), self.d.local_out_type(b, 0)
        t0 = self.g.call_module(self.clock_attr(), ())
        return self.g.call_function(rows_in_roles, (t, t0, self._named_seq(), list(bounds), [str(x) for x in ty],
                                                  node.op, [None if r is None else r == R.N for r in roles]))
