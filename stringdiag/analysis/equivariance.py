"""Whether a diagram is permutation-equivariant in a sequence dimension, by one static pass.

Permute every input along every axis of a sequence dimension ``s`` by one permutation pi.
An output with ``s`` axes is *equivariant* when it is permuted by pi in turn (f(pi x) =
pi f(x)), an output without them *invariant* when it does not change (f(pi x) = f(x));
the diagram is equivariant when every output is one or the other, invariant when every
output is invariant, and neither otherwise ("attention is order-invariant": the lecture
slides; Sumformer's Defs. 2.7-2.8).

The structure says which. Every wire is one of three :class:`Order`:

- ``FOLLOWS``: permuted by pi along each of its ``s`` axes. A wire without ``s`` axes
  that follows does not change at all: an invariant (``still``, as a constant is).
- ``HELD``: has ``s`` axes that stay where they are while the input moves: a table over
  positions (``positions``, ``posenc``, ``causal``, a learned ``[s, s]`` table, a random
  tensor over ``s``). It does no harm until it meets a wire that moves.
- ``BROKEN``: neither; the report names the box that broke it, with the chain of
  definitions it sits in.

SIMD boxes over ``s`` apply one function at every position, so they preserve the order;
a contraction sums over ``s`` whatever the order, reindexing (transposes, diagonals,
broadcasts) moves axes with their labels. A box whose own (non-SIMD) type mentions ``s``
preserves it only when the box is known to be order-blind there: softmax's and sum's bodies
are entered and checked like any definition, hardmax and amax are in :data:`RULES`; a
cumulative sum, a shift, a causal convolution, a scan along ``s``, a learnable map of the
whole sequence, a reshape that makes ``s`` part of a larger axis, break it. A function of
values that do not change does not change, whatever it is (``cumsum(ones<s>())`` is a table
of positions, held). The verdicts are sound, not complete: "neither" means no argument from
the structure was found (weights that happen to be symmetric are not looked at);
``verify/permuted.py`` confirms each verdict numerically.
"""
from __future__ import annotations

from dataclasses import dataclass
from enum import Enum
from typing import Iterable

from ..graph.box import Box, Kind
from ..graph.diagram import Diagram
from ..graph.types import Dim, DimKind
from .degree import Chain, show_chain


class Order(str, Enum):
    """How a wire moves when the inputs are permuted along the dimension."""

    FOLLOWS = "follows"
    HELD = "held"
    BROKEN = "broken"


class AxisRule(str, Enum):
    """How a fixed primitive of the prelude treats a sequence axis of its own type."""

    BLIND = "order-blind"     # permuting the axis permutes the result (or leaves it alone)
    SYMMETRIC = "symmetric"   # a constant that every permutation leaves as it is


# Primitives (stringdiag/prelude/prelude.diag) that are order-blind in their own axes. The
# scalar ones (add, exp, where, ...) have no axes of their own; every primitive not listed
# here reads its axis in order (cumsum, shift, causal_conv, rev, pick, cat, topk) or makes a
# table over positions (positions, posenc, causal, window, gauss), and breaks the order.
RULES: dict[str, AxisRule] = {
    "hardmax": AxisRule.BLIND, "amax": AxisRule.BLIND,
    "ones": AxisRule.SYMMETRIC, "zeros": AxisRule.SYMMETRIC,
}

# What a box that is not order-blind in the dimension is, in words, by kind or primitive.
_WHY_FIXED = {
    "cumsum": "a cumulative sum along {s}", "cumprod": "a cumulative product along {s}",
    "shift": "a shift along {s}", "causal_conv": "a causal convolution along {s}",
    "rev": "a reversal of {s}", "pick": "picks a position of {s}", "narrow": "picks positions of {s}",
    "cat": "a concatenation that makes {s} part of a longer axis",
    "split": "splits an axis made of {s}", "flatten": "a reshape that merges {s} with another axis",
    "unflatten": "a reshape that splits an axis made of {s}", "topk": "top-k along {s} (indices name positions)",
    "positions": "the positions of {s}", "posenc": "a positional encoding over {s}",
    "causal": "a causal mask over {s}", "window": "a window mask over positions of {s}",
    "strided": "a strided mask over positions of {s}", "gauss": "a Gaussian window over positions of {s}",
    "global": "global-token positions of {s}",
}


@dataclass(frozen=True)
class WireOrder:
    """What the pass knows of a wire: its :class:`Order`, whether it stays unchanged when the
    inputs are permuted (``still``: a held wire always does), and, unless it follows, why (the
    box, in a chain)."""

    order: Order
    still: bool
    why: tuple[str, Chain] | None = None


MOVES = WireOrder(Order.FOLLOWS, False)
STILL = WireOrder(Order.FOLLOWS, True)


def _join(xs: Iterable[WireOrder]) -> WireOrder:
    """A wire made from ``xs`` by a box that is order-blind: broken by any broken argument, held
    when only unchanged values meet a held one, broken when a held one meets one that moves."""
    xs = list(xs)
    broken = next((x for x in xs if x.order is Order.BROKEN), None)
    if broken:
        return broken
    held = next((x for x in xs if x.order is Order.HELD), None)
    still = all(x.still for x in xs)
    if held is None:
        return WireOrder(Order.FOLLOWS, still)
    if still:
        return held
    text, chain = held.why or ("", ())
    return WireOrder(Order.BROKEN, False, (f"{text} (held in place while the sequence moves)", chain))


def _within(v: WireOrder, op: str, node: Box, args: list[WireOrder]) -> WireOrder:
    """A value computed inside a box: a chain that began inside it starts there."""
    if v.why is None or v.why in {x.why for x in args}:
        return v
    text, chain = v.why
    return WireOrder(v.order, v.still, (text, ((op, node.pos), *chain)))


def _names(dims: Iterable[Dim]) -> set[str]:
    return {n for dim in dims for n in dim.names()}


class OrderPass:
    """The static pass for one sequence dimension, ``shown`` (by that name in the reasons). A
    definition is entered with the names its generics bind to it (``perm``), and ``lifted``
    when the box that uses it is SIMD over the dimension: then every wire of its body has
    the dimension's axes, unseen in its own types."""

    def __init__(self, shown: str):
        self.shown = shown
        self.memo: dict[tuple, list[WireOrder]] = {}

    def run(self, d: Diagram, perm: frozenset[str], ins: list[WireOrder], lifted: bool = False) -> list[WireOrder]:
        key = (id(d.graph), d.version(), perm, tuple(ins), lifted)
        if key not in self.memo:
            env = dict(zip(d.inputs, ins))
            for b in d.topological_boxes():
                outs = self.box(d, b, perm, [env[w] for w, _ in d.box_inputs(b)], lifted)
                env.update(zip(d.box_outputs(b), outs))
            self.memo[key] = [env[w] for w in d.outputs]
        return self.memo[key]

    def box(self, d: Diagram, b: int, perm: frozenset[str], xs: list[WireOrder], lifted: bool) -> list[WireOrder]:
        node = d.record(b)
        outs = d.box_outputs(b)
        moved = [lifted or bool(_names(d.wire_type(w)) & perm) for w in outs]
        if node.scan and _names([node.simd[-1][1]]) & perm:
            return self.ordered(xs, moved, f"a scan along {self.shown} (a state carried from position "
                                           f"to position)", node)
        if node.kind is Kind.DIAGRAM or node.loop is not None:
            lift = lifted or bool(_names(dim for _, dim in node.simd) & perm)
            return [_within(v, node.op, node, xs) for v in self.use(node, perm, xs, moved, lift)]
        own = {n for port in range(len(xs)) for n in _names(d.local_in_type(b, port))}
        own |= {n for port in range(len(outs)) for n in _names(d.local_out_type(b, port))}
        own |= _names(dim for _, dim in node.generics)
        if node.kind in (Kind.CONTRACT, Kind.REINDEX, Kind.CONST) or not (own & perm):
            return self.blind(xs, moved)
        rule = RULES.get(node.op) if node.kind is Kind.FIXED else None
        if rule is not None:  # order-blind, or a constant no permutation changes
            return self.blind(xs, moved)
        return self.ordered(xs, moved, self.reason(node, xs), node)

    @staticmethod
    def blind(xs: list[WireOrder], moved: list[bool]) -> list[WireOrder]:
        v = _join(xs)
        return [v if v.order is not Order.FOLLOWS else WireOrder(Order.FOLLOWS, v.still or not m) for m in moved]

    @staticmethod
    def ordered(xs: list[WireOrder], moved: list[bool], why: str, node: Box) -> list[WireOrder]:
        """A box that reads the dimension in order: held when nothing it reads moves (a table
        over positions), else broken, naming it."""
        v = _join(xs)
        if v.order is Order.BROKEN:
            return [v] * len(moved)
        chain = ((node.op, node.pos),)
        if v.still:
            return [WireOrder(Order.HELD, True, (why, chain)) if m else STILL for m in moved]
        return [WireOrder(Order.BROKEN, False, (why, chain))] * len(moved)

    def reason(self, node: Box, xs: list[WireOrder]) -> str:
        s = self.shown
        if node.kind is Kind.FIXED and node.op in _WHY_FIXED:
            return _WHY_FIXED[node.op].format(s=s)
        if node.kind is Kind.LEARN:
            return (f"a learned table over positions of {s}" if not xs
                    else f"a learnable map of the whole of {s} (a universal approximator reads it in order)")
        if node.kind is Kind.RANDOM:
            return f"a random tensor over positions of {s}"
        if node.kind is Kind.ABSTRACT:
            return f"the abstract family '{node.op}' over {s}: nothing is known of its order"
        return f"nothing is known of how the fixed process '{node.op}' treats the order of {s}"

    def use(self, node: Box, perm: frozenset[str], xs: list[WireOrder], moved: list[bool], lifted: bool) -> list[WireOrder]:
        """A definition used as a box: entered with the dimensions its generics bind to ours."""
        bound = {g: dim for g, dim in node.generics}
        inner = {g for g, dim in bound.items() if dim.name in perm}
        inside = [(g, dim) for g, dim in bound.items() if (dim.names() & perm) and dim.name not in perm]
        if inside:
            g, dim = inside[0]
            return self.ordered(xs, moved, f"'{node.op}' takes {g} = {dim}, a size that makes "
                                           f"{self.shown} part of a longer axis", node)
        callee_perm = frozenset(inner | (perm - bound.keys()))
        if node.loop is None:
            return self.run(node.ref, callee_perm, xs, lifted)
        # a scan over another dimension, or a repeat: the carried state (port 0) settles to a
        # fixed point of the join (three orders: it settles within three rounds)
        state = xs[0]
        outs = xs
        for _ in range(4):
            outs = self.step(node, callee_perm, [state, *xs[1:]], moved, lifted)
            nxt = _join([state, outs[0]]) if outs else state
            if nxt == state:
                break
            state = nxt
        return outs

    def step(self, node: Box, perm: frozenset[str], xs: list[WireOrder], moved: list[bool],
             lifted: bool) -> list[WireOrder]:
        if node.kind is Kind.LEARN:  # a learnable cell of a scan: order-blind across positions
            return self.blind(xs, moved)
        return self.run(node.ref, perm, xs, lifted)


class OrderVerdict(str, Enum):
    EQUIVARIANT = "equivariant"
    INVARIANT = "invariant"
    NEITHER = "neither"


@dataclass(frozen=True)
class OutputOrder:
    """One output in one dimension: whether it is permuted with the inputs (``equivariant``),
    whether it stays as it was (``invariant``; an output without the dimension's axes that is
    one is both, as is one whose positions all hold the same value), and why when neither."""

    name: str
    equivariant: bool
    invariant: bool
    why: str = ""
    chain: Chain = ()

    @property
    def verdict(self) -> OrderVerdict:
        return OrderVerdict.INVARIANT if self.invariant else OrderVerdict.EQUIVARIANT if self.equivariant else OrderVerdict.NEITHER


@dataclass(frozen=True)
class Equivariance:
    """The diagram's verdict in one sequence dimension, and each output's: invariant when every
    output is, equivariant when every output is, else neither."""

    dim: str
    outputs: tuple[OutputOrder, ...]

    @property
    def verdict(self) -> OrderVerdict:
        return overall([(o.equivariant, o.invariant) for o in self.outputs])

    def text(self) -> str:
        """``s: equivariant`` or ``s: neither: a causal mask over s ..., at causal (file:29:11)``."""
        if self.verdict is not OrderVerdict.NEITHER:
            return f"{self.dim}: {self.verdict.value}"
        many = len(self.outputs) > 1
        bad = [o for o in self.outputs if o.why and not (o.equivariant and o.invariant)]
        parts = [f"{o.name + ': ' if many else ''}{o.why}" + (f", at {show_chain(o.chain)}" if o.chain else "")
                 for o in bad]
        return f"{self.dim}: neither: " + "; ".join(parts)

    def as_dict(self) -> dict:
        return {"dim": self.dim, "verdict": self.verdict.value, "text": self.text(),
                "outputs": [{"output": o.name, "equivariant": o.equivariant, "invariant": o.invariant, "why": o.why,
                             "at": show_chain(o.chain)} for o in self.outputs]}


def sequence_dims(d: Diagram) -> list[str]:
    """The sequence dimensions the diagram's inputs have axes of, in order of appearance."""
    prog = d.program
    seen: list[str] = []
    for t in d.input_types:
        for dim in t:
            n = dim.name
            decl = prog.lookup_dim(n) if (prog is not None and n is not None) else None
            if n is not None and decl is not None and decl.kind is DimKind.SEQ and n not in seen:
                seen.append(n)
    return seen


def equivariance(d: Diagram, dims: Iterable[str] | None = None) -> list[Equivariance]:
    """For each sequence dimension of the inputs (or each of ``dims``), whether ``d`` is
    permutation-equivariant, invariant, or neither in it, and why.

    >>> from stringdiag import loads
    >>> p = loads('''dim s : seq
    ... dim d : fixed
    ... learn F : [d] -> [d]
    ... diagram Pool(x: [s, d]) -> [d] {
    ...   y[i] = F(x[i])
    ...   return sum_i y[i]
    ... }
    ... diagram Run(x: [s, d]) -> [d, s] {
    ...   c[f] = cumsum(x[:, f])
    ...   return c
    ... }''')
    >>> [e.text() for e in equivariance(p["Pool"])]
    ['s: invariant']
    >>> equivariance(p["Run"])[0].verdict.value
    'neither'
    """
    out_names = [d.wire_label(w) or ("out" if len(d.outputs) == 1 else f"out{k + 1}")
                 for k, w in enumerate(d.outputs)]
    found = []
    for s in (list(dims) if dims is not None else sequence_dims(d)):
        perm = frozenset({s})
        pas = OrderPass(s)
        ins = [MOVES if _names(t) & perm else STILL for t in d.input_types]
        outs = pas.run(d, perm, ins)
        orders = []
        for name, w, v in zip(out_names, d.outputs, outs):
            has = bool(_names(d.wire_type(w)) & perm)
            if v.order is Order.FOLLOWS:
                orders.append(OutputOrder(name, True, v.still or not has))
            else:
                text, chain = v.why or ("", ())
                held = v.order is Order.HELD  # unchanged by the permutation, though it has the axis
                why = f"unchanged by the permutation, not permuted with it ({text})" if held else text
                orders.append(OutputOrder(name, False, held, why, chain))
        found.append(Equivariance(s, tuple(orders)))
    return found


def overall(outputs: list[tuple[bool, bool]]) -> OrderVerdict:
    """The diagram's verdict from its outputs' (equivariant, invariant): invariant first."""
    if all(inv for _, inv in outputs):
        return OrderVerdict.INVARIANT
    if all(eq for eq, _ in outputs):
        return OrderVerdict.EQUIVARIANT
    return OrderVerdict.NEITHER


__all__ = ["equivariance", "overall", "sequence_dims", "Equivariance", "OutputOrder", "OrderVerdict", "Order", "RULES"]
