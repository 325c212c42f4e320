"""What a ``.diag`` program is made of: declared dimensions and boxes, diagram definitions,
and the program that holds them.

These are the records a graph refers to (a box's ``ref`` is a :class:`BoxDecl` or a
definition's diagram; a diagram knows its :class:`Program`), so they are the graph
algebra's. Reading them from syntax trees is elaboration's (``stringdiag/elaborate/``): a
definition is given its parameters and the function that elaborates it, so nothing here
imports elaboration.
"""
from __future__ import annotations

from typing import Callable, Iterator

from .box import Kind
from ..errors import DiagError, DiagWarning, NoSuchDiagram, Pos, kind, shown
from ..syntax import ast as A
from ..syntax.records import Mutable, Record, field
from .diagram import Diagram
from .types import Dim, DimKind, TensorType, show_type


class DimDecl(Record):
    name: str
    kind: DimKind  # FIXED, SEQ or GENERIC
    default: int | None
    pos: Pos | None


class Approximator(Record):
    """``via linear(bias = false)``: the module one learnable box becomes, written in the file;
    a box without one takes the policy given when compiling (``--approximator``)."""

    policy: str  # a key of OPTIONS
    bias: bool = True
    hidden: int | None = None  # mlp: the hidden width (None: as wide as the input)

    def show(self) -> str:
        opts = ([] if self.bias else ["bias = false"]) + ([f"hidden = {self.hidden}"] if self.hidden else [])
        return f"via {self.policy}" + (f"({', '.join(opts)})" if opts else "")


OPTIONS = {"linear": ("bias",), "mlp": ("bias", "hidden")}  # the options each policy takes


class BoxDecl(Record):
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
        return tuple(bounds.get(dim.name or "") for dim in self.outs[0]) if bounds else ()
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


class Program(Mutable, frozen=False):
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
        if not isinstance(name, str):
            raise NoSuchDiagram(f"a diagram is named by a string, got {kind(name)}; "
                                f"{shown(self.path)} defines {', '.join(map(repr, self.own)) or 'none'}")
        if name in self.defs:
            return self.defs[name].diagram()
        if self.prelude is not None and name in self.prelude.defs:
            return self.prelude[name]
        hint = suggest(name, list(self.defs))
        raise NoSuchDiagram(f"no diagram named {name!r} in {shown(self.path)}{hint}")

    def __contains__(self, name: object) -> bool:
        return isinstance(name, str) and name in self.defs

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

    def __repr__(self) -> str:  # not the fields': those print every declaration and the source
        return f"<Program {shown(self.path)}: {', '.join(self.own) or 'no diagrams'}>"


class Definition:
    """A diagram definition: its syntax tree, elaborated to a graph once, when first needed,
    by ``elaborate`` (given by whoever makes the definition: the loader)."""

    def __init__(self, node: A.DiagramDecl, program: Program, elaborate: Callable[["Definition"], Diagram],
                 generics: tuple[str, ...]):
        self.name = node.name.text
        self.node = node
        self.program = program
        self._elaborate = elaborate
        self._diagram: Diagram | None = None
        self._busy = False
        self.generics = generics  # its <n, m> parameters, read by the loader
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


def suggest(name: str, candidates: list[str]) -> str:
    """``; did you mean 'x'?`` for the closest candidate, or nothing."""
    import difflib  # here: a mistake's cost, not every start's

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
