"""The diagram users hold: the graph of ``hypergraph.py`` with the operations on whole
diagrams (isomorphism, expansion, composition) as methods, named after the mathematics.

The operations themselves live in modules below this one (``iso.py``, ``expand.py``,
``algebra.py``), which work on :class:`~stringdiag.graph.hypergraph.Hypergraph` and build
their results with ``type(d)``, so a ``Diagram`` in gives a ``Diagram`` out.
"""
from __future__ import annotations

from . import algebra, iso
from . import expand as expansion
from .hypergraph import BOX_CLASSES, Axes, Hypergraph


class Diagram(Hypergraph):
    """An open diagram: a graph with ordered input and output wires (``hypergraph.py``)."""

    # -- equality up to isomorphism -------------------------------------------------
    def canonical_hash(self) -> str:
        """A hash equal for isomorphic diagrams (``iso.py``)."""
        return iso.canonical_hash(self)

    def isomorphic(self, other: "Diagram") -> bool:
        """Equal up to renaming wires, boxes and weight sets (``iso.py``)."""
        return iso.isomorphic(self, other)

    def expand(self, keep: "expansion.Keep" = frozenset(), path: str = "",
               unroll: "dict[str, int] | None" = None) -> "Diagram":
        """Inline every definition used as a box, recursively (the picture's ``--expand``),
        except those named in ``keep``; weights keep their identity (``weights.py``). A
        ``repeat`` box stays one box unless ``unroll`` (fixed sizes its count may name) is given."""
        return expansion.expand(self, keep, path, unroll)

    # -- composition (``algebra.py``) -----------------------------------------------
    def then(self, other: "Diagram") -> "Diagram":
        """Sequential composition ``self ; other`` (:func:`~stringdiag.graph.algebra.then`)."""
        return algebra.then(self, other)

    def tensor(self, other: "Diagram") -> "Diagram":
        """Parallel composition ``self ⊗ other`` (:func:`~stringdiag.graph.algebra.tensor`)."""
        return algebra.tensor(self, other)

    def fresh(self) -> "Diagram":
        """The same diagram with fresh weight sets of its own (:func:`~stringdiag.graph.algebra.fresh`)."""
        return algebra.fresh(self)


__all__ = ["Diagram", "Hypergraph", "BOX_CLASSES", "Axes"]
