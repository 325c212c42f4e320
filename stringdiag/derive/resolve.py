"""What the names of a derivation script mean: the files it uses (``use "f.diag"``, ``use
"f.diag" as o``), the diagram a ``start``/``target``/``rewire`` names, and the dimension,
learnable or definition a step names. Kept apart from running the steps (``derivation.py``),
so that a step's work never climbs back here to ask what a name is."""
from __future__ import annotations

from pathlib import Path

from ..elaborate.loader import load, prelude
from ..errors import PREFIX, DiagError, Pos, shown
from ..graph.decls import Definition, Program, suggest, unknown_qualified
from ..graph.diagram import Diagram
from ..graph.types import DimKind
from ..resources import locate
from ..syntax import ast as A
from ..syntax import deriv_ast as D
from ..syntax.source import note


class Resolver:
    """The files a derivation has read, and the names they declare, in the order they are looked up:
    the start file, the files used plainly, then the files used under an alias (``o.NAME``)."""

    def __init__(self, text: str, file: str):
        self.text, self.file = text, file
        self.base = Path(file).parent
        self.programs: dict[str, Program] = {}  # resolved path -> the program read from it
        self.extra: list[Program] = []
        self.aliases: dict[str, Program] = {}  # use "f.diag" as o
        self.start_prog: Program | None = None

    def err(self, msg: str, pos: Pos | None) -> DiagError:
        return DiagError(msg, pos, self.text)

    def program(self, rel: str, pos: Pos) -> Program:
        """The ``.diag`` file ``rel`` (relative to the script), read once."""
        written = locate(rel, self.base, pos, self.text, (".diag",))
        target = written.resolve()
        if str(target) not in self.programs:
            note(target)  # looked for, even when it is not there (syntax/source.py)
            if not target.is_file():
                raise self.err(f"no such file {looked(rel, written)}", pos)
            self.programs[str(target)] = load(written)  # (by the name written: messages quote it)
        return self.programs[str(target)]

    def rules_file(self, rel: str, pos: Pos) -> Path:
        """The ``.rules`` file ``rel`` a ``use`` names."""
        written = locate(rel, self.base, pos, self.text, (".rules",))
        note(written.resolve())  # looked for, even when it is not there (syntax/source.py)
        if not written.is_file():
            raise self.err(f"no such file {looked(rel, written)}", pos)
        return written  # (as named: its errors are shown where the user ran, not by a resolved path)

    def use(self, item: D.UseDecl) -> None:
        """``use "f.diag"`` (its names join the start file's) or ``use "f.diag" as o``."""
        rel, pos = item.path.value, item.path.pos
        if item.alias is None:
            self.extra.append(self.program(rel, pos))
            return
        if item.alias.text in self.aliases:
            raise self.err(f"'{item.alias.text}' already names a file in use", item.alias.pos)
        self.aliases[item.alias.text] = self.program(rel, pos)

    def start(self, ref: D.Ref) -> Diagram:
        """The start diagram; its file is the first the other names are looked up in."""
        if ref.file is not None:
            self.start_prog = self.program(ref.file, ref.pos)
        elif "." in ref.name and ref.name.partition(".")[0] in self.aliases:
            self.start_prog = self.aliases[ref.name.partition(".")[0]]  # start o.NAME: o's file is the start file
        return self.diagram(ref)

    def diagram(self, ref: D.Ref) -> Diagram:
        """``FILE.diag:NAME``, ``o.NAME`` or ``NAME`` (in the start file or a file used plainly)."""
        if ref.file is not None:
            prog = self.program(ref.file, ref.pos)
        elif "." in ref.name:
            return self.qualified(ref)
        else:
            found = next((p for p in [self.start_prog, *self.extra] if p is not None and ref.name in p.defs), None)
            if found is None:
                raise self.err(f"no diagram named '{ref.name}' in the start file or the files this derivation "
                               "uses; write FILE.diag:NAME", ref.pos)
            prog = found
        if ref.file is not None:
            absent(prog, ref, self.base, self.text)
        return prog[ref.name]  # (there: the search above found it, or absent() refused it)

    def qualified(self, ref: D.Ref) -> Diagram:
        """``o.NAME``: the diagram NAME of the file used as ``o``."""
        q, _, name = ref.name.partition(".")
        prog = self.aliases.get(q)
        if prog is None or name not in prog.defs:
            names = [f"{a}.{n}" for a, p in self.aliases.items() for n in p.defs]
            raise self.err(unknown_qualified(ref.name, names or [f"{a}." for a in self.aliases], "use"), ref.pos)
        return prog[name]

    def dim_kind(self, cur: Diagram, name: str) -> DimKind | None:
        """How the dimension ``name`` is declared in the files of the derivation, if it is."""
        progs = [cur.program, self.start_prog, *self.extra, *self.programs.values(), prelude()]
        decl = next((d for p in progs if p is not None and (d := p.lookup_dim(name)) is not None), None)
        return decl.kind if decl is not None else None

    def learner(self, ref: D.Ref):
        """``as L``: a learnable declared in a file in use (``o.L`` for one used as ``o``), else
        the name of a fresh learner of the derivation's own."""
        if "." in ref.name and ref.file is None:
            q, _, name = ref.name.partition(".")
            decl = self.aliases[q].lookup_box(name) if q in self.aliases else None
            if decl is None:
                raise self.err(f"no learnable '{name}' in the file used as '{q}'", ref.pos)
            return decl
        progs = [self.start_prog, *self.extra]
        return next((d for p in progs if p is not None and (d := p.lookup_box(ref.name)) is not None), ref.name)

    def definition(self, cur: Diagram, name: A.Name) -> Definition:
        """The definition a ``fold`` names: in the diagram's file, the start file, a file used, the prelude."""
        for p in [cur.program, self.start_prog, *self.extra, prelude()]:
            if p is not None and (defn := p.lookup_def(name.text)) is not None:
                return defn
        raise self.err(f"no definition named '{name.text}' to fold", name.pos)

    def shareable(self) -> dict[str, Program]:
        """The programs read so far that an inline body importing them may take as they are (by
        path): the one file read, if only one was. Files read apart each hold their own reading
        of a file they both import, whose names would clash in one program."""
        return dict(self.programs) if len(self.programs) == 1 else {}

    def imports(self) -> str:
        """The import lines that give an inline body the names the script sees: every file read
        but those used only under an alias (which may clash), and the aliased ones as aliases."""
        qualified = {id(p) for p in self.aliases.values()} - {id(self.start_prog)} - {id(p) for p in self.extra}
        paths = {id(prog): p for p, prog in self.programs.items()}
        return "\n".join([f'import "{p}"' for p, prog in self.programs.items() if id(prog) not in qualified]
                         + [f'import "{paths[id(prog)]}" as {a}' for a, prog in self.aliases.items()])


def looked(name: str, found: Path) -> str:
    """A missing file as a message names it: as written, and where it was looked for when that
    differs (a name relative to the script's folder, shown from where the user ran), never by a
    resolved or site-packages path."""
    where = shown(found)
    return name if name.startswith(PREFIX) or where == name else f"{name} (looked for {where})"


def absent(prog: Program, ref: D.Ref, base: Path, text: str) -> None:
    """Refuse ``FILE.diag:NAME`` where the file has no diagram ``NAME``, naming the file as written
    (relative to where the user ran, or by its package name), not by the path it was read from."""
    assert ref.file is not None
    if ref.name in prog.defs or (prog.prelude is not None and ref.name in prog.prelude.defs):
        return
    file = ref.file if ref.file.startswith(PREFIX) else shown(base / ref.file)
    raise DiagError(f"no diagram named {ref.name!r} in {file}{suggest(ref.name, list(prog.defs))}", ref.pos, text)
