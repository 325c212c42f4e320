"""Proofs of rules: a rule that is not one step names the derivation that proves it.

A rule written ``rule NAME(...) -> ... { LEFT } REL { RIGHT } by "FILE.deriv"`` (see
``stringdiag/rewrite/rule.py``) is not checked when it is loaded; :func:`check_proof` runs
its derivation and checks that it proves the rule:

1. the derivation checks, every step (and, with ``verify``, every equality numerically);
2. its start is the rule's left side and its result the rule's right side: the fully
   expanded diagrams are isomorphic (``graph/iso.py``: structure and weight sharing, not
   names). The boundaries correspond by position: the start diagram's k-th input is the
   rule's k-th input, and so on for the outputs, so a derivation of ``ConcatFF(y, x)`` over
   ``(x, y)`` proves a rule over ``(x, y)`` that returns ``ConcatFF(y, x)``, and not one
   that returns ``ConcatFF(x, y)``;
3. its relation is the rule's: an equation (``==``) only by equalities (≡ steps); a
   reduction (``=>``) by equalities and reductions (≡ and ⇒ steps). A rewiring (≠) proves
   nothing.

Every failure is a ``DiagError`` positioned at the ``by "FILE.deriv"`` string of the rule.
This is the layer above rewriting: ``derive`` imports ``rewrite``, never the other way round
(loading rules never runs a proof; ``stringdiag check FILE.rules`` does).
"""
from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from ..errors import DiagError, shown as named
from ..graph.diagram import Diagram
from ..graph.expand import expand
from ..rewrite.rule import EQUATION, Rule
from .derivation import Derivation, load_derivation
from .steps import ABSORB, EQ, RED


@dataclass
class Proof:
    """A rule's checked proof."""

    rule: Rule
    path: str                  # the derivation, as shown (normalised, relative where it can be)
    derivation: Derivation

    @property
    def steps(self) -> int:
        return len(self.derivation.steps) - 1

    @property
    def relations(self) -> str:
        """The steps' relations, in order: ``≡ ⇒ ≡``."""
        return " ".join(s.relation for s in self.derivation.steps[1:])

    @property
    def verified(self) -> int:
        """How many equalities were checked numerically."""
        return sum(1 for s in self.derivation.steps if s.verified is not None)

    def describe(self) -> str:
        n = self.steps
        return f"proved by {self.path} ({n} step{'s' if n != 1 else ''}: {self.relations})"


def shown(path: str) -> str:
    """A proof's path as a person reads it: a shipped one by its package name, another
    normalised, relative to here when below it."""
    if named(path) != path:  # (inside the installed package: never its site-packages path)
        return named(path)
    norm = os.path.normpath(path)
    try:
        rel = os.path.relpath(norm)
    except ValueError:  # another drive
        return norm
    return rel if not rel.startswith("..") else norm


def check_proof(rule: Rule, verify: bool = True) -> Proof:
    """Run the derivation ``rule`` names and check that it proves the rule (see the module's
    doc); a positioned ``DiagError`` at the rule's ``by`` string otherwise."""
    if rule.proof is None:
        raise DiagError(f"rule '{rule.name}' names no proof", rule.pos)
    path = shown(rule.proof)

    def fail(why: str) -> DiagError:
        return DiagError(f"rule '{rule.name}' is not proved by {path}: {why}", rule.proof_pos)

    if not Path(rule.proof).is_file():
        what = "is not a file" if Path(rule.proof).exists() else "does not exist"
        raise fail(f"the proof {what}")
    try:
        deriv = load_derivation(rule.proof, verify=verify)
    except DiagError as e:
        where = f"{e.pos}: " if e.pos is not None else ""
        raise fail(f"the derivation fails: {where}{e.message}") from None
    start, result = deriv.steps[0].diagram, deriv.result
    _same(start, rule.lhs, "starts from", "left", fail)
    _same(result, rule.rhs, "ends at", "right", fail)
    allowed = (EQ,) if rule.kind == EQUATION else (EQ, RED)
    for s in deriv.steps[1:]:
        if s.relation not in allowed:
            kind = {RED: "a reduction (⇒)", ABSORB: "as expressive only under an assumption (⇔)"}.get(
                s.relation, "a rewiring (≠), not a reduction")
            rel = "an equation (==): only equalities (≡) prove it" if rule.kind == EQUATION else \
                "a reduction (=>): only equalities (≡) and reductions (⇒) prove it"
            raise fail(f"step {s.number} ({s.text}) is {kind}, and the rule is {rel}")
    return Proof(rule, path, deriv)


def _same(got: Diagram, side: Diagram, verb: str, which: str, fail) -> None:
    """The derivation's diagram against a side of the rule, both opened to primitives; the
    boundaries correspond by position (types checked first, for a clearer message)."""
    if got.input_types != side.input_types or got.output_types != side.output_types:
        raise fail(f"the derivation {verb} '{got.name}' : {_sig(got)}, but the rule's {which} side is "
                   f"{_sig(side)} (the boundaries correspond by position)")
    a, b = expand(got), expand(side)
    if not a.isomorphic(b):
        raise fail(f"the derivation {verb} '{got.name}' ({len(a)} boxes, opened), which is not the rule's "
                   f"{which} side ({len(b)} boxes, opened): they are not isomorphic")


def _sig(d: Diagram) -> str:
    return d.signature().split(" : ", 1)[-1]


__all__ = ["Proof", "check_proof", "shown"]
