"""Typed subgraph matching of a rule side's interior in a target diagram: the public face.

A match sends each box of the pattern (a rule side) to a distinct target box of the same
identity (class, op, generics after unifying the rule's dimension variables), port for
port, and each wire to a target wire up to a permutation of its axes; target boxes may
carry more SIMD labels than the pattern's, a common context the match records as slots.
Each match is described by its wires' names (with the instance path of expanded
definitions, ``Layer#3/Head#2/y``), which a derivation script uses to select it.

The parts, one module each: ``view`` (a box as matching reads it), ``index`` (the target),
``unify`` (dimension and box variables), ``pattern`` (a rule side and its search plan),
``search`` (the backtracking), ``conditions`` (each condition a match must meet, after
Chyp's), ``context`` (SIMD context slots), ``occurrence`` (:class:`Match`).
"""
from __future__ import annotations

from typing import Any, Iterator

from ..errors import DiagError
from ..graph.diagram import Diagram
from ..graph.gcpause import gc_paused
from .cellforms import cell_forms
from .index import Index, key
from .names import instance_path, wire_name
from .occurrence import Match
from .pattern import Pattern
from .search import Matcher
from .unify import Unifier, identity
from .view import LOCAL, Perm, View, view


def _pattern_of(rule, reverse: bool) -> tuple[Diagram, Any]:
    if isinstance(rule, Diagram):
        return rule, None
    return rule.sides(reverse)[0], rule


def find_matches(target: Diagram, rule, reverse: bool = False, index: Index | None = None,
                 limit: int | None = None, ties: bool = False) -> list[Match]:
    """Every occurrence of the rule's left side (right side with ``reverse``) in ``target``.

    ``rule`` is a :class:`~stringdiag.rewrite.rule.Rule` or a bare pattern diagram. Matches
    that would tie weight sets (:attr:`Match.ties`) are reductions, found only with ``ties``.
    """
    with gc_paused():
        return list(iter_matches(target, rule, reverse, index, limit, ties=ties))


def pattern(rule, reverse: bool = False) -> Pattern:
    """The prepared pattern of a rule side (kept on the rule, so prepared once)."""
    side, r = _pattern_of(rule, reverse)
    if r is None:
        return Pattern(side)
    cache = r.__dict__.setdefault("_patterns", {})
    if reverse not in cache:
        cache[reverse] = Pattern(side)
    return cache[reverse]


def iter_matches(target: Diagram, rule, reverse: bool = False, index: Index | None = None,
                 limit: int | None = None, seed: tuple[int, int] | None = None,
                 ties: bool = False) -> Iterator[Match]:
    """Like :func:`find_matches`, lazily; ``seed`` fixes one (pattern box, target box) pair.

    A rule whose side scans a cell pattern also matches a scan written in another form of the same
    function: a user's cell reading ``(S, g, q, k, v)`` for the rule's ``(S, q, k, v, g)``, its
    per-step outputs in another order, its state ``S[d, k]`` for the rule's ``S[k, d]``
    (``cellforms``). When the side as written finds nothing, each form is tried, and the matches
    of the first that finds any say which (:attr:`Match.order`)."""
    _, r = _pattern_of(rule, reverse)
    ix = index if index is not None else Index(target)
    n = 0
    forms = _cell_orders(rule, reverse) if _scans_like(target, rule, reverse) else []
    for pat, order in [(pattern(rule, reverse), ""), *forms]:
        for m in Matcher(pat, ix).run(seed):  # a variant keeps the box ids: a seed holds
            if m.ties and not ties:
                continue
            m.rule, m.reverse, m.order = r, reverse, order
            yield m
            n += 1
            if limit is not None and n >= limit:
                return
        if n:
            return


def _scans_like(target: Diagram, rule, reverse: bool) -> bool:
    """Does ``target`` scan a cell of as many inputs and outputs as the side's cell pattern? (The
    other forms are built, once per rule, only where one might match.)"""
    side, _ = _pattern_of(rule, reverse)
    cells = [side.record(b).ref for b in side.boxes() if side.record(b).cell and side.record(b).ref is not None]
    if not cells:
        return False
    ports = (len(cells[0].inputs), len(cells[0].outputs))
    return any(node.scan and isinstance(node.ref, Diagram) and (len(node.ref.inputs), len(node.ref.outputs)) == ports
               for node in (target.record(b) for b in target.boxes()))


def _cell_orders(rule, reverse: bool) -> list[tuple[Pattern, str]]:
    """The side with its scanned cell pattern in each other form a user may write the loop in
    (``cellforms``: the per-step inputs or outputs in another order, the state's axes turned);
    kept on the rule."""
    side, r = _pattern_of(rule, reverse)
    cache = r.__dict__.setdefault("_cell_orders", {}) if r is not None else {}
    if reverse not in cache:
        cache[reverse] = [(Pattern(form), said) for form, said in cell_forms(side)]
    return cache[reverse]


def select(matches: list[Match], where: str) -> Match:
    """The match whose wires include every name in ``where`` (comma-separated names, as
    :attr:`Match.where` and :attr:`Match.names` spell them).

    Matches of the same boxes that differ only in which indices are the rule's and which
    are context are one place in the diagram: the first is taken. Otherwise an ambiguous
    or empty selection is an error that lists the candidates.
    """
    want = {w.strip() for w in where.split(",") if w.strip()}
    hits = [m for m in matches if want <= m.names]
    exact = [m for m in hits if m.where == ", ".join(w.strip() for w in where.split(","))]
    pick = exact or hits
    if pick and len({m.targets for m in pick}) == 1:
        return pick[0]
    shown = "; ".join(dict.fromkeys(m.where for m in (pick or matches))) or "none"
    if not pick:
        raise DiagError(f"no match at '{where}' (the matches are at: {shown})")
    raise DiagError(f"'{where}' names {len({m.targets for m in pick})} different matches ({shown}); "
                    "name more of their wires")


__all__ = ["Match", "Index", "Matcher", "Pattern", "Unifier", "find_matches", "iter_matches", "pattern", "select",
           "view", "View", "key", "identity", "instance_path", "wire_name", "LOCAL", "Perm"]
