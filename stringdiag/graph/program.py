"""A program: the declarations of a ``.diag`` file, its imports and the prelude.

Diagrams are elaborated from their syntax trees into typed graphs on first use, so a
definition may be used before it appears; recursion is reported as an error.
"""
from __future__ import annotations

import difflib
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterator

from lark import Token, Tree

from ..errors import DiagError, DiagWarning, Pos
from ..syntax.source import read_source  # noqa: F401  (the public place to read a file)
from ..syntax.parser import parse, pos_of
from .diagram import Diagram
from .gcpause import gc_paused
from .types import Dim, TensorType

PRELUDE = Path(__file__).resolve().parents[1] / "prelude" / "prelude.diag"
DEPTH = 20000  # recursion limit while elaborating


@dataclass(frozen=True)
class DimDecl:
    name: str
    kind: str  # "fixed" | "seq" | "generic"
    default: int | None
    pos: Pos | None


@dataclass(frozen=True)
class BoxDecl:
    """A declared box: learnable (``learn``), abstract family (``abstract``) or ``fixed``."""

    name: str
    box: str
    generics: tuple[str, ...]
    ins: tuple[TensorType, ...]
    outs: tuple[TensorType, ...]
    pos: Pos | None
    local: bool = False  # declared inside a diagram: fresh weights for each use of it

    def signature(self) -> str:
        from .types import show_type

        g = f"<{', '.join(self.generics)}>" if self.generics else ""
        ins = ", ".join(show_type(t) for t in self.ins)
        outs = ", ".join(show_type(t) for t in self.outs)
        return f"{self.box} {self.name}{g} : {ins} -> {outs}"


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
        hint = _suggest(name, list(self.defs))
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
        return [b for b in self.boxes.values() if b.box == "learn"]


class Definition:
    """A diagram definition: its syntax tree, elaborated to a graph once, when first needed."""

    def __init__(self, name: str, tree: Tree, program: Program):
        self.name = name
        self.tree = tree
        self.program = program
        self._diagram: Diagram | None = None
        self._busy = False
        self.generics: tuple[str, ...] = generic_names(tree.children[1], program)
        self.pos = pos_of(tree.children[0], program.path)

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
                from .elaborate import elaborate

                self._diagram = elaborate(self)
            finally:
                self._busy = False
                _elaborating.pop()
        return self._diagram


_elaborating: list[Definition] = []  # definitions being elaborated, outermost first


# -- loading --------------------------------------------------------------------------
_prelude_cache: list[Program] = []


def prelude() -> Program:
    if not _prelude_cache:
        prog = _load_text(PRELUDE.read_text(), str(PRELUDE), prelude_prog=None, stack=())
        for name in prog.own:
            prog[name]
        _prelude_cache.append(prog)
    return _prelude_cache[0]


def load(path: str | Path) -> Program:
    """Load, type-check and elaborate a ``.diag`` file and its imports."""
    return loads(read_source(path), str(path))


def loads(text: str, file: str = "<string>") -> Program:
    """Like :func:`load`, from a string.

    >>> p = loads("dim s : seq\\ndim d : fixed\\nlearn F : [d] -> [d]\\n"
    ...           "diagram Id(x: [s, d]) -> [s, d] { y = F(x)\\n return y }")
    >>> p["Id"].signature()
    'Id : [s, d] -> [s, d]'
    """
    limit = sys.getrecursionlimit()
    sys.setrecursionlimit(max(limit, DEPTH))  # long expressions nest deeply; Python frames are cheap
    try:
        with gc_paused():
            prog = _load_text(text, file, prelude(), stack=())
            for name in prog.own:
                prog[name]  # elaborate now, so that every error is reported by check
    except RecursionError:  # deep outside a statement (the elaborator reports those at the statement)
        raise DiagError("expressions are nested too deeply to check; split them into named wires",
                        Pos(file, 1, 1), text) from None
    finally:
        sys.setrecursionlimit(limit)
    return prog


def _load_text(text: str, file: str, prelude_prog: Program | None, stack: tuple[str, ...],
               loaded: dict[str, Program] | None = None) -> Program:
    loaded = {} if loaded is None else loaded
    tree = parse(text, file)
    prog = Program(path=file, source=text, prelude=prelude_prog)
    for item in tree.children:
        declare(prog, item, stack, loaded)
    return prog


def declare(prog: Program, item: Tree, stack: tuple[str, ...] = (), loaded: dict | None = None) -> bool:
    """Add one top-level item of the .diag language to the program; False if it is not one
    (a .rules file's ``rule``, say), so that other file kinds reuse this for the rest."""
    kind = item.data
    if kind == "import_decl":
        _import(prog, item, stack, {} if loaded is None else loaded)
    elif kind == "dim_decl":
        _dim_decl(prog, item)
    elif kind == "box_decl":
        for decl in box_decls(item, prog, local=False):
            _define(prog, decl.name, decl.pos, prog.boxes, decl)
    elif kind == "diagram":
        d = Definition(str(item.children[0]), item, prog)
        _define(prog, d.name, d.pos, prog.defs, d)
        prog.own.append(d.name)
    else:
        return False
    return True


def _taken(prog: Program, name: str) -> Pos | None | bool:
    for table in (prog.dims, prog.boxes, prog.defs):
        if name in table:
            return getattr(table[name], "pos", None) or True
    return False


def _define(prog: Program, name: str, pos: Pos | None, table: dict, value) -> None:
    where = _taken(prog, name)
    if where:
        at = f" (first defined at {where})" if isinstance(where, Pos) else ""
        raise DiagError(f"'{name}' is already defined{at}", pos, prog.source)
    table[name] = value


def _import(prog: Program, item: Tree, stack: tuple[str, ...], loaded: dict[str, Program]) -> None:
    tok = item.children[0]
    pos = pos_of(tok, prog.path)
    rel = str(tok)[1:-1]
    if "\x00" in rel or not rel:
        raise DiagError(f"not a file name: {rel!r}", pos, prog.source)
    base = Path(prog.path).parent if prog.path not in ("<string>",) else Path.cwd()
    target = (base / rel).resolve()
    me = str(Path(prog.path).resolve())
    if str(target) == me:
        raise DiagError(f"import cycle: {rel} imports itself", pos, prog.source)
    if str(target) in stack:
        chain = list(stack[stack.index(str(target)):]) + [me, str(target)]
        raise DiagError("import cycle: " + " -> ".join(Path(c).name for c in chain), pos, prog.source)
    if str(target) in loaded:  # a diamond: the same file reached twice is the same declarations
        sub = loaded[str(target)]
    else:
        if target.is_dir():
            raise DiagError(f'cannot import "{rel}": {target} is a directory', pos, prog.source)
        if not target.exists():
            raise DiagError(f'cannot import "{rel}": no such file {target}', pos, prog.source)
        if not target.is_file():
            raise DiagError(f'cannot import "{rel}": {target} is not a regular file', pos, prog.source)
        try:
            text = target.read_text()
        except UnicodeDecodeError:
            raise DiagError(f'cannot import "{rel}": {target} is not UTF-8 text', pos, prog.source) from None
        except OSError as e:
            raise DiagError(f'cannot import "{rel}": {e.strerror or e}', pos, prog.source) from None
        name = str(Path(prog.path).parent / rel) if prog.path != "<string>" else rel
        sub = _load_text(text, name, prog.prelude, stack + (me,), loaded)
        for n in sub.own:
            sub[n]
        loaded[str(target)] = sub
        prog.warnings.extend(sub.warnings)
    for name, d in sub.dims.items():
        mine = prog.dims.get(name)
        if mine is None:
            _define(prog, name, pos, prog.dims, d)
        elif mine.kind != d.kind:
            raise DiagError(f"dimension '{name}' is {mine.kind} here but {d.kind} in \"{rel}\"", pos, prog.source)
    for table, theirs in ((prog.boxes, sub.boxes), (prog.defs, sub.defs)):
        for name, v in theirs.items():
            if table.get(name) is v:
                continue
            _define(prog, name, pos, table, v)


def _dim_decl(prog: Program, item: Tree) -> None:
    *names, kind_tree, default = item.children
    kind = str(kind_tree.children[0])
    if default is not None and len(default) > 18:
        raise DiagError("the default size is too large", pos_of(default, prog.path), prog.source)
    for tok in names:
        d = DimDecl(str(tok), kind, int(default) if default is not None else None, pos_of(tok, prog.path))
        _define(prog, d.name, d.pos, prog.dims, d)


def dim_expr(tree: Tree | Token, prog: Program, generics: tuple[str, ...] | set[str]) -> Dim:
    """Evaluate a dimension expression, checking that its names are dimensions."""
    if isinstance(tree, Token):
        if tree.type == "INT":
            if len(tree) > 18:
                raise DiagError(f"the number {str(tree)[:20]}... is too large for a dimension",
                                pos_of(tree, prog.path), prog.source)
            return Dim.const(int(tree))
        name = str(tree)
        if name not in generics and prog.lookup_dim(name) is None:
            hint = _suggest(name, [n for n in prog.dims] + list(generics))
            raise DiagError(f"undefined dimension '{name}'{hint}", pos_of(tree, prog.path), prog.source)
        return Dim.var(name)
    if tree.data == "dim_expr":
        total = Dim.const(0)
        for t in tree.children:
            total = total + dim_expr(t, prog, generics)
        return total
    if tree.data == "dim_term":
        prod = Dim.const(1)
        for t in tree.children:
            prod = prod * dim_expr(t, prog, generics)
        return prod
    raise AssertionError(tree.data)


def tensor_type(tree: Tree, prog: Program, generics) -> TensorType:
    return tuple(dim_expr(c, prog, generics) for c in tree.children if c is not None)


def type_list(tree: Tree, prog: Program, generics) -> tuple[TensorType, ...]:
    return tuple(tensor_type(t, prog, generics) for t in tree.children if t is not None)


def generic_names(tree: Tree | None, prog: Program) -> tuple[str, ...]:
    """The <n, m> parameters of a declaration, each named once."""
    if tree is None:
        return ()
    seen: list[str] = []
    for tok in tree.children:
        if str(tok) in seen:
            raise DiagError(f"dimension parameter '{tok}' is declared twice", pos_of(tok, prog.path), prog.source)
        seen.append(str(tok))
    return tuple(seen)


def box_decls(item: Tree, prog: Program, local: bool, outer_generics=()) -> list[BoxDecl]:
    kind_tree, *names, ins, outs = item.children
    box = str(kind_tree.children[0])
    if local and box != "learn":
        raise DiagError(f"only learnable boxes can be declared inside a diagram, not '{box}'",
                        pos_of(kind_tree, prog.path), prog.source)
    decls = []
    for dn in names:
        tok, gen = dn.children
        generics = generic_names(gen, prog)
        scope = set(generics) | set(outer_generics)
        decls.append(BoxDecl(str(tok), box, generics, type_list(ins, prog, scope),
                             type_list(outs, prog, scope), pos_of(tok, prog.path), local))
    return decls


def _suggest(name: str, candidates: list[str]) -> str:
    same_case = [c for c in candidates if c.lower() == name.lower()]
    close = same_case or difflib.get_close_matches(name, candidates, n=1)
    return f"; did you mean '{close[0]}'?" if close else ""


suggest = _suggest
