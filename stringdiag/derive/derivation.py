"""Derivations: checked chains of rewrites from one architecture to another (``.deriv``).

A derivation starts from a diagram of a ``.diag`` file and applies steps — rules of
``rules/`` (equations ≡ either way, reductions ⇒ one way), specialisations of a universal
approximator or abstract family into a composite (⇒, Definition 3.1 of seed 003),
unfolding and folding definitions (≡), and at most a few rewirings (structural changes,
labelled as not reductions) — and may name a target the result must be isomorphic to.
Every step is checked as it is applied; with ``verify`` every equality is also checked
numerically by the oracle (both sides on the same random float64 inputs, shared weights).
A failing step is reported by number, with its source position and the reason.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from lark import Token, Tree

from ..analysis.combine import expanded_box_count
from ..analysis.complexity import analyse
from ..errors import DiagError, Pos
from ..graph.diagram import Diagram
from ..graph.expand import expand
from ..graph.program import Definition, Program, load, loads, prelude, read_source, suggest
from ..graph.types import show_type
from ..rewrite.match import find_matches, select
from ..verify.oracle import equal
from ..rewrite.rule import EQUATION, RULES_DIR, Rule, library, load_rules
from ..syntax.parser import parse, pos_of
from . import steps
from .steps import EQ, RED, REWIRE  # noqa: F401  (the relations, re-exported for callers)


@dataclass
class Step:
    number: int
    text: str           # the step as written
    relation: str       # ≡, ⇒ or ≠ (a rewiring: not a reduction)
    diagram: Diagram    # the result of the step
    pos: Pos | None = None
    verified: float | None = None  # the oracle's relative error, for checked equalities
    note: str = ""      # what the step did to weights, where it matters (ties, renamings)


@dataclass
class Derivation:
    path: str
    steps: list[Step] = field(default_factory=list)
    target: Diagram | None = None

    @property
    def result(self) -> Diagram:
        return self.steps[-1].diagram

    def table(self) -> str:
        """Step, relation, boxes, and time and memory in the sequence length."""
        rows = [("step", "", "boxes", "time", "memory", "time (all dims)", "weights")]
        for s in self.steps:
            c = analyse(s.diagram)
            rel = s.relation + (" ✓" if s.verified is not None else "")
            rows.append((f"{s.number}. {s.text}", rel, str(expanded_box_count(s.diagram)), f"O({c.seq_time})",
                         f"O({c.seq_memory})", f"O({c.time})", s.note))
        widths = [max(len(r[k]) for r in rows) for k in range(len(rows[0]))]
        return "\n".join("  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip() for r in rows)


def load_derivation(path: str | Path, verify: bool = False, log=None) -> Derivation:
    """Run a ``.deriv`` file, checking every step (and, with ``verify``, every equality)."""
    return Runner(read_source(path), str(path), verify, log).run()


class Runner:
    def __init__(self, text: str, file: str, verify: bool, log):
        self.text, self.file, self.verify = text, file, verify
        self.log = log or (lambda s: None)
        self.base = Path(file).parent
        self.programs: dict[str, Program] = {}
        self.extra: list[Program] = []
        self.rules: dict[str, Rule] = dict(_library())
        self.start_prog: Program | None = None

    def err(self, msg: str, where) -> DiagError:
        pos = where if isinstance(where, Pos) or where is None else pos_of(where, self.file)
        return DiagError(msg, pos, self.text)

    # -- references -----------------------------------------------------------------
    def program(self, rel: str, where) -> Program:
        target = (self.base / rel).resolve()
        if str(target) not in self.programs:
            if not target.is_file():
                raise self.err(f"no such file {rel} (looked for {target})", where)
            self.programs[str(target)] = load(target)
        return self.programs[str(target)]

    def diagram(self, ref: Tree) -> Diagram:
        tok = ref.children[0]
        text = str(tok)
        if tok.type == "FILEREF":
            rel, name = text.rsplit(":", 1)
            prog = self.program(rel, tok)
        else:
            name = text
            prog = next((p for p in [self.start_prog, *self.extra] if p is not None and name in p.defs), None)
            if prog is None:
                raise self.err(f"no diagram named '{name}' in the start file or the files this derivation uses; "
                               "write FILE.diag:NAME", tok)
        try:
            return prog[name]
        except KeyError as e:
            raise self.err(e.args[0], tok) from None

    # -- the script -----------------------------------------------------------------
    def run(self) -> Derivation:
        tree = parse(self.text, self.file, grammar="deriv.lark")
        items = tree.children
        starts = [i for i in items if i.data == "start_decl"]
        if len(starts) != 1:
            raise self.err("a derivation has exactly one 'start FILE.diag:NAME'",
                           starts[1] if starts else Pos(self.file, 1, 1))
        for item in items:
            if item.data == "use_decl":
                self.use(item)
        ref = starts[0].children[0]
        if ref.children[0].type == "FILEREF":
            self.start_prog = self.program(str(ref.children[0]).rsplit(":", 1)[0], ref)
        deriv = Derivation(self.file)
        cur = self.diagram(ref)
        deriv.steps.append(Step(0, f"start {cur.name}", "", cur, pos_of(starts[0], self.file)))
        number = 0
        for item in items:
            if item.data in ("start_decl", "use_decl", "target_decl"):
                continue
            number += 1
            try:
                step = self.step(item, cur, number)
            except DiagError as e:
                where = e.pos or pos_of(item, self.file)
                raise DiagError(f"step {number} ({self.source(item)}) fails: {e.message}", where,
                                e.source if e.pos else self.text) from None
            self.log(f"{number}. {step.text} {step.relation}")
            deriv.steps.append(step)
            cur = step.diagram
        targets = [i for i in items if i.data == "target_decl"]
        if targets:
            target = self.diagram(targets[-1].children[0])
            deriv.target = target
            if not expand(cur).isomorphic(expand(target)):
                raise self.err(f"the result of step {number} is not the target '{target.name}': "
                               f"{len(expand(cur))} boxes ({cur.signature()}) against {len(expand(target))} "
                               f"({target.signature()}), and they are not isomorphic", targets[-1])
        return deriv

    def source(self, item: Tree) -> str:
        m = item.meta
        return " ".join(self.text[m.start_pos:m.end_pos].split())

    def use(self, item: Tree) -> None:
        tok = item.children[0]
        rel = str(tok)[1:-1]
        if rel.endswith(".rules"):
            target = (self.base / rel).resolve()
            if not target.is_file():
                raise self.err(f"no such file {rel}", tok)
            for r in load_rules(target):
                self.rules[r.name] = r
        else:
            self.extra.append(self.program(rel, tok))

    def step(self, item: Tree, cur: Diagram, number: int) -> Step:
        kind = item.data
        text = self.source(item)
        pos = pos_of(item, self.file)
        if kind == "apply":
            name_tok, back, everywhere, at = item.children
            rule = self.rules.get(str(name_tok))
            if rule is None:
                raise self.err(f"no rule named '{name_tok}'{suggest(str(name_tok), list(self.rules))}", name_tok)
            reverse = back is not None
            rule.sides(reverse)  # a reduction cannot be used backwards: say so
            if everywhere is not None:
                res, n = steps.apply_everywhere(cur, rule, reverse)
                if n == 0:
                    raise self.err(f"rule '{rule.name}' does not match anywhere (without tying weights)", name_tok)
            else:
                res = steps.apply_rule(cur, rule, self.pick(cur, rule, reverse, at, name_tok))
        elif kind == "specialise":
            res = self.specialise(item, cur)
        elif kind == "unfold":
            (name_tok,) = item.children
            res = self.located(name_tok, steps.unfold, cur, str(name_tok), self.all_definitions(cur))
        elif kind == "fold":
            name_tok, at = item.children
            res = self.fold(cur, name_tok, at)
        elif kind == "copy":
            (name_tok,) = item.children
            res = self.located(name_tok, steps.copy, cur, str(name_tok))
        elif kind == "rewire":
            ref, _why = item.children
            out = self.diagram(ref)
            if out.input_types != cur.input_types or out.output_types != cur.output_types:
                raise self.err(f"a rewiring keeps the boundary: {out.signature()} is not of the type of "
                               f"{cur.signature()}", ref)
            res = steps.Outcome(out.copy(), REWIRE)
        else:  # pragma: no cover - the grammar has no other steps
            raise AssertionError(kind)
        out = res.diagram
        out.name = cur.name
        step = Step(number, text, res.relation, out, pos, note=res.note)
        if self.verify and res.relation == EQ:
            ok, error = equal(cur, out, instantiate=self.instances(cur, out), correspond=res.correspond)
            if not ok:
                raise self.err(f"the two sides differ numerically (relative error {error:.3g}): "
                               "this step is not an equality", pos)
            step.verified = error
        return step

    def located(self, tok: Token, fn, *args) -> steps.Outcome:
        """A step function's refusal, positioned at the name it was given."""
        try:
            return fn(*args)
        except DiagError as e:
            if e.pos is not None:
                raise
            raise self.err(e.message, tok) from None

    def pick(self, cur: Diagram, rule: Rule, reverse: bool, at: Tree | None, name_tok: Token):
        """The match the step names; one that ties weights is a reduction (the step says so)."""
        matches = find_matches(cur, rule, reverse, ties=True)
        if not matches:
            raise self.err(f"rule '{rule.name}'{' (reversed)' if reverse else ''} does not match here", name_tok)
        if at is not None:
            return select(matches, str(at.children[0]).strip())
        if len(matches) > 1:
            shown = "; ".join(m.where for m in matches[:6])
            raise self.err(f"rule '{rule.name}' matches {len(matches)} places ({shown}); say which with "
                           "'at WIRE, ...' or apply it 'everywhere'", name_tok)
        return matches[0]

    @staticmethod
    def all_definitions(cur: Diagram) -> frozenset[str]:
        names = set(prelude().defs)
        if cur.program is not None:
            names |= set(cur.program.defs)
        for b in cur.boxes():
            if cur.box(b)["box"] == "diagram":
                names.add(cur.box(b)["op"])
        return frozenset(names)

    @staticmethod
    def instances(*ds: Diagram) -> dict:
        """Abstract families have no meaning of their own: check equalities for a random one."""
        flats = [d.expand() for d in ds]
        return {f.box(b)["op"]: "learn" for f in flats for b in f.boxes() if f.box(b)["box"] == "abstract"}

    def specialise(self, item: Tree, cur: Diagram) -> steps.Outcome:
        name_tok, params, value, at = item.children
        name = str(name_tok)
        uses = [b for b in cur.boxes() if cur.box(b)["op"] == name and cur.box(b)["box"] in ("learn", "abstract")]
        if not uses:
            raise self.err(f"no learnable or abstract box '{name}' in the diagram to specialise", name_tok)
        decl = cur.box(uses[0])["ref"]
        if isinstance(value, Token) and value.type == "BODY":
            defn = self.inline(name, decl, params, value)
        else:
            if params is not None:
                raise self.err("input names belong to an inline body: specialise f(x, y) := { ... }", params)
            defn = self.diagram(value)
        if defn.input_types != list(decl.ins) or defn.output_types != list(decl.outs):
            raise self.err(f"'{defn.name}' has type {_sig(defn.input_types, defn.output_types)} but '{name}' "
                           f"has type {_sig(decl.ins, decl.outs)}", value)
        if at is None:
            return steps.specialise(cur, name, defn, self.all_definitions(cur))
        tok = at.children[0]
        where = str(tok)
        try:
            return steps.specialise(cur, name, defn, self.all_definitions(cur), where)
        except DiagError as e:
            if e.pos is not None:
                raise
            # at the wire's name (the WHERE token starts with the blank after 'at')
            lead = len(where) - len(where.lstrip())
            raise self.err(e.message, Pos(self.file, tok.line, tok.column + lead)) from None

    def inline(self, name: str, decl, params: Tree | None, body: Token) -> Diagram:
        """``f(x, y) := { body }``: a diagram of f's type, written in place; its text keeps its
        line and column, so errors in it point into the .deriv file."""
        if params is None:
            raise self.err(f"name the inputs of '{name}': specialise {name}(x, ...) := {{ ... }}", body)
        names = [str(t) for t in params.children if t is not None]
        if len(names) != len(decl.ins):
            raise self.err(f"'{name}' has {len(decl.ins)} input(s); {len(names)} name(s) given", params)
        header = ", ".join(f"{n}: {show_type(t)}" for n, t in zip(names, decl.ins))
        outs = ", ".join(show_type(t) for t in decl.outs)
        imports = "\n".join(f'import "{p}"' for p in self.programs)
        line, col = body.line, body.column
        # the header on the line before the body, the imports after it (order does not matter
        # in a .diag file), so that the body keeps its line and column in the .deriv
        src = ("\n" * max(line - 2, 0) + f"diagram __{name}({header}) -> {outs}\n" + " " * (col - 1) + str(body)
               + "\n" + imports + "\n")
        try:
            prog = loads(src, self.file)
        except DiagError as e:
            raise DiagError(e.message, e.pos, self.text if e.pos and e.pos.file == self.file else e.source) from None
        return prog[f"__{name}"]

    def fold(self, cur: Diagram, name_tok: Token, at: Tree | None) -> steps.Outcome:
        name = str(name_tok)
        defn = None
        for p in [cur.program, self.start_prog, *self.extra, prelude()]:
            if p is not None and p.lookup_def(name) is not None:
                defn = p.lookup_def(name)
                break
        if defn is None:
            raise self.err(f"no definition named '{name}' to fold", name_tok)
        body = defn.diagram()
        if body.generics:
            raise self.err(f"'{name}' has dimension parameters; folding it is not supported yet", name_tok)
        call = _call_of(defn, body)
        rule = Rule(f"fold {name}", EQUATION, body, call, ())
        return self.located(name_tok, steps.fold, cur, body, call, [self.pick(cur, rule, False, at, name_tok)])


_LIBRARY: tuple[tuple, dict[str, Rule]] | None = None


def _library() -> dict[str, Rule]:
    """The standard library of rules, loaded once per process while its files stay as they
    are (a derivation per rule's proof would otherwise read them all again)."""
    global _LIBRARY
    stamp = tuple((p.name, p.stat().st_mtime_ns, p.stat().st_size) for p in sorted(RULES_DIR.glob("*.rules")))
    if _LIBRARY is None or _LIBRARY[0] != stamp:
        _LIBRARY = (stamp, library())
    return _LIBRARY[1]


def _sig(ins, outs) -> str:
    return ", ".join(show_type(t) for t in ins) + " -> " + ", ".join(show_type(t) for t in outs)


def _call_of(defn: Definition, body: Diagram) -> Diagram:
    """A diagram that is one use of the definition, over the definition's own boundary."""
    d = Diagram(name=f"{defn.name} (folded)", program=body.program, source=body.source,
                input_names=list(body.input_names))
    ins = [d.add_wire(t, name=n) for t, n in zip(body.input_types, body.input_names)]
    d.inputs.extend(ins)
    _, outs = d.add_box("diagram", defn.name, [(w, tuple(range(len(d.wire_type(w))))) for w in ins],
                        body.output_types, ref=body, clusters=(), instance=f"{defn.name}#1")
    d.outputs.extend(outs)
    return d
