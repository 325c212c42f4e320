"""Benchmark: where drawing a derivation's chain (``derive -o x.svg``) spends its CPU, part by part.

In one process, the derivation loaded first (not counted), then ``chain_svg`` drawn ``--rounds``
times (the medians printed): the process's own CPU time (``time.process_time``) split by the
parts below (each wrapped; a part's time includes what it calls), and the CPU of the Graphviz
processes it ran (user + system of the children) with their count. The imports drawing adds
(numpy) are timed in a fresh process. The whole command against ``derive`` alone is
``bench_verify.py``'s row; this says what that figure is made of.

    .venv/bin/python benchmarks/bench_draw.py [--rounds 3] [gallery/sumformer_thm45_performer.deriv]
"""
from __future__ import annotations

import argparse
import resource
import statistics
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

PARTS = [  # (module, function, what it is)
    ("stacked", "_way", "routing wires round frames (route, detour, taut, bezier)"),
    ("crossings", "_read", "reading Graphviz's SVG (boxes' places, wires through frames)"),
    ("draw", "to_graphviz", "building each step's Graphviz graph (render/dotsource.py)"),
    ("stacked", "parse", "parsing dot's placed layout (-Tdot)"),
    ("stacked", "_place", "stacking the blocks in the order before"),
    ("draw", "_mark", "the order hints"),
]


def _children() -> float:
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def _wrap(spent: Counter, module, name: str, what: str) -> None:
    f = getattr(module, name)

    def timed(*a, **k):
        t = time.process_time()
        try:
            return f(*a, **k)
        finally:
            spent[what] += time.process_time() - t
    setattr(module, name, timed)


def _forget(stacked, crossings, dotrun) -> None:
    """Every round from nothing: the caches of routes, read pictures and layouts emptied."""
    for f in (stacked._way, crossings._read, crossings._crossings, crossings._centres):
        f.cache_clear()
    dotrun._MEMO.clear()


def imports() -> float:
    """CPU of importing what drawing adds (numpy; the DOT text is our own), in a fresh process."""
    code = "import time; t = time.process_time(); import numpy; print(time.process_time() - t)"
    return float(subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout)


def dot_start(env, n: int = 10) -> float:
    """CPU of one ``dot -Tsvg`` run on a graph of one labelled box in ``env`` (its start: the
    plugins, and with Graphviz as installed the fonts loaded to size the label), median of ``n``."""
    got = []
    for _ in range(n):
        c = _children()
        subprocess.run(["dot", "-Tsvg"], input=b'digraph{a [label="x" fontname=Helvetica shape=box]}',
                       capture_output=True, check=True, env=env)
        got.append(_children() - c)
    return statistics.median(got)


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("derivation", nargs="?", default="gallery/sumformer_thm45_performer.deriv")
    ap.add_argument("--rounds", type=int, default=3)
    a = ap.parse_args(argv)
    from stringdiag.derive.derivation import load_derivation
    from stringdiag.render import crossings, draw, dotrun, gvplugins, stacked

    modules = {"stacked": stacked, "crossings": crossings, "draw": draw}
    runs: Counter = Counter()
    cpu: Counter = Counter()  # children's CPU by program
    real = dotrun.spawn

    def counted(cmd, source, env=None):
        runs[cmd[0]] += 1
        c = _children()
        try:
            return real(cmd, source, env)
        finally:
            cpu[cmd[0]] += _children() - c
    dotrun.spawn = counted
    t = time.process_time()
    deriv = load_derivation(ROOT / a.derivation)
    print(f"{a.derivation}: {len(deriv.steps)} pictures; loading it in this process {time.process_time() - t:.2f} s CPU",
          flush=True)
    rows: dict[str, list[float]] = {}
    originals = {(mod, name): getattr(modules[mod], name) for mod, name, _ in PARTS}
    for r in range(a.rounds):
        _forget(stacked, crossings, dotrun)
        spent: Counter = Counter()
        for mod, name, what in PARTS:
            _wrap(spent, modules[mod], name, what)
        runs.clear()
        cpu.clear()
        t, c = time.process_time(), _children()
        draw.chain_svg(deriv.frames(), [s.changes for s in deriv.steps])
        total, kids = time.process_time() - t, _children() - c
        for (mod, name), f in originals.items():
            setattr(modules[mod], name, f)
        for what, v in [("drawing, this process", total), *spent.items(),
                        (f"Graphviz processes ({', '.join(f'{n} {k}' for k, n in runs.items())})", kids),
                        *((f"  of which {k} ({n} runs)", cpu[k]) for k, n in runs.items())]:
            rows.setdefault(what, []).append(v)
        print(f"  round {r + 1}: {total:.2f} s CPU here, {kids:.2f} s in Graphviz", flush=True)
    print(f"importing numpy: {imports():.2f} s CPU (a fresh process)")
    layout = gvplugins.layout_environ(real)
    print(f"starting dot (a graph of one box): {1000 * dot_start(layout):.1f} ms CPU with the layout plugins "
          f"drawing uses, {1000 * dot_start(None):.1f} ms as installed (medians of 10)")
    for what, v in rows.items():
        print(f"{what}: {statistics.median(v):.2f} s CPU (median of {len(v)})")


if __name__ == "__main__":
    main()
