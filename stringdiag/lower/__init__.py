"""Lowering: typed graph to trainable PyTorch modules."""
from .lower import compile as _parallel


def compile(diagram, dims=None, approximator="mlp", dtype=None, fast: bool = True, native: bool = True,
            incremental: bool = False, **kwargs):
    """:func:`stringdiag.lower.lower.compile`, or with ``incremental`` the diagram's incremental form
    (:func:`stringdiag.lower.incremental.compile_incremental`: ``initial_state``, ``step``, ``prefill``)."""
    if incremental:
        from .incremental import compile_incremental
        return compile_incremental(diagram, dims, approximator, dtype, fast, native, **kwargs)
    return _parallel(diagram, dims, approximator, dtype, fast, native, **kwargs)


__all__ = ["compile"]
