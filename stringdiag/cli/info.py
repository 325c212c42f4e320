"""``stringdiag info FILE [-d NAME] [--json] [--degree [--confirm]]``: what a diagram takes, gives
and contains; with ``--degree``, its degree as a piecewise-polynomial map (``analysis/degree.py``)."""
from __future__ import annotations

import argparse

from .common import load_reporting, pick, print_json

HELP = "describe diagrams: inputs, outputs, dimensions, boxes by kind, learnable boxes"
EXAMPLES = """\
stringdiag info gallery/attention.diag -d SelfAttention
stringdiag info gallery/attention.diag --json
stringdiag info gallery/splines.diag -d EncoderBlock --degree"""


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
    p.add_argument("--confirm", action="store_true",
                   help="with --degree: confirm each degree numerically on the compiled module (float64, learnable "
                        "boxes affine, every fixed dimension 2, sequences of length 3; imports torch): along random "
                        "lines inside one linear region of the ReLUs (degrees up to 9), and by scaling with the "
                        "biases set to zero (any degree)")


def run(args: argparse.Namespace) -> int:
    from ..analysis.degree import degree
    from .summary import summarize

    prog = load_reporting(args.file)
    diagrams = pick(prog, args.diagram)
    summaries = [summarize(d) for d in diagrams]
    if args.degree or args.confirm:
        for d, s in zip(diagrams, summaries):
            s["degree"] = [r.as_dict() for r in degree(d)]
            if args.confirm:
                s["confirmed"] = _confirm(d)
    if args.json:
        print_json(summaries[0] if args.diagram else summaries)
        return 0
    for s in summaries:
        print(_text(s))
    return 0


def _text(s: dict) -> str:
    lines = [f"{s['signature']}    ({s['position']})"]
    width = max([len(p["name"]) for p in s["inputs"] + s["outputs"]] + [4])
    lines.append("inputs:")
    lines += [f"  {p['name']:<{width}}  [{', '.join(p['indices'])}]" for p in s["inputs"]]
    lines.append("outputs:")
    lines += [f"  {p['name']:<{width}}  [{', '.join(p['indices'])}]" for p in s["outputs"]]
    lines.append("dimensions:")
    lines += [f"  {name:<{width}}  {kind}" for name, kind in s["dimensions"].items()]
    b = s["boxes"]
    lines.append(f"boxes: {b['total']} ({b['expanded_total']} when expanded)")
    kinds = [*b["by_kind"], *(k for k in b["expanded"] if k not in b["by_kind"])]  # random boxes inside definitions too
    lines += [f"  {kind:<9} {b['by_kind'].get(kind, 0):>4}   {b['expanded'].get(kind, 0):>5}" for kind in kinds]
    lines.append("learnable boxes (parameters; uses):")
    if not s["learnable"]:
        lines.append("  none")
    pw = max([len(p["name"]) for p in s["learnable"]] + [4])
    for p in s["learnable"]:
        # a local learnable of a definition used very often is listed once: its weight sets counted
        sets = f"   ({p['weight_sets']:,} weight sets)" if "weight_sets" in p else ""
        lines.append(f"  {p['name']:<{pw}}  {p['signature']:<24} x{p['uses']}{sets}")
    c = s["complexity"]
    lines.append(f"time:   O({c['time']})   in the sequence length: O({c['seq_time']})")
    lines.append(f"memory: O({c['memory']})   in the sequence length: O({c['seq_memory']})")
    many = len(s.get("degree", ())) > 1
    for r in s.get("degree", ()):
        lines.append(f"degree{' of ' + r['output'] if many else ''}: {r['text']}")
    lines += [f"  {line}" for line in s.get("confirmed", ())]
    return "\n".join(lines) + "\n"


def _confirm(d) -> list[str]:
    """The numeric confirmation (verify/degree.py), one line per check; torch is imported here only."""
    from ..verify.degree import confirm

    return [c.describe() for c in confirm(d)] or ["nothing to confirm numerically: no output is a spline"]
