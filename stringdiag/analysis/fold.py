"""One fold over the definitions a diagram uses: each computed once, callees first.

What ``info`` and a derivation's table report about ``d.expand()`` (boxes by kind, cost, the
dimensions the module needs, weight sets, parameters) is a functor in DisCoPy's sense: a
value per definition, made from the values of its boxes and of the definitions it uses,
never from the expansion, which can be exponentially larger. :func:`fold` is that one
traversal: a post-order over the definitions reachable through the diagram boxes an
:class:`Algebra` opens, each definition's body read once (memoised per graph) and its value
computed once. The algebra says what each kind of step contributes:

- ``box``: a box of the body that stays a box;
- ``call``: an opened definition used inline, with its value, its generics' substitution
  (``site.node.generics``) and the instance path segment ``graph/expand.py`` gives it;
- ``loop``: a ``scan`` or ``repeat`` box whose body is opened: the callee's value run
  :func:`copies` times (a repeat) or once per step (a scan).

``analysis/shape.py`` (counts and cost), ``analysis/dimensions.py``, ``analysis/learnables.py``
(weight sets) and ``analysis/parameters.py`` are its algebras.
"""

from typing import Any, Callable, Generic, Mapping, NamedTuple, TypeVar

from ..graph.box import Box, Kind
from ..graph.diagram import Diagram
from ..graph.expand import instance_segment
from ..graph.hypergraph import Hypergraph, count_value, per_graph_cache, repeated

Acc = TypeVar("Acc")  # what an algebra gathers while it reads one body
R = TypeVar("R")  # a definition's value


class Site(NamedTuple):
    """One box of a definition's body, where the fold meets it: its id, record, inputs
    (wire, axes), output wires, and, for a diagram box, the instance-path segment it gets
    in the expansion (``H#2``; None for other boxes)."""

    box: int
    node: Box
    ins: list
    outs: list
    segment: str | None


@per_graph_cache
def _body(d: Diagram) -> tuple[int, list[Site]]:
    """The graph's version, and its boxes as :class:`Site` in the order ``expand`` inlines
    them (topological), with ``expand``'s instance segments: cached per graph."""
    seen: dict[str, int] = {}
    sites = []
    for b in d.topological_boxes():
        node = d.record(b)
        segment = instance_segment(node, seen) if node.kind is Kind.DIAGRAM else None
        sites.append(Site(b, node, d.box_inputs(b), d.box_outputs(b), segment))
    return d.version(), sites


def copies(node: Box, sizes: Mapping[str, int | None] | None = None) -> int | None:
    """How many times a box runs its body in sequence: a repeat's count (None when it names a
    size neither ``sizes`` gives nor its program declares), else 1."""
    return count_value(node.count, node.ref.program, sizes or {}) if repeated(node) else 1


def inlined(node: Box) -> bool:
    """A diagram box ``expand`` replaces by its callee's body (not a scan, not a repeat)."""
    return node.kind is Kind.DIAGRAM and not node.scan and not repeated(node)


def opened(node: Box) -> bool:
    """A box whose body counts: inlined by ``expand``, or a loop (the compiler runs its body
    once per step or copy, with weights of its own)."""
    return node.kind is Kind.DIAGRAM


Reached = list  # of (definition, version, body), callees first


def post_order(d: Hypergraph, through: Callable[[Box], bool]) -> Reached:
    """Definitions reachable from ``d`` through the diagram boxes ``through`` accepts, callees
    first, each once, with its version and body (:class:`Site` list)."""
    order: Reached = []
    state: dict[int, int] = {}
    stack: list[tuple[Hypergraph, Any]] = [(d, None)]
    while stack:
        x, done = stack.pop()
        key = id(x.graph)
        if done is not None:
            if state.get(key) != 2:
                state[key] = 2
                order.append((x, *done))
            continue
        if key in state:
            continue
        state[key] = 1
        version, body = _body(x)
        stack.append((x, (version, body)))
        for site in reversed(body):
            node = site.node
            if node.kind is Kind.DIAGRAM and through(node) and id(node.ref.graph) not in state:
                stack.append((node.ref, None))
    return order


class Algebra(Generic[Acc, R]):
    """What a :func:`fold` computes: ``start`` an accumulator for a body, add each step to it
    (``box``, ``call``, ``loop``), ``finish`` it into the definition's value. ``opens`` says
    which diagram boxes are folded through (the others are plain boxes)."""

    opens: Callable[[Box], bool] = staticmethod(opened)  # (a plain function: it is asked of every diagram box)

    def start(self, x: Diagram) -> Acc:
        raise NotImplementedError

    def box(self, acc: Acc, x: Diagram, site: Site) -> None:
        """A box that stays one box (a diagram box not opened included)."""

    def call(self, acc: Acc, x: Diagram, site: Site, callee: R) -> None:
        """An opened definition used inline: its value placed at ``site``."""

    def loop(self, acc: Acc, x: Diagram, site: Site, callee: R) -> None:
        """An opened ``scan`` or ``repeat`` box: by default the same as a call."""
        self.call(acc, x, site, callee)

    def finish(self, acc: Acc, x: Diagram) -> R:
        return acc  # type: ignore[return-value]

    def definition(self, x: Diagram, body: list[Site], done: Mapping[int, R]) -> R:
        """The value of ``x`` from its body and its callees' values in ``done``."""
        acc = self.start(x)
        for site in body:
            node = site.node
            if node.kind is not Kind.DIAGRAM or not self.opens(node):
                self.box(acc, x, site)
            elif node.loop is None:  # inlined (read as a field: asked of every diagram box)
                self.call(acc, x, site, done[id(node.ref.graph)])
            else:
                self.loop(acc, x, site, done[id(node.ref.graph)])
        return self.finish(acc, x)


def fold(d: Diagram, algebra: Algebra[Any, R]) -> dict[int, R]:
    """The value of every definition reachable from ``d`` (by ``id`` of its graph; ``d``'s
    own included), each computed once, callees first."""
    done: dict[int, R] = {}
    for x, _version, body in post_order(d, algebra.opens):
        done[id(x.graph)] = algebra.definition(x, body, done)
    return done
