"""How the count moves with the reading of Sec. 5 (the text leaves these choices open).

Each row varies one choice against the stated reading: the bound (one less), whether
generator outputs may be copied, and which rule files are used (none, each alone, all).
``reduced`` is left out (``None``) where the not-composite stage is too large to reduce in
a few seconds.
"""
from __future__ import annotations

from .space import generators, is_composite, wirings
from .stages import enumerate_space

REDUCE_LIMIT = 1500


def readings(defns, max_size: int, rule_files: dict, copy_outputs: bool) -> list[dict]:
    rows = []
    all_rules = [r for rs in rule_files.values() for r in rs]
    variants = [(f"stated (max {max_size}{', outputs copied' if copy_outputs else ''}, "
                 f"{'all rules' if rule_files else 'no rules'})",
                 max_size, copy_outputs, all_rules)]
    if max_size > 1:
        variants.append((f"max {max_size - 1}", max_size - 1, copy_outputs, all_rules))
    variants.append(("outputs copied too" if not copy_outputs else "only the input copied",
                     max_size, not copy_outputs, all_rules))
    if rule_files:
        variants.append(("no rules", max_size, copy_outputs, []))
        if len(rule_files) > 1:
            for path, rs in rule_files.items():
                variants.append((f"only {path}", max_size, copy_outputs, rs))
    for label, n, copies, rules in variants:
        rows.append(_row(label, defns, n, copies, rules))
    return rows


def _row(label, defns, n, copies, rules) -> dict:
    gens, stream = generators(defns)
    ws = list(wirings(gens, stream, n, copies))
    kept = [w for w in ws if not is_composite(w, gens, stream)]
    reduced = None
    if not rules:
        reduced = len(kept)
    elif len(kept) <= REDUCE_LIMIT:
        reduced = enumerate_space(defns, n, rules, copies).stages[-1].count
    return {"reading": label, "raw": len(ws), "not-composite": len(kept), "reduced": reduced}


__all__ = ["readings"]
