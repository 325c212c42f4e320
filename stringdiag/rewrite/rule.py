"""Rules as data: ``.rules`` files of named equations and reductions between open diagrams.

A rule is two diagrams over ONE boundary, so its header is written once and each side is
a diagram body of the ``.diag`` language (``grammars/rules.lark`` imports diag.lark's
statements; the bodies are type-checked by the same elaborator)::

    # associativity of contraction: (A B) C = A (B C)
    rule assoc<n, m, p, q>(a: [n, m], b: [m, p], c: [p, q]) -> [n, q] {
      ab[i, k] = sum_j a[i, j] * b[j, k]
      y[i, l]  = sum_k ab[i, k] * c[k, l]
      return y
    } == {
      bc[j, l] = sum_k b[j, k] * c[k, l]
      y[i, l]  = sum_j a[i, j] * bc[j, l]
      return y
    }

The file format:

- ``rule NAME<DIMS>(INPUTS) -> OUTPUTS [given ...]* { LEFT } REL { RIGHT }``.
- ``<DIMS>`` are dimension variables: they unify with any dimension of a target (seq or
  fixed, or a sum or product) when the rule is matched. A dimension declared with ``dim``
  in the file (or an import) is a constant: it matches only itself.
- ``REL`` is ``==`` or ``≡`` for an equation (usable both ways, checked numerically by
  the tests) or ``=>`` or ``⇒`` for a reduction (one way: a universal approximator
  specialised, Definition 3.1 of Khatri et al. (2024)).
- ``given f, g : [a] -> [b]`` declares box variables: ``f`` stands for any process of
  that type (a learnable, abstract, fixed or defined box; one occurrence of ``f`` fixes it
  for the others). Boxes named in the sides otherwise mean the box of that name.
- The rest of a ``.rules`` file is ``.diag`` language: ``import``, ``dim``, ``learn`` /
  ``abstract`` / ``fixed`` declarations and helper ``diagram`` definitions.
- Names of wires and indices are presentation: a side is a graph, matched up to renaming.

Loading returns :class:`Rule` objects; every error is a positioned ``DiagError``. A
reduction is checked when it is loaded: its right side must be an instance of its left
(:func:`check_reduction` says exactly what that means). Equations are checked
numerically on demand (:func:`stringdiag.verify.verify_rule`; ``stringdiag check FILE.rules --verify``).

>>> rules = loads_rules('''
... rule commute<n>(a: [n], b: [n]) -> [] {
...   return sum_j a[j] * b[j]
... } == {
...   return sum_j b[j] * a[j]
... }''')
>>> r = rules[0]
>>> r.name, r.kind, r.dims, r.lhs.signature(), len(r.rhs)
('commute', 'equation', ('n',), 'commute (left) : [n], [n] -> []', 1)
"""
from __future__ import annotations

import re
import sys
from collections.abc import Iterator, Mapping
from ..syntax.records import Mutable, field
from pathlib import Path

from ..errors import DiagError, DiagWarning, Pos
from ..elaborate import loader as P
from ..elaborate.declarations import generic_names, type_list
from ..graph.decls import BoxDecl, Program
from ..graph.diagram import Diagram
from ..graph.gcpause import gc_paused
from ..resources import argument, folder, locate
from ..graph.box import Kind
from ..syntax import ast as A
from ..syntax import rules_ast as RA
from ..syntax.astcache import read_cached
from ..syntax.source import read_source
from .reduction import check_reduction

RULES_DIR = folder("rules")  # the standard library
EQUATION, REDUCTION = "equation", "reduction"
_RELATIONS = {"==": EQUATION, "≡": EQUATION, "=>": REDUCTION, "⇒": REDUCTION}


class Rule(Mutable, frozen=False):
    """A named rule: two open diagrams with one boundary, over dimension variables ``dims``."""

    name: str
    kind: str  # "equation" (≡, both ways) or "reduction" (⇒, left to right only)
    lhs: Diagram
    rhs: Diagram
    dims: tuple[str, ...]
    vars: dict[str, BoxDecl] = field(default_factory=dict)  # box variables (``given``)
    pos: Pos | None = None
    warnings: list[DiagWarning] = field(default_factory=list)
    # a reduction's holes (learnable boxes, box variables, abstract families of the left)
    # and what replaces each on the right ("itself", "the identity", "3 boxes"); see
    # check_reduction
    specialised: dict[str, str] = field(default_factory=dict)
    # a rule that is not one step names the derivation that proves it (left side to right)
    proof: str | None = None
    proof_pos: Pos | None = None
    # ``assuming z != 0``: the inputs it holds only away from zero, by name, and their positions
    nonzero: dict[str, int] = field(default_factory=dict)

    @property
    def symbol(self) -> str:
        return "≡" if self.kind == EQUATION else "⇒"

    def sides(self, reverse: bool = False) -> tuple[Diagram, Diagram]:
        """(pattern, replacement); ``reverse`` uses an equation right to left."""
        if not reverse:
            return self.lhs, self.rhs
        if self.kind != EQUATION:
            raise DiagError(f"rule '{self.name}' is a reduction (⇒): it cannot be used right to left", self.pos)
        return self.rhs, self.lhs

    def __repr__(self) -> str:
        return f"<Rule {self.name}: {self.lhs.signature().split(' : ', 1)[1]} ({self.kind})>"


# -- loading ---------------------------------------------------------------------------
def load_rules(path: str | Path) -> list[Rule]:
    """The rules of a ``.rules`` file, or of every ``.rules`` file in a directory (``path`` may
    name a shipped one, ``stringdiag:rules/absorb.rules``)."""
    path = Path(argument(path))
    if path.is_dir():
        return [r for f in sorted(path.glob("*.rules")) for r in load_rules(f)]
    return loads_rules(read_source(path), str(path))


def library() -> Library:
    """The standard library (``rules/*.rules``), by rule name."""
    return Library(sorted(RULES_DIR.glob("*.rules")))


class Library(Mapping[str, Rule]):
    """Rules by name, each file read only when one of its rules is asked for.

    A derivation names a handful of rules; reading all of ``rules/`` is most of its start-up.
    Which file holds which name is found by scanning the text for ``rule NAME`` at the start
    of a line; the file's parse is the authority once read. As with one dict built from the
    files in order, a later file's rule wins a name.
    """

    def __init__(self, files: list[Path]):
        self._where: dict[str, Path] = {}
        for f in files:
            for name in _DECLARED.findall("\n" + read_source(f)):
                self._where[name] = f
        self._read: dict[Path, _FileRules] = {}

    def __getitem__(self, name: str) -> Rule:
        file = self._where[name]
        if file not in self._read:
            self._read[file] = _FileRules(file)
        return self._read[file][name]

    def __iter__(self) -> Iterator[str]:
        return iter(self._where)

    def __len__(self) -> int:
        return len(self._where)


# `rule NAME` at the start of a line, found as "\nrule" (in the text after a newline): a literal
# the matcher searches for, where a line-start anchor is tried at every character (4x slower)
_DECLARED = re.compile(r"\nrule\s+([A-Za-z_][A-Za-z0-9_]*)")


class _FileRules:
    """One library file's rules, each elaborated when first asked for: a derivation names a few of
    a file's rules (linearize three of contraction.rules' eight). The file is parsed, its helper
    definitions checked and its names checked unique at once, as :func:`load_rules` does."""

    def __init__(self, file: Path):
        self.prog, self.items = _deep(_declared, read_source(file), str(file))
        self.made: dict[str, Rule] = {}

    def __getitem__(self, name: str) -> Rule:
        if name not in self.made:
            self.made[name] = _deep(_rule, self.items[name], self.prog)
        return self.made[name]


def _deep(fn, *args):
    """``fn(*args)`` with room for deeply nested expressions and the collector paused."""
    limit = sys.getrecursionlimit()
    sys.setrecursionlimit(max(limit, P.DEPTH))
    try:
        with gc_paused():
            return fn(*args)
    finally:
        sys.setrecursionlimit(limit)


def _declared(text: str, file: str) -> tuple[Program, dict[str, RA.RuleDecl]]:
    """A rules file's program (its helper definitions checked) and its rules' syntax by name."""
    prog = Program(path=file, source=text, prelude=P.prelude())
    loaded: dict = {}
    shipped = Path(file).parent == RULES_DIR  # the library's parse is cached (syntax/astcache.py)
    items = read_cached(text, file, RA.read_rules) if shipped else RA.read_rules(text, file)
    rule_items = [item for item in items if not P.declare(prog, item, (), loaded)]
    for name in prog.own:
        prog[name]  # type-check helper definitions first: their errors are theirs
    rules: dict[str, RA.RuleDecl] = {}
    for item in rule_items:
        assert isinstance(item, RA.RuleDecl)  # (declare took every other item)
        if item.name.text in rules:
            raise DiagError(f"rule '{item.name.text}' is already defined (at {rules[item.name.text].name.pos})",
                            item.name.pos, text)
        rules[item.name.text] = item
    return prog, rules


def loads_rules(text: str, file: str = "<string>") -> list[Rule]:
    """Like :func:`load_rules`, from a string."""
    return _deep(_load, text, file)


def _load(text: str, file: str) -> list[Rule]:
    prog, items = _declared(text, file)
    return [_rule(item, prog) for item in items.values()]


def _rule(item: RA.RuleDecl, prog: Program) -> Rule:
    name = item.name.text
    dims = generic_names(item.generics, prog)
    for n in (item.generics.names if item.generics is not None else ()):
        if prog.lookup_dim(n.text) is not None:
            raise DiagError(f"dimension variable '{n.text}' has the name of a declared dimension; a declared "
                            "dimension is a constant in a rule, so name the variable differently",
                            n.pos, prog.source)
    variables = _box_variables(item.given, prog, set(dims))
    scope = Program(path=prog.path, source=prog.source, dims=prog.dims, boxes={**prog.boxes, **variables},
                    defs=dict(prog.defs), prelude=prog.prelude)
    cells = _cells(item, scope, variables)
    sides = [_side(item, side, label, scope, variables) for side, label in ((item.left, "left"), (item.right, "right"))]
    unused = [v for v in variables if not any(d.record(b).var and d.record(b).op == v
                                               for d in sides + cells for b in d.boxes())]
    if unused:
        raise DiagError(f"box variable '{unused[0]}' is used by neither side of rule '{name}'",
                        variables[unused[0]].pos, prog.source)
    rule = Rule(name, _RELATIONS[item.relation], sides[0], sides[1], dims, variables, item.name.pos,
                list(scope.warnings))
    params = [prm.name.text for prm in item.params]
    for n in item.nonzero:
        if n.text not in params:
            raise DiagError(f"'{n.text}' is not an input of rule '{name}' (assuming names one of "
                            f"{', '.join(params) or 'its inputs'})", n.pos, prog.source)
    rule.nonzero = {n.text: params.index(n.text) for n in item.nonzero}
    if item.proof is not None:  # checked by running the derivation (stringdiag check FILE.rules)
        rule.proof = str(locate(item.proof.value, Path(prog.path).parent, item.proof.pos, prog.source,
                                    (".deriv",)))
        rule.proof_pos = item.proof.pos
    elif rule.kind == REDUCTION:
        rule.specialised = check_reduction(rule, prog.source)
    return rule


def _box_variables(given: tuple[RA.Given, ...], prog: Program, dims: set[str]) -> dict[str, BoxDecl]:
    """``given f : [a] -> [b]``: abstract boxes, over the rule's dimension variables only."""
    variables: dict[str, BoxDecl] = {}
    for g in given:
        for dn in g.names:
            name = dn.name.text
            if dn.generics is not None:
                raise DiagError("a box variable has no dimension parameters of its own; use the rule's",
                                dn.generics.pos, prog.source)
            if name in variables:
                raise DiagError(f"box variable '{name}' is declared twice", dn.name.pos, prog.source)
            variables[name] = BoxDecl(name, "abstract", (), type_list(g.ins, prog, dims),
                                      type_list(g.outs, prog, dims), dn.name.pos)
    return variables


def _cells(item: RA.RuleDecl, scope: Program, variables: dict[str, BoxDecl]) -> list[Diagram]:
    """``where diagram Cell ...``: definitions local to the rule, in whose bodies the rule's box
    variables stand for any process. Scanned in a side, such a cell is a pattern for the body
    of the target's scanned cell (``conditions.same_cell``), so a law can say what a loop
    does inside (a cell that passes its carry through, one that swaps it with its input)."""
    bodies = []
    for node in item.cells:
        if node.name.text in scope.defs:
            raise DiagError(f"'{node.name.text}' is already defined; a rule's cell needs a name of its own",
                            node.name.pos, scope.source)
        defn = P.definition(node, scope)
        scope.defs[defn.name] = defn
        body = defn.diagram()
        _mark_variables(body, variables)
        body.cell_pattern = True
        bodies.append(body)
    return bodies


def _mark_variables(d: Diagram, variables: dict[str, BoxDecl]) -> None:
    for b in d.boxes():
        box = d.record(b)
        if box.kind is Kind.ABSTRACT and variables.get(box.op) is box.ref:
            d.update(b, var=True)


def _side(item: RA.RuleDecl, side: RA.Side, label: str, scope: Program, variables: dict[str, BoxDecl]) -> Diagram:
    """One side of a rule: a diagram over the rule's header, named ``NAME (left)``; the boxes
    that are box variables are marked ``var``."""
    if not side.body:  # point at the opening brace, as an empty diagram body would be
        raise DiagError(f"the {label} side of rule '{item.name.text}' is empty; it needs a return statement",
                        side.pos, scope.source)
    name = A.Name(f"{item.name.text} ({label})", item.name.pos)
    d = P.definition(A.DiagramDecl(name, item.generics, item.params, item.outs, side.body, item.pos), scope).diagram()
    _mark_variables(d, variables)
    for b in d.boxes():
        box = d.record(b)
        if box.kind is Kind.DIAGRAM and getattr(box.ref, "cell_pattern", False):
            if not box.scan:
                raise DiagError(f"'{box.op}' is a cell pattern of rule '{item.name.text}': scan it",
                                box.pos, scope.source)
            d.update(b, cell=True)
    return d


__all__ = ["Rule", "load_rules", "loads_rules", "library", "check_reduction", "RULES_DIR",
           "EQUATION", "REDUCTION"]
