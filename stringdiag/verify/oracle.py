"""The semantic oracle: do two diagrams with one boundary compute the same function?

PyZX's lesson: every rewrite is tested by evaluating both sides. Both diagrams are
compiled from their graphs as they are, weights are drawn in float64 for the first, and
each weight set of the second gets the weights of the same set of the first — matched by
identity (``graph/weights.py``; ``correspond`` maps the sets a step renamed), never by
name alone. Both run on the same random float64 inputs; they agree when the largest
difference is below ``tol`` relative to the largest output. A set that only one side has
keeps its own random weights, so a step that splits or merges sets is caught. Sizes default to small distinct primes, so that a
transposed axis cannot go unnoticed.

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
from typing import Mapping, Union

import torch

from ..errors import DiagError
from ..graph.diagram import Diagram
from ..graph.types import Dim, show_type
from ..lower import compile
from ..rewrite.rule import Rule

PRIMES = (3, 5, 7, 11, 13, 17, 19, 23, 29, 31, 37, 41, 43, 47, 53, 59, 61, 67, 71, 73)
Instance = Union[Diagram, str]  # a definition, or "learn": a random universal approximator


def dim_names(d: Diagram) -> set[str]:
    """Every dimension name the diagram's wires, SIMD boxes, generics and constants mention."""
    names: set[str] = set()
    for n, a in d.graph.nodes(data=True):
        if a["kind"] == "wire":
            for dim in a["type"]:
                names |= dim.names()
        else:
            for _, dim in tuple(a["simd"]) + tuple(a.get("summed", ())) + tuple(a.get("generics", ())):
                names |= dim.names()
            if a["box"] == "const":  # sqrt(k): a size only a constant names
                names |= _const_dims(a.get("value"))
    return names


def _const_dims(c) -> set[str]:
    """The dimension names a constant expression mentions."""
    if not isinstance(c, tuple) or not c or c[0] == "num":
        return set()
    if c[0] == "dim":
        return set(c[1].names())
    return set().union(*(_const_dims(x) for x in c[1:]))


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
    g = flat.graph
    for b in list(flat.boxes()):
        node = g.nodes[b]
        if node.get("scan") and node["box"] == "diagram" and instantiate:
            node["ref"] = instantiated(node["ref"], instantiate)  # the cell a loop runs: filled in too
        if node["box"] != "abstract":
            continue
        what = inst.get(node["op"])
        if what is None:
            kind = "a box variable" if node.get("var") else "an abstract family"
            raise DiagError(f"'{node['op']}' in '{d.name}' is {kind} and has no meaning to evaluate; "
                            f"pass instantiate={{'{node['op']}': <Diagram> or 'learn'}}", node.get("pos"))
        if isinstance(what, str):
            if what != "learn":
                raise DiagError(f"instantiate['{node['op']}'] must be a Diagram or 'learn', not {what!r}")
            node.update(box="learn", local=False, param=node["op"])
            continue
        ins = [flat.local_in_type(b, p) for p in range(len(flat.box_inputs(b)))]
        outs = [flat.local_out_type(b, p) for p in range(len(flat.box_outputs(b)))]
        sub = _bind(what, ins, outs)
        if sub is None:
            want = ", ".join(show_type(t) for t in ins) + " -> " + ", ".join(show_type(t) for t in outs)
            raise DiagError(f"'{what.name}' ({what.signature()}) cannot stand for '{node['op']}' : {want}")
        node.update(box="diagram", op=what.name, ref=what, generics=tuple((gname, sub[gname]) for gname in what.generics))
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


def equal(a: Diagram, b: Diagram, dims: dict[str, int] | None = None, trials: int = 3, seed: int = 0,
          instantiate: Mapping[str, Instance] | None = None, tol: float = 1e-9,
          fast: bool = False, correspond: Mapping[tuple, tuple] | None = None) -> tuple[bool, float]:
    """Evaluate both diagrams on the same random inputs with shared weights.

    Returns whether they agree to relative error ``tol`` in every trial, and the largest
    relative error seen (``inf`` where one side is finite and the other not).
    """
    if a.input_types != b.input_types or a.output_types != b.output_types:
        raise DiagError(f"the diagrams have different boundaries: {a.signature()} and {b.signature()}")
    fa, fb = instantiated(a, instantiate), instantiated(b, instantiate)
    sizes = default_sizes(dim_names(fa) | dim_names(fb), dims)
    worst = 0.0
    for t in range(trials):
        torch.manual_seed(seed * 1000 + t)
        ma = compile(fa, dims=sizes, dtype=torch.float64, fast=fast)
        mb = compile(fb, dims=sizes, dtype=torch.float64, fast=fast)
        gen = torch.Generator().manual_seed(seed * 1000 + t)
        draw(ma, gen)
        draw(mb, gen)  # sets only b has: their own weights
        share_sets(ma, mb, correspond or {})
        # a leading batch axis of 2: the compiled module then also shows that examples stay apart
        xs = [torch.randn(2, *[dim.evaluate(sizes) for dim in ty], generator=gen, dtype=torch.float64)
              for ty in a.input_types]
        with torch.no_grad():
            ya, yb = _tuple(ma(*xs)), _tuple(mb(*xs))
        worst = max(worst, max((relative_error(p, q) for p, q in zip(ya, yb)), default=0.0))
    return worst < tol, worst


def draw(m: torch.nn.Module, gen: torch.Generator) -> None:
    """Fresh float64 weights: N(0, 1/fan_in) for matrices, N(0, 1/4) for vectors and scalars."""
    with torch.no_grad():
        for p in m.parameters():
            std = 1.0 / math.sqrt(p.shape[-1]) if p.dim() >= 2 else 0.5
            p.copy_(torch.randn(p.shape, generator=gen, dtype=torch.float64) * std)


def translate(key: tuple, correspond: Mapping[tuple, tuple]) -> tuple:
    """The weight set of the first side that ``key`` of the second stands for: itself, unless
    a step renamed it or the instance it lies in (``I/W`` for a renamed instance ``I``)."""
    if key in correspond:
        return correspond[key]
    name = str(key[-1])
    for new, old in correspond.items():
        if new[0] == "diagram" and name.startswith(new[1] + "/"):
            return (*key[:-1], old[1] + name[len(new[1]):])
    return key


def share_sets(src: torch.nn.Module, dst: torch.nn.Module, correspond: Mapping[tuple, tuple]) -> int:
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
    have = dict(src.named_parameters())
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
    """max |p - q| / max(|p|, |q|) over finite entries; ``inf`` if the shapes differ, if the
    infinite entries differ, or if either side has a NaN: a NaN agrees with nothing, so two
    sides that both compute NaN (0 * inf, say) are never taken for equal functions."""
    if p.shape != q.shape or p.isnan().any() or q.isnan().any():
        return math.inf
    fp, fq = torch.isfinite(p), torch.isfinite(q)
    if not torch.equal(fp, fq) or not torch.equal(p[~fp], q[~fq]):
        return math.inf
    if not fp.any():
        return 0.0
    p, q = p[fp], q[fq]
    scale = max(p.abs().max().item(), q.abs().max().item())
    if scale == 0.0:
        return 0.0
    return (p - q).abs().max().item() / scale


def verify_rule(rule: Rule, trials: int = 3, seed: int = 0, tol: float = 1e-9) -> tuple[bool, float]:
    """Evaluate both sides of an equation on the same random float64 inputs (:func:`equal`):
    box variables and abstract families are instantiated as random universal approximators,
    the same on both sides. Returns whether the sides agree to ``tol`` and the largest
    relative error."""
    abstract = {side.box(b)["op"] for side in (rule.lhs.expand(), rule.rhs.expand()) for b in side.boxes()
                if side.box(b)["box"] == "abstract"} | set(rule.vars)
    return equal(rule.lhs, rule.rhs, trials=trials, seed=seed, tol=tol,
                 instantiate={name: "learn" for name in sorted(abstract)})


__all__ = ["equal", "instantiated", "default_sizes", "dim_names", "share", "share_sets", "draw", "relative_error", "verify_rule"]
