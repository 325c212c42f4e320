"""Derivations: checked chains of rewrites from one architecture to another (``.deriv``).

A derivation starts from a diagram of a ``.diag`` file and applies steps — rules of
``rules/`` (equations ≡ either way, reductions ⇒ one way), specialisations of a universal
approximator or abstract family into a composite (⇒, Definition 3.1 of Khatri et al. (2024)),
unfolding and folding definitions (≡), and at most a few rewirings (structural changes,
labelled as not reductions) — and may name a target the result must be isomorphic to.
Every step is checked as it is applied; with ``verify`` every equality is also checked
numerically by the oracle (both sides on the same random float64 inputs, shared weights).
A failing step is reported by number, with its source position and the reason.
"""
from __future__ import annotations


from collections import ChainMap
from collections.abc import MutableMapping
from ..syntax.records import Mutable, field
from pathlib import Path

from ..analysis.shape import expanded_box_count  # (not combine: its other algebras are not needed here)
from ..analysis.complexity import analyse
from ..errors import DiagError, Pos, shown
from ..graph.box import Box, Instance, Kind
from ..graph.diagram import Diagram
from ..graph.decls import Definition, suggest
from ..elaborate.loader import loads_beside, prelude
from ..graph.types import Dim, DimKind, show_type
from ..rewrite.match import find_matches, select
from ..rewrite.rule import EQUATION, RULES_DIR, Library, Rule, library, load_rules
from ..resources import argument
from ..syntax import ast as A
from ..syntax import deriv_ast as D
from ..syntax.source import read_source
from . import steps
from .resolve import Resolver
from .specialise import specialise as specialise_step, uses_of
from .steps import ABSORB, EQ, RED, REWIRE  # noqa: F401  (the relations, re-exported for callers)


class Step(Mutable, frozen=False):
    number: int
    text: str           # the step as written
    relation: str       # ≡, ⇒ or ≠ (a rewiring: not a reduction)
    diagram: Diagram    # the result of the step
    pos: Pos | None = None
    verified: float | None = None  # the oracle's relative error, for checked equalities
    note: str = ""      # what the step did to weights, where it matters (ties, renamings)
    unverified: bool = False  # an equality by a user's rule that was not evaluated (no --verify)
    changes: steps.Changes = field(default_factory=steps.Changes)  # what it replaced (for its picture)


class Derivation(Mutable, frozen=False):
    path: str
    steps: list[Step] = field(default_factory=list)
    target: Diagram | None = None

    @property
    def result(self) -> Diagram:
        return self.steps[-1].diagram

    def rows(self) -> list[dict]:
        """The table as data: each step, its relation, boxes, and costs (``derive --json``)."""
        rows = []
        for s in self.steps:
            c = analyse(s.diagram)
            rows.append({"step": s.number, "text": s.text, "relation": s.relation, "verified": s.verified,
                         "diagram": s.diagram.name, "boxes": expanded_box_count(s.diagram),
                         "time": f"O({c.seq_time})", "memory": f"O({c.seq_memory})", "time_all_dims": f"O({c.time})",
                         "weights": s.note, "unverified_rule": s.unverified})
        return rows

    def text_rows(self) -> list[tuple[str, ...]]:
        """The table as text: its header, then one row per step (the CLI's table, a notebook's)."""
        rows: list[tuple[str, ...]] = [("step", "", "boxes", "time", "memory", "time (all dims)", "weights")]
        for r in self.rows():
            rel = r["relation"] + (" ✓" if r["verified"] is not None else "")
            rel += " (unverified rule)" if r["unverified_rule"] else ""
            rows.append((f"{r['step']}. {r['text']}", rel, str(r["boxes"]), r["time"], r["memory"],
                         r["time_all_dims"], r["weights"]))
        return rows

    def table(self) -> str:
        """Step, relation, boxes, and time and memory in the sequence length."""
        rows = self.text_rows()
        widths = [max(len(r[k]) for r in rows) for k in range(len(rows[0]))]
        return "\n".join("  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip() for r in rows)

    def frames(self) -> list[tuple[str, str, Diagram]]:
        """Each step's caption (the step, its relation to the one before, and what it changed
        in boxes, time and memory), that relation, and the diagram: the chain's pictures."""
        rows = self.rows()
        return [(_caption(s, rows[k - 1] if k else None, rows[k]), s.relation, s.diagram)
                for k, s in enumerate(self.steps)]

    def chain_svg(self) -> str:
        """The chain of pictures, top to bottom (``derive -o chain.svg``): each highlights the
        boxes the next step replaces and those its own step put in; untouched boxes keep
        their order from one picture to the next."""
        from ..render.draw import chain_svg  # Graphviz only to draw

        return chain_svg(self.frames(), [s.changes for s in self.steps])

    def _repr_html_(self) -> str:
        """In a notebook: the steps on a slider beside the table (``render/html.py``)."""
        from ..render.html import derivation_view

        return derivation_view(*self.drawn())

    def drawn(self) -> tuple[str, list, list, list]:
        """What a picture of the chain shows: the heading, each step's frame, the table's rows and
        each step's changes (``render/output.py``'s ``save_chain`` and ``chain_page`` take them)."""
        return self.heading(), self.frames(), self.text_rows(), [s.changes for s in self.steps]

    def heading(self) -> str:
        """``FILE: N steps, from A to B (isomorphic)``: the line ``derive`` prints first."""
        end = f" to {self.target.name} (isomorphic)" if self.target is not None else ""
        return f"{shown(self.path)}: {len(self.steps) - 1} steps, from {self.steps[0].diagram.name}{end}"

    def __repr__(self) -> str:
        return f"<Derivation {self.heading()}>"


# the most boxes a diagram of a derivation (or a normal form) may have: the gallery's largest has
# under two hundred; an `everywhere` step that doubles the diagram reaches it in 14 steps, in seconds
MAX_DERIVED = 10_000


def load_derivation(path: str | Path, verify: bool = False, log=None, max_boxes: int = MAX_DERIVED,
                    explain: bool = False) -> Derivation:
    """Run a ``.deriv`` file, checking every step (and, with ``verify``, every equality);
    ``path`` may name a shipped one (``stringdiag:gallery/linearize.deriv``). A step that
    would make a diagram of more than ``max_boxes`` boxes is refused before it is done."""
    path = argument(path)
    return Runner(read_source(path), str(path), verify, log, max_boxes, explain).run()


def all_definitions(cur: Diagram) -> frozenset[str]:
    """Every definition a step may name in ``cur``: the prelude's, the program's, the boxes'."""
    names = set(prelude().defs)
    if cur.program is not None:
        names |= set(cur.program.defs)
    for b in cur.boxes():
        if cur.record(b).kind is Kind.DIAGRAM:
            names.add(cur.record(b).op)
    return frozenset(names)


def instances(*ds: Diagram) -> dict:
    """Abstract families have no meaning of their own: check equalities for a random one."""
    flats = [d.expand() for d in ds]
    return {f.record(b).op: "learn" for f in flats for b in f.boxes() if f.record(b).kind is Kind.ABSTRACT}


def unfolded_size(cur: Diagram, name: str) -> int:
    """The boxes unfolding every use of ``name`` one level makes: counted, not built."""
    return len(cur) + sum(len(cur.record(b).ref) - 1 for b in cur.boxes()
                          if cur.record(b).op == name and cur.record(b).kind is Kind.DIAGRAM
                          and cur.record(b).ref is not None and not cur.record(b).scan)


def within(n: int, limit: int, doing: str, cur: Diagram) -> None:
    """A step that would make ``n`` boxes from ``cur`` is refused past ``limit``, with the figure."""
    if n > limit:
        raise DiagError(f"{doing}: it would make about {n:,} boxes (from {len(cur):,}), over {limit:,} "
                        "(derive --max-boxes)")


class Runner:
    def __init__(self, text: str, file: str, verify: bool, log, max_boxes: int = MAX_DERIVED,
                 explain: bool = False):
        self.text, self.file, self.verify = text, file, verify
        self.max_boxes = max_boxes
        self.explain = explain  # a refusal lists every candidate of the closest match, not three
        self.log = log or (lambda s: None)
        self.names = Resolver(text, file)  # what the script's names mean (resolve.py)
        # own rules first (a ChainMap writes to its first map only: the library is read)
        self.own: dict[str, Rule] = {}
        self.rules: MutableMapping[str, Rule] = ChainMap(self.own, _library())  # type: ignore[arg-type]
        self.unchecked: set[str] = set()  # the user's equations not evaluated (without --verify)

    def err(self, msg: str, pos: Pos | None) -> DiagError:
        return DiagError(msg, pos, self.text)

    def diagram(self, ref: D.Ref) -> Diagram:
        """The diagram ``ref`` names (``resolve.py``)."""
        return self.names.diagram(ref)

    # -- the script -----------------------------------------------------------------
    def run(self) -> Derivation:
        items = D.read_deriv(self.text, self.file)
        starts = [i for i in items if isinstance(i, D.StartDecl)]
        if len(starts) != 1:
            raise self.err("a derivation has exactly one 'start FILE.diag:NAME'",
                           starts[1].pos if starts else Pos(self.file, 1, 1))
        targets = [i for i in items if isinstance(i, D.TargetDecl)]
        if len(targets) > 1:  # (taking one of them would leave the other claim unchecked)
            raise self.err("a derivation has at most one 'target FILE.diag:NAME'", targets[1].pos)
        for item in items:
            if isinstance(item, D.UseDecl):
                self.use(item)
        deriv = Derivation(self.file)
        cur = self.names.start(starts[0].ref)
        deriv.steps.append(Step(0, f"start {cur.name}", "", cur, starts[0].pos))
        steps_ = [i for i in items if not isinstance(i, (D.StartDecl, D.UseDecl, D.TargetDecl))]
        for number, item in enumerate(steps_, 1):
            try:
                step = self.step(item, cur, number)
            except DiagError as e:
                raise DiagError(f"step {number} ({item.text}) fails: {e.message}", e.pos or item.pos,
                                e.source if e.pos else self.text) from None
            self.log(f"{number}. {step.text} {step.relation}")
            deriv.steps.append(step)
            cur = step.diagram
        if targets:
            deriv.target = self.reaches(cur, targets[0], len(steps_), deriv)
        return deriv

    def reaches(self, cur: Diagram, decl: D.TargetDecl, number: int, deriv: Derivation) -> Diagram:
        """The target, which the result must be isomorphic to; else where they part (``missed.py``)."""
        from .missed import TargetMissed, missed_target

        target = self.diagram(decl.ref)
        if (why := missed_target(cur, target)) is not None:
            raise TargetMissed(self.err(f"the result of step {number} is not the target '{target.name}': {why.text}",
                                        decl.pos), deriv, target, why)
        return target

    def use(self, item: D.UseDecl) -> None:
        """``use "f.rules"`` (its rules before the library's), else a ``.diag`` file (``resolve.py``)."""
        if not item.path.value.endswith(".rules"):
            self.names.use(item)
            return
        own = self.own
        for r in load_rules(self.names.rules_file(item.path.value, item.path.pos)):
            if r.name in own and own[r.name].pos != r.pos:  # (the same file used twice is the same rules)
                raise self.err(f"rule '{r.name}' is already defined by a file in use (at {own[r.name].pos}): "
                               "two of a derivation's own rules may not share a name", item.path.pos)
            self.rules[r.name] = r
            if r.kind == EQUATION:
                self.checked(r)

    def checked(self, r: Rule) -> None:
        """A user's equation, evaluated as it is loaded with ``verify`` (a false one is refused
        at its name); without, the steps that use it are labelled ``≡ (unverified rule)``."""
        if not self.verify:
            self.unchecked.add(r.name)
            return
        from ..verify.oracle import verify_rule  # torch: imported only when asked to verify

        try:
            v = verify_rule(r)
        except DiagError as e:
            raise DiagError(f"rule '{r.name}' cannot be evaluated: {e.message}", r.pos) from None
        if not v.same:
            raise DiagError(f"rule '{r.name}' is not an equation: its sides differ numerically "
                            f"(relative error {v.error:.3g} {v.where()})", r.pos)

    def step(self, item: D.Step, cur: Diagram, number: int) -> Step:
        match item:
            case D.Apply():
                res = self.apply(item, cur)
            case D.Specialise():
                res = self.specialise(item, cur)
            case D.Unfold(name):
                within(unfolded_size(cur, name.text), self.max_boxes, f"refusing to unfold '{name.text}'", cur)
                res = self.located(name, steps.unfold, cur, name.text, all_definitions(cur))
            case D.Fold(name, at):
                res = self.fold(cur, name, at)
            case D.Copy(name):
                res = self.located(name, steps.copy, cur, name.text)
            case D.Rewire(ref):
                res = self.located(ref, rewired, self.diagram(ref), cur)
            case D.Prune():
                res = self.located(item, steps.prune, cur)
            case D.Resize(name, to):
                kinds = {n.text: self.names.dim_kind(cur, n.text) for n in (name, to)}
                res = self.located(name, steps.identify, cur, name.text, to.text, kinds)
            case D.Absorb(wire, into, learner):
                from .absorb import absorb  # (here: few derivations absorb or plug)

                res = self.located(wire, absorb, cur, wire.text, into.text, self.names.learner(learner))
            case D.Plug(input_, into):
                from .plug import plug

                res = self.located(input_, plug, cur, input_.text, into.text,
                                   lambda n: self.names.dim_kind(cur, n) is DimKind.SEQ)
            case _:  # pragma: no cover - the grammar has no other steps
                raise AssertionError(item)
        out = res.diagram
        out.name = cur.name
        within(len(out), self.max_boxes, "refused", cur)  # a step whose growth is not counted before (a plug)
        step = Step(number, item.text, res.relation, out, item.pos, note=res.note,
                    changes=steps.changes(cur, out, res.kept))
        if self.verify and res.relation == EQ:
            from ..verify.oracle import Reuse, compare  # torch: imported only when asked to verify

            self.reuse = getattr(self, "reuse", None) or Reuse()  # this step's result: the next step's start
            v = compare(cur, out, instantiate=instances(cur, out), correspond=res.correspond, reuse=self.reuse)
            if not v.same:
                raise self.err(f"the two sides differ numerically (relative error {v.error:.3g} {v.where()}): "
                               "this step is not an equality", item.pos)
            step.verified = v.error
        elif res.relation == EQ and isinstance(item, D.Apply) and item.rule.text in self.unchecked:
            step.unverified = True  # a user's equation, not evaluated: --verify would
        return step

    def apply(self, item: D.Apply, cur: Diagram) -> steps.Outcome:
        name = item.rule
        rule = self.rules.get(name.text)
        if rule is None:
            raise self.err(f"no rule named '{name.text}'{suggest(name.text, list(self.rules))}", name.pos)
        rule.sides(item.reversed)  # a reduction cannot be used backwards: say so
        if not item.everywhere:
            return steps.apply_rule(cur, rule, self.pick(cur, rule, item.reversed, item.at, name))
        res, n = steps.apply_everywhere(cur, rule, item.reversed, self.max_boxes)
        if n == 0:
            raise self.err(f"rule '{rule.name}' does not match anywhere (without tying weights)", name.pos)
        return res

    def located(self, name: A.Name | D.Ref | D.Prune, fn, *args) -> steps.Outcome:
        """A step function's refusal, positioned at the name it was given."""
        try:
            return fn(*args)
        except DiagError as e:
            if e.pos is not None:
                raise
            raise self.err(e.message, name.pos) from None

    def pick(self, cur: Diagram, rule: Rule, reverse: bool, at: D.Where | None, name: A.Name):
        """The match the step names; one that ties weights is a reduction (the step says so)."""
        matches = find_matches(cur, rule, reverse, ties=True)
        if not matches:
            raise self.err(no_match(cur, rule, reverse, self.explain), name.pos)
        if at is not None:
            return select(matches, at.text.strip())
        if len(matches) > 1:
            shown = "; ".join(m.where for m in matches[:6])
            raise self.err(f"rule '{rule.name}' matches {len(matches)} places ({shown}); say which with "
                           "'at WIRE, ...' or apply it 'everywhere'", name.pos)
        return matches[0]

    def specialise(self, item: D.Specialise, cur: Diagram) -> steps.Outcome:
        name = item.box.text
        use = next(uses_of(cur, name), None)  # inside definition boxes, cells and stacks too
        if use is None:
            raise self.err(f"no learnable or abstract box '{name}' in the diagram to specialise", item.box.pos)
        decl = use.ref
        if isinstance(item.value, D.Body):
            defn = self.inline(name, decl, item.params, item.value)
        else:
            if item.params is not None:
                raise self.err("input names belong to an inline body: specialise f(x, y) := { ... }",
                               item.params.pos)
            defn = self.diagram(item.value)
        if defn.input_types != list(decl.ins) or defn.output_types != list(decl.outs):
            raise self.err(f"'{defn.name}' has type {_sig(defn.input_types, defn.output_types)} but '{name}' "
                           f"has type {_sig(decl.ins, decl.outs)}", item.value.pos)
        if item.at is None:
            return specialise_step(cur, name, defn, all_definitions(cur))
        where = item.at.text
        try:
            return specialise_step(cur, name, defn, all_definitions(cur), where)
        except DiagError as e:
            if e.pos is not None:
                raise
            # at the wire's name (the WHERE token starts with the blank after 'at')
            lead = len(where) - len(where.lstrip())
            pos = item.at.pos
            raise self.err(e.message, Pos(self.file, pos.line, pos.col + lead)) from None

    def inline(self, name: str, decl, params: D.Params | None, body: D.Body) -> Diagram:
        """``f(x, y) := { body }``: a diagram of f's type, written in place; its text keeps its
        line and column, so errors in it point into the .deriv file."""
        if params is None:
            raise self.err(f"name the inputs of '{name}': specialise {name}(x, ...) := {{ ... }}", body.pos)
        names = [n.text for n in params.names]
        if len(names) != len(decl.ins):
            raise self.err(f"'{name}' has {len(decl.ins)} input(s); {len(names)} name(s) given", params.pos)
        header = ", ".join(f"{n}: {show_type(t)}" for n, t in zip(names, decl.ins))
        outs = ", ".join(show_type(t) for t in decl.outs)
        generics = f"<{', '.join(decl.generics)}>" if decl.generics else ""  # N<n>: the body may use n
        imports = self.names.imports()  # the files the body sees
        line, col = body.pos.line, body.pos.col
        # the header on the line before the body, the imports after it (order does not matter
        # in a .diag file), so that the body keeps its line and column in the .deriv
        src = ("\n" * max(line - 2, 0) + f"diagram __{name}{generics}({header}) -> {outs}\n" + " " * (col - 1) + body.text
               + "\n" + imports + "\n")
        try:
            prog = loads_beside(src, self.file, self.names.shareable())  # not read again
        except DiagError as e:
            pos = e.pos
            ours = pos is not None and pos.file == self.file
            if pos is not None and ours and pos.line < line:
                pos = body.pos  # the generated header: at the body
            raise DiagError(e.message, pos, self.text if ours else e.source) from None
        return prog[f"__{name}"]

    def fold(self, cur: Diagram, name: A.Name, at: D.Where | None) -> steps.Outcome:
        body = (defn := self.names.definition(cur, name)).diagram()
        call = _call_of(defn, body)
        # a generic definition (softmax<n>) folds as a rule over its dimension parameters
        rule = Rule(f"fold {name.text}", EQUATION, body, call, tuple(body.generics))
        return self.located(name, steps.fold, cur, body, call, [self.pick(cur, rule, False, at, name)])


_LIBRARY: tuple[tuple, Library] | None = None


def _library() -> Library:
    """The standard library of rules, loaded once per process while its files stay as they
    are (a derivation per rule's proof would otherwise read them all again)."""
    global _LIBRARY
    stamp = tuple((p.name, p.stat().st_mtime_ns, p.stat().st_size) for p in sorted(RULES_DIR.glob("*.rules")))
    if _LIBRARY is None or _LIBRARY[0] != stamp:
        _LIBRARY = (stamp, library())
    return _LIBRARY[1]


standard_library = _library  # for the other commands that read the library (normalize)


def _caption(step: Step, before: dict | None, row: dict) -> str:
    """``3. apply assoc  ≡  boxes 12 → 10 · time O(s^2) → O(s) · memory O(s)``: a change as
    ``old → new``, a cost the step leaves alone once."""
    head = f"{step.number}. {step.text}"
    if before is None:
        return f"{head}  ·  boxes {row['boxes']} · time {row['time']} · memory {row['memory']}"
    costs = [f"{what} {before[key]}" + (f" → {row[key]}" if row[key] != before[key] else "")
             for what, key in (("boxes", "boxes"), ("time", "time"), ("memory", "memory"))]
    return f"{head}  {step.relation}  " + " · ".join(costs)


def _sig(ins, outs) -> str:
    return ", ".join(show_type(t) for t in ins) + " -> " + ", ".join(show_type(t) for t in outs)


def _call_of(defn: Definition, body: Diagram) -> Diagram:
    """A diagram that is one use of the definition, over the definition's own boundary."""
    d = Diagram(name=f"{defn.name} (folded)", program=body.program, source=body.source,
                input_names=list(body.input_names), generics=tuple(body.generics))
    ins = [d.add_wire(t, name=n) for t, n in zip(body.input_types, body.input_names)]
    d.inputs.extend(ins)
    box = Box(Kind.DIAGRAM, defn.name, generics=tuple((g, Dim.var(g)) for g in body.generics), ref=body,
              weights=Instance(f"{defn.name}#1"))
    _, outs = d.emit(box, [(w, tuple(range(len(d.wire_type(w))))) for w in ins], body.output_types)
    d.outputs.extend(outs)
    return d


def rewired(out: Diagram, cur: Diagram) -> steps.Outcome:
    """``rewire := FILE:NAME``: another diagram of the same boundary (no box is kept)."""
    if out.input_types != cur.input_types or out.output_types != cur.output_types:
        raise DiagError(f"a rewiring keeps the boundary: {out.signature()} is not of the type of {cur.signature()}")
    return steps.Outcome(out.copy(), REWIRE, kept={})


def no_match(cur: Diagram, rule: Rule, reverse: bool, every: bool = False) -> str:
    """A rule that does not match, and why: its closest partial match (``every``: each candidate)."""
    from ..rewrite.closest import explain

    why = explain(cur, rule, reverse).summary(rule.sides(reverse)[0], cur, explain=every)
    return f"rule '{rule.name}'{' (reversed)' if reverse else ''} does not match here\n{why}"
