"""Fast paths as rules: ``rules/fastpath.rules`` applied before lowering, like torch.fx's
``replace_pattern``.

Each rule's left side is attention written out box by box and its right side one fused
process of the prelude (``sdpa``, ``causal_linear_attention``, ...) that the primitive
table lowers to one kernel. The rules are found by the rewrite engine's own matcher and
applied by its double pushout, so what a fast path recognises is what the rule says —
inside SIMD boxes (heads), on transposed wires, with a head index the keys and values may
lack (multi-query and grouped-query attention) — and nothing is checked by hand here.

The one thing added to the engine's reading of a rule: a product's factors are matched
port for port, so each rule is also tried with the factors of every product on its left
in every order (a product is the same in any order; ``commuted``).
"""
from __future__ import annotations

from functools import lru_cache
from typing import Callable

from ..graph.box import Kind
from ..graph.diagram import Diagram
from ..rewrite import cell
from ..rewrite.dpo import rewrite
from ..rewrite.match import Index, Match, find_matches, iter_matches
from ..rewrite.rule import RULES_DIR, Rule, load_rules
from ..syntax.records import replace
from .table import native

RULES = RULES_DIR / "fastpath.rules"


def commuted(rule: Rule) -> list[Rule]:
    """The rule once for every order of the factors of each product on its left side."""
    return [replace(rule, lhs=side) for side in cell.commuted(rule.lhs, _product)]


def _product(box) -> bool:
    return box.kind is Kind.CONTRACT


@lru_cache(maxsize=None)
def rules() -> tuple[Rule, ...]:
    """The fast-path rules in file order, each in all its commuted forms (loaded once)."""
    return tuple(r for rule in load_rules(RULES) for r in commuted(rule))


def apply(d: Diagram, rule: Rule, ix: Index, seen: Callable[[Match], None] | None = None) -> int:
    """Rewrite ``d`` in place at every match of ``rule``; returns how many (``seen`` is told
    of each match before its rewrite).

    A match that shares a box or a wire with one rewritten before it is found again from
    its anchor first (that rewrite may have replaced a box both read, such as a causal
    mask); the search repeats while some match was lost that way."""
    done = 0
    while True:
        lost, before, touched = 0, done, set()
        for m in find_matches(d, rule, index=ix):
            if touched & _footprint(m):
                m = next(iter_matches(d, rule, index=ix, seed=m.seed, limit=1), None) \
                    if all(ix.alive(b) for b in m.targets) else None
            if m is None:
                lost += 1
                continue
            touched |= _footprint(m)
            if seen is not None:
                seen(m)
            rewrite(d, m, index=ix, in_place=True)
            done += 1
        if not lost or done == before:
            return done


def _footprint(m: Match) -> set:
    """The target boxes and wires a match reads, writes or replaces."""
    return {("box", b) for b in m.targets} | {("wire", w) for w, _ in m.wires.values()}


def fuse(d: Diagram) -> int:
    """Apply every fast-path rule to ``d`` in place, in file order; returns the number of
    rewrites. A rule whose left side names a process ``d`` does not use is not searched."""
    ops = {d.record(b).op for b in d.boxes()}
    todo = [r for r in rules() if _processes(r) <= ops]
    if not todo:
        return 0
    ix = Index(d)
    return sum(apply(d, r, ix) for r in todo)


def _processes(rule: Rule) -> frozenset[str]:
    return frozenset(rule.lhs.record(b).op for b in rule.lhs.boxes()
                     if rule.lhs.record(b).kind in (Kind.FIXED, Kind.DIAGRAM))


def fused(d: Diagram, memo: dict | None = None, prepare: Callable[[Diagram], object] | None = None) -> Diagram:
    """A copy of ``d`` whose definitions (and theirs, down to the prelude's native ones) have
    the fast paths applied, before anything is expanded: a definition used by many heads or
    layers is rewritten once, not once per use. What crosses definitions (attention split
    between two of them) is left to :func:`fuse` on the expanded diagram. ``prepare`` rewrites
    each definition in place before its fast paths (a scan through its chunked form, ``scans.py``)."""
    memo = {} if memo is None else memo
    out = d.copy()
    for b in out.boxes():
        node = out.record(b)
        if node.kind is not Kind.DIAGRAM or native(node):
            continue
        key = id(node.ref)
        if key not in memo:
            memo[key] = fused(node.ref, memo, prepare)
            if prepare is not None:
                prepare(memo[key])
            fuse(memo[key])
        out.update(b, ref=memo[key])
    return out
