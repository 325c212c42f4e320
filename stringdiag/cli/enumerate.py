"""``stringdiag enumerate FILE --generators G1,G2,... --max N [--rules R.rules ...]``: the space of
mechanisms built from generators, stage by stage (Khatri et al. (2024), Sec. 5)."""
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
    from ..enumerate.sensitivity import readings
    from ..enumerate.stages import enumerate_space
    from ..rewrite.rule import load_rules

    prog = load_reporting(args.file)
    names = [n.strip() for n in args.generators.split(",") if n.strip()]
    defns = _generators(prog, names, args.file)
    rule_files = {path: load_rules(path) for path in args.rules}
    rules = [r for rs in rule_files.values() for r in rs]
    space = enumerate_space(defns, args.max, rules, args.copy_outputs)
    gens = _gens(defns)
    named = _named(space, gens)
    table = readings(defns, args.max, rule_files, args.copy_outputs) if args.sensitivity else []
    if args.output:
        _write(args, prog, names, space, named)
    if args.grid:
        _draw(named, args.grid)
    if args.json:
        print(json.dumps(_as_json(space, named, table), indent=2))
        return 0
    _print(args, space, named, gens, table)
    if args.output:
        print(f"wrote {args.output} ({len(named)} mechanisms)", file=sys.stderr)
    return 0


def _generators(prog, names: list[str], file: str) -> list:
    """The definitions ``--generators`` names, each a diagram of the file."""
    if not names:
        raise DiagError("--generators: name at least one generator")
    for n in names:
        if n not in prog.defs:
            raise DiagError(f"--generators: '{n}' is not a diagram of {file} "
                            f"(it has {', '.join(prog.defs) or 'none'})")
    return [prog[n] for n in names]


def _named(space, gens) -> list:
    """The survivors in their order, named, each with the diagram the enumeration built for it."""
    from ..enumerate.output import ordered

    named = ordered([m.wiring for m in space.result], gens)
    built = {id(m.wiring): m.diagram for m in space.result}
    for m in named:
        m.diagram = built[id(m.wiring)]
    return named


def _reading(args: argparse.Namespace) -> str:
    """What the space is, in words: the text output and the written file both begin with it."""
    return READING.format(max=args.max, copy=" and so are generator outputs" if args.copy_outputs else "")


def _write(args: argparse.Namespace, prog, names: list[str], space, named: list) -> None:
    """The survivors as a .diag file, headed by the command that wrote it and the stages' counts."""
    from ..enumerate.output import write

    command = (f"stringdiag enumerate {args.file} --generators {','.join(names)} --max {args.max}"
               + (f" --rules {' '.join(args.rules)}" if args.rules else "")
               + (" --copy-outputs" if args.copy_outputs else ""))
    stages = "; ".join(f"{s.name} {s.count}" for s in space.stages)
    header = (f"The space of mechanisms (Khatri et al. (2024), Sec. 5), written by\n  {command}\n{stages}\n\n"
              f"{_reading(args)}")
    write(args.output, named, args.file, header, {n: prog[n] for n in prog.own})


def _draw(named: list, path: str) -> None:
    """The survivors in a grid, each captioned; progress on stderr (drawing many takes a while)."""
    from tqdm import tqdm

    from ..render.draw import grid_svg, write_text

    frames = [(f"{m.name}  ({m.family}, {m.generators})", m.diagram) for m in named]
    bar = lambda xs: tqdm(xs, desc="drawing", unit="diagram", file=sys.stderr, leave=False)  # noqa: E731
    write_text(grid_svg(frames, progress=bar), path)
    print(f"wrote {path}", file=sys.stderr)


def _as_json(space, named: list, table: list[dict]) -> dict:
    return {
        "stages": [{"name": s.name, "count": s.count} for s in space.stages],
        "mechanisms": [{"name": m.name, "generators": m.generators, "family": m.family, "source": m.source}
                       for m in named],
        **({"sensitivity": table} if table else {}),
    }


def _print(args: argparse.Namespace, space, named: list, gens, table: list[dict]) -> None:
    """The reading, the count after each stage, every survivor as a term, and the sensitivity table."""
    print(_reading(args))
    for s in space.stages:
        print(f"{s.name:<14} {s.count:>7}")
    for m in named:
        print(f"  {m.name:<5} {m.generators} generator{'s' if m.generators != 1 else ' '}  {m.family:<7} "
              f"{_term(m.wiring, gens)}")
    if table:
        _print_sensitivity(table)


def _print_sensitivity(table: list[dict]) -> None:
    print("\nsensitivity (the count under each reading):")
    width = max(len(r["reading"]) for r in table)
    print(f"  {'reading':<{width}}  {'raw':>7}  {'not-composite':>13}  {'reduced':>7}")
    for r in table:
        red = "-" if r["reduced"] is None else str(r["reduced"])
        print(f"  {r['reading']:<{width}}  {r['raw']:>7}  {r['not-composite']:>13}  {red:>7}")


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
