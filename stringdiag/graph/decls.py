"""What a ``.diag`` program is made of: declared dimensions and boxes, diagram definitions,
and the program that holds them, with the reading of a declaration's types.

Kept apart from loading (``program.py``) and elaboration (``elaborate.py``) so that both
import these records and neither imports the other: a definition is given the function that
elaborates it.
"""
from __future__ import annotations

import difflib
from dataclasses import dataclass, field
from typing import Callable, Iterator

from .box import Kind
from ..errors import DiagError, DiagWarning, Pos
from ..syntax import ast as A
from .diagram import Diagram
from .types import Dim, TensorType, show_type


@dataclass(frozen=True)
class DimDecl:
    name: str
    kind: str  # "fixed" | "seq" | "generic"
    default: int | None
    pos: Pos | None


@dataclass(frozen=True)
class Approximator:
    """``via linear(bias = false)``: the module one learnable box becomes, written in the file;
    a box without one takes the policy given when compiling (``--approximator``)."""

    policy: str  # a key of OPTIONS
    bias: bool = True
    hidden: int | None = None  # mlp: the hidden width (None: as wide as the input)

    def show(self) -> str:
        opts = ([] if self.bias else ["bias = false"]) + ([f"hidden = {self.hidden}"] if self.hidden else [])
        return f"via {self.policy}" + (f"({', '.join(opts)})" if opts else "")


OPTIONS = {"linear": ("bias",), "mlp": ("bias", "hidden")}  # the options each policy takes


@dataclass(frozen=True)
class BoxDecl:
    """A declared box: learnable (``learn``), abstract family (``abstract``), ``fixed``, or
    ``random``: a tensor drawn from N(0, 1) by ``seed``, fixed and never trained."""

    name: str
    box: str
    generics: tuple[str, ...]
    ins: tuple[TensorType, ...]
    outs: tuple[TensorType, ...]
    pos: Pos | None
    local: bool = False  # declared inside a diagram: fresh weights for each use of it
    via: Approximator | None = None
    bounds: tuple[tuple[str, int], ...] = ()  # (seq dimension, largest length) of a learnable tensor

    def axis_bounds(self) -> tuple[int | None, ...]:
        """The largest length of each axis of a learnable tensor (None: not bounded; empty if
        none is), by axis: a use inside a definition may call the bounded dimension otherwise."""
        bounds = dict(self.bounds)
        return tuple(bounds.get(dim.name) for dim in self.outs[0]) if bounds else ()
    seed: int | None = None  # a random box's seed
    ins_of: tuple[Dim | None, ...] = ()  # per input: the range v of a token-id port ([] of v), else None
    outs_of: tuple[Dim | None, ...] = ()  # per output: the range of the ids a fixed box computes (topk's)

    def port_ranges(self) -> tuple[Dim | None, ...]:
        """Per input, the range of its token ids (``[s] of v``) or None (real numbers)."""
        return self.ins_of or (None,) * len(self.ins)

    def out_ranges(self) -> tuple[Dim | None, ...]:
        """Per output, the range of the ids it carries (``[k] of n``: topk's indices) or None."""
        return self.outs_of or (None,) * len(self.outs)

    def signature(self) -> str:
        g = f"<{', '.join(self.generics)}>" if self.generics else ""
        ins = ", ".join(show_type(t, r) for t, r in zip(self.ins, self.port_ranges()))
        outs = ", ".join(show_type(t, r) for t, r in zip(self.outs, self.out_ranges()))
        seed = f" seed {self.seed}" if self.seed is not None else ""
        return f"{self.box} {self.name}{g} : {ins} -> {outs}{seed}"


@dataclass
class Program:
    """Everything a file declares, with its imports (and the prelude) in scope."""

    path: str
    source: str
    dims: dict[str, DimDecl] = field(default_factory=dict)
    boxes: dict[str, BoxDecl] = field(default_factory=dict)
    defs: dict[str, "Definition"] = field(default_factory=dict)
    own: list[str] = field(default_factory=list)  # names of diagrams defined in this file
    warnings: list[DiagWarning] = field(default_factory=list)
    prelude: "Program | None" = None

    # -- lookup ---------------------------------------------------------------------
    def __getitem__(self, name: str) -> Diagram:
        if name in self.defs:
            return self.defs[name].diagram()
        if self.prelude is not None and name in self.prelude.defs:
            return self.prelude[name]
        hint = suggest(name, list(self.defs))
        raise KeyError(f"no diagram named {name!r} in {self.path}{hint}")

    def __contains__(self, name: str) -> bool:
        return name in self.defs

    def __iter__(self) -> Iterator[str]:
        return iter(self.own)

    @property
    def diagrams(self) -> dict[str, Diagram]:
        """The diagrams this file defines (not its imports), in source order."""
        return {n: self[n] for n in self.own}

    def lookup_dim(self, name: str) -> DimDecl | None:
        if name in self.dims:
            return self.dims[name]
        return self.prelude.dims.get(name) if self.prelude else None

    def lookup_box(self, name: str) -> BoxDecl | None:
        if name in self.boxes:
            return self.boxes[name]
        return self.prelude.boxes.get(name) if self.prelude else None

    def lookup_def(self, name: str) -> "Definition | None":
        if name in self.defs:
            return self.defs[name]
        return self.prelude.defs.get(name) if self.prelude else None

    def all_names(self) -> list[str]:
        names = list(self.dims) + list(self.boxes) + list(self.defs)
        if self.prelude:
            names += list(self.prelude.boxes) + list(self.prelude.defs)
        return names

    def learnables(self) -> list[BoxDecl]:
        return [b for b in self.boxes.values() if b.box == Kind.LEARN]

    def __repr__(self) -> str:  # not the dataclass's: that prints every declaration and the source
        return f"<Program {self.path}: {', '.join(self.own) or 'no diagrams'}>"


class Definition:
    """A diagram definition: its syntax tree, elaborated to a graph once, when first needed,
    by ``elaborate`` (given by whoever makes the definition: the loader)."""

    def __init__(self, node: A.Diagram, program: Program, elaborate: Callable[["Definition"], Diagram]):
        self.name = node.name.text
        self.node = node
        self.program = program
        self._elaborate = elaborate
        self._diagram: Diagram | None = None
        self._busy = False
        self.generics: tuple[str, ...] = generic_names(node.generics, program)
        self.pos = node.name.pos

    def diagram(self) -> Diagram:
        if self._diagram is None:
            if self._busy:
                cycle = _elaborating[_elaborating.index(self) + 1:]
                via = " via " + " -> ".join(f"'{d.name}'" for d in cycle) if cycle else ""
                # no position here: the caller knows where the use that closes the cycle is
                raise DiagError(f"diagram '{self.name}' uses itself{via} (recursion is not allowed)")
            self._busy = True
            _elaborating.append(self)
            try:
                self._diagram = self._elaborate(self)
            finally:
                self._busy = False
                _elaborating.pop()
        return self._diagram


_elaborating: list[Definition] = []  # definitions being elaborated, outermost first


# -- declarations' types ------------------------------------------------------------------
def dim_expr(e: A.DimSum | A.DimProduct | A.Name | A.Int, prog: Program, generics: tuple[str, ...] | set[str]) -> Dim:
    """Evaluate a dimension expression, checking that its names are dimensions."""
    match e:
        case A.Int(text, pos):
            if len(text) > 18:
                raise DiagError(f"the number {text[:20]}... is too large for a dimension", pos, prog.source)
            return Dim.const(int(text))
        case A.Name(name, pos):
            if name not in generics and prog.lookup_dim(name) is None:
                hint = suggest(name, [n for n in prog.dims] + list(generics))
                raise DiagError(f"undefined dimension '{name}'{hint}", pos, prog.source)
            return Dim.var(name)
        case A.DimSum(terms):
            total = Dim.const(0)
            for t in terms:
                total = total + dim_expr(t, prog, generics)
            return total
        case A.DimProduct(factors):
            prod = Dim.const(1)
            for f in factors:
                prod = prod * dim_expr(f, prog, generics)
            return prod
    raise AssertionError(e)  # pragma: no cover


def tensor_type(t: A.TypeExpr, prog: Program, generics) -> TensorType:
    return tuple(dim_expr(d, prog, generics) for d in t.dims)


def id_range(t: A.TypeExpr, prog: Program, generics) -> Dim | None:
    """The range v of a token-id type ``[s] of v``; None for a tensor of real numbers."""
    return None if t.of is None else dim_expr(t.of.dim, prog, generics)


def no_ids(ts: tuple[A.TypeExpr, ...], where: str, prog: Program) -> None:
    """Refuse ``of`` where token ids cannot be: they enter a diagram as inputs and are read by
    a fixed box's input port (embed); nothing computes them."""
    for t in ts:
        if t.of is not None:
            raise DiagError(f"token ids ('of') are {where}; write the inputs of a diagram or of a fixed box "
                            "as [s] of v and read them with embed(ids, table)", t.of.pos, prog.source)


def type_list(ts: tuple[A.TypeExpr, ...], prog: Program, generics) -> tuple[TensorType, ...]:
    return tuple(tensor_type(t, prog, generics) for t in ts)


def generic_names(g: A.Generics | None, prog: Program) -> tuple[str, ...]:
    """The <n, m> parameters of a declaration, each named once."""
    if g is None:
        return ()
    seen: list[str] = []
    for n in g.names:
        if n.text in seen:
            raise DiagError(f"dimension parameter '{n.text}' is declared twice", n.pos, prog.source)
        seen.append(n.text)
    return tuple(seen)


def box_decls(item: A.BoxDecl, prog: Program, local: bool, outer_generics=()) -> list[BoxDecl]:
    box = item.kind.text
    if local and box not in (Kind.LEARN, Kind.RANDOM):
        raise DiagError(f"only learnable and random boxes can be declared inside a diagram, not '{box}'",
                        item.kind.pos, prog.source)
    via = approximator(item.via, prog) if item.via is not None else None
    if (via is not None or item.bounds) and box != Kind.LEARN:
        at = item.via.pos if item.via is not None else item.bounds[0].pos
        raise DiagError(f"only a learnable box has an approximator or a largest length, not '{box}'", at, prog.source)
    seed = random_seed(item, prog)
    decls = []
    for dn in item.names:
        generics = generic_names(dn.generics, prog)
        scope = set(generics) | set(outer_generics)
        ins, outs = type_list(item.ins, prog, scope), type_list(item.outs, prog, scope)
        if box != Kind.FIXED:
            no_ids(item.outs, "no output of a box but a fixed one (topk's indices)", prog)
            no_ids(item.ins, f"an input of a fixed box only, not of a {box} box", prog)
        ins_of = tuple(id_range(t, prog, scope) for t in item.ins) if box == Kind.FIXED else ()
        outs_of = tuple(id_range(t, prog, scope) for t in item.outs) if box == Kind.FIXED else ()
        if via is not None and not ins:
            raise DiagError(f"'{dn.name.text}' has no inputs: a learnable tensor has no approximator", item.via.pos,
                            prog.source)
        decls.append(BoxDecl(dn.name.text, box, generics, ins, outs, dn.name.pos, local, via,
                             bounds(item, ins, outs, prog), seed, ins_of if any(ins_of) else (),
                             outs_of if any(outs_of) else ()))
    return decls


def approximator(v: A.Via, prog: Program) -> Approximator:
    """Read ``via POLICY(OPTION = VALUE, ...)``, checking each option against its policy."""
    policy = v.policy.text
    if policy not in OPTIONS:
        raise DiagError(f"unknown approximator '{policy}': use one of {', '.join(OPTIONS)}{suggest(policy, list(OPTIONS))}",
                        v.policy.pos, prog.source)
    values: dict = {}
    for opt in v.options:
        name, val = opt.name.text, opt.value
        if name not in OPTIONS[policy] or name in values:
            what = "is given twice" if name in values else f"is not an option of '{policy}' ({', '.join(OPTIONS[policy])})"
            raise DiagError(f"'{name}' {what}", opt.name.pos, prog.source)
        if name == "bias" and isinstance(val, A.Name) and val.text in ("true", "false"):
            values[name] = val.text == "true"
        elif name == "hidden" and isinstance(val, A.Number) and val.text.isdigit() and 0 < int(val.text) < 2**31:
            values[name] = int(val.text)
        else:
            want = "true or false" if name == "bias" else "a positive integer"
            raise DiagError(f"'{name}' takes {want}, not '{getattr(val, 'text', val)}'", val.pos, prog.source)
    return Approximator(policy, **values)


def bounds(item: A.BoxDecl, ins: tuple, outs: tuple, prog: Program) -> tuple[tuple[str, int], ...]:
    """``where s <= 512``: each a seq dimension of a learnable tensor's type, bounded once."""
    out: dict[str, int] = {}
    for b in item.bounds:
        name, decl = b.dim.text, prog.lookup_dim(b.dim.text)
        if ins or decl is None or decl.kind != "seq" or not any(dim.name == name for t in outs for dim in t):
            raise DiagError(f"'{name}' must be a seq dimension that is an axis of a learnable tensor (a box without "
                            "inputs) to have a largest length", b.dim.pos, prog.source)
        if name in out or not b.limit.text.isdigit() or not 0 < int(b.limit.text) < 2**31:
            raise DiagError(f"the largest length of '{name}' must be given once, as a positive integer",
                            b.limit.pos, prog.source)
        out[name] = int(b.limit.text)
    return tuple(out.items())


def random_seed(item: A.BoxDecl, prog: Program) -> int | None:
    """A random box has a seed, no inputs and one output (the tensor it draws); no other box has a seed."""
    if item.kind.text != Kind.RANDOM:
        if item.seed is not None:
            raise DiagError(f"only a random box has a seed, not a '{item.kind.text}' box", item.seed.pos, prog.source)
        return None
    if item.seed is None:
        raise DiagError("a random box needs its seed: random W : -> [m, k] seed 7", item.kind.pos, prog.source)
    if item.ins or len(item.outs) != 1:
        raise DiagError("a random box has no inputs and one output: random W : -> [m, k] seed 7",
                        item.kind.pos, prog.source)
    if len(item.seed.text) > 18:
        raise DiagError(f"seed {item.seed.text} is too large (at most 18 digits)", item.seed.pos, prog.source)
    return int(item.seed.text)


def suggest(name: str, candidates: list[str]) -> str:
    """``; did you mean 'x'?`` for the closest candidate, or nothing."""
    same_case = [c for c in candidates if c.lower() == name.lower()]
    close = same_case or difflib.get_close_matches(name, candidates, n=1)
    return f"; did you mean '{close[0]}'?" if close else ""


def unknown_qualified(name: str, names, keyword: str = "import") -> str:
    """What is wrong with ``o.Name`` that names nothing: ``o`` is no import's qualifier, or
    that import has no ``Name``."""
    q, _, rest = name.partition(".")
    names = list(names)
    quals = sorted({n.split(".", 1)[0] for n in names if "." in n})
    if q not in quals:
        known = f"the qualified imports here: {', '.join(quals)}" if quals else "no import here has 'as'"
        return f"unknown qualifier '{q}' ({known}); write {keyword} \"FILE.diag\" as {q}"
    mine = [n.split(".", 1)[1] for n in names if n.startswith(q + ".")]
    return f"'{q}' (an import) has no box or diagram '{rest}'{suggest(rest, mine)}"
