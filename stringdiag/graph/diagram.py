"""The diagram users hold: the graph of ``hypergraph.py`` with the operations on whole
diagrams (isomorphism, expansion, composition) as methods, named after the mathematics.

The operations themselves live in modules below this one (``iso.py``, ``expand.py``,
``algebra.py``), which work on :class:`~stringdiag.graph.hypergraph.Hypergraph` and build
their results with ``type(d)``, so a ``Diagram`` in gives a ``Diagram`` out.
"""
from __future__ import annotations

from typing import Mapping

from . import algebra, iso
from . import expand as expansion
from ..errors import DiagError, kind
from .budget import MAX_LOWERED
from .hypergraph import BOX_CLASSES, Axes, Hypergraph
from .weights import weight_sets


class Diagram(Hypergraph, frozen=False):
    """An open diagram: a graph with ordered input and output wires (``hypergraph.py``)."""

    cell_pattern: bool = False  # a rule's cell pattern (``where diagram``), matched against the cells scans run

    # -- equality up to isomorphism -------------------------------------------------
    def canonical_hash(self) -> str:
        """A hash equal for isomorphic diagrams (``iso.py``)."""
        return iso.canonical_hash(self)

    def isomorphic(self, other: "Diagram") -> bool:
        """Equal up to renaming wires, boxes and weight sets (``iso.py``)."""
        return iso.isomorphic(self, _operand(other, "isomorphic"))

    def expand(self, keep: "expansion.Keep" = frozenset(), path: str = "",
               unroll: "dict[str, int] | None" = None, limit: int = MAX_LOWERED) -> "Diagram":
        """Inline every definition used as a box, recursively (the picture's ``--expand``),
        except those named in ``keep``; weights keep their identity (``weights.py``). A
        ``repeat`` box stays one box unless ``unroll`` (fixed sizes its count may name) is given;
        unrolling past ``limit`` boxes is refused before any work (a picture's limit is smaller)."""
        if not callable(keep) and (not isinstance(keep, (set, frozenset, list, tuple))
                                   or not all(isinstance(k, str) for k in keep)):
            raise DiagError(f"expand(): keep must be a set of definition names, such as {{'Attention'}}, "
                            f"got {kind(keep)}")
        if unroll is not None and not isinstance(unroll, Mapping):
            raise DiagError(f"expand(): unroll must be a dict of dimension sizes, such as {{'L': 2}}, "
                            f"got {kind(unroll)}")
        if isinstance(limit, bool) or not isinstance(limit, int) or limit < 1:
            raise DiagError(f"expand(): limit must be a positive integer (a number of boxes), got {kind(limit)}")
        return expansion.expand(self, keep if callable(keep) else frozenset(keep), path, unroll, limit=limit)

    # -- composition (``algebra.py``) -----------------------------------------------
    def then(self, other: "Diagram", shared: bool | None = None) -> "Diagram":
        """Sequential composition ``self ; other`` (:func:`~stringdiag.graph.algebra.then`).

        Weight sharing is part of the meaning: when both sides hold weights of their own in
        common (``blk.then(blk)``), say ``shared=True`` (one set used twice: one function) or
        ``shared=False`` (``other`` with fresh weights: two functions); unsaid, it is an error.

        >>> from stringdiag import loads
        >>> blk = loads("dim d : fixed\\ndiagram B(x: [d]) -> [d] {\\n  learn F : [d] -> [d]\\n  return F(x)\\n}")["B"]
        >>> blk.then(blk)  # doctest: +ELLIPSIS
        Traceback (most recent call last):
        ...
        stringdiag.errors.DiagError: B ; B: both sides hold the weights of F; ...
        >>> len(weight_sets(blk.then(blk, shared=True))), len(weight_sets(blk.then(blk, shared=False)))
        (1, 2)
        """
        return algebra.then(self, _sharing(self, _operand(other, "then"), shared, ";"))

    def tensor(self, other: "Diagram", shared: bool | None = None) -> "Diagram":
        """Parallel composition ``self ⊗ other`` (:func:`~stringdiag.graph.algebra.tensor`);
        ``shared`` as for :meth:`then`."""
        return algebra.tensor(self, _sharing(self, _operand(other, "tensor"), shared, "@"))

    def fresh(self) -> "Diagram":
        """The same diagram with fresh weight sets of its own (:func:`~stringdiag.graph.algebra.fresh`)."""
        return algebra.fresh(self)


def _operand(other: object, method: str) -> Hypergraph:
    """The other side of a composition or comparison: a diagram (a graph), or a DiagError saying so."""
    if not isinstance(other, Hypergraph):
        raise DiagError(f"{method}() takes a diagram (program['NAME']), got {kind(other)}")
    return other


def _sharing(f: Hypergraph, g: Hypergraph, shared: bool | None, op: str) -> Hypergraph:
    """``g`` as it is, or with fresh weights, as ``shared`` says; an error when it matters and is unsaid."""
    if shared not in (None, True, False):
        raise DiagError(f"shared must be True, False or None (unsaid), got {kind(shared)}")
    if shared is None:
        common = sorted(k.name for k in weight_sets(f) & weight_sets(g))
        if common:
            raise DiagError(f"{f.name} {op} {g.name}: both sides hold the weights of {', '.join(common[:4])}; "
                            f"say shared=True to use one set of weights twice (one function), or shared=False "
                            f"to give the second its own (two functions)")
    return g if shared is None or shared else algebra.fresh(g, globals_too=True)


__all__ = ["Diagram", "Hypergraph", "BOX_CLASSES", "Axes"]
