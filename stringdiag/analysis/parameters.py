"""How many parameters a compiled module has: the parameters algebra of the fold.

A global weight set is counted once, sized at its first use; a local one once per instance
of its definition, and a definition's local parameters depend only on the sizes its
generics are bound to, so they are computed once per definition and binding. The fold's
value for a definition is therefore a function of sizes (:class:`Parameters`), evaluated
at the top with the sizes given.
"""

import math
from typing import Any, Callable, Mapping, NamedTuple

from ..graph.box import Kind
from ..graph.budget import bind_generics
from ..graph.decls import Approximator
from ..graph.diagram import Diagram
from ..graph.hypergraph import repeated
from ..graph.types import Dim
from ..errors import DiagError
from .fold import Algebra, Site, fold

Sizes = Mapping[str, int | None]


def _box_parameters(shapes_in: list[tuple[int, ...]], shapes_out: list[tuple[int, ...]], make: Callable,
                    cache: dict, via: Approximator | None = None) -> int:
    """Parameters of the module lower/ makes for a learnable box of these local shapes (by
    its own ``via`` clause if it has one, else by the policy's ``make``)."""
    if not shapes_in:
        return sum(math.prod(s) for s in shapes_out)  # a LearnableTensor
    n_in, n_out = sum(math.prod(s) for s in shapes_in), sum(math.prod(s) for s in shapes_out)
    key = (n_in, n_out, via)
    if key not in cache:
        cache[key] = make(n_in, n_out) if via is None else via_parameters(via, n_in, n_out)
    return cache[key]


def via_parameters(via: Approximator, i: int, o: int) -> int:
    """Parameters of ``via linear(...)`` / ``via mlp(...)`` (lower/approximators.py per_box)."""
    if via.policy == "linear":
        return i * o + (o if via.bias else 0)
    h = via.hidden or i
    return i * h + h * o + (h + o if via.bias else 0)


# Parameters of the modules lower/ builds for each approximator policy, by feature counts
# (in and out); the suite checks them against the compiled modules (test_info_linear.py).
FORMULAS: dict[str, Callable[[int, int], int]] = {
    "linear": lambda i, o: i * o + o,
    "mlp": lambda i, o: i * i + i + i * o + o,
}


def _counter(approximator: Any) -> Callable[[int, int], int]:
    if callable(approximator):
        return lambda i, o: sum(p.numel() for p in approximator(i, o).parameters())
    if approximator not in FORMULAS:
        raise DiagError(f"unknown approximator '{approximator}': use one of {', '.join(FORMULAS)} or a callable")
    return FORMULAS[approximator]


class Parameters(NamedTuple):
    """A definition's value in the parameters fold: its global weight sets in order of first
    use, each with the function from the definition's sizes to its parameters; whether it
    holds local weight sets (itself or through a callee); and the function from its sizes
    and the binding of its generics to its local parameters (one instance)."""

    glob: dict[str, Callable[[Sizes], int]]
    has_local: bool
    local: Callable[[dict, tuple], int]


class _Reading(NamedTuple):
    glob: dict  # param -> sizer
    terms: list  # sizes -> parameters of a local weight set
    own: set  # local params declared here, counted
    instances: set  # (segment, callee) met


class ParametersAlgebra(Algebra[_Reading, Parameters]):
    """Parameters per definition; ``size`` gives a learnable box's at some sizes, ``top`` the
    sizes given (a callee's are those with its generics bound, ``bind_generics``)."""

    def __init__(self, size: Callable[[Diagram, int, Sizes], int], top: Mapping[str, int | None]):
        self.size, self.top = size, top
        self.memo: dict[tuple, int] = {}  # (definition, binding of its generics) -> local parameters

    def start(self, x: Diagram) -> _Reading:
        return _Reading({}, [], set(), set())

    def box(self, acc: _Reading, x: Diagram, site: Site) -> None:
        node, b, size = site.node, site.box, self.size
        if node.kind is not Kind.LEARN:
            return
        if not node.local:
            acc.glob.setdefault(node.param, lambda env: size(x, b, env))
        elif node.param not in acc.own:
            acc.own.add(node.param)
            acc.terms.append(lambda env: size(x, b, env))

    def call(self, acc: _Reading, x: Diagram, site: Site, callee: Parameters) -> None:
        """A callee's global sets sized with its generics bound here; its local ones once per
        instance, times the copies of a repeat that does not share them."""
        node, top = site.node, self.top
        for param, sizer in callee.glob.items():
            if param not in acc.glob:
                acc.glob[param] = lambda env, sizer=sizer: sizer(bind_generics(node, env, top)[0])
        inst = (site.segment, id(node.ref.graph))
        if callee.has_local and inst not in acc.instances:
            acc.instances.add(inst)
            one = node.shared or not repeated(node)
            acc.terms.append(lambda env: (1 if one else _evaluate(node.count, env))
                             * callee.local(*bind_generics(node, env, top)))

    def finish(self, acc: _Reading, x: Diagram) -> Parameters:
        memo, terms, key = self.memo, acc.terms, id(x.graph)

        def local(env: dict, bound: tuple) -> int:
            if (key, bound) not in memo:
                memo[key, bound] = sum(term(env) for term in terms)
            return memo[key, bound]
        return Parameters(acc.glob, bool(acc.own) or bool(acc.instances), local)


def parameter_count(d: Diagram, dims: Mapping[str, int], approximator: Any = "mlp") -> int:
    """How many parameters the compiled module of ``d`` has (``stringdiag compile``) with the
    sizes ``dims`` (every name the learnable boxes' types use, a generic top diagram's own
    parameters included): each weight set counted once, without expanding.

    Scanned definitions are opened too, as the compiler does: their weights are the body's."""
    make = _counter(approximator)
    cache: dict = {}

    def size(x: Diagram, b: int, env: Sizes) -> int:
        return _learnable_parameters(x, b, env, make, cache)

    top = dict(dims)
    value = fold(d, ParametersAlgebra(size, top))[id(d.graph)]
    found = [sizer(dict(top)) for sizer in value.glob.values()]  # (sized before the local sets: the same errors first)
    return value.local(dict(top), ()) + sum(found)


def _learnable_parameters(x: Diagram, b: int, env: Sizes, make: Callable, cache: dict) -> int:
    """Parameters of learnable box ``b`` of ``x`` at the sizes ``env``."""
    n_in, n_out = len(x.box_inputs(b)), len(x.box_outputs(b))
    ref = x.record(b).ref
    bounds = ref.axis_bounds() if hasattr(ref, "axis_bounds") else ()  # a bounded seq axis: held at its bound
    ins = [tuple(_evaluate(dim, env) for dim in x.local_in_type(b, k)) for k in range(n_in)]
    outs = [tuple(bounds[i] if i < len(bounds) and bounds[i] else _evaluate(dim, env)
                  for i, dim in enumerate(x.local_out_type(b, k))) for k in range(n_out)]
    return _box_parameters(ins, outs, make, cache, getattr(ref, "via", None))


def _evaluate(dim: Dim, env: Mapping[str, int | None]) -> int:
    for n in dim.names():
        if env.get(n) is None:
            raise DiagError(f"no size for dimension '{n}' (give it in dims)")
    return dim.evaluate({n: v for n, v in env.items() if v is not None})
