"""The semantic oracle: do two diagrams with one boundary compute the same function?

PyZX's lesson: every rewrite is tested by evaluating both sides. Both diagrams are
compiled from their graphs as they are, weights are drawn in float64 for the first, and
each weight set of the second gets the weights of the same set of the first — matched by
identity (``graph/weights.py``; ``correspond`` maps the sets a step renamed), never by
name alone; a set that only one side has keeps its own random weights, so a step that splits
or merges sets is caught. Sizes, points and magnitudes are chosen so that a rule true only in
a corner cannot pass:

- every dimension is drawn independently, at several sizes per check: distinct small primes
  first (a transposed axis cannot go unnoticed), then each takes 1, 2 and 4 once in its own
  order, then a non-prime (:func:`size_rounds`), and the sizes the file declares;
- at the first sizes, inputs carry a batch axis long enough for :data:`POINTS` numbers (a
  scalar rule is tried on 512 points a distribution);
- inputs and weights come from several distributions (unit normal, large and tiny, all-negative,
  constant rows, ties), and inputs alone at 1e8 and 1e150, near the square root of the range.

Every entry of every output must satisfy ``|p - q| <= RTOL·|q| + ATOL·scale`` (RTOL = 1e-9,
ATOL = 1e-12 times the distribution's magnitude), so one large entry cannot hide an error in
the small ones. Entries non-finite on both sides agree (both sides of a sound rule may be
undefined at the same inputs); an entry finite on one side only is a difference, except at a
large magnitude where a side overflowed (an infinity made from finite numbers: the float's
range, not the rule); an output never finite on both sides is no evidence and fails. A
failure names the counterexample: the sizes, the distribution, the entry, both values and the
example's inputs when they are few. A rule that holds only away from zero at an input says so
(``assuming z != 0``), and that input is drawn away from zero.

Abstract boxes (``sim``) and a rule's box variables have no meaning of their own: give
``instantiate={"sim": diagram}`` for a definition to put in their place, or ``"learn"``
for a random universal approximator (the same weights on both sides).

>>> from stringdiag import loads
>>> p = loads('''dim s : seq
... dim d : fixed
... diagram A(x: [s, d], y: [d, s]) -> [s, s] {
...   e[i, j] = sum_f x[i, f] * y[f, j]
...   return e
... }
... diagram B(x: [s, d], y: [d, s]) -> [s, s] {
...   e[i, j] = sum_f y[f, j] * x[i, f]
...   return e
... }
... diagram C(x: [s, d], y: [d, s]) -> [s, s] {
...   e[j, i] = sum_f x[i, f] * y[f, j]
...   return e
... }''')
>>> equal(p["A"], p["B"])[0], equal(p["A"], p["C"])[0]
(True, False)
"""
from __future__ import annotations

import math
import warnings
from contextlib import contextmanager
from dataclasses import dataclass, replace
from typing import Any, Collection, Mapping, Union

import torch

from ..errors import DiagError
from ..graph.box import Global, Kind
from ..graph.constants import dims_in
from ..graph.diagram import Diagram
from ..graph.types import Dim, show_type
from ..lower import compile
from ..rewrite.rule import Rule

PRIMES = (3, 5, 7, 11, 13, 17, 19, 23, 29, 31, 37, 41, 43, 47, 53, 59, 61, 67, 71, 73)
Instance = Union[Diagram, str]  # a definition, or "learn": a random universal approximator


def dim_names(d: Diagram) -> set[str]:
    """Every dimension name the diagram's wires, SIMD boxes, generics and constants mention."""
    names: set[str] = set()
    for w in d.wires():
        for dim in d.wire_type(w):
            names |= dim.names()
    for b in d.boxes():
        a = d.record(b)
        for _, dim in tuple(a.simd) + tuple(a.summed) + tuple(a.generics):
            names |= dim.names()
        if a.kind is Kind.CONST:  # sqrt(k): a size only a constant names
            names |= {n for dim in dims_in(a.value) for n in dim.names()}
    return names


def default_sizes(names: set[str], given: Mapping[str, int] | None = None) -> dict[str, int]:
    """Sizes for every name: those given, then distinct small primes in name order."""
    sizes = dict(given or {})
    free = [p for p in PRIMES if p not in sizes.values()]
    for n in sorted(names - sizes.keys()):
        if not free:  # pragma: no cover - more dimensions than primes listed
            free = [max(sizes.values()) + 2]
        sizes[n] = free.pop(0)
    return sizes


def instantiated(d: Diagram, instantiate: Mapping[str, Instance] | None) -> Diagram:
    """The diagram with every definition opened and its abstract boxes filled in."""
    flat = d.expand()
    inst = dict(instantiate or {})
    for b in list(flat.boxes()):
        node = flat.record(b)
        if node.scan and node.kind is Kind.DIAGRAM and instantiate:
            flat.update(b, ref=instantiated(node.ref, instantiate))  # the cell a loop runs: filled in too
        if node.kind is not Kind.ABSTRACT:
            continue
        what = inst.get(node.op)
        if what is None:
            kind = "a box variable" if node.var else "an abstract family"
            raise DiagError(f"'{node.op}' in '{d.name}' is {kind} and has no meaning to evaluate; "
                            f"pass instantiate={{'{node.op}': <Diagram> or 'learn'}}", node.pos)
        if isinstance(what, str):
            if what != "learn":
                raise DiagError(f"instantiate['{node.op}'] must be a Diagram or 'learn', not {what!r}")
            flat.reset(b, node._replace(kind=Kind.LEARN, weights=Global(node.op)))
            continue
        ins = [flat.local_in_type(b, p) for p in range(len(flat.box_inputs(b)))]
        outs = [flat.local_out_type(b, p) for p in range(len(flat.box_outputs(b)))]
        sub = _bind(what, ins, outs)
        if sub is None:
            want = ", ".join(show_type(t) for t in ins) + " -> " + ", ".join(show_type(t) for t in outs)
            raise DiagError(f"'{what.name}' ({what.signature()}) cannot stand for '{node.op}' : {want}")
        flat.reset(b, node._replace(kind=Kind.DIAGRAM, op=what.name, ref=what,
                                    generics=tuple((gname, sub[gname]) for gname in what.generics)))
    return flat.expand() if instantiate else flat


def _bind(defn: Diagram, ins, outs) -> dict[str, Dim] | None:
    """Values of the definition's dimension parameters that give it these port types."""
    if len(defn.inputs) != len(ins) or len(defn.outputs) != len(outs):
        return None
    sub: dict[str, Dim] = {}
    for have, want in zip(defn.input_types + defn.output_types, list(ins) + list(outs)):
        if len(have) != len(want):
            return None
        for h, w in zip(have, want):
            if h.name in defn.generics and h.name not in sub:
                sub[h.name] = w
            elif h.substitute(sub) != w:
                return None
    return sub if all(gname in sub for gname in defn.generics) else None


@dataclass(frozen=True)
class Distribution:
    """One way of drawing inputs and weights: a shape (``normal``, ``negative``, ``constant
    rows``, ``ties``) at a magnitude. A false equation that holds on N(0, 1) alone (``clamp(x,
    -20, 20) == x``, ``relu(x) == x``) is caught by another distribution. The huge magnitudes
    scale the inputs only (``weights`` False): weights of that size would overflow every layer
    after the first on both sides alike, which tells nothing."""
    name: str
    shape: str
    scale: float
    weights: bool = True  # whether the weights are drawn at this magnitude too

    def sample(self, size: tuple[int, ...], gen: torch.Generator) -> torch.Tensor:
        x = torch.randn(size, generator=gen, dtype=torch.float64)
        if self.shape == "negative":
            x = -x.abs()
        elif self.shape == "constant rows" and len(size) > 0:
            x = x[..., :1].expand(size).clone()  # every row constant along its last axis
        elif self.shape == "ties":
            x = torch.randint(-2, 3, size, generator=gen).to(torch.float64)  # few values: ties, zeros
        return x * self.scale


DISTRIBUTIONS = (Distribution("N(0, 1)", "normal", 1.0),
                 Distribution("large (1e3·N(0, 1))", "normal", 1e3),
                 Distribution("tiny (1e-3·N(0, 1))", "normal", 1e-3),
                 Distribution("all-negative (-|N(0, 1)|)", "negative", 1.0),
                 Distribution("constant-row", "constant rows", 1.0),
                 Distribution("tied (integers -2..2)", "ties", 1.0),
                 Distribution("huge (1e8·N(0, 1))", "normal", 1e8, weights=False),
                 Distribution("extreme (1e150·N(0, 1))", "normal", 1e150, weights=False))

SIZE_DISTRIBUTIONS = (DISTRIBUTIONS[0], DISTRIBUTIONS[5])
NOWHERE = "no"  # the verdict's distribution when an output was never finite
RTOL = 1e-9   # float64: about 1e7 ulps of room for rounding in a reordered computation
ATOL = 1e-12  # times the distribution's scale: for entries that cancel to about zero
POINTS = 512  # inputs per distribution at least, as a batch: a scalar rule is tried on 512 points
MAX_BATCH = 256
SIZE_BATCH = 4  # at the sizes after the first: what a size decides shows on a few examples
SMALL = (1, 2, 4)  # every free dimension takes each of these once, independently of the others
NON_PRIME = (6, 8, 9, 10)


def size_rounds(names: set[str], given: Mapping[str, int] | None = None, seed: int = 0) -> list[dict[str, int]]:
    """The sizes a check runs at: distinct primes first (a transposed axis cannot go unnoticed),
    then rounds in which each free dimension is drawn independently of the others: each takes
    1, 2 and 4 once (in its own shuffled order), then a non-prime. A rule true only when a
    dimension is 3, or only when two are equal, is false at one of them; sizes ``given`` stay
    as they are."""
    first = default_sizes(names, given)
    free = sorted(names - set(given or {}))
    if not free:
        return [first]
    gen = torch.Generator().manual_seed(seed)
    order = {n: [SMALL[int(i)] for i in torch.randperm(len(SMALL), generator=gen)] for n in free}
    rounds = [first]
    for r in range(len(SMALL)):
        rounds.append({**first, **{n: order[n][r] for n in free}})
    rounds.append({**first, **{n: NON_PRIME[int(torch.randint(len(NON_PRIME), (1,), generator=gen))]
                               for n in free}})
    return rounds


def batch_for(types, sizes: Mapping[str, int]) -> int:
    """A leading batch axis large enough that a small rule meets :data:`POINTS` inputs (a scalar
    rule off on a narrow interval is met there), at least 2 (examples must stay apart)."""
    per = sum(math.prod(dim.evaluate(sizes) for dim in ty) for ty in types)
    return max(2, min(MAX_BATCH, -(-POINTS // max(per, 1))))


@dataclass(frozen=True)
class Verdict:
    """What the oracle found: whether every entry of every output agreed within ``|p - q| <=
    RTOL·|q| + ATOL·scale`` on every distribution at every size, and the worst entry (its
    relative error ``|p - q| / (|q| + ATOL·scale/RTOL)``, which is at most RTOL exactly when
    it passes): the counterexample, with the sizes and the distribution it was found at."""
    same: bool
    error: float
    distribution: str = ""   # where the worst entry was found
    output: int = 0
    entry: tuple[int, ...] = ()
    values: tuple[float, float] = (0.0, 0.0)
    sizes: tuple[tuple[str, int], ...] = ()  # the dimensions' sizes it was found at
    inputs: str = ""  # the inputs of its example, when they are few enough to print

    def where(self) -> str:
        """``at n=4, on large (1e3·N(0, 1)) inputs, output 1 at [0, 2]: 3 against -3``."""
        at_sizes = ("at " + ", ".join(f"{n}={v}" for n, v in self.sizes) + ", ") if self.sizes else ""
        if self.distribution == NOWHERE:
            return f"; output {self.output + 1} is finite on no input distribution, nothing to compare"
        at = ", ".join(str(i) for i in self.entry)
        given = f" (inputs {self.inputs})" if self.inputs else ""
        return (f"{at_sizes}on {self.distribution} inputs, output {self.output + 1} at [{at}]: "
                f"{self.values[0]:.6g} against {self.values[1]:.6g}{given}")


class Reuse:
    """What :func:`compare` built for a diagram, kept for the next comparison that meets the same
    diagram object (a derivation's step n + 1 starts from the diagram step n made): its
    instantiated expansion and its module at each size, each built once. It holds the diagrams of
    the latest comparison only. Weights are drawn afresh for every comparison, so a module
    reused is one compiled anew."""

    def __init__(self) -> None:
        self._held: dict[int, tuple[Diagram, tuple, dict]] = {}  # id -> (diagram, key, what was built)

    def keep(self, *ds: Diagram) -> None:
        ids = {id(d) for d in ds}
        for i in [i for i in self._held if i not in ids]:
            del self._held[i]

    def _built(self, d: Diagram, instantiate: Mapping[str, Instance] | None) -> dict:
        key = (len(d), d.signature(), tuple(sorted((k, v if isinstance(v, str) else id(v))
                                                   for k, v in (instantiate or {}).items())))
        held = self._held.get(id(d))
        if held is None or held[0] is not d or held[1] != key:  # a diagram edited in place is built again
            held = self._held[id(d)] = (d, key, {"flat": instantiated(d, instantiate)})
        return held[2]

    def flat(self, d: Diagram, instantiate: Mapping[str, Instance] | None) -> Diagram:
        return self._built(d, instantiate)["flat"]

    def module(self, d: Diagram, instantiate, sizes: Mapping[str, int], fast: bool) -> torch.nn.Module:
        """The float64 module at ``sizes``, or the DiagError compiling it raised, raised again."""
        built = self._built(d, instantiate)
        key = (tuple(sorted(sizes.items())), fast)
        if key not in built:
            try:
                built[key] = compile(built["flat"], dims=dict(sizes), dtype=torch.float64, fast=fast)
            except DiagError as e:
                built[key] = e
        got = built[key]
        if isinstance(got, DiagError):
            raise got
        return got


@contextmanager
def _one_thread():
    n = torch.get_num_threads()
    if n != 1:
        torch.set_num_threads(1)
    try:
        yield
    finally:
        if n != 1:
            torch.set_num_threads(n)


def compare(a: Diagram, b: Diagram, dims: dict[str, int] | None = None, trials: int = 1, seed: int = 0,
            instantiate: Mapping[str, Instance] | None = None, tol: float = RTOL,
            fast: bool = False, correspond: Mapping[Any, tuple] | None = None,
            nonzero: Collection[int] = (), reuse: Reuse | None = None) -> Verdict:
    """Evaluate both diagrams entry by entry on the same inputs with shared weights, at every
    size of :func:`size_rounds` and on every distribution of :data:`DISTRIBUTIONS` (``trials``
    rounds of them), and return the verdict with its worst entry. Entries non-finite on both
    sides agree (a sound rule about ``log`` of negatives, say); an entry finite on one side only
    is a difference (:func:`entrywise`); an output that is never finite on both sides is not
    evidence of equality, and the verdict says so. Sizes at which neither side can be built
    (a size below a constant index, say) are passed over; the first always runs. The inputs at
    the positions ``nonzero`` are drawn away from zero (a rule ``assuming z != 0``). With ``reuse``, a diagram met by the comparison
    before (the same object) is not expanded or compiled again. Torch runs at one thread meanwhile
    (the tensors are small: a thread pool costs more than it saves)."""
    with _one_thread():
        return _compare(a, b, dims, trials, seed, instantiate, tol, fast, correspond or {}, nonzero, reuse or Reuse())


def _compare(a: Diagram, b: Diagram, dims, trials: int, seed: int, instantiate, tol: float, fast: bool,
             correspond: Mapping[Any, tuple], nonzero: Collection[int], reuse: Reuse) -> Verdict:
    if a.input_types != b.input_types or a.output_types != b.output_types:
        raise DiagError(f"the diagrams have different boundaries: {a.signature()} and {b.signature()}")
    reuse.keep(a, b)
    fa, fb = reuse.flat(a, instantiate), reuse.flat(b, instantiate)
    rounds = size_rounds(dim_names(fa) | dim_names(fb), dims, seed)
    declared = _declared(a, dims)
    if declared:  # the sizes the file itself chose, too
        rounds.append({**rounds[0], **declared})
    worst = Verdict(True, 0.0)
    finite = [False] * len(a.output_types)
    for r, sizes in enumerate(rounds):
        torch.default_generator.manual_seed(seed)  # the CPU generator, as torch.manual_seed (1 ms) seeds it
        try:
            ma, mb = reuse.module(a, instantiate, sizes, fast), reuse.module(b, instantiate, sizes, fast)
        except DiagError:
            if r == 0:
                raise
            continue  # neither side has a meaning at these sizes, or only one: other sizes decide
        shown = tuple(sorted(sizes.items()))
        n = batch_for(a.input_types, sizes) if r == 0 else SIZE_BATCH
        # every distribution at the first sizes; at the others (what a size decides) unit normal
        # and ties, each dimension at 1, 2, 4 and a non-prime
        dists = DISTRIBUTIONS if r == 0 else SIZE_DISTRIBUTIONS
        for t in range(trials):
            for dist in dists:
                gen = torch.Generator().manual_seed(seed * 1000 + t)
                draw(ma, gen, dist)
                draw(mb, gen, dist)  # sets only b has: their own weights
                share_sets(ma, mb, correspond)
                xs = inputs(a.input_types, sizes, n, dist, gen, nonzero)
                try:
                    found = _verdicts(ma, mb, xs, dist, tol)
                except (IndexError, RuntimeError, ValueError):
                    if r == 0:
                        raise
                    break  # a size one side cannot run at (an index past the end): passed over
                for k, (v, some) in enumerate(found):
                    finite[k] = finite[k] or some
                    if v.error > worst.error or (v.error == worst.error and not worst.distribution):
                        worst = replace(v, distribution=dist.name, output=k, sizes=shown,
                                        inputs=_example(xs, v.entry))
                if not worst.same:
                    return worst  # the counterexample: no need to look further
    if worst.same and not all(finite):
        k = finite.index(False)
        return Verdict(False, math.inf, NOWHERE, k)
    return worst


def inputs(types, sizes: Mapping[str, int], n: int, dist: Distribution, gen: torch.Generator,
           nonzero: Collection[int] = ()) -> list[torch.Tensor]:
    """Inputs of the distribution with a leading batch axis of ``n`` (the compiled module then
    also shows that examples stay apart); at the positions ``nonzero`` a zero is moved to the
    distribution's scale."""
    xs = [dist.sample((n, *[dim.evaluate(sizes) for dim in ty]), gen) for ty in types]
    for i in nonzero:
        xs[i] = torch.where(xs[i] == 0, torch.full_like(xs[i], dist.scale), xs[i])
    return xs


def _verdicts(ma, mb, xs: list[torch.Tensor], dist: Distribution, tol: float) -> list[tuple[Verdict, bool]]:
    """Both modules on the inputs: each output's verdict, and whether any entry is finite on both
    sides. At a large magnitude an entry finite on one side only is left out when a side
    overflowed (asked only then: the module is run again node by node)."""
    with torch.no_grad(), _quiet():
        ya, yb = _tuple(ma(*xs)), _tuple(mb(*xs))
    loose = None
    out = []
    for p, q in zip(ya, yb):
        strict = True
        if dist.scale > 1 and bool((torch.isfinite(p) != torch.isfinite(q)).any()):
            if loose is None:
                loose = overflows(ma, xs) or overflows(mb, xs)
            strict = not loose
        both = bool((torch.isfinite(p) & torch.isfinite(q)).any())
        out.append((entrywise(p, q, dist.scale, tol, strict=strict), both))
    return out


def _declared(d: Diagram, given: Mapping[str, int] | None) -> dict[str, int]:
    """The sizes the diagram's file declares (``dim L : fixed = 2``) and the caller did not give."""
    prog = d.program
    return {name: decl.default for name, decl in (prog.dims.items() if prog is not None else ())
            if decl.default is not None and name not in (given or {})}


def _example(xs: list[torch.Tensor], entry: tuple[int, ...]) -> str:
    """The inputs of the example an entry belongs to, when there are at most four numbers."""
    if not entry or any(x.dim() == 0 for x in xs):
        return ""
    row = [x[entry[0]] for x in xs]
    if sum(r.numel() for r in row) > 4:
        return ""
    return ", ".join(f"{v:.6g}" for r in row for v in r.reshape(-1).tolist())


def equal(a: Diagram, b: Diagram, dims: dict[str, int] | None = None, trials: int = 1, seed: int = 0,
          instantiate: Mapping[str, Instance] | None = None, tol: float = RTOL,
          fast: bool = False, correspond: Mapping[Any, tuple] | None = None,
          nonzero: Collection[int] = ()) -> tuple[bool, float]:
    """:func:`compare`, as whether the diagrams agree and the worst entry's relative error."""
    v = compare(a, b, dims, trials, seed, instantiate, tol, fast, correspond, nonzero)
    return v.same, v.error


def entrywise(p: torch.Tensor, q: torch.Tensor, scale: float = 1.0, tol: float = RTOL,
              strict: bool = True) -> Verdict:
    """Entry by entry, ``|p - q| <= tol·|q| + ATOL·scale``; the worst entry named. Entries
    non-finite on both sides agree (NaN or ±inf: the function is undefined or overflows there,
    as ``log`` of a negative, ``0/0``, ``exp`` of a large input); an entry finite on one side
    only is an infinite error (``x / x`` against ``1`` at a zero, a sum that overflows on one
    side only), unless ``strict`` is False. Different shapes are an infinite error."""
    if p.shape != q.shape:
        return Verdict(False, math.inf)
    fp, fq = torch.isfinite(p), torch.isfinite(q)
    ok = fp & fq
    err = torch.zeros(p.shape, dtype=torch.float64)
    floor = ATOL * scale / tol
    err[ok] = (p[ok] - q[ok]).abs().double() / (q[ok].abs().double() + floor)
    if strict:
        err[fp != fq] = math.inf
    if err.numel() == 0:
        return Verdict(True, 0.0)
    i = int(err.reshape(-1).argmax())
    e = float(err.reshape(-1)[i])
    idx = _unravel(i, tuple(p.shape))  # not torch.unravel_index: it imports sympy (2 s) on first use
    return Verdict(e <= tol, e, entry=idx, values=(float(p[idx]), float(q[idx])))


class _Overflow(torch.fx.Interpreter):
    """Runs a compiled module node by node and notes whether some node made an infinity out of
    finite operands (``exp`` of a large input, a product or sum past the float's range)."""
    found = False

    def run_node(self, n):
        out = super().run_node(n)
        if not self.found and _infinite(out):
            ins = [a for a in torch.fx.node.map_aggregate((self.env.get(x) for x in n.all_input_nodes), lambda x: x)]
            if not any(_not_finite(a) for a in ins):
                self.found = True
        return out


def _unravel(i: int, shape: tuple[int, ...]) -> tuple[int, ...]:
    """The index of entry ``i`` of a row-major array of ``shape``."""
    idx = []
    for n in reversed(shape):
        i, r = divmod(i, n)
        idx.append(r)
    return tuple(reversed(idx))


def _infinite(x) -> bool:
    return isinstance(x, torch.Tensor) and x.is_floating_point() and bool(torch.isinf(x).any())


def _not_finite(x) -> bool:
    if isinstance(x, (tuple, list)):
        return any(_not_finite(y) for y in x)
    return isinstance(x, torch.Tensor) and x.is_floating_point() and not bool(torch.isfinite(x).all())


def overflows(m: torch.nn.Module, xs: list[torch.Tensor]) -> bool:
    """Whether evaluating the module on these inputs overflows somewhere: an infinity made out
    of finite numbers. At large magnitudes an entry finite on one side only is then the float's
    range, not the rule, and is left out; a NaN made without an overflow (``0 / 0``, the square
    root of a negative) is a difference at every magnitude."""
    if not isinstance(m, torch.fx.GraphModule):
        return False
    run = _Overflow(m)
    try:
        with torch.no_grad(), _quiet():
            run.run(*xs)
    except (RuntimeError, TypeError, ValueError, IndexError):  # not to be run node by node: no overflow shown
        return False
    return run.found


@contextmanager
def _quiet():
    """Overflow to inf on large inputs is an answer the comparison weighs, not a warning to print."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        yield


def draw(m: torch.nn.Module, gen: torch.Generator, dist: Distribution | None = None) -> None:
    """Fresh float64 weights of the distribution's shape: N(0, 1/fan_in) for matrices,
    N(0, 1/4) for vectors and scalars, at the distribution's scale."""
    dist = dist or DISTRIBUTIONS[0]
    with torch.no_grad():
        for p in m.parameters():
            std = 1.0 / math.sqrt(p.shape[-1]) if p.dim() >= 2 else 0.5
            x = dist.sample(tuple(p.shape), gen) * std
            p.copy_(x if dist.weights else x / dist.scale)


def translate(key: tuple, correspond: Mapping[Any, tuple]) -> tuple:
    """The weight set of the first side that ``key`` of the second stands for: itself, unless
    a step renamed it or the instance it lies in (``I/W`` for a renamed instance ``I``)."""
    if key in correspond:
        return correspond[key]
    name = str(key[-1])
    for new, old in correspond.items():
        if new[0] == Kind.DIAGRAM and name.startswith(new[1] + "/"):
            return (*key[:-1], old[1] + name[len(new[1]):])
    return key


def share_sets(src: torch.nn.Module, dst: torch.nn.Module, correspond: Mapping[Any, tuple]) -> int:
    """Give every weight set of ``dst`` the weights of the same set of ``src``."""
    have = getattr(src, "weight_sets", {})
    n = 0
    with torch.no_grad():
        for key, attr in getattr(dst, "weight_sets", {}).items():
            other = have.get(translate(key, correspond))
            if other is None:
                continue
            a, b = _module(dst, attr), _module(src, other)
            if a is None or b is None:
                continue
            mine, theirs = a.state_dict(), b.state_dict()
            if mine.keys() == theirs.keys() and all(mine[k].shape == theirs[k].shape for k in mine):
                a.load_state_dict(theirs)
                n += 1
    return n


def _module(root: torch.nn.Module, attr: str) -> torch.nn.Module | None:
    """The module of one weight set: at the top, or, for a set only a scanned cell uses,
    inside that cell's module (``Cell_1.h``: the same parameters wherever they are reached)."""
    try:
        return root.get_submodule(attr)
    except AttributeError:
        pass
    return next((m for name, m in root.named_modules() if name.endswith("." + attr)), None)


def share(src: torch.nn.Module, dst: torch.nn.Module) -> int:
    """Copy parameters and buffers of the same name and shape from ``src`` into ``dst``."""
    have: dict[str, torch.Tensor] = dict(src.named_parameters())
    have.update(dict(src.named_buffers()))
    n = 0
    with torch.no_grad():
        for name, p in list(dst.named_parameters()) + list(dst.named_buffers()):
            q = have.get(name)
            if q is not None and q.shape == p.shape:
                p.copy_(q)
                n += 1
    return n


def _tuple(y) -> tuple:
    return tuple(y) if isinstance(y, (tuple, list)) else (y,)


def relative_error(p: torch.Tensor, q: torch.Tensor) -> float:
    """The worst entry's relative error (:func:`entrywise`, at unit scale)."""
    return entrywise(p, q).error


def verify_rule(rule: Rule, trials: int = 1, seed: int = 0, tol: float = RTOL) -> Verdict:
    """Evaluate both sides of an equation on the same random float64 inputs (:func:`equal`):
    box variables and abstract families are instantiated as random universal approximators,
    the same on both sides; an input the rule assumes non-zero is drawn away from zero. Returns
    the verdict (:func:`compare`)."""
    abstract = {side.record(b).op for side in (rule.lhs.expand(), rule.rhs.expand()) for b in side.boxes()
                if side.record(b).kind is Kind.ABSTRACT} | set(rule.vars)
    return compare(rule.lhs, rule.rhs, trials=trials, seed=seed, tol=tol,
                   instantiate={name: "learn" for name in sorted(abstract)}, nonzero=tuple(rule.nonzero.values()))


__all__ = ["compare", "Reuse", "entrywise", "Verdict", "Distribution", "DISTRIBUTIONS", "RTOL", "ATOL", "equal", "instantiated", "default_sizes", "size_rounds", "dim_names", "share", "share_sets", "draw", "relative_error", "verify_rule"]
