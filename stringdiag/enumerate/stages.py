"""The space of mechanisms, stage by stage (Khatri et al. (2024), Sec. 5), under a :class:`Reading`.

- ``raw``: every member (``space.py`` finds the ordered wirings; ``symmetry.py`` makes one
  member of the wirings the declared symmetries relate, and with ``Work.confirm`` confirms the
  classes with an independent isomorphism test).
- ``not-composite``: members that are a sequential composite ``f ; g`` of two smaller members
  removed (``space.is_composite``; permuting ports does not change the answer).
- ``required``: members without any of the required generators removed (when the reading
  requires some).
- ``reduced``: members related by local applications of the given reductions are one
  class (the symmetric, transitive closure of "one rule applied at one match of one member
  gives another member"); each class keeps its member with the fewest generators (then the
  least canonical form).

The rules see ordered ports, so the closure is taken over every ordered wiring of the
surviving members, joined with the symmetry classes: a rule written for ``ConcatFF(x, v)``
then also relates ``ConcatFF(v, x)`` when ConcatFF is declared symmetric. A rule whose sides
are plain wirings of the generators is applied to the wiring itself (``rewiring.py``); any
other to the built diagram by the engine, its result read back as a wiring
(``build.wiring_of``). Canonical numbering is exact, so no isomorphism test is needed to find
a result among the members.
"""
from __future__ import annotations

import time
from collections import Counter
from dataclasses import dataclass, field

from ..errors import DiagError
from ..graph.diagram import Diagram
from ..rewrite.dpo import rewrite
from ..rewrite.match import Index
from ..rewrite.pattern import Pattern
from ..rewrite.search import Matcher
from . import rewiring, symmetry
from .build import build, wiring_of
from .patterns import Shape, may_match, shape
from .reading import Copy, Reading
from .space import Generator, Wiring, generators, is_composite, wirings


@dataclass
class Member:
    name: str
    wiring: Wiring
    diagram: Diagram | None
    generators: int


@dataclass
class Stage:
    name: str
    members: list[Member]

    @property
    def count(self) -> int:
        return len(self.members)


@dataclass
class Space:
    stages: list[Stage] = field(default_factory=list)
    classes: dict[str, list[str]] = field(default_factory=dict)  # survivor -> members it stands for
    ordered: int = 0  # how many ordered wirings the members are made of

    @property
    def result(self) -> list[Member]:
        return self.stages[-1].members


class OutOfTime(DiagError):
    """The work ran past the time budget."""


@dataclass
class Work:
    """How the work is watched: ``progress`` wraps an iterable (a progress bar), ``deadline``
    is a ``time.monotonic()`` value past which the work stops, ``cache`` keeps the rewrites of
    each ordered wiring by each rule (readings that share generators share it)."""

    progress: object = None
    deadline: float | None = None
    budget: float | None = None
    cache: dict = field(default_factory=dict)
    confirmed: dict = field(default_factory=dict)  # symmetry declarations -> {wiring: form} already confirmed
    stage: str = "starting"  # the stage last checked
    confirm: bool = False  # confirm the symmetry classes by VF2 too (``symmetry.confirm``; slow)
    done: set = field(default_factory=set)  # (generators, wiring) already reduced: their rewrites are in ``cache``

    def check(self, doing: str, k: int | None = None, of: int | None = None) -> None:
        """Stop with :class:`OutOfTime` once past the deadline, saying in which stage (kept in
        ``stage``, so whoever stops the work from outside can say it too)."""
        self.stage = doing
        if self.deadline is not None and time.monotonic() > self.deadline:
            where = f" after {k} of {of} wirings" if k is not None else ""
            raise OutOfTime(f"ran past --time-budget {self.budget:g} s {doing}{where}; "
                            "use a smaller --max or a larger --time-budget")

    def watched(self, items, doing: str, every: int = 16):
        """``items``, the deadline checked every ``every`` of them: every stage honours it."""
        for k, x in enumerate(items):
            if k % every == 0:
                self.check(doing)
            yield x


def enumerate_space(defns: list[Diagram], reading: Reading | int, rules=(), copy_outputs: bool = False,
                    progress=None, work: Work | None = None) -> Space:
    """The stages for generators ``defns`` (their first input's type is the stream type).
    ``reading`` may be a bare bound (ports ordered, ``copy_outputs``: every value copied)."""
    if isinstance(reading, int):
        reading = Reading(reading, Copy.ALL if copy_outputs else Copy.INPUT)
    work = work or Work(progress=progress)
    gens, stream = generators(defns)
    symmetry.check(gens, reading)
    ordered = list(work.watched(wirings(gens, stream, reading.max, reading.copy, reading.once), "listing the wirings"))
    form = symmetry.classes(work.watched(ordered, "grouping the wirings by symmetry"), gens, reading)
    work.check("grouping the wirings by symmetry")
    if work.confirm:
        _confirm(form, gens, reading, work)
        work.check("confirming the symmetry classes")
    forms = list(dict.fromkeys(form[w] for w in ordered))
    space = Space(ordered=len(ordered))
    space.stages.append(Stage("raw", [Member(f"R{k}", f, None, f.size) for k, f in enumerate(forms)]))
    kept = [m for m in work.watched(space.stages[-1].members, "dropping the composites")
            if not is_composite(m.wiring, gens, stream)]
    space.stages.append(Stage("not-composite", kept))
    if reading.require:
        need = {k for k, g in enumerate(gens) if g.name in reading.require}
        kept = [m for m in kept if any(g in need for g, _ in m.wiring.occurrences)]
        space.stages.append(Stage("required", kept))
    if rules:
        forms_kept = {m.wiring for m in kept}
        survivors, classes = reduce(kept, [w for w in ordered if form[w] in forms_kept],
                                    form, gens, list(rules), reading.max, work)
        space.classes = classes
        space.stages.append(Stage("reduced", survivors))
    for m in work.watched(space.result, "building the members", every=1):
        m.diagram = build(m.wiring, gens, m.name)
        if wiring_of(m.diagram, gens) != m.wiring:
            raise DiagError(f"internal check failed: member {m.name} does not read back as its wiring")
    return space


def _confirm(form: dict, gens: list[Generator], reading: Reading, work: Work) -> None:
    """``symmetry.confirm``, once per set of declarations: the classes of a subset of wirings
    already confirmed (a smaller bound, a requirement dropped) are confirmed with them."""
    key = (tuple(g.name for g in gens), reading.copy, reading.symmetric, reading.interchangeable, reading.paired)
    known = work.confirmed.get(key, {})
    if any(known.get(w) != f for w, f in form.items()):
        symmetry.confirm(form, gens, reading)
        work.confirmed[key] = {**known, **form}


def reduce(members: list[Member], ordered: list[Wiring], form: dict[Wiring, Wiring], gens: list[Generator],
           rules: list, bound: int, work: Work) -> tuple[list[Member], dict[str, list[str]]]:
    """Classes of members related by one application of a rule (either way) to any of their
    ordered wirings, closed transitively; the smallest member of each class survives."""
    by_form = {m.wiring: m for m in members}
    parent = {m.name: m.name for m in members}

    def find(x: str) -> str:
        while parent[x] != x:
            parent[x] = parent[parent[x]]
            x = parent[x]
        return x

    names = tuple(g.name for g in gens)
    rules = _distinct([Oriented.of(r) for r in rules], gens, names, work.cache)
    steps = work.progress(ordered) if work.progress else ordered
    for k, w in enumerate(steps):
        work.check("reducing by the rules", k, len(ordered))
        here = by_form[form[w]]
        found = neighbours(w, gens, names, rules, bound, work.cache)
        work.done.add((names, w))
        for other in found:
            there = by_form.get(form.get(other))
            a, b = find(here.name), find(there.name) if there else None
            if b is not None and a != b:
                parent[a] = b
    classes: dict[str, list[Member]] = {}
    for m in members:
        classes.setdefault(find(m.name), []).append(m)
    order = {m.name: k for k, m in enumerate(members)}
    survivors, shown = [], {}
    for group in classes.values():
        best = min(group, key=lambda m: (m.generators, symmetry.sort_key(m.wiring)))
        survivors.append(best)
        shown[best.name] = [m.name for m in group if m is not best]
    survivors.sort(key=lambda m: order[m.name])
    return survivors, shown


def _ops(d: Diagram) -> Counter:
    return Counter(d.record(b).op for b in d.boxes())


@dataclass(frozen=True)
class Oriented:
    """A rule applied from its larger side: ``pattern`` is matched, ``replacement`` put in.

    The classes are the symmetric closure of "one rule applied at one match", and a rewrite
    at a match is undone by the other side at the image, so one direction of each rule finds
    every related pair. The larger side is the rarer pattern and gives the smaller result,
    always within the bound; the other direction would match nearly every wiring (a single
    generator) and build results past the bound only to drop them."""

    rule: object
    reverse: bool
    pattern: Diagram
    replacement: Diagram
    needs: Counter
    brings: frozenset  # the generators the replacement uses
    shape: Shape | None  # the pattern over wirings, where it is one (``patterns.py``)
    compiled: object  # the engine's prepared pattern

    @staticmethod
    def of(rule) -> "Oriented":
        reverse = len(rule.rhs) > len(rule.lhs)
        pattern, replacement = (rule.rhs, rule.lhs) if reverse else (rule.lhs, rule.rhs)
        return Oriented(rule, reverse, pattern, replacement, _ops(pattern), frozenset(_ops(replacement)), shape(pattern),
                        Pattern(pattern))


def neighbours(w: Wiring, gens: list[Generator], names: tuple, rules: list, bound: int, cache: dict) -> list[Wiring]:
    """The wirings one rewrite away from ``w`` (either way): each rule applied from its
    larger side (:class:`Oriented`) at each of its matches, on the wiring
    (``rewiring.py``) or in the built diagram, read back;
    results larger than ``bound`` or not members are dropped. Kept in ``cache`` by the
    member's generators by name, whatever the bound and whatever else is enumerated, so
    readings share it (the generator set is in the key only where the replacement brings in
    a generator the reading lacks)."""
    out: list[Wiring] = []
    d = ix = site = None
    have = Counter(gens[g].name for g, _ in w.occurrences)
    index = {n: k for k, n in enumerate(names)}
    named = (tuple((names[g], srcs) for g, srcs in w.occurrences), w.root)
    for rule in rules:
        o = rule if isinstance(rule, Oriented) else Oriented.of(rule)
        key = (id(o.rule), named) + (() if o.brings <= have.keys() else (names,))
        if key not in cache:
            found: list = []
            if o.needs and all(have[op] >= n for op, n in o.needs.items()):
                fast = _rewire(o, gens, names, cache)
                if fast is not None:
                    site = site or rewiring.WiringSite.of(w)
                    found = list(rewiring.rewrites(fast, w, site))
                elif o.shape is None or may_match(o.shape, w, gens):
                    if d is None:
                        d = build(w, gens, "w")
                        ix = Index(d)
                    found = _results(d, o, ix, gens)
            cache[key] = [(tuple((names[g], srcs) for g, srcs in v.occurrences), v.root) for v in found]
        for occ, root in cache[key]:
            if len(occ) <= bound and all(n in index for n, _ in occ):
                out.append(Wiring(tuple((index[n], srcs) for n, srcs in occ), root))
    return out


def _distinct(rules: list[Oriented], gens: list[Generator], names: tuple, cache: dict) -> list[Oriented]:
    """The rules less those that are another's over wirings (a rule and its converse are
    applied from the same larger side: one finds what the other does)."""
    out, seen = [], set()
    for o in rules:
        fast = _rewire(o, gens, names, cache)
        if fast is None or fast not in seen:
            out.append(o)
            seen.add(fast)
    return out


def _rewire(o: Oriented, gens: list[Generator], names: tuple, cache: dict) -> rewiring.WiringRule | None:
    """The rule over wirings of these generators (``rewiring.py``), compiled once; ``None``
    where a side is not a plain wiring of them (then the engine matches built diagrams)."""
    key = ("rewire", id(o.rule), names)
    if key not in cache or cache[key][0] is not o.rule:  # the rule kept with it: an id is reused once freed
        cache[key] = (o.rule, rewiring.compile_rule(o.pattern, o.replacement, gens))
    return cache[key][1]


def _results(d: Diagram, o: Oriented, ix, gens: list[Generator]) -> list[Wiring]:
    out = []
    for m in Matcher(o.compiled, ix).run(None):
        if m.ties:
            continue
        try:
            res = rewrite(d, m, o.replacement)
        except DiagError:
            continue
        v = wiring_of(res, gens)
        if v is not None:
            out.append(v)
    return out


__all__ = ["Member", "Stage", "Space", "Work", "OutOfTime", "enumerate_space", "reduce", "neighbours"]
