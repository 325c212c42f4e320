"""How the count moves with the reading of Sec. 5 (the text leaves these choices open).

Each row varies one choice against the stated reading, says what it changes and which
constraint stated in Sec. 5 it breaks (none, where the text leaves the choice open): the
bound (one less), the copy policy, each declared symmetry dropped, the requirement dropped,
the rules (none, each file alone, and each file alone at the smaller bound), each generator
left out, each generator used at most once, and another typing of the generators
(``--retype``; its rules are the companions ``rulesets.py`` finds), also with its paired
generators declared and with each generator left out.

Rows share the work already done (``Work``: the rewrites of each wiring, the confirmed
classes). A row is computed only when its new work fits a budget of its own (``budget`` / 6
by default): it is priced by the up-front estimate (``estimate.py``: the whole pipeline's
cost), less the share of its ordered wirings reduced before where they are few enough to
list, and a row over the budget is reported, not computed, with that figure and the command
that computes it alone.
"""
from __future__ import annotations

import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

from ..errors import DiagError
from .estimate import estimate
from .reading import Copy, Reading
from .space import generators, wirings
from .stages import Work, enumerate_space

ROW_SHARE = 6  # a row may take at most this fraction of the time budget


@dataclass(frozen=True)
class Typing:
    """Another typing: ``program`` (from ``path``) defines ``renames[G]`` in place of ``G``."""

    path: str
    program: object
    renames: dict


@dataclass(frozen=True)
class Row:
    label: str  # what the row changes against the stated reading
    breaks: str  # the constraint stated in Sec. 5 the row breaks ("" for none)
    defns: list
    reading: Reading
    rules: list
    file: str  # the generator file, for the command that computes the row alone
    rule_files: tuple[str, ...]


def readings(defns, reading: Reading, rule_files: dict, typing: Typing | None, rules_for, work: Work,
             file: str = "FILE") -> list[dict]:
    """The table: one dict per row (reading, breaks, raw, not-composite, required, reduced,
    families; or ``not computed`` with the estimated seconds and the command)."""
    budget = (work.budget or 60.0) / ROW_SHARE
    rows = _rows(defns, reading, rule_files, typing, rules_for, file)
    return [_count(row, work, budget) for row in rows]


def _rows(defns, reading: Reading, rule_files: dict, typing, rules_for, file: str) -> list[Row]:
    every = [r for rs in rule_files.values() for r in rs]
    paths = tuple(rule_files)

    def row(label, breaks, r=reading, ds=defns, rules=every, rp=paths, f=file):
        return Row(label, breaks, ds, r, rules, f, rp)

    rows = [row("stated", "")]
    fewer = reading.but(max=reading.max - 1) if reading.max > 1 else None
    if fewer:
        rows.append(row(f"max {fewer.max}", f"at most {reading.max} generators", fewer))
    for c in Copy:
        if c is not reading.copy:
            rows.append(row(f"copy {c.value}", "" if c is Copy.INPUT else "only copies of the input",
                            reading.but(copy=c)))
    for g in sorted(reading.symmetric):
        rows.append(row(f"{g} inputs ordered", "", reading.but(symmetric=reading.symmetric - {g})))
    for g in sorted(reading.interchangeable):
        rows.append(row(f"{g} outputs ordered", "", reading.but(interchangeable=reading.interchangeable - {g})))
    for g in sorted(reading.paired):
        rows.append(row(f"{g} not paired", "", reading.but(paired=reading.paired - {g})))
    if reading.require:
        rows.append(row("attention not required", "attention mechanisms", reading.but(require=())))
    if rule_files:
        rows.append(row("no rules", "reductions (5) and (6)", rules=[], rp=()))
        for path, rs in rule_files.items() if len(rule_files) > 1 else ():
            rows.append(row(f"only {path}", "both reductions (5) and (6)", rules=rs, rp=(path,)))
            if fewer:
                rows.append(row(f"max {fewer.max}, only {path}", f"at most {reading.max} generators; both (5) and (6)",
                                fewer, rules=rs, rp=(path,)))
    rows.extend(row(label, breaks, r, ds) for label, breaks, r, ds in _left_out(defns, reading))
    rows.append(row("each generator at most once", f"composites of up to {reading.max} generators",
                    reading.but(once=True)))
    if typing:
        rows.extend(_retyped(defns, reading, typing, rules_for))
    return rows


def _left_out(defns, reading: Reading, typed: str = ""):
    """(label, breaks, reading, generators) for each generator left out (the stream stays
    the first generator's first input)."""
    for d in defns:
        left = [e for e in defns if e is not d]
        if left and left[0].input_types[:1] == defns[0].input_types[:1]:
            need = tuple(n for n in reading.require if n != d.name)
            r = reading.but(symmetric=reading.symmetric - {d.name}, interchangeable=reading.interchangeable - {d.name},
                            paired=reading.paired - {d.name}, require=need)
            yield f"{typed}without {d.name}", "the five generators", r, left


def _retyped(defns, reading: Reading, typing: Typing, rules_for) -> list[Row]:
    """The other typing as declared, with every interchangeable generator that has as many
    inputs as outputs declared paired instead, and with each generator left out."""
    ren = typing.renames
    names = [ren.get(d.name, d.name) for d in defns]
    missing = [n for n in names if n not in typing.program.defs]
    if missing:
        raise DiagError(f"--retype: {typing.path} has no diagram {', '.join(missing)}")
    new = [typing.program[n] for n in names]
    r = reading.but(symmetric=frozenset(ren.get(n, n) for n in reading.symmetric),
                    interchangeable=frozenset(ren.get(n, n) for n in reading.interchangeable),
                    paired=frozenset(ren.get(n, n) for n in reading.paired),
                    require=tuple(ren.get(n, n) for n in reading.require))
    files = rules_for(names)
    rules = [x for rs in files.values() for x in rs]
    typed = f"typed by {Path(typing.path).name}"

    def row(label, breaks, rd, ds):
        return Row(label, breaks, ds, rd, rules, typing.path, tuple(files))

    rows = [row(typed, "", r, new)]
    pairable = {d.name for d in new if d.name in r.interchangeable and len(d.input_types) == len(d.output_types) > 1}
    if pairable:
        r = r.but(interchangeable=r.interchangeable - pairable, paired=r.paired | pairable)
        typed += f", {', '.join(sorted(pairable))} paired"
        rows.append(row(typed, "", r, new))
    rows.extend(row(label, breaks, rd, ds) for label, breaks, rd, ds in _left_out(new, r, typed + ", "))
    return rows


def _count(row: Row, work: Work, budget: float) -> dict:
    out = {"reading": row.label, "breaks": row.breaks}
    if row.rules:
        est = estimate(row.defns, row.reading, row.rules)
        total = new = est.ordered(row.reading.max)
        if est.exact(row.reading.max):  # few enough to list: those reduced before are free
            gens, stream = generators(row.defns)
            names = tuple(g.name for g in gens)
            new = sum((names, w) not in work.done
                      for w in wirings(gens, stream, row.reading.max, row.reading.copy, row.reading.once))
        price = est.seconds(row.reading.max) * new / max(1, total)
        if price > budget:
            out.update({"ordered": total, "exact": est.exact(row.reading.max), "not computed": round(price, 1),
                        "command": _command(row)})
            return out
    t = time.perf_counter()
    space = enumerate_space(row.defns, row.reading, row.rules, work=Work(
        cache=work.cache, confirmed=work.confirmed, done=work.done, budget=work.budget))
    counts = {s.name: s.count for s in space.stages}
    out.update({"raw": counts["raw"], "not-composite": counts["not-composite"], "required": counts.get("required"),
                "reduced": counts.get("reduced") if row.rules else counts.get("required", counts["not-composite"]),
                "families": _families(space, row), "seconds": round(time.perf_counter() - t, 1)})
    return out


def _command(row: Row) -> str:
    names = ",".join(d.name for d in row.defns)
    rules = f" --rules {' '.join(row.rule_files)}" if row.rule_files else ""
    return f"stringdiag enumerate {row.file} --generators {names} {row.reading.options()}{rules}"


def _families(space, row: Row) -> dict:
    from .survivors import families_of, family

    gens = generators(row.defns)[0]
    fam = families_of(row.reading.require)
    return dict(Counter(family(m.wiring, gens, fam) for m in space.result))


__all__ = ["Typing", "readings", "ROW_SHARE"]
