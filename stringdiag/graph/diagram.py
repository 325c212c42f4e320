"""The diagram users hold: the graph of ``hypergraph.py`` with the operations on whole
diagrams (isomorphism, expansion, composition) as methods, named after the mathematics.

The operations themselves live in modules below this one (``iso.py``, ``expand.py``,
``algebra.py``), which work on :class:`~stringdiag.graph.hypergraph.Hypergraph` and build
their results with ``type(d)``, so a ``Diagram`` in gives a ``Diagram`` out.
"""
from __future__ import annotations

from . import algebra, iso
from . import expand as expansion
from ..errors import DiagError
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
        return iso.isomorphic(self, other)

    def expand(self, keep: "expansion.Keep" = frozenset(), path: str = "",
               unroll: "dict[str, int] | None" = None, limit: int = MAX_LOWERED) -> "Diagram":
        """Inline every definition used as a box, recursively (the picture's ``--expand``),
        except those named in ``keep``; weights keep their identity (``weights.py``). A
        ``repeat`` box stays one box unless ``unroll`` (fixed sizes its count may name) is given;
        unrolling past ``limit`` boxes is refused before any work (a picture's limit is smaller)."""
        return expansion.expand(self, keep, path, unroll, limit=limit)

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
        return algebra.then(self, _sharing(self, other, shared, ";"))

    def tensor(self, other: "Diagram", shared: bool | None = None) -> "Diagram":
        """Parallel composition ``self ⊗ other`` (:func:`~stringdiag.graph.algebra.tensor`);
        ``shared`` as for :meth:`then`."""
        return algebra.tensor(self, _sharing(self, other, shared, "@"))

    def fresh(self) -> "Diagram":
        """The same diagram with fresh weight sets of its own (:func:`~stringdiag.graph.algebra.fresh`)."""
        return algebra.fresh(self)


def _sharing(f: Hypergraph, g: Hypergraph, shared: bool | None, op: str) -> Hypergraph:
    """``g`` as it is, or with fresh weights, as ``shared`` says; an error when it matters and is unsaid."""
    if shared is None:
        common = sorted(k.name for k in weight_sets(f) & weight_sets(g))
        if common:
            raise DiagError(f"{f.name} {op} {g.name}: both sides hold the weights of {', '.join(common[:4])}; "
                            f"say shared=True to use one set of weights twice (one function), or shared=False "
                            f"to give the second its own (two functions)")
    return g if shared is None or shared else algebra.fresh(g, globals_too=True)


__all__ = ["Diagram", "Hypergraph", "BOX_CLASSES", "Axes"]
