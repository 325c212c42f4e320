"""Loading a program: the declarations of a ``.diag`` file, its imports and the prelude.

Diagrams are elaborated from their syntax trees into typed graphs on first use, so a
definition may be used before it appears; recursion is reported as an error. The records
(:class:`Program`, :class:`Definition`, :class:`BoxDecl`) are the graph algebra's
(``graph/decls.py``).
"""
from __future__ import annotations

import sys
from pathlib import Path

from ..graph.box import Kind
from ..errors import DiagError, Pos, shown
from ..resources import PREFIX, argument, locate, shipped
from ..syntax import ast as A
from ..syntax.astcache import Later, read_cached
from ..syntax.records import replace
from ..syntax.source import note, read_source, shown_path  # the public place to read a file
from ..graph.arguments import need_path, need_text
from ..graph.decls import Definition, DimDecl, Program
from ..graph.diagram import Diagram
from ..graph.types import DimKind
from ..graph.gcpause import gc_paused
from .declarations import box_decls, generic_names
from .statements import elaborate

PRELUDE = shipped("prelude/prelude.diag")
DEPTH = 20000  # recursion limit while elaborating


# -- loading --------------------------------------------------------------------------
_prelude_cache: list[Program] = []


def prelude() -> Program:
    """The shipped prelude, its diagrams elaborated when first used (a command that uses two of
    its forty definitions does not pay for the rest; tests/test_primitives.py elaborates all)."""
    if not _prelude_cache:
        prog = _load_text(PRELUDE.read_text(), str(PRELUDE), prelude_prog=None, stack=(), read=_cached_lazily)
        _prelude_cache.append(prog)
    return _prelude_cache[0]


def load(path: str | Path) -> Program:
    """Load, type-check and elaborate a ``.diag`` file and its imports (``path`` may name a
    shipped file, ``stringdiag:gallery/attention.diag``)."""
    path = argument(need_path(path, "load(): path"))
    return loads(read_source(path), str(path))


def loads(text: str, file: str = "<string>") -> Program:
    """Like :func:`load`, from a string.

    >>> p = loads("dim s : seq\\ndim d : fixed\\nlearn F : [d] -> [d]\\n"
    ...           "diagram Id(x: [s, d]) -> [s, d] { y = F(x)\\n return y }")
    >>> p["Id"].signature()
    'Id : [s, d] -> [s, d]'
    """
    return _loads(need_text(text, "loads(): the text"), need_text(file, "loads(): file"), {})


def loads_beside(text: str, file: str, read: dict[str, Program]) -> Program:
    """:func:`loads`, where an import of a file in ``read`` (by its resolved path) is that program,
    read already: a derivation's inline body imports the files the derivation has read, and gets
    their declarations rather than a second reading of each."""
    return _loads(text, file, dict(read))


def _loads(text: str, file: str, loaded: dict[str, Program]) -> Program:
    limit = sys.getrecursionlimit()
    sys.setrecursionlimit(max(limit, DEPTH))  # long expressions nest deeply; Python frames are cheap
    try:
        with gc_paused():
            prog = _load_text(text, file, prelude(), stack=(), loaded=loaded)
            for name in prog.own:
                prog[name]  # elaborate now, so that every error is reported by check
    except RecursionError:  # deep outside a statement (the elaborator reports those at the statement)
        raise DiagError("expressions are nested too deeply to check; split them into named wires",
                        Pos(file, 1, 1), text) from None
    finally:
        sys.setrecursionlimit(limit)
    return prog


def _load_text(text: str, file: str, prelude_prog: Program | None, stack: tuple[str, ...],
               loaded: dict[str, Program] | None = None, read=A.read) -> Program:
    """``read``: the prelude's items come from a cache of its parse (syntax/astcache.py)."""
    loaded = {} if loaded is None else loaded
    prog = Program(path=file, source=text, prelude=prelude_prog)
    for item in read(text, file):
        declare(prog, item, stack, loaded)
    return prog


def _cached_lazily(text: str, file: str) -> tuple:
    return read_cached(text, file, lazy=True)  # each diagram's body decoded when it is first used


def definition(node: A.DiagramDecl, prog: Program) -> Definition:
    """A diagram definition in ``prog``'s scope, elaborated when first used."""
    return Definition(node, prog, _decoded if isinstance(node.body, Later) else elaborate,
                      generic_names(node.generics, prog))


def _decoded(defn: Definition) -> Diagram:
    """A prelude definition whose body the cache left encoded: decoded, then elaborated."""
    n, later = defn.node, defn.node.body
    assert isinstance(later, Later)
    defn.node = replace(n, body=later.read())
    return elaborate(defn)


def declare(prog: Program, item, stack: tuple[str, ...] = (), loaded: dict | None = None) -> bool:
    """Add one top-level item of the .diag language to the program; False if it is not one
    (a .rules file's ``rule``, say), so that other file kinds reuse this for the rest."""
    match item:
        case A.Import():
            _import(prog, item.path, stack, {} if loaded is None else loaded, item.alias)
        case A.DimDecl():
            _dim_decl(prog, item)
        case A.BoxDecl():
            for decl in box_decls(item, prog, local=False):
                _define(prog, decl.name, decl.pos, prog.boxes, decl)
        case A.DiagramDecl():
            d = definition(item, prog)
            _define(prog, d.name, d.pos, prog.defs, d)
            prog.own.append(d.name)
        case _:
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


def _import(prog: Program, path: A.Str, stack: tuple[str, ...], loaded: dict[str, Program],
            alias: A.Name | None = None) -> None:
    """Bring an imported file's declarations into ``prog``; a file reached twice (a diamond)
    is loaded once, and is the same declarations both times. With ``as o`` its boxes and
    diagrams are ``o.NAME`` (two files may then both declare a ``Q``); dimensions are shared
    either way (one ``d`` is one size)."""
    pos, rel = path.pos, path.value
    target, me = _import_target(prog, rel, pos, stack)
    key = str(target) + (f" as {alias.text}" if alias is not None else "")
    sub = loaded.get(key)
    if sub is None:
        text = _import_text(prog, rel, target, pos)
        try:
            sub = _load_text(text, _import_name(prog, rel, target), prog.prelude, stack + (me,), loaded)
            if alias is not None:
                _qualify_boxes(sub, alias.text)
            for n in sub.own:
                sub[n]
        except DiagError as e:
            e.imported_at = (pos, *e.imported_at)
            raise
        for w in sub.warnings:
            w.imported_at = (pos, *w.imported_at)
        loaded[key] = sub
        prog.warnings.extend(sub.warnings)
    for name, d in sub.dims.items():
        mine = prog.dims.get(name)
        if mine is None:
            _define(prog, name, pos, prog.dims, d)
        elif mine.kind != d.kind:
            raise DiagError(f"dimension '{name}' is {mine.kind} here but {d.kind} in \"{rel}\"", pos, prog.source)
    prefix = ""
    if alias is not None:
        prefix = alias.text + "."
        if any(n.startswith(prefix) for n in list(prog.boxes) + list(prog.defs)):
            raise DiagError(f"'{alias.text}' already names an import", alias.pos, prog.source)
    for table, theirs in ((prog.boxes, sub.boxes), (prog.defs, sub.defs)):
        for name, v in theirs.items():
            if table.get(prefix + name) is v or (prefix and "." in name):
                continue  # (its own qualified imports stay its own)
            _define(prog, prefix + name, pos, table, v)


def _import_name(prog: Program, rel: str, target: Path) -> str:
    """An imported file's name in messages, which its own imports are relative to."""
    if rel.startswith(PREFIX):
        return str(target)
    return str(Path(prog.path).parent / rel) if prog.path != "<string>" else rel


def _import_shown(prog: Program, rel: str, target: Path) -> str:
    """An imported file as a message shows it: a shipped one by its package name, another by
    the importing file's name joined to it (as the user named that file: relative to where they
    ran), never by its resolved path."""
    return rel if rel.startswith(PREFIX) else shown(_import_name(prog, rel, target))


def _qualify_boxes(sub: Program, alias: str) -> None:
    """A file imported ``as o`` is loaded on its own, its learnable boxes and abstract
    families named ``o.Q``: two files' ``Q`` are two sets of weights (two functions), not
    one by a shared name. Its diagrams are elaborated after, so they use the qualified boxes."""
    for name, decl in list(sub.boxes.items()):
        if decl.box in (Kind.LEARN, Kind.ABSTRACT) and "." not in decl.name:
            sub.boxes[name] = replace(decl, name=f"{alias}.{decl.name}")


def _import_target(prog: Program, rel: str, pos: Pos, stack: tuple[str, ...]) -> tuple[Path, str]:
    """The file an import names, and the importing file's own path; a cycle is an error."""
    if "\x00" in rel or not rel:
        raise DiagError(f"not a file name: {rel!r}", pos, prog.source)
    base = Path(prog.path).parent if prog.path not in ("<string>",) else Path.cwd()
    target = locate(rel, base, pos, prog.source, (".diag",)).resolve()  # never another kind of file
    me = str(Path(prog.path).resolve())
    if str(target) == me:
        raise DiagError(f"import cycle: {rel} imports itself", pos, prog.source)
    if str(target) in stack:
        chain = list(stack[stack.index(str(target)):]) + [me, str(target)]
        raise DiagError("import cycle: " + " -> ".join(Path(c).name for c in chain), pos, prog.source)
    return target, me


def _import_text(prog: Program, rel: str, target: Path, pos: Pos) -> str:
    """The imported file's text, read as every source is (``read_source``: a regular file, at
    most 16 MiB, UTF-8), its refusal said at the import."""
    note(target)  # looked for, even when it is not there: a page drawn from this file waits for it
    if target.is_dir():
        raise DiagError(f'cannot import "{rel}": {_import_shown(prog, rel, target)} is a directory', pos,
                        prog.source)
    if not target.exists():
        raise DiagError(f'cannot import "{rel}": no such file {_import_shown(prog, rel, target)}', pos,
                        prog.source)
    try:
        return read_source(target)
    except DiagError as e:
        said, by = e.message, f"cannot read {shown_path(str(target))}"  # (by its resolved path)
        if said.startswith(by):
            said = _import_shown(prog, rel, target) + said[len(by):]
        raise DiagError(f'cannot import "{rel}": {said}', pos, prog.source) from None


def _dim_decl(prog: Program, item: A.DimDecl) -> None:
    default = item.default
    if default is not None and len(default.text) > 18:
        raise DiagError("the default size is too large", default.pos, prog.source)
    for n in item.names:
        d = DimDecl(n.text, DimKind(item.kind), int(default.text) if default is not None else None, n.pos)
        _define(prog, d.name, d.pos, prog.dims, d)


__all__ = ["load", "loads", "loads_beside", "prelude", "declare", "definition", "PRELUDE", "DEPTH"]
