"""The frames a picture draws around a box (``Box.clusters``, outer to inner), as records.

Two kinds: a SIMD box (:class:`SimdFrame`: the statement that made it, so that the boxes of one
statement share it, its label, its range, whether it is a scan's) and an opened definition
(:class:`DefFrame`: the instance path, the definition's name, and a copy number where a
composition pasted the same frame twice). They are for pictures only: isomorphism and weights
never read them.

Each is a tuple underneath, led by its tag — ``("simd", statement, label, dim, scan)``,
``("def", path, name[, copy])`` — so that frames compare and hash in C (the drawing groups
boxes by them) and print as they always have; code reads ``is_simd`` and the fields.
"""
from __future__ import annotations

from operator import itemgetter
from typing import Any, ClassVar, Hashable, Literal

_make = tuple.__new__


class SimdFrame(tuple):
    """A SIMD box of the source: made by ``statement``, iterating ``label`` over ``dim``
    (sequentially when ``scan``)."""

    __slots__ = ()
    is_simd: ClassVar[Literal[True]] = True
    statement: Hashable = property(itemgetter(1))  # type: ignore[assignment]
    label: str = property(itemgetter(2))  # type: ignore[assignment]
    dim: Any = property(itemgetter(3))  # type: ignore[assignment]  # a Dim (a picture's own frame: its text)
    scan: bool = property(itemgetter(4))  # type: ignore[assignment]

    def __new__(cls, statement: Hashable, label: str, dim: Any, scan: bool) -> SimdFrame:
        return _make(cls, ("simd", statement, label, dim, scan))

    def __getnewargs__(self) -> tuple:  # type: ignore[override]
        return tuple(self[1:])

    def with_(self, statement: Hashable | None = None, dim: Any = None) -> SimdFrame:
        """The frame made by another ``statement``, or over another ``dim``."""
        return _make(SimdFrame, ("simd", self[1] if statement is None else statement, self[2],
                                 self[3] if dim is None else dim, self[4]))


class DefFrame(tuple):
    """An opened definition: its instance ``path`` (``Layer#3/``), its ``name``, and ``copy``
    (None unless a composition pasted it beside another paste of the same frame)."""

    __slots__ = ()
    is_simd: ClassVar[Literal[False]] = False
    path: str = property(itemgetter(1))  # type: ignore[assignment]
    name: str = property(itemgetter(2))  # type: ignore[assignment]

    def __new__(cls, path: str, name: str, copy: Hashable | None = None) -> DefFrame:
        return _make(cls, ("def", path, name) if copy is None else ("def", path, name, copy))

    def __getnewargs__(self) -> tuple:  # type: ignore[override]
        return tuple(self[1:])

    @property
    def copy(self) -> Hashable | None:
        return self[3] if len(self) > 3 else None


Cluster = SimdFrame | DefFrame

__all__ = ["SimdFrame", "DefFrame", "Cluster"]
