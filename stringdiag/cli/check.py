"""``stringdiag check FILE... [--verify]``: parse and type-check ``.diag`` and ``.rules`` files.

A ``.rules`` file is parsed, both sides of every rule are type-checked, and every
reduction (``=>``) is checked to be an instance of its left side
(:func:`stringdiag.rewrite.rule.check_reduction`). With ``--verify`` both sides of every
equation (``==``) are also evaluated on random float64 inputs, box variables and
abstract families instantiated as random universal approximators (the same on both
sides), and one line per rule says what was found::

    $ stringdiag check stringdiag:rules/contraction.rules --verify
    stringdiag:rules/contraction.rules: 7 rules
      assoc          ≡  verified, relative error 2e-16
      ...

A side that differs is an error at the rule's name, ``FILE:LINE:COL: error: rule 'NAME'
is not an equation: its sides differ numerically (relative error X)``, and the exit
status is 1.

A rule that names its proof (``... by "FILE.deriv"``) is checked by running that derivation
(:func:`stringdiag.derive.proof.check_proof`; with ``--verify`` its equalities are evaluated
too): it must start from the rule's left side, end at its right side and use only steps of
the rule's relation. Each such rule gets a line ``NAME  ⇒  proved by FILE (N steps: ≡ ⇒ ≡)``;
a missing or failing proof is an error at the ``by`` string, and the exit status is 1.
"""
from __future__ import annotations

import argparse

from ..errors import DiagError, shown
from .common import Report, diagnostic, load_reporting, print_json, to_stderr
from ..graph.box import Kind
from .kinds import FileKind, kind_of

HELP = "type-check .diag and .rules files (errors as FILE:LINE:COL); --verify evaluates rules' equations"
EXAMPLES = """\
stringdiag check stringdiag:gallery/attention.diag stringdiag:rules/algebra.rules
stringdiag check stringdiag:rules/contraction.rules --verify
stringdiag check stringdiag:gallery/attention.diag --json"""


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("files", nargs="+", metavar="FILE")
    p.add_argument("-q", "--quiet", action="store_true", help="print nothing for files that check")
    p.add_argument("--verify", action="store_true",
                   help="for .rules files: also evaluate both sides of every equation on random inputs (float64)")
    p.add_argument("--json", action="store_true",
                   help="print JSON only: for each file {file, ok, diagrams or rules, diagnostics}, each "
                        "diagnostic {file, line, col, severity, message}")


def run(args: argparse.Namespace) -> int:
    files: list[dict] = []
    status = 0
    for path in args.files:
        report: Report = to_stderr
        if args.json:  # what the file defines, and what was found in it
            entry: dict = {"file": shown(path), "ok": True, "diagnostics": []}
            files.append(entry)

            def report(e: DiagError, severity: str, path: str = path, entry: dict = entry) -> None:
                entry["diagnostics"].append(diagnostic(e, severity, path))
                entry["ok"] = entry["ok"] and severity != "error"
        status |= check_file(path, args, report, entry if args.json else {})
    if args.json:
        print_json([{k: e[k] for k in ("file", "ok", "diagrams", "rules", "diagnostics") if k in e} for e in files])
    return status


def check_file(path: str, args: argparse.Namespace, report: Report, entry: dict) -> int:
    """Check one file; its diagrams' (or rules') names go into ``entry``; 1 on an error."""
    try:
        if FileKind.RULES in kind_of(path):
            entry["rules"] = []
            return check_rules(path, args.verify, args.quiet, report, silent=args.json, names=entry["rules"])
        entry["diagrams"] = []
        prog = load_reporting(path, report)
    except DiagError as e:
        report(e, "error")
        return 1
    entry["diagrams"] = list(prog.own)
    defects = report_obstacles(prog, report)
    if not (args.quiet or args.json) and not defects:
        print(f"{path}: ok ({_many(len(prog.own), 'diagram')}: {', '.join(prog.own)})")
    return 1 if defects else 0


def report_obstacles(prog, report: Report = to_stderr) -> int:
    """Print what would stop each diagram compiling (analysis.compilable): defects as errors,
    diagrams not compilable as they stand (an abstract family, say) as warnings. Returns the
    number of defects."""
    from ..analysis.compilable import obstacles
    from ..elaborate.loader import prelude

    implemented = frozenset(n for n, b in prelude().boxes.items() if b.box == Kind.FIXED)
    seen, defects, memo = set(), 0, {}  # memo: each definition read once for all the diagrams
    for name in prog.own:
        for o in obstacles(prog[name], implemented, memo):
            if (o.message, o.pos) in seen:  # a box used by several diagrams: said once
                continue
            seen.add((o.message, o.pos))
            defects += o.defect
            report(DiagError(o.message, o.pos), "error" if o.defect else "warning")
    return defects


def _many(n: int, what: str) -> str:
    """``1 rule``, ``3 rules``: a count with its noun."""
    return f"{n} {what}{'s' if n != 1 else ''}"


def check_rules(path: str, verify: bool = False, quiet: bool = False, report: Report = to_stderr,
                silent: bool = False, names: list | None = None) -> int:
    """Check one ``.rules`` file (its rules' names appended to ``names``); 1 when an equation
    does not hold numerically or a rule's proof does not prove it. Errors in the file itself
    (syntax, types, a reduction that is not one) are raised as ``DiagError``."""
    from ..rewrite.rule import load_rules

    rules = load_rules(path)
    if names is not None:
        names.extend(r.name for r in rules)
    for r in rules:
        for w in r.warnings:
            report(w, "warning")
    checks = RuleChecks(rules, verify, report, silent)
    if verify:
        checks.verify_all(path)
    else:
        checks.list_all(path, quiet)
    return checks.status


class RuleChecks:
    """The report on one file's rules, a line per rule: a rule that fails is reported (its
    error reported) and sets ``status`` to 1, so that the rules after it are still checked.
    ``silent`` prints no lines (``--json`` prints only what is reported)."""

    def __init__(self, rules: list, verify: bool, report: Report = to_stderr, silent: bool = False):
        self.rules, self.verify, self.report = rules, verify, report
        self.say = (lambda line: None) if silent else print
        self.width = max((len(r.name) for r in rules), default=0)
        self.status = 0

    def head(self, r) -> str:
        """The start of a rule's line: its name, aligned, and its relation."""
        return f"  {r.name:<{self.width}}  {r.symbol}  "

    def fail(self, line: str, error: DiagError) -> None:
        self.say(line)
        self.report(error, "error")
        self.status = 1

    def proved(self, r) -> str | None:
        """Run the rule's proof: its line, or None (the error printed) when it fails."""
        from ..derive.proof import check_proof, shown

        try:
            return check_proof(r, verify=self.verify).describe()
        except DiagError as e:
            self.fail(self.head(r) + f"FAILED: not proved by {shown(r.proof)}", e)
            return None

    def list_all(self, path: str, quiet: bool) -> None:
        """Without ``--verify``: the file's line, then a line for each rule that names a proof."""
        if not quiet:
            self.say(f"{path}: ok ({_many(len(self.rules), 'rule')}: {', '.join(r.name for r in self.rules)})")
        for r in self.rules:
            if r.proof is not None and (line := self.proved(r)) is not None and not quiet:
                self.say(self.head(r) + line)

    def verify_all(self, path: str) -> None:
        """With ``--verify``: a line for every rule, its proof run and its equation evaluated."""
        self.say(f"{path}: {_many(len(self.rules), 'rule')}")
        for r in self.rules:
            self.verify_one(r)

    def verify_one(self, r) -> None:
        from ..rewrite.rule import EQUATION

        proof = ""
        if r.proof is not None:
            line = self.proved(r)
            if line is None:
                return
            proof = line + ", "
        if r.kind != EQUATION:
            self.say(self.head(r) + self.reduction(r, proof))
        else:
            self.evaluate(r, proof)

    @staticmethod
    def reduction(r, proof: str) -> str:
        """Why a reduction holds: its proof (⇒ and ≡ steps from the left side to the right), or
        the holes of the left side that the right side fills."""
        if r.proof is not None:
            return proof + "the right side is an instance of the left, up to equalities"
        what = ", ".join(f"{hole} := {how}" for hole, how in r.specialised.items())
        return f"a reduction: the right side is an instance of the left ({what or 'no holes'})"

    def evaluate(self, r, proof: str) -> None:
        """An equation's two sides on random inputs: they must agree numerically."""
        from ..verify.oracle import verify_rule

        head = self.head(r)
        try:
            v = verify_rule(r)
        except DiagError as e:
            self.fail(head + f"cannot be evaluated: {e.message}",
                      DiagError(f"rule '{r.name}' cannot be evaluated: {e.message}", r.pos))
            return
        if v.same:
            where = f" (assuming {', '.join(f'{n} != 0' for n in r.nonzero)})" if r.nonzero else ""
            self.say(head + proof + f"verified, relative error {v.error:.1g}{where}")
        else:
            self.fail(head + f"FAILED: its sides differ numerically (relative error {v.error:.3g} {v.where()})",
                      DiagError(f"rule '{r.name}' is not an equation: its sides differ numerically "
                                f"(relative error {v.error:.3g} {v.where()})", r.pos))
