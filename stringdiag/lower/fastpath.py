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

import dataclasses
import itertools
from functools import lru_cache
from pathlib import Path

from ..graph.diagram import Diagram
from ..rewrite.dpo import rewrite
from ..rewrite.match import Index, find_matches, iter_matches
from ..rewrite.rule import Rule, load_rules

RULES = Path(__file__).resolve().parents[2] / "rules" / "fastpath.rules"


def commuted(rule: Rule) -> list[Rule]:
    """The rule once for every order of the factors of each product on its left side."""
    lhs = rule.lhs
    products = [b for b in lhs.boxes() if lhs.box(b)["box"] == "contract"]
    orders = itertools.product(*(itertools.permutations(range(len(lhs.box_inputs(b)))) for b in products))
    out = []
    for order in orders:
        side = lhs.copy()
        for b, perm in zip(products, order):
            edges = list(side.graph.in_edges(b, keys=True, data=True))
            side.graph.remove_edges_from([(w, b, k) for w, _, k, _ in edges])
            for w, _, k, attrs in edges:
                side.graph.add_edge(w, b, key=perm[k], **attrs)
        out.append(dataclasses.replace(rule, lhs=side))
    return out


@lru_cache(maxsize=None)
def rules() -> tuple[Rule, ...]:
    """The fast-path rules in file order, each in all its commuted forms (loaded once)."""
    return tuple(r for rule in load_rules(RULES) for r in commuted(rule))


def apply(d: Diagram, rule: Rule, ix: Index) -> int:
    """Rewrite ``d`` in place at every match of ``rule``; returns how many.

    Each match is found again from its anchor just before it is rewritten (an earlier
    rewrite may have replaced a box it shares, such as a causal mask read twice); the
    search repeats while some match was lost that way."""
    done = 0
    while True:
        lost, before = 0, done
        for m in find_matches(d, rule, index=ix):
            fresh = next(iter_matches(d, rule, index=ix, seed=m.seed, limit=1), None) \
                if all(ix.alive(b) for b in m.targets) else None
            if fresh is None:
                lost += 1
                continue
            rewrite(d, fresh, index=ix, in_place=True)
            done += 1
        if not lost or done == before:
            return done


def fuse(d: Diagram) -> int:
    """Apply every fast-path rule to ``d`` (expanded, not yet lowered) in place; returns
    the number of rewrites."""
    ix = Index(d)
    return sum(apply(d, r, ix) for r in rules())
