"""Benchmark: confirm that two separately generated N-layer encoders are isomorphic.

Each model is ``transformer_source(N)`` (8 heads a layer, definitions), loaded and expanded
into primitive boxes; the two copies are built apart, so nothing is shared but the source.
Timed is ``isomorphic(a, b)`` on the two expanded diagrams, everything included (building
the labelled structure of both, refinement, the confirming walk), for 6, 12, 24 and 48
layers; also the new ``canonical_hash`` of one model.

The old path (networkx's Weisfeiler-Lehman hash, then VF2 on ``labelled`` graphs, as
``iso.isomorphic`` did before) is timed only with ``--vf2``, in the same loop, alternating with
the new one, on the sizes given by ``--old-layers``. It is very slow: with networkx 3.6 VF2 takes about 40 s
on a one-layer encoder (340 nodes) and about 5x that per doubling, so by default it runs
on 1 and 2 layers, once (``--old-repeats``). (VF2's time depends on the order of the
nodes: the same one-layer graphs renumbered in topological order take 0.3 s.) Reported:
the median of the repeats (and the fastest) and the growth per doubling, in CPU seconds
(``time.process_time``: on a shared machine wall time measures the neighbours); each size is
printed as soon as it is measured.

    .venv/bin/python benchmarks/bench_iso.py [--repeats 5] [--vf2 [--old-layers 1 2] [--old-repeats 1]]
"""
from __future__ import annotations

import argparse
import statistics
import sys
import time
import warnings
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import networkx as nx  # noqa: E402

import stringdiag  # noqa: E402
from stringdiag.graph import iso  # noqa: E402
from transformer_source import transformer_source  # noqa: E402


def old_hash(d) -> str:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return nx.weisfeiler_lehman_graph_hash(iso.labelled(d), node_attr="label", edge_attr="label", iterations=4)


def old_isomorphic(a, b) -> bool:
    """``iso.isomorphic`` as it was: sizes, the WL hash of both, then VF2 on the labelled graphs."""
    ha, hb = iso.labelled(a), iso.labelled(b)
    if ha.number_of_nodes() != hb.number_of_nodes() or ha.number_of_edges() != hb.number_of_edges():
        return False
    if old_hash(a) != old_hash(b):
        return False
    same = lambda x, y: x["label"] == y["label"]  # noqa: E731
    return nx.is_isomorphic(ha, hb, node_match=same, edge_match=same)


def timed(f, *args) -> tuple[float, object]:
    t0 = time.process_time()
    out = f(*args)
    return time.process_time() - t0, out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--layers", type=int, nargs="+", default=[6, 12, 24, 48])
    ap.add_argument("--old-layers", type=int, nargs="*", default=[1, 2], help="sizes to time the old path on")
    ap.add_argument("--old-repeats", type=int, default=1)
    ap.add_argument("--vf2", action="store_true", help="also time the old networkx VF2 path (minutes)")
    args = ap.parse_args()
    if not args.vf2:
        args.old_layers = []

    stringdiag.loads("dim s : seq\n")  # the prelude and grammar, outside the timings
    sizes = sorted(set(args.layers) | set(args.old_layers))
    models = {}
    for n in sizes:
        src = transformer_source(n)
        a = stringdiag.loads(src, "a.diag")["Encoder"].expand()
        b = stringdiag.loads(src, "b.diag")["Encoder"].expand()
        g = iso.labelled(a)
        models[n] = (a, b, len(a), g.number_of_nodes(), g.number_of_edges())

    new_t: dict[int, list] = {n: [] for n in sizes}
    hash_t: dict[int, list] = {n: [] for n in sizes}
    old_t: dict[int, list] = {n: [] for n in args.old_layers}
    for rep in range(args.repeats):
        for n in sizes:
            a, b = models[n][:2]
            if n in old_t and rep < args.old_repeats:
                dt, same = timed(old_isomorphic, a, b)
                assert same, "old path: not isomorphic?"
                old_t[n].append(dt)
            dt, same = timed(iso.isomorphic, a, b)
            assert same, "new path: not isomorphic?"
            new_t[n].append(dt)
            dt, ha = timed(iso.canonical_hash, a)
            hash_t[n].append(dt)
            assert ha == iso.canonical_hash(b)
        print(f"round {rep + 1}/{args.repeats}: " + ", ".join(f"{n} layers {new_t[n][-1]:.3f} s" for n in sizes),
              flush=True)

    med = {n: statistics.median(ts) for n, ts in new_t.items()}
    old_med = {n: statistics.median(ts) for n, ts in old_t.items()}
    print(f"isomorphic(a, b), two expanded N-layer encoders: median of {args.repeats} "
          f"(old path: of {min(args.old_repeats, args.repeats)}), CPU seconds")
    print(f"{'layers':>6}{'boxes':>7}{'nodes':>7}{'edges':>7}{'old VF2':>10}{'new':>9}{'fastest':>9}"
          f"{'speedup':>9}{'hash':>8}{'new x/doubling':>16}")
    for n in sizes:
        _, _, boxes, nodes, edges = models[n]
        old = f"{old_med[n]:>10.2f}" if n in old_med else f"{'-':>10}"
        speed = f"{old_med[n] / med[n]:>8.0f}x" if n in old_med else f"{'-':>9}"
        growth = f"{med[n] / med[n // 2]:>15.2f}x" if n % 2 == 0 and n // 2 in med else f"{'':>16}"
        print(f"{n:>6}{boxes:>7}{nodes:>7}{edges:>7}{old}{med[n]:>9.3f}{min(new_t[n]):>9.3f}{speed}"
              f"{statistics.median(hash_t[n]):>8.3f}{growth}")
    for n in sorted(old_med):
        if n % 2 == 0 and n // 2 in old_med:
            print(f"old path growth {n // 2} -> {n} layers: {old_med[n] / old_med[n // 2]:.1f}x")
    big = max(sizes)
    ok = med[big] < 0.5 if big >= 48 else True
    print(f"{big}-layer pair: {med[big]:.3f} s CPU (median) -> {'PASS' if ok else 'FAIL'} (< 0.5 s)")
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
