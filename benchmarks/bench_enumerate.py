"""How the space of mechanisms and the time to enumerate it grow with the bound.

For the five generators of gallery/anatomy.diag:

1. the wirings alone (found, canonical, the composite test), bound by bound;
2. the whole pipeline (classes up to the declared symmetries, confirmed by VF2; members
   built as diagrams; reduced by rules/absorb.rules and rules/merge.rules) under the
   best-supported reading (``--symmetric ConcatFF --interchangeable LinAttPrep --require
   AttApply,LinAttApply``) at --max 4 and 5, and the old reading (every port ordered,
   nothing required) at --max 5. Each run starts from an empty rewrite cache.

The cases of 2. run interleaved, round by round, beside a reference measured in the same
rounds (the wirings alone at --max 5); each figure is the median CPU time (user + system of
this process: wall time on a shared machine mostly measures the neighbours), each ratio the
median of the per-round ratios to the reference.

    python benchmarks/bench_enumerate.py [--max 6] [--repeats 3]

``--bound 7`` times the whole pipeline once at that bound (best-supported reading) against the
goal of 30 s of CPU, stopped by the kernel's CPU-time limit (``--cpu-limit``, RLIMIT_CPU) if
it runs longer; it prints how far each stage got.
"""
from __future__ import annotations

import argparse
import statistics
import time
from pathlib import Path

import stringdiag
from stringdiag.enumerate.reading import Reading
from stringdiag.enumerate.space import generators, is_composite, wirings
from stringdiag.enumerate.stages import enumerate_space
from stringdiag.rewrite.rule import load_rules

ROOT = Path(__file__).resolve().parents[1]
NAMES = ["AttPrep", "AttApply", "LinAttPrep", "LinAttApply", "ConcatFF"]
BEST = dict(symmetric=frozenset({"ConcatFF"}), interchangeable=frozenset({"LinAttPrep"}),
            require=("AttApply", "LinAttApply"))


def cpu(fn) -> tuple[float, object]:
    t = time.process_time()
    out = fn()
    return time.process_time() - t, out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--max", type=int, default=6, help="largest bound for the wirings alone")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--row", action="store_true", help="the speed table's row: best-supported max 5 against "
                    "the wirings alone, 5 interleaved rounds")
    ap.add_argument("--bound", type=int, help="the speed table's row at this bound: the whole pipeline once, "
                    "best-supported reading, against 30 s of CPU")
    ap.add_argument("--cpu-limit", type=int, default=300, help="CPU seconds --bound may run (RLIMIT_CPU)")
    args = ap.parse_args()
    if args.row:
        return row(max(5, args.repeats))
    if args.bound:
        return bounded(args.bound, args.cpu_limit)
    prog = stringdiag.load(ROOT / "gallery" / "anatomy.diag")
    defns = [prog[n] for n in NAMES]
    gens, stream = generators(defns)
    rules = load_rules(ROOT / "rules" / "absorb.rules") + load_rules(ROOT / "rules" / "merge.rules")

    print("the wirings alone (ordered ports, only the input copied)")
    print(f"{'max':>3}  {'ordered':>7}  {'not-comp':>8}  {'cpu s':>7}")
    for n in range(1, args.max + 1):
        t, (raw, nc) = cpu(lambda: _wirings(gens, stream, n))
        print(f"{n:>3}  {raw:>7}  {nc:>8}  {t:>7.3f}")

    reference = ("wirings alone, max 5 (reference)", lambda: _wirings(gens, stream, 5)[0])
    cases = [reference,
             ("best-supported, max 4", lambda: _reduced(defns, Reading(4, **BEST), rules)),
             ("best-supported, max 5", lambda: _reduced(defns, Reading(5, **BEST), rules)),
             ("old reading (ordered), max 5", lambda: _reduced(defns, Reading(5), rules))]
    times: dict[str, list[float]] = {label: [] for label, _ in cases}
    counts: dict[str, object] = {}
    for _ in range(args.repeats):
        for label, fn in cases:
            t, counts[label] = cpu(fn)
            times[label].append(t)
    ref = times[reference[0]]
    print(f"\nthe pipeline, {args.repeats} interleaved rounds (median CPU s; ratio to the reference, median of rounds)")
    print(f"{'case':<34}  {'count':>7}  {'cpu s':>7}  {'ratio':>7}")
    for label, _ in cases:
        ratio = statistics.median(t / r for t, r in zip(times[label], ref))
        print(f"{label:<34}  {counts[label]!s:>7}  {statistics.median(times[label]):>7.3f}  {ratio:>6.0f}x")


def row(rounds: int) -> None:
    """The best-supported reading at max 5 against the wirings alone at max 5, same rounds."""
    import sys
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    import cpu_clock as C
    prog = stringdiag.load(ROOT / "gallery" / "anatomy.diag")
    defns = [prog[n] for n in NAMES]
    gens, stream = generators(defns)
    rules = load_rules(ROOT / "rules" / "absorb.rules") + load_rules(ROOT / "rules" / "merge.rules")
    mine, ref = [], []
    for r in range(rounds):
        for which in ((0, 1) if r % 2 == 0 else (1, 0)):
            if which == 0:
                mine.append(cpu(lambda: _reduced(defns, Reading(5, **BEST), rules))[0])
            else:
                ref.append(cpu(lambda: _wirings(gens, stream, 5))[0])
    ratio = statistics.median(a / b for a, b in zip(mine, ref))
    C.row("`enumerate`, best-supported reading, max 5, in-process", "the wirings alone, max 5",
          f"{ratio:.1f}x ({statistics.median(mine):.2f} vs {statistics.median(ref):.3f} s CPU)",
          "reduction <= 10x the wirings", ratio <= 10)


class _Stop(BaseException):
    """The CPU-time limit was reached (SIGXCPU), or the run was stopped (SIGTERM): a
    BaseException, so no ``except Exception`` on the way swallows it."""


def bounded(bound: int, limit: int, goal: float = 30.0) -> None:
    """The best-supported reading at ``bound``, once, by CPU time; past ``limit`` CPU seconds the
    kernel's signal stops it, and the row says where (which stage, how many wirings reduced),
    loading the generators and rules included."""
    import resource
    import signal
    import sys
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    import cpu_clock as C
    from stringdiag.enumerate.stages import Work

    def stop(*_):
        for s in (signal.SIGXCPU, signal.SIGTERM):  # once: the kernel repeats SIGXCPU every second
            signal.signal(s, signal.SIG_IGN)
        raise _Stop

    seen = {"reduced": 0, "of": 0}

    def watch(items):
        items = list(items)
        seen["of"] = len(items)
        print(f"  reducing {len(items)} ordered wirings from {time.process_time() - t0:.1f} s CPU", flush=True)
        for k, x in enumerate(items):
            seen["reduced"] = k
            yield x

    t0 = time.process_time()
    work = Work(progress=watch, stage="loading the generators")
    what = f"`enumerate` at bound {bound}, best-supported reading, in-process"
    try:
        signal.signal(signal.SIGXCPU, stop)
        signal.signal(signal.SIGTERM, stop)  # stopped from outside: the row still prints
        used = resource.getrusage(resource.RUSAGE_SELF)
        resource.setrlimit(resource.RLIMIT_CPU, (int(used.ru_utime + used.ru_stime) + limit, resource.RLIM_INFINITY))
        prog = stringdiag.load(ROOT / "gallery" / "anatomy.diag")
        defns = [prog[n] for n in NAMES]
        work.stage = "loading the rules"
        rules = load_rules(ROOT / "rules" / "absorb.rules") + load_rules(ROOT / "rules" / "merge.rules")
        space = enumerate_space(defns, Reading(bound, **BEST), rules, work=work)
    except _Stop:
        spent = time.process_time() - t0
        where = f"{seen['reduced']} of {seen['of']} wirings reduced" if seen["of"] else work.stage
        C.row(what, "-", f"over {spent:.1f} s CPU (stopped: {where})", f"<= {goal:.0f} s CPU", False)
        return
    spent = time.process_time() - t0
    counts = " / ".join(str(st.count) for st in space.stages)
    C.row(what, "-", f"{spent:.1f} s CPU (stages {counts})", f"<= {goal:.0f} s CPU", spent <= goal)


def _wirings(gens, stream, n):
    ws = list(wirings(gens, stream, n))
    return len(ws), sum(not is_composite(w, gens, stream) for w in ws)


def _reduced(defns, reading, rules) -> int:
    return enumerate_space(defns, reading, rules).stages[-1].count


if __name__ == "__main__":
    main()
