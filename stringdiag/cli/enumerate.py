"""``stringdiag enumerate FILE --generators G1,G2,... --max N [--rules R.rules ...]``: the space of
mechanisms built from generators, stage by stage (seed 003, Sec. 5)."""
from __future__ import annotations

import argparse
import json
import sys

from ..errors import DiagError
from .common import load_reporting
from .options import integer

HELP = "enumerate the mechanisms built from generators, reduce them by rewrites, and write the survivors"

READING = """\
Reading: a member maps the stream (the first generator's first input type) to itself with at
most {max} generator occurrences, each with weights of its own; only the input is copied{copy};
ports are ordered. Sequential composites f ; g of two members are removed; members related by
the rules (applied at any match, closed both ways) keep the one with the fewest generators."""


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("file", metavar="FILE", help="the .diag file that defines the generators")
    p.add_argument("--generators", metavar="G1,G2,...", required=True, help="the generators, by name")
    p.add_argument("--max", type=integer(1, 9), default=5, metavar="N",
                   help="at most this many generator occurrences (default: 5)")
    p.add_argument("--rules", nargs="*", default=[], metavar="R.rules", help="reductions that relate members")
    p.add_argument("--copy-outputs", action="store_true",
                   help="let generator outputs be copied too (another reading of the space)")
    p.add_argument("--sensitivity", action="store_true",
                   help="also count the space under the alternative readings (bound, copies, rules)")
    p.add_argument("-o", "--output", metavar="OUT.diag", help="write the survivors as a .diag file")
    p.add_argument("--grid", metavar="OUT.svg", help="draw the survivors in a grid, each with its name")
    p.add_argument("--json", action="store_true", help="print JSON instead of text")


def run(args: argparse.Namespace) -> int:
    from ..enumerate.output import ordered, write
    from ..enumerate.sensitivity import readings
    from ..enumerate.stages import enumerate_space
    from ..rewrite.rule import load_rules

    prog = load_reporting(args.file)
    names = [n.strip() for n in args.generators.split(",") if n.strip()]
    if not names:
        raise DiagError("--generators: name at least one generator")
    defns = []
    for n in names:
        if n not in prog.defs:
            raise DiagError(f"--generators: '{n}' is not a diagram of {args.file} "
                            f"(it has {', '.join(prog.defs) or 'none'})")
        defns.append(prog[n])
    rule_files = {path: load_rules(path) for path in args.rules}
    rules = [r for rs in rule_files.values() for r in rs]
    space = enumerate_space(defns, args.max, rules, args.copy_outputs)
    gens = _gens(defns)
    named = ordered([m.wiring for m in space.result], gens)
    built = {id(m.wiring): m.diagram for m in space.result}
    for m in named:
        m.diagram = built[id(m.wiring)]
    table = readings(defns, args.max, rule_files, args.copy_outputs) if args.sensitivity else []
    if args.output:
        header = (f"The space of mechanisms (seed 003, Sec. 5), written by\n  stringdiag enumerate {args.file} --generators {','.join(names)} "
                  f"--max {args.max}" + (f" --rules {' '.join(args.rules)}" if args.rules else "")
                  + (" --copy-outputs" if args.copy_outputs else "") + "\n"
                  + "; ".join(f"{s.name} {s.count}" for s in space.stages) + "\n\n"
                  + READING.format(max=args.max, copy=" and so are generator outputs" if args.copy_outputs else ""))
        write(args.output, named, args.file, header, {n: prog[n] for n in prog.own})
    if args.grid:
        from tqdm import tqdm

        from ..render.draw import grid_svg, write_text

        frames = [(f"{m.name}  ({m.family}, {m.generators})", m.diagram) for m in named]
        bar = lambda xs: tqdm(xs, desc="drawing", unit="diagram", file=sys.stderr, leave=False)  # noqa: E731
        write_text(grid_svg(frames, progress=bar), args.grid)
        print(f"wrote {args.grid}", file=sys.stderr)
    if args.json:
        print(json.dumps({
            "stages": [{"name": s.name, "count": s.count} for s in space.stages],
            "mechanisms": [{"name": m.name, "generators": m.generators, "family": m.family, "source": m.source}
                           for m in named],
            **({"sensitivity": table} if table else {}),
        }, indent=2))
        return 0
    print(READING.format(max=args.max, copy=" and so are generator outputs" if args.copy_outputs else ""))
    for s in space.stages:
        print(f"{s.name:<14} {s.count:>7}")
    for m in named:
        print(f"  {m.name:<5} {m.generators} generator{'s' if m.generators != 1 else ' '}  {m.family:<7} "
              f"{_term(m.wiring, gens)}")
    if table:
        print("\nsensitivity (the count under each reading):")
        width = max(len(r["reading"]) for r in table)
        print(f"  {'reading':<{width}}  {'raw':>7}  {'not-composite':>13}  {'reduced':>7}")
        for r in table:
            red = "-" if r["reduced"] is None else str(r["reduced"])
            print(f"  {r['reading']:<{width}}  {r['raw']:>7}  {r['not-composite']:>13}  {red:>7}")
    if args.output:
        print(f"wrote {args.output} ({len(named)} mechanisms)", file=sys.stderr)
    return 0


def _gens(defns):
    from ..enumerate.space import generators

    return generators(defns)[0]


def _term(w, gens) -> str:
    """A member as one nested term: AttApply(AttPrep(x), x)."""
    from ..enumerate.space import X

    def val(s):
        return "x" if s == X else term(*s)

    def term(k, port):
        g, srcs = w.occurrences[k]
        t = f"{gens[g].name}({', '.join(val(s) for s in srcs)})"
        return t + (f".{port}" if len(gens[g].outs) > 1 else "")

    return term(*w.root)
