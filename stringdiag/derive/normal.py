"""Normal forms: apply rules everywhere until nothing changes, under explicit bounds.

Termination is not guaranteed in general (an equation used both ways loops), so the
rounds and the size are bounded, and a repeated canonical hash ends the search too.
"""
from __future__ import annotations

from collections import ChainMap
from dataclasses import dataclass
from typing import Callable

from ..errors import DiagError
from ..graph.decls import suggest
from ..graph.diagram import Diagram
from ..rewrite.rule import load_rules
from ..rewrite.strategy import TooManyBoxes, rewrite_all
from .derivation import standard_library


# The default rules: the laws of finite iteration that remove a loop, left to right (a loop
# that carries nothing is a SIMD box; a loop over one step is its cell), and a reversal undone
# (rules/sequence.rules). Each removes a scan or two boxes, so the search always ends.
DEFAULT_RULES = ("simd_scan", "simd_unit", "vanish", "reverse_twice")


@dataclass
class Normalized:
    diagram: Diagram
    rounds: int
    rewrites: int
    fixpoint: bool
    stop: str = "a fixpoint"  # why the search ended, as the command line says it


def normalize(d: Diagram, rules: list[str] | tuple[str, ...] = DEFAULT_RULES, max_rounds: int = 20, max_boxes: int = 10_000,
              log: Callable[[str], None] | None = None, files: list[str] | tuple[str, ...] = (),
              trace: bool = False) -> Normalized:
    """``rules`` by name, from ``files`` (.rules) first, then the standard library. With ``trace``
    (and a ``log``), a rule that does not fire in a round says why: its closest partial match."""
    own = {r.name: r for f in files for r in load_rules(f)}
    # (a ChainMap writes to its first map only: the library is read)
    lib = ChainMap(own, standard_library()) if own else standard_library()  # type: ignore[arg-type]
    chosen = []
    for spec in rules:
        name, _, how = spec.partition(":")
        if name not in lib:
            raise DiagError(f"no rule named '{name}'{suggest(name, list(lib))}")
        if how not in ("", "reversed"):
            raise DiagError(f"'{spec}': write NAME or NAME:reversed")
        rule = lib[name]
        rule.sides(how == "reversed")  # a reduction cannot be used backwards
        chosen.append((rule, how == "reversed"))
    start, seen = d, None  # hashes of the diagrams met, taken once something changes
    total = 0
    for rounds in range(1, max_rounds + 1):
        changed = 0
        for rule, reverse in chosen:
            try:
                d, n = rewrite_all(d, rule, reverse, max_boxes=max_boxes)
            except TooManyBoxes as e:  # counted before rewriting: the diagram stays within the bound
                return Normalized(d, rounds, total + changed, False,
                                  f"stopped at the size bound: round {rounds} would apply '{rule.name}' at "
                                  f"{e.matches:,} matches, making about {e.boxes:,} boxes, over {e.limit:,} "
                                  "(--max-boxes)")
            changed += n
            if log and n:
                log(f"round {rounds}: {rule.name}{' (reversed)' if reverse else ''} x{n}")
            elif log and trace:
                from ..rewrite.closest import explain

                why = explain(d, rule, reverse).summary(rule.sides(reverse)[0], d, more="")
                log(f"round {rounds}: {rule.name}{' (reversed)' if reverse else ''} does not fire\n  "
                    + why.replace("\n", "\n  "))
        total += changed
        if not changed:
            return Normalized(d, rounds, total, True)
        seen = seen if seen is not None else {start.canonical_hash()}
        h = d.canonical_hash()
        if h in seen:  # back where we have been: a cycle of equations
            return Normalized(d, rounds, total, False,
                              f"stopped at a cycle: round {rounds} gave back a diagram seen before "
                              "(the rules undo one another, or one undoes itself, as commute does)")
        seen.add(h)
    return Normalized(d, max_rounds, total, False, f"stopped at the round bound: {max_rounds} rounds (--max-rounds)")
