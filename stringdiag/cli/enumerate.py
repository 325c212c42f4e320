"""``stringdiag enumerate FILE --generators G1,G2,... --max N [--rules R.rules ...]``: the space of
mechanisms built from generators, stage by stage (Khatri et al. (2024), Sec. 5)."""
from __future__ import annotations

import argparse
import json
import sys
import textwrap
import time

from ..errors import DiagError
from ..enumerate.reading import Copy, Reading
from . import kinds, outputs
from .common import load_reporting
from .options import UsageError, integer, number, short

HELP = "enumerate the mechanisms built from generators, reduce them by rewrites, and write the survivors"

EXAMPLES = """\
stringdiag enumerate stringdiag:gallery/anatomy.diag --generators AttPrep,AttApply,LinAttPrep,LinAttApply,ConcatFF \\
    --symmetric ConcatFF --interchangeable LinAttPrep --require AttApply,LinAttApply --max 5 \\
    --rules stringdiag:rules/absorb.rules stringdiag:rules/merge.rules -o mechanisms.diag --grid mechanisms.svg
stringdiag enumerate stringdiag:gallery/anatomy.diag --generators AttPrep,AttApply,LinAttPrep,LinAttApply,ConcatFF \\
    --symmetric ConcatFF --interchangeable LinAttPrep --require AttApply,LinAttApply --max 5 \\
    --rules stringdiag:rules/absorb.rules stringdiag:rules/merge.rules --sensitivity
stringdiag enumerate stringdiag:gallery/anatomy_qk.diag --generators AttPrepQK,AttApply,LinAttPrepQK,LinAttApply \\
    --paired LinAttPrepQK --require AttApply,LinAttApply --max 5 --json
"""

TAIL = """\
Sequential composites f ; g of two members are removed; members related by the rules (applied
at any match, closed both ways) keep the one with the fewest generators."""
DEFAULT_BUDGET = 60.0


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("file", metavar="FILE", help="the .diag file that defines the generators")
    p.add_argument("--generators", metavar="G1,G2,...", required=True, help="the generators, by name")
    p.add_argument("--max", type=integer(1, 9), default=5, metavar="N",
                   help="at most this many generator occurrences (default: 5)")
    p.add_argument("--rules", nargs="*", default=[], metavar="R.rules", type=kinds.rules_file,
                   help="reductions that relate members (a file R_*.rules beside one, written for these "
                        "generators, is used too)")
    p.add_argument("--symmetric", type=_names, default=(), metavar="G1,...",
                   help="generators whose inputs may be permuted (the same mechanism)")
    p.add_argument("--interchangeable", type=_names, default=(), metavar="G1,...",
                   help="generators whose outputs are interchangeable learnable maps of their inputs")
    p.add_argument("--paired", type=_names, default=(), metavar="G1,...",
                   help="generators whose k-th output is a learnable map of their k-th input alone "
                        "(inputs and outputs permuted together)")
    p.add_argument("--once", action="store_true",
                   help="each generator at most once in a member (a reading that breaks 'at most N generators')")
    p.add_argument("--require", type=_names, default=(), metavar="G1,...",
                   help="a member contains at least one of these (families are computed from them)")
    p.add_argument("--copy", choices=[c.value for c in Copy], default=None,
                   help="what may be copied: the input (default), every stream value, or every value")
    p.add_argument("--copy-outputs", action="store_true", help="the same as --copy all")
    p.add_argument("--time-budget", type=number(what="a positive number of seconds"), default=DEFAULT_BUDGET,
                   metavar="SECONDS", help=f"refuse (or stop) work estimated to take longer (default: {DEFAULT_BUDGET:g})")
    p.add_argument("--sensitivity", action="store_true",
                   help="also count the space under the alternative readings (each choice varied)")
    p.add_argument("--retype", metavar="FILE:G=H,...",
                   help="for --sensitivity: another typing of some generators (FILE defines H for G)")
    p.add_argument("-o", "--output", metavar="OUT.diag", type=diag_file, help="write the survivors as a .diag file")
    p.add_argument("--grid", metavar="OUT.svg", type=outputs.grid,
                   help="draw the survivors in a grid, each with its name (.svg), or on a page opening them "
                        "one at a time (.html)")
    p.add_argument("--trace-rules", action="store_true",
                   help="for each rule of --rules, say on how many members it fires; for one that fires on none, "
                        "why: its closest partial match and the box or condition that stopped it")
    p.add_argument("--confirm", action="store_true",
                   help="also confirm the symmetry classes by networkx's VF2 on an encoding of their own (slow)")
    p.add_argument("--json", action="store_true", help="print JSON instead of text")


def _names(text: str) -> tuple[str, ...]:
    names = tuple(n.strip() for n in text.split(",") if n.strip())
    if not names:
        raise argparse.ArgumentTypeError("expected generator names separated by commas")
    return names


def diag_file(text: str) -> str:
    """``-o``: the survivors are written as a diagram file, so the name ends with ``.diag``."""
    if not text.lower().endswith(".diag") or text.endswith(("/", "\\")):
        raise argparse.ArgumentTypeError(f"cannot write {short(text)}: the survivors are written as a diagram "
                                         "file, so the name must end with .diag (draw them with --grid OUT.svg)")
    return outputs.file_of("a diagram file", ".diag")(text)  # in a folder that is there and takes files


diag_file.__name__ = "diagram file"


def reading_of(args: argparse.Namespace) -> Reading:
    copy = Copy(args.copy) if args.copy else Copy.ALL if args.copy_outputs else Copy.INPUT
    if args.copy and args.copy_outputs and copy is not Copy.ALL:
        raise UsageError("--copy-outputs is --copy all; it contradicts --copy " + args.copy)
    both = sorted(set(args.paired) & (set(args.interchangeable) | set(args.symmetric)))
    if both:
        raise UsageError(f"--paired {','.join(both)}: a paired generator's ports are permuted together, so it is "
                         "not also --symmetric or --interchangeable")
    return Reading(args.max, copy, frozenset(args.symmetric), frozenset(args.interchangeable), tuple(args.require),
                   args.once, frozenset(args.paired))


def run(args: argparse.Namespace) -> int:
    from ..enumerate.rulesets import load_for
    from ..enumerate.stages import Work, enumerate_space

    prog = load_reporting(args.file)
    names = [n.strip() for n in args.generators.split(",") if n.strip()]
    defns = _generators(prog, names, args.file)
    reading = reading_of(args)
    rule_files = load_for(args.rules, names)
    rules = [r for rs in rule_files.values() for r in rs]
    guess = _tell(args, defns, reading, rules)
    quiet = args.json or not sys.stderr.isatty()
    work = Work(progress=_bar(quiet), deadline=time.monotonic() + args.time_budget, budget=args.time_budget,
                confirm=args.confirm)
    space = enumerate_space(defns, reading, rules, work=work)
    gens = _gens(defns)
    named = _named(space, gens, reading)
    table = _sensitivity(args, defns, reading, rule_files, work) if args.sensitivity else []
    if args.output:
        _write(args, prog, names, space, named, reading, list(rule_files))
    if args.grid:
        _draw(named, args.grid, quiet)
    traced = _traced(args, space, defns, rules)
    if args.json:
        found = _as_json(space, named, table, guess, reading, list(rule_files))
        print(json.dumps({**found, "rules_traced": traced} if args.trace_rules else found, indent=2))
        return 0
    _print(reading, space, named, gens, table, list(rule_files))
    if traced:
        print("\nRules traced (--trace-rules):\n" + "\n".join(traced))
    if args.output:
        print(f"wrote {args.output} ({len(named)} mechanisms)", file=sys.stderr)
    return 0


def _traced(args, space, defns, rules) -> list[str]:
    """``--trace-rules``: each rule's members, or why it fires on none (``enumerate/unfired.py``)."""
    if not args.trace_rules:
        return []
    if not rules:
        raise UsageError("--trace-rules explains the rules of --rules; none were given")
    from ..enumerate.unfired import traced

    return traced(space, defns, rules)


def _tell(args, defns, reading: Reading, rules) -> dict:
    """The estimate, printed before the work (stderr; in the JSON with --json); a refusal
    when it would not fit the time budget."""
    from ..enumerate.estimate import estimate

    e = estimate(defns, reading, rules, confirm=args.confirm)
    n, secs = e.ordered(reading.max), e.seconds(reading.max)
    about = "" if e.exact(reading.max) else "about "
    if not args.json:
        print(f"estimate: {about}{n} wirings with ordered ports at --max {reading.max} "
              f"(the members are at most that many); about {secs:.{1 if secs < 10 else 0}f} s on this machine now",
              file=sys.stderr)
    if secs > args.time_budget:
        k = e.largest_within(args.time_budget)
        raise DiagError(f"enumerating --max {reading.max} would take about {_duration(secs)} on this machine "
                        f"({about}{n} wirings with ordered ports); use --max {k} or --time-budget {_budget(secs)}")
    return {"ordered_wirings": n, "exact": e.exact(reading.max), "seconds": round(secs, 1)}


def _duration(secs: float) -> str:
    return f"{secs:.0f} s" if secs < 120 else f"{secs / 60:.0f} minutes" if secs < 7200 else f"{secs / 3600:.1f} hours"


def _budget(secs: float) -> str:
    return f"{int(secs * 1.5) + 1}"


def _bar(quiet: bool):
    from tqdm import tqdm

    return lambda xs: tqdm(xs, desc="reducing", unit="wiring", file=sys.stderr, leave=False, disable=quiet)


def _sensitivity(args, defns, reading: Reading, rule_files: dict, work) -> list[dict]:
    from ..enumerate.sensitivity import Typing, readings

    typing = None
    if args.retype:
        path, _, pairs = args.retype.partition(":")
        renames = dict(p.split("=", 1) for p in pairs.split(",") if "=" in p)
        if not path or not renames:
            raise UsageError(f"--retype: expected FILE:G=H,..., got '{args.retype}'")
        typing = Typing(path, load_reporting(path), renames)
    return readings(defns, reading, rule_files, typing, lambda ns: _rules_for(args.rules, ns), work, args.file)


def _rules_for(paths, names):
    from ..enumerate.rulesets import load_for

    return load_for(paths, names)


def _generators(prog, names: list[str], file: str) -> list:
    """The definitions ``--generators`` names, each a diagram of the file."""
    if not names:
        raise UsageError("--generators: name at least one generator")
    for n in names:
        if n not in prog.defs:
            raise DiagError(f"--generators: '{n}' is not a diagram of {file} "
                            f"(it has {', '.join(prog.defs) or 'none'})")
    return [prog[n] for n in names]


def _named(space, gens, reading: Reading) -> list:
    """The survivors in their order, named, each with the diagram the enumeration built for it."""
    from ..enumerate.survivors import families_of, ordered

    named = ordered([m.wiring for m in space.result], gens, families_of(reading.require))
    built = {id(m.wiring): m.diagram for m in space.result}
    for m in named:
        m.diagram = built[id(m.wiring)]
    return named


def _reading(reading: Reading, rule_files: list[str]) -> str:
    """What the space is, in words: the text output and the written file both begin with it."""
    rules = f"Rules: {', '.join(rule_files)}." if rule_files else "No rules."
    return textwrap.fill("Reading: " + reading.describe(), 96) + "\n" + TAIL + "\n" + rules


def _write(args: argparse.Namespace, prog, names: list[str], space, named: list, reading: Reading,
           rule_files: list[str]) -> None:
    """The survivors as a .diag file, headed by the command that wrote it and the stages' counts."""
    from ..enumerate.survivors import write

    command = (f"stringdiag enumerate {args.file} --generators {','.join(names)} {reading.options()}"
               + (f" --rules {' '.join(args.rules)}" if args.rules else ""))
    stages = "; ".join(f"{s.name} {s.count}" for s in space.stages)
    header = (f"The space of mechanisms (Khatri et al. (2024), Sec. 5), written by\n  {command}\n{stages}\n\n"
              f"{_reading(reading, rule_files)}")
    write(args.output, named, args.file, header, {n: prog[n] for n in prog.own})


def _draw(named: list, path: str, quiet: bool) -> None:
    """The survivors in a grid, each captioned; progress on stderr (drawing many takes a while)."""
    from tqdm import tqdm

    from ..render.output import save_grid

    frames = [(f"{m.name}  ({m.family}, {m.generators})", m.diagram) for m in named]
    bar = lambda xs: tqdm(xs, desc="drawing", unit="diagram", file=sys.stderr, leave=False, disable=quiet)  # noqa: E731
    save_grid(f"{len(frames)} mechanisms", frames, path, progress=bar)
    print(f"wrote {path}", file=sys.stderr)


def _as_json(space, named: list, table: list[dict], guess: dict, reading: Reading, rule_files: list[str]) -> dict:
    return {
        "reading": {"max": reading.max, "copy": reading.copy.value, "symmetric": sorted(reading.symmetric),
                    "interchangeable": sorted(reading.interchangeable), "paired": sorted(reading.paired),
                    "require": list(reading.require), "once": reading.once, "rules": rule_files},
        "estimate": guess,
        "stages": [{"name": s.name, "count": s.count} for s in space.stages],
        "mechanisms": [{"name": m.name, "generators": m.generators, "family": m.family, "source": m.source}
                       for m in named],
        **({"sensitivity": table} if table else {}),
    }


def _print(reading: Reading, space, named: list, gens, table: list[dict], rule_files: list[str]) -> None:
    """The reading, the count after each stage, every survivor as a term, and the sensitivity table."""
    print(_reading(reading, rule_files))
    for s in space.stages:
        print(f"{s.name:<14} {s.count:>7}")
    for m in named:
        print(f"  {m.name:<5} {m.generators} generator{'s' if m.generators != 1 else ' '}  {m.family:<7} "
              f"{_term(m.wiring, gens)}")
    if table:
        _print_sensitivity(table)


def _print_sensitivity(table: list[dict]) -> None:
    """One line a row: what it changes, its counts and families, what of Sec. 5 it breaks; a
    row over its share of the time budget says so, with the figure and the command."""
    print("\nsensitivity (each row changes one choice of the stated reading; families linear/dot/both):")
    width = max(len(r["reading"]) for r in table)
    print(f"  {'reading':<{width}}  {'raw':>5}  {'required':>8}  {'reduced':>7}  families              breaks")
    for r in table:
        if "not computed" in r:
            print(f"  {r['reading']:<{width}}  not computed ({'' if r.get('exact', True) else 'about '}"
                  f"{r['ordered']} ordered wirings): about "
                  f"{_duration(r['not computed'])}; run `{r['command']}` alone")
            continue
        fams = "/".join(str(r["families"].get(k, 0)) for k in ("linear", "dot", "both"))
        fams += f" (+{r['families']['none']} none)" if r["families"].get("none") else ""
        req = r["required"] if r["required"] is not None else r["not-composite"]
        print(f"  {r['reading']:<{width}}  {r['raw']:>5}  {req:>8}  {r['reduced']:>7}  {fams:<20}  "
              f"{r['breaks'] or '-'}")


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
