"""How the count moves with the reading of Sec. 5 (the text leaves these choices open).

Each row varies one choice against the stated reading and says which: the bound (one less),
the copy policy, each declared symmetry dropped, the requirement dropped, the rules (none,
each file alone), each generator left out, each generator used at most once, and another
typing of the generators (``--retype``; its rules are the companions ``rulesets.py``
finds). A row that breaks a constraint the text states says so in ``breaks``. Rows share
the rewrites already found (``Work.cache``). ``reduced`` is ``None`` where a row would not
fit the time budget.
"""
from __future__ import annotations

from dataclasses import dataclass

from ..errors import DiagError
from .estimate import estimate
from .reading import Copy, Reading
from .stages import Work, enumerate_space


@dataclass(frozen=True)
class Typing:
    """Another typing: ``program`` (from ``path``) defines ``renames[G]`` in place of ``G``."""

    path: str
    program: object
    renames: dict


@dataclass(frozen=True)
class Row:
    label: str
    breaks: str  # the constraint of the text the row breaks ("" for none)
    defns: list
    reading: Reading
    rules: list


def readings(defns, reading: Reading, rule_files: dict, typing: Typing | None, rules_for, work: Work) -> list[dict]:
    """The table: one dict per row (reading, breaks, raw, not-composite, required, reduced)."""
    return [_count(row, work) for row in _rows(defns, reading, rule_files, typing, rules_for)]


def _rows(defns, reading: Reading, rule_files: dict, typing, rules_for) -> list[Row]:
    every = [r for rs in rule_files.values() for r in rs]
    rows = [Row("stated", "", defns, reading, every)]
    if reading.max > 1:
        rows.append(Row(f"max {reading.max - 1}", "the bound of five", defns, reading.but(max=reading.max - 1), every))
    for c in Copy:
        if c is not reading.copy:
            rows.append(Row(f"copy {c.value}", "" if c is Copy.INPUT else "only the input copied", defns,
                            reading.but(copy=c), every))
    for g in sorted(reading.symmetric):
        rows.append(Row(f"{g} inputs ordered", "", defns, reading.but(symmetric=reading.symmetric - {g}), every))
    for g in sorted(reading.interchangeable):
        rows.append(Row(f"{g} outputs ordered", "", defns,
                        reading.but(interchangeable=reading.interchangeable - {g}), every))
    if reading.require:
        rows.append(Row("attention not required", "attention mechanisms only", defns, reading.but(require=()), every))
    if rule_files:
        rows.append(Row("no rules", "reductions (5) and (6)", defns, reading, []))
        if len(rule_files) > 1:
            for path, rs in rule_files.items():
                rows.append(Row(f"only {path}", "reductions (5) and (6)", defns, reading, rs))
    for d in defns:
        left = [e for e in defns if e is not d]
        if left and left[0].input_types[:1] == defns[0].input_types[:1]:  # the stream stays the stream
            need = tuple(n for n in reading.require if n != d.name)
            rows.append(Row(f"without {d.name}", "the five generators", left,
                            reading.but(symmetric=reading.symmetric - {d.name},
                                        interchangeable=reading.interchangeable - {d.name}, require=need), every))
    rows.append(Row("each generator at most once", "composites of up to five generators", defns,
                    reading.but(once=True), every))
    if typing:
        rows.append(_retyped(defns, reading, typing, rules_for))
    return rows


def _retyped(defns, reading: Reading, typing: Typing, rules_for) -> Row:
    names = [typing.renames.get(d.name, d.name) for d in defns]
    missing = [n for n in names if n not in typing.program.defs]
    if missing:
        raise DiagError(f"--retype: {typing.path} has no diagram {', '.join(missing)}")
    ren = typing.renames
    r = reading.but(symmetric=frozenset(ren.get(n, n) for n in reading.symmetric),
                    interchangeable=frozenset(ren.get(n, n) for n in reading.interchangeable),
                    require=tuple(ren.get(n, n) for n in reading.require))
    rules = [x for rs in rules_for(names).values() for x in rs]
    label = ", ".join(f"{a} as {b}" for a, b in ren.items()) + f" ({typing.path})"
    return Row(label, "", [typing.program[n] for n in names], r, rules)


def _count(row: Row, work: Work) -> dict:
    out = {"reading": row.label, "breaks": row.breaks}
    budget = work.budget
    fits = budget is None or not row.rules or estimate(row.defns, row.reading, row.rules).seconds(row.reading.max) <= budget
    space = enumerate_space(row.defns, row.reading, row.rules if fits else [],
                            work=Work(cache=work.cache, budget=budget))
    counts = {s.name: s.count for s in space.stages}
    out.update({"raw": counts["raw"], "not-composite": counts["not-composite"], "required": counts.get("required"),
                "reduced": (counts.get("reduced") if row.rules else counts.get("required", counts["not-composite"]))
                if fits else None})
    if fits:
        fams = _families(space, row)
        if fams:
            out["families"] = fams
    return out


def _families(space, row: Row) -> dict:
    from collections import Counter

    from .output import families_of, family
    from .space import generators

    gens = generators(row.defns)[0]
    fam = families_of(row.reading.require)
    return dict(Counter(family(m.wiring, gens, fam) for m in space.result))


__all__ = ["Typing", "readings"]
