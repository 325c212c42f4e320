"""``stringdiag construct KIND``: architectures whose weights are written from a proof, compiled and
checked: the exact hardmax sequence classifier (Alcalde, Fantuzzi and Zuazua (2025), Theorem 2.4) and the
ReLU encoders of Lai, Lim and Liu (2024), Sec. 3.3 (Lemma 3.6, Lemma 3.7, Theorem 3.8)."""
from __future__ import annotations

import argparse
import json

from ..resources import argument
from .options import UsageError, integer, short
from .outputs import file_of, folder

FIGURE = file_of("a figure", ".svg", ".png", ".pdf")

HELP = "build a transformer from a proof (hardmax classifier; Veronese, network, spline encoders; Sumformer)"
EXAMPLES = """\
stringdiag construct hardmax-classifier --sequences stringdiag:gallery/construct.sequences.json -o classifier/
stringdiag construct hardmax-classifier --sequences stringdiag:gallery/construct.sequences.json -o classifier/ --json
stringdiag construct hardmax-classifier --sequences stringdiag:gallery/construct.sequences.json -o classifier/ \\
    --stages stages.svg --separation separation.svg
stringdiag construct veronese --n 2 --p 3 -o veronese/
stringdiag construct nn-block --network stringdiag:gallery/construct.network.json --p 4 -o block/
stringdiag construct spline-encoder --function stringdiag:gallery/construct.spline.json -o spline/
stringdiag construct spline-decoder --function stringdiag:gallery/construct.autoregressive.json -o decoder/
stringdiag construct sumformer --function stringdiag:gallery/construct.equivariant.json -o sumformer/"""
KINDS = ("hardmax-classifier", "veronese", "nn-block", "spline-encoder", "spline-decoder", "spline-encoder-decoder",
         "sumformer")
NEEDS = {"hardmax-classifier": ("sequences",), "veronese": ("n", "p"), "nn-block": ("network", "p"),
         "spline-encoder": ("function",), "spline-decoder": ("function",), "spline-encoder-decoder": ("function",),
         "sumformer": ("function",)}


def add_arguments(p: argparse.ArgumentParser) -> None:
    from ..construct.instance import FORMAT  # no torch: the formats are plain text
    from ..construct.spline_input import FUNCTION_FORMAT, NETWORK_FORMAT, SUMFORMER_FORMAT

    p.formatter_class = argparse.RawDescriptionHelpFormatter
    p.epilog = "hardmax-classifier's " + FORMAT + """

Writes OUT/classifier.diag (a chain of gallery/hardmax.diag's ScalarHardmaxBlock, then the
readout (2.2)), OUT/hardmax.diag (the blocks it imports) and OUT/classifier.safetensors (its
float64 weights by the compiled module's parameter names); compiles what it wrote and checks
that every sequence's readout lies in its label's target set.

veronese, nn-block and spline-encoder write OUT/encoder.diag (a chain of gallery/spline_encoder.diag's
SplineBlock: ReLU heads with position biases, then a one-layer ReLU network), OUT/spline_encoder.diag
and OUT/encoder.safetensors, and compare the compiled encoder with its target on 16 random X:
veronese (Lemma 3.6): position j of the output holds v_2(X), every monomial of degree <= 2 in the
n x p entries of X, in its block j; nn-block (Lemma 3.7) and spline-encoder (Theorem 3.8) take the
files below; spline-decoder (Corollary 3.10) takes spline-encoder's, for an f whose entry at position j
reads positions 1..j only, and chains MaskedSplineBlock (masked heads) instead; spline-encoder-decoder
(the remark after Corollary 3.10, our reconstruction) takes f(X, Y) whose entry j reads all of X and
Y's positions 1..j, and writes one SplineBlock encoder on X followed by EncDecSplineBlock blocks:

""" + NETWORK_FORMAT + "\n\n" + FUNCTION_FORMAT + """

sumformer (Alberti et al. (2023), Theorem 4.1, continuous proof) writes OUT/sumformer.diag, a Polynomial
Sumformer psi(x_i, sum_k phi(x_k)) with phi every monomial of degree 1..n and psi a polynomial of x_i and
the other tokens' power sums, and compares it with f on 16 random X; it takes:

""" + SUMFORMER_FORMAT
    p.add_argument("construction", choices=KINDS, help="what to construct")
    p.add_argument("--sequences", metavar="FILE.json", help="hardmax-classifier: the labelled sequences (below)")
    p.add_argument("--n", type=integer(1, 64), help="veronese: the features of X (tokens' width)")
    p.add_argument("--p", type=integer(1, 64), help="veronese, nn-block: the positions (tokens) of X")
    p.add_argument("--network", metavar="FILE.json", help="nn-block: the one-layer network (below)")
    p.add_argument("--function", metavar="FILE.json",
                   help="spline-encoder, spline-decoder: the max-definable function; sumformer: the equivariant "
                        "polynomial (below)")
    p.add_argument("-o", "--output", required=True, metavar="OUT", type=folder, help="the directory to write")
    p.add_argument("--seed", type=integer(0, 2**32 - 1), default=0,
                   help="seed of the generic choices the proof leaves free (hardmax-classifier) or of the check's random X")
    p.add_argument("--stages", metavar="FIGURE", type=FIGURE,
                   help="hardmax-classifier: also draw the tokens after each stage (Fig. 2 (a)-(f)) to FIGURE "
                        "(.svg, .png or .pdf)")
    p.add_argument("--separation", metavar="FIGURE", type=FIGURE,
                   help="hardmax-classifier: also draw the separation stage layer by layer, the cases of "
                        "Lemma 3.5 (Figs. 3-5), to FIGURE")
    p.add_argument("--json", action="store_true", help="print the report as JSON")


def report(con, files) -> dict:
    import numpy as np

    inst = con.instance
    dist = [float(np.linalg.norm(y - inst.targets[c].centre)) for y, c in zip(con.readouts, inst.labels)]
    return {"n": con.n, "d": inst.d, "labels": len(set(inst.labels)), "blocks": len(con.blocks),
            "bound": con.bound, "stages": {s: {"blocks": u, "paper": p} for s, (u, p) in con.stages().items()},
            "parameters": con.parameters, "nonzero": con.nonzero(),
            "per_block": con.parameters // max(len(con.blocks), 1), "landed": con.n,
            "repeated_tokens": sum(len(z) - len(np.unique(z, axis=0)) for z in inst.sequences),
            "largest_distance_to_centre": max(dist), "smallest_radius": min(t.radius for t in inst.targets.values()),
            "files": [str(f) for f in files]}


def text(r: dict) -> str:
    rows = [f"hardmax-classifier: N = {r['n']} sequences in R^{r['d']}, {r['labels']} labels",
            f"  {'stage':<16}{'blocks':>7}  paper's count"]
    rows += [f"  {s:<16}{v['blocks']:>7}  {v['paper']}" for s, v in r["stages"].items()]
    if r["repeated_tokens"]:
        rows.insert(1, f"repeated tokens: {r['repeated_tokens']}, each copy read as mass on its token (Remark 2.6, (2.7))")
    rows += [f"  {'total':<16}{r['blocks']:>7}  8N + 4 = {r['bound']}",
             f"parameters: {r['parameters']:,} ({r['per_block']} per block = 4d + 3: U d + 1, W d + d, v d, "
             f"lam, rho), {r['nonzero']:,} nonzero",
             f"every sequence lands in its target set ({r['landed']} of {r['n']}, compiled module, float64); "
             f"largest distance to a target's centre {r['largest_distance_to_centre']:.2g} "
             f"(smallest radius {r['smallest_radius']:g})",
             "wrote " + ", ".join(short(f) for f in r["files"])]
    return "\n".join(rows)


def encoder_report(enc, files) -> dict:
    return {"construction": enc.kind, "n": enc.n, "p": enc.p, "blocks": len(enc.layers),
            "heads": enc.heads, "stages": [layer.stage for layer in enc.layers], "parameters": enc.parameters,
            "monomials": len(enc.monomials), "largest_relative_error": enc.error, "files": [str(f) for f in files]}


def encoder_text(r: dict) -> str:
    kind = "decoder" if r["construction"] == "spline-decoder" else "encoder"
    rows = [f"{r['construction']}: X is {r['n']} x {r['p']} (features x positions), {r['blocks']} {kind} "
            f"block(s), heads {', '.join(map(str, r['heads']))}"]
    rows += [f"  block {k}: {s}" for k, s in enumerate(r["stages"], 1)]
    if r["monomials"]:
        rows.append(f"monomials formed: {r['monomials']} (the constant included)")
    rows += [f"parameters: {r['parameters']:,} (position tables held for 64 positions)",
             f"matches its target on 16 random X (compiled module, float64): largest relative error "
             f"{r['largest_relative_error']:.1g}",
             "wrote " + ", ".join(short(f) for f in r["files"])]
    return "\n".join(rows)


def _sumformer(args: argparse.Namespace) -> int:
    from ..construct.spline_input import read_sumformer
    from ..construct.sumformer_poly import sumformer, write

    gs, n, d = read_sumformer(args.function)
    con = sumformer(gs, n, d, seed=args.seed)
    files = write(con, args.output)
    r = {"construction": "sumformer", "n": n, "d": d, "latent": con.latent, "psi_degree": con.degree,
         "psi_terms": con.terms, "parameters": con.parameters, "largest_relative_error": con.error,
         "files": [str(f) for f in files]}
    print(json.dumps(r, indent=2) if args.json else "\n".join([
        f"sumformer: n = {n} tokens in R^{d}; phi: the d' = C(n + d, d) - 1 = {con.latent} monomials of degree 1..{n}",
        f"psi: degree {con.degree} in x_i and the others' power sums, {con.terms} nonzero coefficients",
        f"parameters: {con.parameters:,} (Phi and Psi on tensor powers of [1, x] and [1, x, Sigma - phi(x)])",
        f"matches f on 16 random X (compiled module, float64): largest relative error {con.error:.1g}",
        "wrote " + ", ".join(short(f) for f in files)]))
    return 0


def _encoder_decoder(args: argparse.Namespace) -> int:
    from ..construct.encdec_splines import write
    from ..construct.spline_input import read_function
    from ..construct.splines import spline_encoder_decoder

    entries, n, p, m = read_function(args.function, pair=True)
    con = spline_encoder_decoder(entries, n, m, p, seed=args.seed)
    files = write(con, args.output)
    r = {"construction": "spline-encoder-decoder", "n": n, "m": m, "p": p, "blocks": 1 + len(con.layers),
         "heads": [con.encoder.dims[1]] + [f"{e.dims[1]}+{e.dims[2]}" for e in con.layers],
         "stages": [e.gamma.stage for e in con.layers], "parameters": con.parameters,
         "largest_relative_error": con.error, "files": [str(f) for f in files]}
    rows = [f"spline-encoder-decoder: X is {n} x {p}, Y is {m} x {p} (features x positions), 1 encoder block, "
            f"{len(con.layers)} encoder-decoder block(s), heads {', '.join(map(str, r['heads']))} (beta+gamma)"]
    rows += [f"  block {k}: {s}" for k, s in enumerate(r["stages"], 1)]
    rows += [f"parameters: {r['parameters']:,} (position tables held for 64 positions)",
             f"matches its target on 16 random X, Y (compiled module, float64): largest relative error {con.error:.1g}",
             "wrote " + ", ".join(short(f) for f in files)]
    print(json.dumps(r, indent=2) if args.json else "\n".join(rows))
    return 0


def _encoder(args: argparse.Namespace) -> int:
    from ..construct import splines
    from ..construct.spline_input import read_function, read_network

    if args.construction == "veronese":
        enc = splines.veronese(args.n, args.p, seed=args.seed)
    elif args.construction == "nn-block":
        enc = splines.nn_block(*read_network(args.network), args.p, seed=args.seed)
    elif args.construction == "spline-encoder-decoder":
        return _encoder_decoder(args)
    else:
        entries, n, p, _ = read_function(args.function)
        enc = splines.spline_encoder(entries, n, p, seed=args.seed, causal=args.construction == "spline-decoder")
    r = encoder_report(enc, splines.write(enc, args.output))
    print(json.dumps(r, indent=2) if args.json else encoder_text(r))
    return 0


def run(args: argparse.Namespace) -> int:
    missing = [f"--{k}" for k in NEEDS[args.construction] if getattr(args, k) is None]
    if missing:
        raise UsageError(f"construct {args.construction} needs {' and '.join(missing)}")
    for k in ("sequences", "network", "function"):  # a shipped input by package name (the --help examples')
        if getattr(args, k) is not None:
            setattr(args, k, argument(getattr(args, k)))
    if args.construction == "sumformer":
        return _sumformer(args)
    if args.construction != "hardmax-classifier":
        return _encoder(args)
    from ..construct import hardmax_classifier, read_instance, write

    inst = read_instance(args.sequences)
    con = hardmax_classifier(inst.sequences, inst.labels,
                             {c: t for c, t in inst.targets.items()}, seed=args.seed)
    files = write(con, args.output)
    if args.stages:
        from ..construct.hardmax_stages import draw

        files = (*files, draw(con, args.stages))
    if args.separation:
        from ..construct.hardmax_cases import draw_separation

        files = (*files, draw_separation(con, args.separation))
    r = report(con, files)
    print(json.dumps(r, indent=2) if args.json else text(r))
    return 0
