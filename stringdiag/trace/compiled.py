"""Compiling a traced program: its opaque boxes are run by the torch operations they stand
for, with their arguments as the module gave them (the batch axis and axes of size one put
back where torch had them)."""
from __future__ import annotations

import contextlib
import math

import torch
from torch.utils import _pytree as pytree

from ..errors import DiagError
from ..lower.lower import PRIMITIVES
from ..graph.types import DimKind
from .values import Slot


def _batch(axes) -> int | None:
    return next((t for t, a in enumerate(axes) if a.kind is DimKind.BATCH), None)


def to_torch(x: torch.Tensor, axes) -> torch.Tensor:
    """From the compiled layout ([batch..., kept axes]) to torch's (batch and size-one axes in place)."""
    n_kept = sum(a.kept for a in axes)
    local = x.shape[x.dim() - n_kept:]
    batch = math.prod(x.shape[:x.dim() - n_kept])
    b = _batch(axes)
    if b is None:
        if batch != 1:
            raise DiagError("an opaque box on a value without a batch axis cannot run on a batch")
        x = x.reshape(local)
    else:
        x = x.reshape(batch, *local).movedim(0, sum(1 for a in axes[:b] if a.kept))
    sizes = iter(x.shape)
    return x.reshape([1 if a.kind is DimKind.ONE else next(sizes) for a in axes])


def from_torch(y: torch.Tensor, axes, lead: torch.Size) -> torch.Tensor:
    """Back from torch's layout to the compiled one, ``lead`` the leading axes the inputs had."""
    y = y.reshape([s for t, s in enumerate(y.shape) if axes[t].kind is not DimKind.ONE])
    b = _batch(axes)
    if b is None:  # the same for every row of the batch: one row, which broadcasts
        return y.reshape(*[1] * max(len(lead), 1), *y.shape)
    b -= sum(1 for a in axes[:b] if a.kind is DimKind.ONE)
    y = y.movedim(b, 0)
    return y.reshape(*lead, *y.shape[1:])


def runner(op):
    """The function an opaque box compiles to."""
    def run(*xs: torch.Tensor) -> torch.Tensor:
        kept = sum(a.kept for a in op.ins[0]) if op.ins else 0
        lead = xs[0].shape[:xs[0].dim() - kept] if xs else torch.Size()
        real = [to_torch(x, axes) for x, axes in zip(xs, op.ins)]
        args, kwargs = pytree.tree_map(lambda a: real[a.k] if isinstance(a, Slot) else a, (op.args, op.kwargs))
        return from_torch(op.fn(*args, **kwargs), op.out, lead)
    run.__name__ = op.name
    return run


def _entry(op):
    return lambda c: c.call(runner(op), *c.xs)


@contextlib.contextmanager
def opaque_boxes(ops: dict):
    """The table of primitives with the opaque boxes of one traced program, while compiling it."""
    clash = set(ops) & set(PRIMITIVES)
    if clash:
        raise DiagError(f"opaque boxes {sorted(clash)} would shadow primitives of the same name")
    PRIMITIVES.update({name: _entry(op) for name, op in ops.items()})
    try:
        yield
    finally:
        for name in ops:
            PRIMITIVES.pop(name, None)
