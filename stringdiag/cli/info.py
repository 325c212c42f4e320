"""``stringdiag info FILE [-d NAME] [--json] [--degree] [--equivariance] [--confirm]``: what a diagram
takes, gives and contains; with ``--degree``, its degree as a piecewise-polynomial map
(``analysis/degree.py``); with ``--equivariance``, whether it is permutation-equivariant in each
sequence dimension (``analysis/equivariance.py``)."""
from __future__ import annotations

import argparse

from .common import load_reporting, pick, print_json

HELP = "describe diagrams: inputs, outputs, dimensions, boxes by kind, learnable boxes"
EXAMPLES = """\
stringdiag info stringdiag:gallery/attention.diag -d SelfAttention
stringdiag info stringdiag:gallery/attention.diag --json
stringdiag info stringdiag:gallery/splines.diag -d EncoderBlock --degree
stringdiag info stringdiag:gallery/attention.diag --equivariance --confirm"""


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("file", metavar="FILE")
    p.add_argument("-d", "--diagram", metavar="NAME", help="the diagram to describe (default: all)")
    p.add_argument("--json", action="store_true", help="print JSON instead of text")
    p.add_argument("--degree", action="store_true",
                   help="also say whether the diagram is a spline (a continuous piecewise-polynomial map, as a "
                        "ReLU transformer is: Lai, Lim and Liu, Thm 3.3) and of what degree, overall and in each "
                        "input (the others held constant), or which box makes it none (softmax's exp, say); "
                        "learnable boxes count as degree 1 (affine, or ReLU networks), as under both approximator "
                        "policies. A static pass: nothing is evaluated")
    p.add_argument("--equivariance", action="store_true",
                   help="also say, for each sequence dimension of the inputs, whether the diagram is permutation-"
                        "equivariant (permuting the inputs permutes the outputs), invariant (the outputs do not "
                        "change), or neither, naming the box that breaks it (a position, a causal mask, a scan, a "
                        "learned table over positions). A static pass: SIMD boxes and sums over the dimension "
                        "preserve the order; nothing is evaluated")
    p.add_argument("--confirm", action="store_true",
                   help="with --equivariance: permute the inputs of the compiled module (float64, random weights, "
                        "three draws) and compare the outputs; with --degree (or alone): confirm each degree numerically on the compiled module (float64, learnable "
                        "boxes affine, every fixed dimension 2, sequences of length 3; imports torch): along random "
                        "lines inside one linear region of the ReLUs (degrees up to 9), and by scaling with the "
                        "biases set to zero (any degree)")


def run(args: argparse.Namespace) -> int:
    from ..analysis.degree import degree
    from .summary import summarize

    prog = load_reporting(args.file)
    diagrams = pick(prog, args.diagram)
    summaries = [summarize(d) for d in diagrams]
    with_degree = args.degree or (args.confirm and not args.equivariance)
    if with_degree:
        for d, s in zip(diagrams, summaries):
            s["degree"] = [r.as_dict() for r in degree(d)]
            if args.confirm:
                s["confirmed"] = _confirm(d)
    if args.equivariance:
        from ..analysis.equivariance import equivariance
        for d, s in zip(diagrams, summaries):
            s["equivariance"] = [e.as_dict() for e in equivariance(d)]
            if args.confirm:
                s["equivariance_confirmed"] = _confirm_permuted(d)
    if args.json:
        print_json(summaries[0] if args.diagram else summaries)
        return 0
    for s in summaries:
        print(_with_equivariance(s))
    return 0


def _with_equivariance(s) -> str:
    """The summary's text, with the equivariance lines when they were asked for."""
    text = s.text()
    if "equivariance" not in s:
        return text
    lines = [f"permutation: {e['text']}" for e in s["equivariance"]] or [
        "permutation: no sequence dimension among the inputs"]
    lines += [f"  {line}" for line in s.get("equivariance_confirmed", ())]
    return text.rstrip("\n") + "\n" + "\n".join(lines) + "\n"


def _confirm_permuted(d) -> list[str]:
    """The numeric confirmation (verify/permuted.py); torch is imported here only."""
    from ..verify.permuted import confirm

    return confirm(d)


def _confirm(d) -> list[str]:
    """The numeric confirmation (verify/measured_degree.py), one line per check; torch is imported here only."""
    from ..verify.measured_degree import confirm

    return [c.describe() for c in confirm(d)] or ["nothing to confirm numerically: no output is a spline"]
