"""``stringdiag construct hardmax-classifier --sequences FILE.json -o OUT``: a transformer whose weights
are written from a proof (Alcalde, Fantuzzi and Zuazua (2025), Theorem 2.4, Sec. 3), compiled and
checked on the data it was built for."""
from __future__ import annotations

import argparse
import json

from .options import integer, short

HELP = "build a transformer from a proof: the exact hardmax sequence classifier of Theorem 2.4"
EXAMPLES = """\
stringdiag construct hardmax-classifier --sequences sequences.json -o classifier/
stringdiag construct hardmax-classifier --sequences sequences.json -o classifier/ --json"""


def add_arguments(p: argparse.ArgumentParser) -> None:
    from ..construct.instance import FORMAT  # no torch: the format is plain text

    p.formatter_class = argparse.RawDescriptionHelpFormatter
    p.epilog = FORMAT + """

Writes OUT/classifier.diag (a chain of gallery/hardmax.diag's ScalarHardmaxBlock, then the
readout (2.2)), OUT/hardmax.diag (the blocks it imports) and OUT/classifier.safetensors (its
float64 weights by the compiled module's parameter names); compiles what it wrote and checks
that every sequence's readout lies in its label's target set."""
    p.add_argument("construction", choices=["hardmax-classifier"], help="what to construct")
    p.add_argument("--sequences", required=True, metavar="FILE.json", help="the labelled sequences (below)")
    p.add_argument("-o", "--output", required=True, metavar="OUT", help="the directory to write")
    p.add_argument("--seed", type=integer(0, 2**32 - 1), default=0,
                   help="seed of the generic choices (directions, step sizes) the proof leaves free")
    p.add_argument("--json", action="store_true", help="print the report as JSON")


def report(con, files) -> dict:
    import numpy as np

    inst = con.instance
    dist = [float(np.linalg.norm(y - inst.targets[c].centre)) for y, c in zip(con.readouts, inst.labels)]
    return {"n": con.n, "d": inst.d, "labels": len(set(inst.labels)), "blocks": len(con.blocks),
            "bound": con.bound, "stages": {s: {"blocks": u, "paper": p} for s, (u, p) in con.stages().items()},
            "parameters": con.parameters, "nonzero": con.nonzero(),
            "per_block": con.parameters // max(len(con.blocks), 1), "landed": con.n,
            "largest_distance_to_centre": max(dist), "smallest_radius": min(t.radius for t in inst.targets.values()),
            "files": [str(f) for f in files]}


def text(r: dict) -> str:
    rows = [f"hardmax-classifier: N = {r['n']} sequences in R^{r['d']}, {r['labels']} labels",
            f"  {'stage':<16}{'blocks':>7}  paper's count"]
    rows += [f"  {s:<16}{v['blocks']:>7}  {v['paper']}" for s, v in r["stages"].items()]
    rows += [f"  {'total':<16}{r['blocks']:>7}  8N + 4 = {r['bound']}",
             f"parameters: {r['parameters']:,} ({r['per_block']} per block = 4d + 3: U d + 1, W d + d, v d, "
             f"lam, rho), {r['nonzero']:,} nonzero",
             f"every sequence lands in its target set ({r['landed']} of {r['n']}, compiled module, float64); "
             f"largest distance to a target's centre {r['largest_distance_to_centre']:.2g} "
             f"(smallest radius {r['smallest_radius']:g})",
             "wrote " + ", ".join(short(f) for f in r["files"])]
    return "\n".join(rows)


def run(args: argparse.Namespace) -> int:
    from ..construct import hardmax_classifier, read_instance, write

    inst = read_instance(args.sequences)
    con = hardmax_classifier(inst.sequences, inst.labels,
                             {c: t for c, t in inst.targets.items()}, seed=args.seed)
    files = write(con, args.output)
    r = report(con, files)
    print(json.dumps(r, indent=2) if args.json else text(r))
    return 0
