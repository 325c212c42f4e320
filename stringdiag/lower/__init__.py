"""Lowering: typed graph to trainable PyTorch modules."""
from ..graph.budget import MAX_LOWERED
from .lower import compile as _parallel


def compile(diagram, dims=None, approximator="mlp", dtype=None, fast: bool = True, native: bool = True,
            max_boxes: int = MAX_LOWERED, incremental: bool = False):
    """:func:`stringdiag.lower.lower.compile`, or with ``incremental`` the diagram's incremental form
    (:func:`stringdiag.lower.incremental.compile_incremental`: ``initial_state``, ``step``, ``prefill``)."""
    if incremental:
        from .incremental import compile_incremental
        return compile_incremental(diagram, dims, approximator, dtype, fast, native, max_boxes)
    return _parallel(diagram, dims, approximator, dtype, fast, native, max_boxes)


__all__ = ["compile"]
