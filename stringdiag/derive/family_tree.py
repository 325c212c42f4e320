"""Family trees of architectures (``.tax``), every edge a checked derivation.

Khatri et al. (2024), Sec. 4, generate a taxonomy from a "primordial attention" by
expressivity reductions. A ``.tax`` file names the root, the members (diagrams of ``.diag``
files) and the edges (``.deriv`` files). Loading one checks that the members form a tree
(one root, one parent for every other member, every member reached from the root, so no
cycle), that every edge's derivation runs (and, with ``verify``, that its equalities hold
numerically), that it starts at the parent and ends at the child (isomorphic), and computes
what each child changes of its parent (``graph/diff.py``) for the picture.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from ..errors import DiagError, Pos, shown
from ..graph.diagram import Diagram
from ..graph.diff import changed_boxes
from ..graph.expand import expand
from ..elaborate.loader import load
from ..graph.decls import Program
from ..syntax import tax_ast as T
from ..resources import argument, locate
from ..syntax.source import read_source
from .derivation import Derivation, load_derivation
from .resolve import absent, looked


@dataclass(frozen=True)
class Member:
    decl: T.Member
    diagram: Diagram

    @property
    def title(self) -> str:
        label = self.decl.label.value if self.decl.label else self.diagram.name
        return f"{label} ({self.decl.family.value})" if self.decl.family else label


@dataclass(frozen=True)
class ReductionEdge:
    decl: T.Edge
    derivation: Derivation
    changed: frozenset[int]  # boxes of the child's diagram that differ from the parent's

    @property
    def verified(self) -> int:
        return sum(1 for s in self.derivation.steps if s.verified is not None)


@dataclass(frozen=True)
class Taxonomy:
    path: str
    root: str
    members: dict[str, Member]
    edges: list[ReductionEdge]  # parents before children
    verify: bool = False  # whether the equalities were evaluated

    def summary(self) -> str:
        """One line per edge: parent -> child, steps by relation, checked / verified."""
        lines = []
        for e in self.edges:
            steps = e.derivation.steps[1:]
            rel = ", ".join(f"{sum(s.relation == r for s in steps)} {r}" for r in ("⇒", "≡", "⇔", "≠")
                            if any(s.relation == r for s in steps))
            n = e.verified
            check = "checked" if not self.verify else \
                f"verified ({n} equalit{'y' if n == 1 else 'ies'})" if n else "verified (no equalities to check)"
            lines.append(f"  {e.decl.parent.text} -> {e.decl.child.text}: {e.decl.deriv.value}, {len(steps)} steps "
                         f"({rel or 'none'}), {check}, {len(e.changed)} boxes changed")
        return "\n".join(lines)

    def tree_parts(self) -> tuple[list, list]:
        """The members and edges as ``render/tree.py`` draws them (what each child changes dashed)."""
        from ..render.tree import TreeEdge, TreeNode  # Graphviz only to draw

        changed = {e.decl.child.text: e.changed for e in self.edges}
        nodes = [TreeNode(name, m.title, m.diagram, changed.get(name, frozenset())) for name, m in self.members.items()]
        return nodes, [TreeEdge(e.decl.parent.text, e.decl.child.text, e.decl.deriv.value) for e in self.edges]

    def _repr_svg_(self) -> str:
        """In a notebook: the tree in one picture (``taxonomy -o tree.svg``)."""
        from ..render.tree import tree_svg

        return tree_svg(*self.tree_parts())

    def _repr_html_(self) -> str:
        """In a notebook: the members opened one at a time (``render/html.py``)."""
        from ..render.html import members_view, taxonomy_members

        return members_view(f"{shown(self.path)}: rooted at {self.root}", taxonomy_members(*self.tree_parts()))

    def __repr__(self) -> str:
        return f"<Taxonomy {shown(self.path)}: {len(self.members)} members rooted at {self.root}, {len(self.edges)} edges>"


def load_taxonomy(path: str | Path, verify: bool = False) -> Taxonomy:
    path = argument(path)
    return _Loader(str(path), read_source(path), verify).run()


class _Loader:
    def __init__(self, file: str, text: str, verify: bool):
        self.file, self.text, self.verify = file, text, verify
        self.base = Path(file).parent
        self.programs: dict[str, Program] = {}

    def err(self, msg: str, pos: Pos) -> DiagError:
        return DiagError(msg, pos, self.text)

    def run(self) -> Taxonomy:
        items = T.read_tax(self.text, self.file)
        members = self.members([i for i in items if isinstance(i, T.Member)])
        edges = [i for i in items if isinstance(i, T.Edge)]
        root = self.tree(members, edges)
        order = self.order(root, edges)
        checked = [self.edge(e, members) for e in order]
        return Taxonomy(self.file, root, members, checked, self.verify)

    def members(self, decls: list[T.Member]) -> dict[str, Member]:
        out: dict[str, Member] = {}
        for m in decls:
            if m.name.text in out:
                raise self.err(f"member '{m.name.text}' is declared twice", m.name.pos)
            out[m.name.text] = Member(m, self.diagram(m))
        roots = [m for m in decls if m.root]
        if len(roots) != 1:
            raise self.err("a taxonomy has exactly one 'root NAME = FILE.diag:DIAGRAM'",
                           roots[1].pos if roots else Pos(self.file, 1, 1))
        return out

    def diagram(self, m: T.Member) -> Diagram:
        assert m.ref.file is not None  # (tax.lark's FILEREF always names the file)
        written = locate(m.ref.file, self.base, m.ref.pos, self.text, (".diag",))
        target = written.resolve()
        if str(target) not in self.programs:
            if not target.is_file():
                raise self.err(f"no such file {looked(m.ref.file, written)}", m.ref.pos)
            self.programs[str(target)] = load(written)  # (by the name written: messages quote it)
        absent(self.programs[str(target)], m.ref, self.base, self.text)
        return self.programs[str(target)][m.ref.name]  # (there: absent() refused it otherwise)

    def tree(self, members: dict[str, Member], edges: list[T.Edge]) -> str:
        """The root's name, once the edges are known to make a tree of the members."""
        root = next(n for n, m in members.items() if m.decl.root)
        parent: dict[str, T.Edge] = {}
        for e in edges:
            for end in (e.parent, e.child):
                if end.text not in members:
                    raise self.err(f"no member named '{end.text}'", end.pos)
            if e.child.text == root:
                raise self.err(f"an edge into the root '{root}': the root has no parent", e.child.pos)
            if e.child.text in parent:
                first = parent[e.child.text].pos
                raise self.err(f"'{e.child.text}' has two parents (the first edge at line {first.line}): "
                               "a taxonomy is a tree", e.child.pos)
            parent[e.child.text] = e
        reached = {root} | {c for c in self.reach(root, edges)}
        for name, m in members.items():
            if name not in reached:
                why = "its ancestors form a cycle" if name in parent else "no edge leads to it"
                raise self.err(f"member '{name}' is not reached from the root '{root}' ({why})", m.decl.name.pos)
        return root

    @staticmethod
    def reach(root: str, edges: list[T.Edge]) -> list[str]:
        seen, todo = [], [root]
        while todo:
            here = todo.pop()
            for e in edges:
                if e.parent.text == here and e.child.text not in seen:
                    seen.append(e.child.text)
                    todo.append(e.child.text)
        return seen

    @staticmethod
    def order(root: str, edges: list[T.Edge]) -> list[T.Edge]:
        """The edges, parents before children (breadth first, in file order)."""
        out, level = [], [root]
        while level:
            nxt = [e for e in edges if e.parent.text in level]
            out += nxt
            level = [e.child.text for e in nxt]
        return out

    def edge(self, e: T.Edge, members: dict[str, Member]) -> ReductionEdge:
        path = locate(e.deriv.value, self.base, e.deriv.pos, self.text, (".deriv",))
        if not path.is_file():
            raise self.err(f"no such file {looked(e.deriv.value, path)}", e.deriv.pos)
        try:
            deriv = load_derivation(path, verify=self.verify)
        except DiagError as err:
            raise DiagError(f"edge {e.parent.text} -> {e.child.text}: {err.message}", err.pos, err.source) from None
        parent, child = members[e.parent.text].diagram, members[e.child.text].diagram
        if not expand(deriv.steps[0].diagram).isomorphic(expand(parent)):
            raise self.err(f"{e.deriv.value} starts at {deriv.steps[0].diagram.name}, not at the parent "
                           f"'{parent.name}'", e.deriv.pos)
        if not expand(deriv.result).isomorphic(expand(child)):
            raise self.err(f"{e.deriv.value} does not end at the child '{child.name}': its result "
                           f"({deriv.result.signature()}) is not isomorphic to it", e.deriv.pos)
        return ReductionEdge(e, deriv, changed_boxes(parent, child))

