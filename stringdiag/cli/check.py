"""``stringdiag check FILE... [--verify]``: parse and type-check ``.diag`` and ``.rules`` files.

A ``.rules`` file is parsed, both sides of every rule are type-checked, and every
reduction (``=>``) is checked to be an instance of its left side
(:func:`stringdiag.rewrite.rule.check_reduction`). With ``--verify`` both sides of every
equation (``==``) are also evaluated on random float64 inputs, box variables and
abstract families instantiated as random universal approximators (the same on both
sides), and one line per rule says what was found::

    $ stringdiag check rules/contraction.rules --verify
    rules/contraction.rules: 7 rules
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
import sys

from ..errors import DiagError
from .common import load_reporting

HELP = "type-check .diag and .rules files (errors as FILE:LINE:COL); --verify evaluates rules' equations"


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("files", nargs="+", metavar="FILE")
    p.add_argument("-q", "--quiet", action="store_true", help="print nothing for files that check")
    p.add_argument("--verify", action="store_true",
                   help="for .rules files: also evaluate both sides of every equation on random inputs (float64)")


def run(args: argparse.Namespace) -> int:
    status = 0
    for path in args.files:
        try:
            if path.endswith(".rules"):
                status |= check_rules(path, verify=args.verify, quiet=args.quiet)
                continue
            prog = load_reporting(path)
        except DiagError as e:
            print(e.render(), file=sys.stderr)
            status = 1
            continue
        if not args.quiet:
            n = len(prog.own)
            print(f"{path}: ok ({n} diagram{'s' if n != 1 else ''}: {', '.join(prog.own)})")
    return status


def check_rules(path: str, verify: bool = False, quiet: bool = False) -> int:
    """Check one ``.rules`` file; 1 when an equation does not hold numerically or a rule's
    proof does not prove it. Errors in the file itself (syntax, types, a reduction that is
    not one) are raised as ``DiagError``."""
    from ..derive.proof import check_proof, shown
    from ..rewrite.rule import EQUATION, load_rules
    from ..verify.oracle import verify_rule

    rules = load_rules(path)
    for r in rules:
        for w in r.warnings:
            print(w.render("warning"), file=sys.stderr)
    names = ", ".join(r.name for r in rules)
    width = max((len(r.name) for r in rules), default=0)
    status = 0

    def proved(r) -> str | None:
        """Run the rule's proof: its line, or None (the error printed) when it fails."""
        nonlocal status
        try:
            return check_proof(r, verify=verify).describe()
        except DiagError as e:
            print(f"  {r.name:<{width}}  {r.symbol}  FAILED: not proved by {shown(r.proof)}")
            print(e.render(), file=sys.stderr)
            status = 1
            return None

    if not verify:
        if not quiet:
            print(f"{path}: ok ({len(rules)} rule{'s' if len(rules) != 1 else ''}: {names})")
        for r in rules:
            if r.proof is not None and (line := proved(r)) is not None and not quiet:
                print(f"  {r.name:<{width}}  {r.symbol}  {line}")
        return status
    print(f"{path}: {len(rules)} rule{'s' if len(rules) != 1 else ''}")
    for r in rules:
        head = f"  {r.name:<{width}}  {r.symbol}  "
        proof = ""
        if r.proof is not None:
            line = proved(r)
            if line is None:
                continue
            proof = line + ", "
        if r.kind != EQUATION:
            if r.proof is not None:  # ⇒ and ≡ steps from the left side to the right
                print(head + proof + "the right side is an instance of the left, up to equalities")
                continue
            what = ", ".join(f"{hole} := {how}" for hole, how in r.specialised.items())
            print(head + f"a reduction: the right side is an instance of the left ({what or 'no holes'})")
            continue
        try:
            same, err = verify_rule(r)
        except DiagError as e:
            print(head + f"cannot be evaluated: {e.message}")
            print(DiagError(f"rule '{r.name}' cannot be evaluated: {e.message}", r.pos).render(), file=sys.stderr)
            status = 1
            continue
        if same:
            print(head + proof + f"verified, relative error {err:.1g}")
        else:
            print(head + f"FAILED: its sides differ numerically (relative error {err:.3g})")
            print(DiagError(f"rule '{r.name}' is not an equation: its sides differ numerically "
                            f"(relative error {err:.3g})", r.pos).render(), file=sys.stderr)
            status = 1
    return status
