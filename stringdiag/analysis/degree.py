"""The degree of a diagram as a piecewise-polynomial map (Lai, Lim and Liu, "Attention is a
smoothed cubic spline", Sec. 3, Lemma 3.2 and Theorem 3.3), by one static pass over the graph.

Every wire gets the set of exponent vectors its entries may contain, one exponent per input
of the diagram (a monomial ``X^2 Y^3`` is ``(2, 3)``), kept as the maximal vectors of a set
closed downwards (lower terms, biases, cost nothing). The rules are Lemma 3.2's, made exact
per input: a product or contraction adds the vectors (Minkowski sum), a sum takes the union
(the maximum degree), a learnable box with inputs is degree 1 (an affine map under the
``linear`` policy, a ReLU network, a linear spline, under ``mlp``: Theorem 3.1), so its
output has the union of its inputs' vectors, and so do ReLU, max, min, clamp and amax (each
piece is one of its arguments); constants are ``(0, ..., 0)``, division by a constant keeps
the vectors. A definition used as a box is entered with its arguments' sets, so composition
substitutes: ``tau(X, Y) = phi(gamma(X, beta(Y)))`` with ``gamma`` of degrees ``(2, 1)`` and
``beta`` cubic is ``(2, 3)``, quintic, as the seed's proof says, where "composition
multiplies" alone would bound it by 9.

The degree overall is the largest sum of a vector, the degree in one input the largest
entry (the other inputs held constant). These are upper bounds (nothing is assumed to
cancel), which is the seed's sense of "a spline of degree k" ("degree not more than k");
``verify/measured_degree.py`` confirms numerically that they are attained.

A diagram is not a spline when some box on the way is not piecewise polynomial in the
inputs (softmax's exp, a division by a value that depends on them), and a piecewise-
polynomial map is a spline in the seed's sense (Def. 2.2) only when it is continuous:
hardmax is piecewise constant but jumps. Either way the report names the box, with the
chain of definitions it sits in. Boxes of which nothing is known (an abstract family, a
user's ``fixed`` process) make the answer unknown, said as plainly.
"""
from __future__ import annotations

from typing import Mapping

from ..graph.box import Box, Kind
from ..errors import DiagError, Pos
from ..graph.diagram import Diagram
from ..graph.hypergraph import count_value, repeated
from ..syntax.records import Record

Vector = tuple[int, ...]
Support = frozenset  # of Vector: the maximal exponent vectors

# How each primitive of the prelude acts on degrees (stringdiag/prelude/prelude.diag).
RULES: dict[str, str] = {
    **dict.fromkeys(["add", "sub", "neg", "detach", "cat", "split", "rev", "flatten", "unflatten",
                     "cumsum", "shift", "pick", "narrow", "dropout"], "linear"),
    **dict.fromkeys(["relu", "max", "min", "clamp", "amax"], "piecewise-linear"),
    **dict.fromkeys(["mul", "causal_conv"], "product"),
    "div": "quotient",
    "where": "mask",
    **dict.fromkeys(["hardmax", "floor"], "step"),
    **dict.fromkeys(["ones", "zeros", "positions", "posenc", "causal", "window", "strided"], "constant"),
    **dict.fromkeys(["exp", "log", "sqrt", "elu", "sigmoid", "tanh", "softplus", "erf", "gelu", "gelu_tanh",
                     "gauss", "sin", "cos"], "analytic"),
}

# the most copies of a stack composed one by one while the degree still grows (the state of a
# stack whose degree settles repeats within a few copies, and is then followed by arithmetic)
MAX_COMPOSED = 1_000

Chain = tuple[tuple[str, "Pos | None"], ...]  # (box, position), outermost first
UNKNOWN = "cannot tell whether it is a spline"


class WireDegree(Record):
    """What the pass knows of a wire: its exponent vectors; or why it is no polynomial piece
    (``broken``); and whether it may jump (``jump``: the box that makes it discontinuous)."""

    support: Support
    broken: tuple[str, str, Chain] | None = None  # (verdict, why, where)
    jump: Chain | None = None

    @property
    def constant(self) -> bool:
        return self.broken is None and self.jump is None and all(not any(v) for v in self.support)


class OutputDegree(Record):
    """One output's verdict. ``degree`` and ``per_input`` are None when it is not piecewise
    polynomial (``reason`` says why, ``chain`` where); ``jump`` names a discontinuity."""

    name: str
    degree: int | None
    per_input: dict[str, int] | None
    spline: bool
    reason: str = ""
    chain: Chain = ()
    jump: Chain = ()
    vectors: tuple[Vector, ...] = ()

    def as_dict(self) -> dict:
        return {"output": self.name, "degree": self.degree, "per_input": self.per_input, "spline": self.spline,
                "reason": self.reason, "at": show_chain(self.chain or self.jump),
                "monomials": [list(v) for v in self.vectors], "text": describe(self)}


def _prune(vs) -> Support:
    vs = set(vs)
    return frozenset(v for v in vs if not any(o != v and all(a >= b for a, b in zip(o, v)) for o in vs))


def _plus(a: Support, b: Support) -> Support:
    return _prune(tuple(x + y for x, y in zip(u, w)) for u in a for w in b)


def _join(values: list[WireDegree]) -> WireDegree:
    """The union: each piece is a linear combination of the arguments."""
    support = _prune(v for x in values for v in x.support)
    broken = next((x.broken for x in values if x.broken), None)
    jump = next((x.jump for x in values if x.jump), None)
    if broken:  # no polynomial piece: the vectors say nothing (and stay put, so a scan's state settles)
        support = frozenset({(0,) * len(next(iter(support)))})
    return WireDegree(support, broken, jump)


def _sum(values: list[WireDegree], n: int) -> WireDegree:
    """The product (Minkowski sum of the exponent vectors)."""
    j = _join(values)
    if j.broken:
        return j
    support: Support = frozenset({(0,) * n})
    for x in values:
        support = _plus(support, x.support)
    return WireDegree(support, None, j.jump)


def _const(n: int) -> WireDegree:
    return WireDegree(frozenset({(0,) * n}))


def _within(value: WireDegree, op: str, pos: Pos | None, args: list[WireDegree]) -> WireDegree:
    """A value computed inside a box ``op`` at ``pos`` from ``args``: a chain that began
    inside it starts there; one its arguments brought in is left as it was."""
    broken, jump = value.broken, value.jump
    if broken and broken not in {x.broken for x in args}:
        broken = (broken[0], broken[1], ((op, pos), *broken[2]))
    if jump and jump not in {x.jump for x in args}:
        jump = ((op, pos), *jump)
    return WireDegree(value.support, broken, jump)


class DegreePass:
    """The static pass over one diagram whose inputs are the variables."""

    def __init__(self, n: int):
        self.n = n
        self.memo: dict[tuple, list[WireDegree]] = {}

    def run(self, d: Diagram, ins: list[WireDegree]) -> list[WireDegree]:
        key = (id(d.graph), d.version(), tuple(ins))
        if key not in self.memo:
            env = dict(zip(d.inputs, ins))
            for b in d.topological_boxes():
                outs = self.box(d, b, [env[w] for w, _ in d.box_inputs(b)])
                env.update(zip(d.box_outputs(b), outs))
            self.memo[key] = [env[w] for w in d.outputs]
        return self.memo[key]

    def box(self, d: Diagram, b: int, xs: list[WireDegree]) -> list[WireDegree]:
        node = d.record(b)
        kind, op, n_out = node.kind, node.op, len(d.box_outputs(b))
        if repeated(node):
            return [_within(v, op, node.pos, xs) for v in self.stack(d, node, xs, n_out)]
        if kind is Kind.DIAGRAM or node.scan:
            outs = self.scan(node, xs, n_out) if node.scan else self.run(node.ref, xs)
            return [_within(v, op, node.pos, xs) for v in outs]
        if kind in (Kind.LEARN, Kind.CONST, Kind.REINDEX):  # degree 1 in the inputs, or a constant
            return [_join(xs) if xs else _const(self.n)] * n_out
        if kind is Kind.CONTRACT:
            return [_sum(xs, self.n)]
        if kind is Kind.ABSTRACT:
            why = f"'{op}' is an abstract family, with no meaning until it is instantiated"
            return [self.broken(why, op, node, UNKNOWN)] * n_out
        return [self.fixed(op, node, xs)] * n_out

    def broken(self, why: str, op: str, node: Box, verdict: str = "not a spline") -> WireDegree:
        return WireDegree(_const(self.n).support, (verdict, why, ((op, node.pos),)))

    def fixed(self, op: str, node: Box, xs: list[WireDegree]) -> WireDegree:
        rule = RULES.get(op)
        if xs and all(x.constant for x in xs):
            return _const(self.n)  # a function of constants is a constant, whatever it is
        if any(x.broken for x in xs):
            return _join(xs)  # the first box that broke it stays the one named
        if rule in ("linear", "piecewise-linear"):
            return _join(xs)
        if rule == "product":
            return _sum(xs, self.n)
        if rule == "constant":
            return _const(self.n)
        if rule == "quotient":
            if xs[1].constant:
                return xs[0]
            return self.broken("division by a value that depends on the input is not piecewise polynomial", op, node)
        if rule == "mask":
            if xs[1].constant:
                return xs[0]  # the masked entries are the constant -infinity
            return self.broken("a mask that depends on the input makes entries jump to -infinity", op, node)
        if rule == "step":
            return WireDegree(_const(self.n).support, _join(xs).broken, ((op, node.pos),))
        if rule == "analytic":
            return self.broken(f"{op} is not piecewise polynomial", op, node)
        return self.broken(f"no degree rule is known for the fixed process '{op}'", op, node, UNKNOWN)

    def stack(self, d: Diagram, node: Box, xs: list[WireDegree], n_out: int) -> list[WireDegree]:
        """``repeat t Block(x, ...)``: the block composed t times, each copy's output its
        successor's first input (so degrees compose: 3^t for t encoder blocks)."""
        t = count_value(node.count, d.program, {})
        if t is None:
            why = f"the degree depends on the number of copies '{node.count}' of '{node.op}' (give it a size)"
            return [WireDegree(_const(self.n).support, (UNKNOWN, why, ((node.op, node.pos),)))] * n_out
        states = [xs[0]]  # states[k]: the first input of copy k
        seen = {xs[0]: 0}
        while len(states) < t:
            nxt = self.run(node.ref, [states[-1], *xs[1:]])[0]
            if nxt in seen:  # a cycle (a fixed point most often): copy t-1 is found by arithmetic
                first = seen[nxt]
                return self.run(node.ref, [states[first + (t - 1 - first) % (len(states) - first)], *xs[1:]])
            if len(states) >= MAX_COMPOSED:
                raise _growing(node, t, len(states), nxt)
            seen[nxt] = len(states)
            states.append(nxt)
        return self.run(node.ref, [states[t - 1], *xs[1:]]) if t else xs

    def scan(self, node: Box, xs: list[WireDegree], n_out: int) -> list[WireDegree]:
        """Finite iteration: the carried state's vectors grow to a fixed point, or without
        bound (then the degree grows with the number of steps)."""
        state = xs[0]
        for _ in range(16):
            outs = self.step(node, [state, *xs[1:]], n_out)
            nxt = _join([state, outs[0]])
            if nxt == state or nxt.broken:
                return outs
            state = nxt
        why = f"the degree grows with the number of steps of the scan '{node.op}'"
        return [WireDegree(_const(self.n).support, ("no degree independent of the sequence length", why, ()))] * n_out

    def step(self, node: Box, xs: list[WireDegree], n_out: int) -> list[WireDegree]:
        if node.kind is Kind.LEARN:  # a learnable cell: degree 1 in the state and the step's inputs
            return [_join(xs)] * n_out
        return self.run(node.ref, xs)


def _growing(node: Box, t: int, k: int, state: WireDegree) -> DiagError:
    """The refusal of a stack whose degree still grows after ``k`` copies of its ``t``."""
    now = "not a polynomial piece" if state.broken else f"{max(sum(v) for v in state.support):,}"
    return DiagError(f"refusing to compute the degree of 'repeat {node.count} {node.op}': it still grows after "
                     f"{k:,} copies (it is {now} there), and {t:,} copies are over the {MAX_COMPOSED:,} "
                     f"composed one by one; give the stack fewer copies", node.pos)


def degree(d: Diagram) -> list[OutputDegree]:
    """Each output's degree as a piecewise-polynomial map of the inputs: overall and per input.

    >>> from stringdiag import loads
    >>> p = loads('''dim d : fixed
    ... learn F : [d] -> [d]
    ... diagram G(x: [d], y: [d]) -> [d] {
    ...   return F(x) * relu(x * y)
    ... }''')
    >>> [describe(r) for r in degree(p["G"])]
    ['3, a spline (continuous piecewise polynomial); in x: 2, in y: 1']
    """
    n = len(d.inputs)
    names = d.input_names or [f"in{k}" for k in range(n)]
    ins = [WireDegree(frozenset({tuple(int(i == k) for i in range(n))})) for k in range(n)]
    outs = DegreePass(n).run(d, ins)
    out_names = [d.wire_label(w) or ("out" if len(d.outputs) == 1 else f"out{k + 1}")
                 for k, w in enumerate(d.outputs)]
    return [_verdict(name, v, names) for name, v in zip(out_names, outs)]


def _verdict(name: str, v: WireDegree, names: list[str]) -> OutputDegree:
    if v.broken:
        return OutputDegree(name, None, None, False, f"{v.broken[0]}: {v.broken[1]}", v.broken[2])
    vecs = tuple(sorted(v.support, key=lambda x: (-sum(x), x)))
    total = max(sum(x) for x in vecs)
    per = {nm: max(x[k] for x in vecs) for k, nm in enumerate(names)}
    return OutputDegree(name, total, per, v.jump is None, "", (), v.jump or (), vecs)


def show_chain(chain: Chain) -> str:
    """``softmax (attention.diag:22:13) > exp (prelude.diag:73:8)``."""
    return " > ".join(f"{op} ({_where(pos)})" if pos else op for op, pos in chain)


def _where(pos: Pos) -> str:
    """The prelude by its name alone: its path is the installation's, not the user's."""
    prelude = pos.file.replace("\\", "/").endswith("stringdiag/prelude/prelude.diag")
    return f"prelude.diag:{pos.line}:{pos.col}" if prelude else str(pos)


def describe(r: OutputDegree) -> str:
    """One line for a person: ``5, a spline (continuous piecewise polynomial); in x: 2, in y: 3``,
    or why there is no degree, naming the box."""
    if r.degree is None:
        return f"{r.reason}, at {show_chain(r.chain)}"
    per = ", ".join(f"in {k}: {v}" for k, v in (r.per_input or {}).items())
    per = f"; {per}" if per else ""
    if not r.spline:
        return (f"{r.degree}, piecewise polynomial but not continuous, so not a spline "
                f"(it jumps at {show_chain(r.jump)}){per}")
    kind = "constant" if r.degree == 0 else "a spline (continuous piecewise polynomial)"
    return f"{r.degree}, {kind}{per}"


__all__ = ["degree", "describe", "OutputDegree", "RULES", "show_chain"]
