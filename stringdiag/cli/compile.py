"""``stringdiag compile FILE -d NAME --dims d=64,k=16 [-o DIR] [--json]``: lower a diagram to PyTorch,
and write it as a folder that imports and runs with torch alone (``lower/export.py``)."""
from __future__ import annotations

import argparse
import json

from ..graph.budget import MAX_LOWERED, Build, refuse_above
from ..graph.types import DimKind, show_type
from . import options, outputs
from .common import load_reporting, pick
from ..errors import DiagError
from .options import UsageError, short

WEIGHTS = "weights.safetensors"

HELP = "compile a diagram to a torch module; print its code and parameter count, or write it (-o DIR)"


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("file", metavar="FILE")
    p.add_argument("-d", "--diagram", metavar="NAME", required=True, help="the diagram to compile")
    p.add_argument("--dims", default="", metavar="d=64,k=16", help="sizes of the fixed dimensions")
    p.add_argument("--approximator", default="mlp", choices=["linear", "mlp"],
                   help="what learnable boxes become (default: mlp, one hidden layer as wide as its input)")
    p.add_argument("-o", "--output", metavar="DIR",
                   help="write the module as a folder that imports with torch alone: DIR/module.py (the class, "
                        "named after the diagram), DIR/weights.safetensors, DIR/diag/ (the source); "
                        "without it, print the forward code")
    p.add_argument("--json", action="store_true", help="print the signature and parameters as JSON")
    p.add_argument("--max-boxes", type=options.positive, default=MAX_LOWERED, metavar="N",
                   help="refuse, before any work, a diagram that would lower more than N boxes, each copy of a "
                        f"stack counted (default: {MAX_LOWERED:,}; the gallery's largest model has under 200)")


def parse_dims(text: str, diagram=None) -> dict[str, int]:
    """``d=64,k=16`` -> {'d': 64, 'k': 16}, with a clear error for anything else
    (and, given the diagram, for names it does not know)."""
    return options.parse_dims(text, diagram)


def check_sizes(diagram, dims: dict[str, int]) -> None:
    """Every fixed dimension the diagram and the definitions it uses need, named at once (each with
    the diagram that declares its use), when any has neither a size given nor a default."""
    from ..analysis.combine import dimensions

    missing: dict[str, list[str]] = {}
    for name, owner in dimensions(diagram).items():
        decl = diagram.program.lookup_dim(name) or owner.program.lookup_dim(name)
        if decl is not None and decl.kind is DimKind.FIXED and decl.default is None and name not in dims:
            missing.setdefault(owner.name, []).append(name)
    if missing:
        names = [n for group in missing.values() for n in group]
        where = "; ".join(f"{', '.join(sorted(group))} ({owner})" for owner, group in missing.items())
        raise DiagError(f"give sizes for the fixed dimension(s) of '{diagram.name}' and what it uses: {where} "
                        f"(e.g. --dims {','.join(f'{n}=64' for n in sorted(names))})")


def check_size(diagram, dims: dict[str, int], approximator: str, max_boxes: int = MAX_LOWERED) -> int | None:
    """Refuse a diagram too large to lower (``graph/budget.py``) or sizes whose parameters cannot
    be allocated here; the parameter count when it is known."""
    refuse_above(diagram, Build.LOWERED, max_boxes, "compile --max-boxes", dims)
    from ..lower import compile  # torch: only once the diagram is known to fit

    try:
        n = options.count_parameters(lambda make: compile(diagram, dims=dims, approximator=make, max_boxes=max_boxes),
                                     approximator)
    except options.TooLarge:
        raise options.too_large() from None
    if n is not None:
        import torch

        options.check_memory(n * torch.get_default_dtype().itemsize, f"for {n:,} parameters")
    return n


def run(args: argparse.Namespace) -> int:
    if args.output:  # before any work: a bad folder name costs nothing
        from ..lower.export import check_folder, check_name

        try:
            check_name(args.output)
        except DiagError as e:  # a name that can never be an export folder: the command line is wrong
            raise UsageError(e.message) from None
        outputs.checked("-o/--output", outputs.folder, args.output)  # a path that cannot be written: 2, as anywhere
        check_folder(args.output)  # what only an export folder must be: empty, or one compile -o wrote (1)
    prog = load_reporting(args.file)
    (diagram,) = pick(prog, args.diagram)
    refuse_above(diagram, Build.LOWERED, args.max_boxes, "compile --max-boxes", parse_dims(args.dims))  # before
    dims = parse_dims(args.dims, diagram)  # ... the names are checked on the expansion
    check_sizes(diagram, dims)
    check_size(diagram, dims, args.approximator, args.max_boxes)
    from ..lower import compile  # torch: once the diagram is known to fit

    try:
        gm = compile(diagram, dims=dims, approximator=args.approximator, max_boxes=args.max_boxes)
    except (RuntimeError, MemoryError) as e:
        raise (options.out_of_memory(e) or e) from None
    n = sum(p.numel() for p in gm.parameters())
    exported = None
    if args.output:
        from ..lower.export import export

        exported = export(gm, args.output, diagram, dims, args.approximator)
    if args.json:
        print(json.dumps(report(diagram, gm, dims, args.approximator, exported), indent=2))
        return 0
    print(f"{diagram.signature()}: {n:,} parameters ({args.approximator} approximators)")
    for c in getattr(gm, "chunked_scans", ()):
        print(c.describe())
    if exported is not None:
        print(f"wrote {short(exported.folder)}/ (module.py, {WEIGHTS}, {exported.source}): "
              f"from {exported.folder.name} import {exported.class_name}")
    else:
        print(gm.code)
    return 0


def report(diagram, gm, dims: dict[str, int], approximator: str, exported) -> dict:
    """What ``--json`` prints: the signature, the sizes, every parameter tensor (a weight set
    used in two places counted once), and the folder written, if any."""
    params = dict(gm.named_parameters())
    return {
        "diagram": diagram.name,
        "signature": diagram.signature(),
        "inputs": [{"name": n, "type": show_type(diagram.wire_type(w), diagram.id_range(w))}
                   for n, w in zip(diagram.input_names, diagram.inputs)],
        "outputs": [show_type(t) for t in diagram.output_types],
        "dims": dims,
        "approximator": approximator,
        "parameters": sum(p.numel() for p in params.values()),
        "tensors": [{"name": k, "shape": list(p.shape), "dtype": str(p.dtype).removeprefix("torch.")}
                    for k, p in params.items()],
        "output": None if exported is None else {"folder": str(exported.folder), "class": exported.class_name,
                                                  "source": exported.source},
    }
