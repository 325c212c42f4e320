"""Building diagrams bottom-up: the operations of a symmetric monoidal category with copying.

The names are the mathematics' (and DisCoPy's): :func:`identity`, :func:`then` (sequential
composition ``f ; g``), :func:`tensor` (parallel composition ``f ⊗ g``), :func:`swap`,
:func:`copy` and :func:`delete` (the cartesian structure: a wire read several times, or
never), and :func:`use`, one box that is a definition or a declared box over its own
boundary. Types are written as in source text (``"[s, d], [d]"``) or given as tuples of
:class:`~stringdiag.graph.types.Dim`. Every result is an ordinary
:class:`~stringdiag.graph.diagram.Diagram` (also ``f.then(g)``, ``f.tensor(g)``,
``f.fresh()``): it type-checks by construction (:func:`then` refuses types that differ),
and draws, compiles, expands and compares (``isomorphic``) like the same diagram read from
source text. Composition only glues boundary wires, so SIMD boxes and the axes their
inputs iterate stay as they are.

Weights (``weights.py``) are identities, and composing keeps them as they are: the same
identity on both sides is one set of weights. :func:`use` gives a definition (or a local
learnable) a fresh identity, so ``then(use(H), use(H))`` has two sets, like ``H(H(x))`` in
source text; ``h = use(H)`` then ``then(h, h)`` has one, used twice (as in DisCoPy, where
``f >> f`` is one box used twice); ``then(h, fresh(h))`` has two again. A global learnable
is one set wherever it is used. Fresh identities are ``op@n`` (``n`` counts up in the
process), never of the form ``op#k`` that the elaborator numbers the uses in a body with.
A body read from source text (``prog["D"]``, not ``use(prog["D"])``) brings its own
identities, numbered per body, so ``H#1`` inside two *different* bodies is the same
identity here, and so are two bodies' top-level local learnables of one name: compose
bodies through :func:`use`, or :func:`fresh` one of them. One identity on two different
declarations or definitions is refused.

>>> from stringdiag import loads
>>> from stringdiag.graph.weights import weight_sets
>>> prog = loads('''dim s : seq
... dim d : fixed
... diagram H(x: [s, d]) -> [s, d] {
...   learn F : [d] -> [d]
...   return F(x)
... }
... diagram Add(a: [s, d], b: [s, d]) -> [s, d] {
...   return a + b
... }
... diagram Residual(x: [s, d]) -> [s, d] {
...   return Add(H(x), x)
... }''')
>>> h = use(prog["H"])
>>> residual = then(copy("[s, d]"), then(tensor(h, identity("[s, d]")), use(prog["Add"])))
>>> residual.signature()
'copy ; H @ id ; Add : [s, d] -> [s, d]'
>>> residual.isomorphic(prog["Residual"])
True
>>> len(weight_sets(then(h, h))), len(weight_sets(then(h, fresh(h))))
(1, 2)
"""
from __future__ import annotations

import re
from typing import Any, Iterable

from .box import Box, Global, Instance, Kind, Local, Weights
from ..errors import DiagError
from .diagram import Diagram
from .decls import BoxDecl, Definition
from .types import Dim, DimKind, TensorType
from .algebra import fresh, fresh_id, tensor, then


# -- generators ---------------------------------------------------------------------
def identity(types, name: str = "id", *, program=None) -> Diagram:
    """The diagram that returns its inputs: no boxes, each input wire is an output.

    >>> identity("[s, d], [d]")
    <Diagram id : [s, d], [d] -> [s, d], [d], 0 boxes>
    """
    d = _open(name, _types(types), program)
    d.outputs = list(d.inputs)
    return d


def copy(types, n: int = 2, *, program=None) -> Diagram:
    """The inputs returned ``n`` times over: each input wire is read ``n`` times (``n = 0``
    deletes them, ``n = 1`` is the identity).

    >>> copy("[s, d]", 3).signature()
    'copy : [s, d] -> [s, d], [s, d], [s, d]'
    """
    if n < 0:
        raise DiagError(f"copy needs a number of copies n >= 0, not {n}")
    d = _open("copy", _types(types), program)
    d.outputs = list(d.inputs) * n
    return d


def delete(types, *, program=None) -> Diagram:
    """The diagram with no outputs: its input wires are never read.

    >>> delete("[s, d]").signature()
    'delete : [s, d] -> '
    """
    return _open("delete", _types(types), program)


def swap(a, b, *, program=None) -> Diagram:
    """The symmetry: inputs of types ``a`` then ``b``, returned as ``b`` then ``a``.

    >>> swap("[s, d]", "[d]").signature()
    'swap : [s, d], [d] -> [d], [s, d]'
    """
    ta, tb = _types(a), _types(b)
    d = _open("swap", ta + tb, program)
    d.outputs = d.inputs[len(ta):] + d.inputs[:len(ta)]
    return d


def wiring(types, picks: Iterable[int], *, program=None) -> Diagram:
    """The cartesian structure in one: output ``k`` is input ``picks[k]``. Copies (an input
    picked twice), deletions (never picked), swaps and permutations are all wirings.

    >>> wiring("[s, d], [d]", [1, 0, 0]).signature()
    'wiring : [s, d], [d] -> [d], [s, d], [s, d]'
    """
    d = _open("wiring", _types(types), program)
    picks = list(picks)
    bad = [k for k in picks if not 0 <= k < len(d.inputs)]
    if bad:
        raise DiagError(f"a wiring of {len(d.inputs)} input(s) cannot pick input {bad[0]}")
    d.outputs = [d.inputs[k] for k in picks]
    return d


def use(box: Diagram | Definition | BoxDecl, *, instance: str | None = None, program=None) -> Diagram:
    """One use of a definition (``prog["H"]``) or a declared box (``prog.lookup_box("F")``)
    over its own boundary, as the elaborator writes ``H(x)`` (``elaborate/calls.py``: ``Calls.apply``).

    A definition's use has its own weights: the identity ``instance``, fresh unless given.
    So has a use of a local learnable (its ``param``); a global learnable is one set of
    weights wherever it is used, and fixed and abstract boxes have none. ``program`` says
    which program a declaration's dimensions belong to (a definition knows its own).

    >>> from stringdiag import loads
    >>> prog = loads('''dim d : fixed
    ... learn G : [d] -> [d]
    ... diagram H(x: [d]) -> [d] {
    ...   return G(x)
    ... }''')
    >>> u = use(prog["H"], instance="H#1")
    >>> u, [u.record(b).instance for b in u.boxes()]
    (<Diagram H : [d] -> [d], 1 boxes>, ['H#1'])
    >>> use(prog.lookup_box("G"), program=prog).signature()
    'G : [d] -> [d]'
    """
    if isinstance(box, Definition):
        box = box.diagram()
    if isinstance(box, Diagram):
        rec = Box(Kind.DIAGRAM, box.name, ref=box, weights=Instance(instance or fresh_id(box.name)))
        return _one_box(rec, box, _seq_generics(box), box.program, box.input_names)
    own = box.box == Kind.LEARN and box.local
    if instance is not None and not own:
        raise DiagError(f"'{box.name}' is a {'global learnable' if box.box == Kind.LEARN else box.box} box; "
                        "only a definition or a local learnable has weights of its own to name")
    weights: Weights | None = None
    if box.box == Kind.LEARN:
        weights = Local(instance or fresh_id(box.name)) if own else Global(box.name)
    return _one_box(Box(Kind(box.box), box.name, ref=box, weights=weights), box, box.generics, program, None)


# -- helpers --------------------------------------------------------------------------
def _types(spec) -> list[TensorType]:
    """Tensor types from ``"[s, d], [d + k]"``, from one tuple of :class:`Dim`, or from a
    list of types, each a string or a tuple of dimensions (``Dim``, names or numbers)."""
    if isinstance(spec, str):
        if not re.fullmatch(r"\s*(\[[^\[\]]*\]\s*(,\s*\[[^\[\]]*\]\s*)*)?", spec):
            raise DiagError(f"not a list of types: {spec!r} (write them as \"[s, d], [d]\")")
        return [tuple(_dim(x) for x in body.split(",")) if body.strip() else ()
                for body in re.findall(r"\[([^\[\]]*)\]", spec)]
    if isinstance(spec, tuple) and spec and all(isinstance(x, Dim) for x in spec):
        return [spec]
    out: list[TensorType] = []
    for t in spec:
        out += _types(t) if isinstance(t, str) else [tuple(x if isinstance(x, Dim) else _dim(str(x)) for x in t)]
    return out


def _dim(text: str) -> Dim:
    total = Dim.const(0)
    for term in text.split("+"):
        prod = Dim.const(1)
        for factor in (x.strip() for x in term.split("*")):
            if not (factor.isdigit() or factor.isidentifier()):
                raise DiagError(f"not a dimension: {text.strip()!r}")
            prod = prod * (Dim.const(int(factor)) if factor.isdigit() else Dim.var(factor))
        total = total + prod
    return total


def _open(name: str, types: list[TensorType], program, names: list[str] | None = None) -> Diagram:
    """A diagram with input wires of these types and nothing else yet."""
    names = names or ([f"x{k + 1}" for k in range(len(types))] if len(types) > 1 else ["x"] * len(types))
    d = Diagram(name=name, program=program, source=getattr(program, "path", ""), input_names=list(names))
    d.inputs = [d.add_wire(t, name=n) for t, n in zip(types, names)]
    return d


def _one_box(rec: Box, box, generics: tuple[str, ...], program, names) -> Diagram:
    """A diagram of the one box ``rec`` (of the definition or declaration ``box``) on fresh wires."""
    ins, outs = (box.input_types, box.output_types) if isinstance(box, Diagram) else (list(box.ins), list(box.outs))
    d = _open(box.name, ins, program, names)
    if generics:
        rec = rec._replace(generics=tuple((g, Dim.var(g)) for g in generics))
    _, d.outputs = d.emit(rec._replace(display={}), [(w, tuple(range(len(t)))) for w, t in zip(d.inputs, ins)], outs)
    d.generics = tuple(box.generics)
    return d


def _seq_generics(defn: Diagram) -> tuple[str, ...]:
    """A definition's dimension parameters as ``Calls.apply`` (``elaborate/calls.py``) lists them for a use: its
    own, then every occurrence of a seq dimension in its input types (so that a use over
    the definition's own boundary is labelled as one written in source text)."""
    prog = defn.program
    return defn.generics + tuple(sorted(
        n for t in defn.input_types for dim in t for n in dim.names()
        if n not in defn.generics and prog is not None and (decl := prog.lookup_dim(n)) is not None
        and decl.kind is DimKind.SEQ))


__all__ = ["identity", "use", "then", "tensor", "copy", "delete", "swap", "fresh"]
