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
  specialised, Definition 3.1 of seed 003).
- ``given f, g : [a] -> [b]`` declares box variables: ``f`` stands for any process of
  that type (a learnable, abstract, fixed or defined box; one occurrence of ``f`` fixes it
  for the others). Boxes named in the sides otherwise mean the box of that name.
- The rest of a ``.rules`` file is ``.diag`` language: ``import``, ``dim``, ``learn`` /
  ``abstract`` / ``fixed`` declarations and helper ``diagram`` definitions.
- Names of wires and indices are presentation: a side is a graph, matched up to renaming.

Loading returns :class:`Rule` objects; every error is a positioned ``DiagError``.

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
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path

from lark import Lark, Token, Tree
from lark.exceptions import UnexpectedInput, UnexpectedToken

from ..errors import DiagError, DiagWarning, Pos
from ..graph import program as P
from ..graph.diagram import Diagram
from ..graph.gcpause import gc_paused
from ..graph.program import BoxDecl, Definition, Program
from ..syntax import parser as S

RULES_DIR = Path(__file__).resolve().parents[2] / "rules"
EQUATION, REDUCTION = "equation", "reduction"
_RELATIONS = {"==": EQUATION, "≡": EQUATION, "=>": REDUCTION, "⇒": REDUCTION}


@dataclass
class Rule:
    """A named rule: two open diagrams with one boundary, over dimension variables ``dims``."""

    name: str
    kind: str  # "equation" (≡, both ways) or "reduction" (⇒, left to right only)
    lhs: Diagram
    rhs: Diagram
    dims: tuple[str, ...]
    vars: dict[str, BoxDecl] = field(default_factory=dict)  # box variables (``given``)
    pos: Pos | None = None
    warnings: list[DiagWarning] = field(default_factory=list)

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


# -- parsing ---------------------------------------------------------------------------
@lru_cache(maxsize=None)
def _parser() -> Lark:
    path = S.grammar_path("rules.lark")
    return Lark(path.read_text(), parser="lalr", propagate_positions=True, maybe_placeholders=True,
                import_paths=[str(path.parent)], source_path=str(path))


_NS = re.compile(r"^diag__")


def _strip(tree: Tree) -> Tree:
    """Imported rules and terminals come back namespaced (``diag__assign``); the elaborator
    reads them by their own names, so the prefix goes."""
    for st in tree.iter_subtrees():
        if isinstance(st.data, str) and st.data.startswith("diag__"):
            st.data = st.data[6:]
        for k, c in enumerate(st.children):
            if isinstance(c, Token) and c.type.startswith("diag__"):
                st.children[k] = Token(c.type[6:], c, c.start_pos, c.line, c.column, c.end_line, c.end_column,
                                       c.end_pos)
    return tree


def _parse(text: str, file: str) -> Tree:
    lark = _parser()
    try:
        return _strip(lark.parse(text))
    except UnexpectedInput as e:
        # name terminals as diag.lark's own messages do (imported ones come back namespaced)
        if isinstance(getattr(e, "expected", None), (set, frozenset, list)):
            e.expected = {_NS.sub("", n) for n in e.expected}
        if isinstance(e, UnexpectedToken):
            e._accepts = {_NS.sub("", n) for n in (e.accepts or e.expected)}
        err = S._syntax_error(e, text, file, lark)
        msg = re.sub(r"\brelation\b", "'==' (≡) or '=>' (⇒)", err.message)
        raise DiagError(msg, err.pos, text) from None


# -- loading ---------------------------------------------------------------------------
def load_rules(path: str | Path) -> list[Rule]:
    """The rules of a ``.rules`` file, or of every ``.rules`` file in a directory."""
    path = Path(path)
    if path.is_dir():
        return [r for f in sorted(path.glob("*.rules")) for r in load_rules(f)]
    return loads_rules(P.read_source(path), str(path))


def library() -> dict[str, Rule]:
    """The standard library (``rules/*.rules``), by rule name."""
    return {r.name: r for r in load_rules(RULES_DIR)}


def loads_rules(text: str, file: str = "<string>") -> list[Rule]:
    """Like :func:`load_rules`, from a string."""
    limit = sys.getrecursionlimit()
    sys.setrecursionlimit(max(limit, P.DEPTH))
    try:
        with gc_paused():
            return _load(text, file)
    finally:
        sys.setrecursionlimit(limit)


def _load(text: str, file: str) -> list[Rule]:
    tree = _parse(text, file)
    prog = Program(path=file, source=text, prelude=P.prelude())
    loaded: dict = {}
    rule_items = []
    for item in tree.children:
        if not P.declare(prog, item, (), loaded) and item.data == "rule":
            rule_items.append(item)
    for name in prog.own:
        prog[name]  # type-check helper definitions first: their errors are theirs
    rules: list[Rule] = []
    seen: dict[str, Pos | None] = {}
    for item in rule_items:
        r = _rule(item, prog)
        if r.name in seen:
            raise DiagError(f"rule '{r.name}' is already defined (at {seen[r.name]})", r.pos, text)
        seen[r.name] = r.pos
        rules.append(r)
    return rules


def _rule(item: Tree, prog: Program) -> Rule:
    name_tok, gen, *rest = item.children
    params = [c for c in rest if isinstance(c, Tree) and c.data == "param"]
    outs = next(c for c in rest if isinstance(c, Tree) and c.data == "type_list")
    givens = [c for c in rest if isinstance(c, Tree) and c.data == "given_decl"]
    left, rel, right = [c for c in rest if (isinstance(c, Tree) and c.data == "side") or
                        (isinstance(c, Token) and c.type == "RELATION")]
    name = str(name_tok)
    pos = S.pos_of(name_tok, prog.path)
    dims = P.generic_names(gen, prog)
    for tok in (gen.children if gen is not None else ()):
        if prog.lookup_dim(str(tok)) is not None:
            raise DiagError(f"dimension variable '{tok}' has the name of a declared dimension; a declared "
                            "dimension is a constant in a rule, so name the variable differently",
                            S.pos_of(tok, prog.path), prog.source)
    variables: dict[str, BoxDecl] = {}
    for g in givens:
        *names, ins, outs_t = g.children
        for dn in names:
            tok, generics = dn.children
            if generics is not None:
                raise DiagError("a box variable has no dimension parameters of its own; use the rule's",
                                S.pos_of(generics, prog.path), prog.source)
            if str(tok) in variables:
                raise DiagError(f"box variable '{tok}' is declared twice", S.pos_of(tok, prog.path), prog.source)
            variables[str(tok)] = BoxDecl(str(tok), "abstract", (), P.type_list(ins, prog, set(dims)),
                                          P.type_list(outs_t, prog, set(dims)), S.pos_of(tok, prog.path))
    scope = Program(path=prog.path, source=prog.source, dims=prog.dims, boxes={**prog.boxes, **variables},
                    defs=prog.defs, prelude=prog.prelude)
    sides = []
    for side, label in ((left, "left"), (right, "right")):
        tok = Token("NAME", f"{name} ({label})", name_tok.start_pos, name_tok.line, name_tok.column)
        if not side.children:  # point at the opening brace, as an empty diagram body would be
            raise DiagError(f"the {label} side of rule '{name}' is empty; it needs a return statement",
                            S.pos_of(side, prog.path), prog.source)
        tree = Tree("diagram", [tok, gen, *params, outs, *side.children], meta=item.meta)
        d = Definition(tok, tree, scope).diagram()
        for b in d.boxes():
            node = d.box(b)
            if node["box"] == "abstract" and variables.get(node["op"]) is node.get("ref"):
                node["var"] = True
        sides.append(d)
    unused = [v for v in variables if not any(d.box(b).get("var") and d.box(b)["op"] == v
                                               for d in sides for b in d.boxes())]
    if unused:
        raise DiagError(f"box variable '{unused[0]}' is used by neither side of rule '{name}'",
                        variables[unused[0]].pos, prog.source)
    return Rule(name, _RELATIONS[str(rel)], sides[0], sides[1], dims, variables, pos, list(scope.warnings))


__all__ = ["Rule", "load_rules", "loads_rules", "library", "RULES_DIR", "EQUATION", "REDUCTION"]
