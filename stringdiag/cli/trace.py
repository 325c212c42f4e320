"""``stringdiag trace MODULE:CALLABLE --example SHAPES [--example SHAPES] [--kwargs JSON] -o OUT.diag
[--weights OUT.safetensors]``: draw an existing PyTorch module as a diagram (``stringdiag.trace``)."""
from __future__ import annotations

import argparse
import importlib
import importlib.util
import json
import sys
from pathlib import Path

from ..errors import DiagError
from .options import UsageError
from .outputs import file_of

HELP = ("trace a PyTorch module (a file or importable module, and a class or function making it) into a .diag; "
        "this runs the file's Python (import it only if you trust it)")
EXAMPLES = """\
stringdiag trace torch.nn:TransformerEncoderLayer --kwargs '{"d_model": 64, "nhead": 4, "batch_first": true}' \\
    --example 2x5x64 --example 2x7x64 -o block.diag
stringdiag trace torch.nn:Linear --kwargs '{"in_features": 64, "out_features": 32}' --example 2x5x64 \\
    -o linear.diag --weights linear.safetensors"""


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("target", metavar="MODULE:CALLABLE",
                   help="a Python file (or an importable module) and the class or function in it that makes the "
                        "module; the file is imported and its Python executed, as python would run it")
    p.add_argument("--example", metavar="SHAPES", action="append", required=True,
                   help="the shapes of the example inputs, batch first, e.g. 2x5x64 (several inputs: 2x5x64,2x5x5; "
                        "token ids below 50: 2x5@50); give it twice, with two sequence lengths, for the sequence "
                        "dimension s")
    p.add_argument("--kwargs", metavar="JSON", default="{}",
                   help="keyword arguments for CALLABLE, as a JSON object, e.g. '{\"n_embd\": 12}'")
    p.add_argument("--config", metavar="FILE", dest="config_file", default=None, help=argparse.SUPPRESS)
    p.add_argument("-o", "--output", metavar="OUT.diag", required=True, type=file_of("a diagram file", ".diag"),
                   help="the .diag file to write")
    p.add_argument("--weights", metavar="OUT.safetensors", type=file_of("weights", ".safetensors"),
                   help="also write the module's weights, named as the compiled trace names them")


def _shapes(text: str) -> list[tuple[tuple[int, ...], int | None]]:
    """Each input's shape, and for token ids (``2x5@50``) the vocabulary they are drawn from."""
    out = []
    try:
        for part in text.split(","):
            shape, _, vocab = part.partition("@")
            out.append((tuple(int(n) for n in shape.split("x")), int(vocab) if vocab else None))
    except ValueError:
        raise UsageError(f"--example '{text}': expected shapes such as 2x5x64 (several: 2x5x64,2x5x5; token ids "
                         "below 50: 2x5@50)") from None
    return out


def _user(what: str, fn, *args, **kwargs):
    """Run the user's own code (importing their file, building their module): what it raises is
    reported as one error naming it, never as a traceback of ours."""
    from ..trace.capture import ModuleFailed, raised

    try:
        return fn(*args, **kwargs)
    except ModuleFailed as e:  # their module's own error, on which inputs it failed said
        raise DiagError(f"{what}: {e.message}") from None
    except (DiagError, KeyboardInterrupt):
        raise
    except BaseException as e:  # their code may raise anything, SystemExit included
        raise DiagError(f"{what} raised {raised(e)}") from None


def _callable(target: str):
    where, sep, name = target.rpartition(":")
    if not sep or not where or not name:
        raise UsageError(f"'{target}': expected MODULE:CALLABLE (my_model.py:Block)")
    if where.endswith(".py"):
        path = Path(where)
        if not path.is_file():
            raise UsageError(f"'{where}': {'it is a directory' if path.is_dir() else 'no such file'}")
        spec = importlib.util.spec_from_file_location(path.stem, path)
        mod = importlib.util.module_from_spec(spec)
        sys.path.insert(0, str(path.parent.resolve()))
        _user(f"importing {where}", spec.loader.exec_module, mod)
    else:
        mod = _user(f"importing {where}", importlib.import_module, where)
    if not hasattr(mod, name):
        raise UsageError(f"'{where}' has no '{name}'")
    return getattr(mod, name)


def run(args: argparse.Namespace) -> int:
    import torch

    from ..lower.tensorfile import write_atomic
    from ..syntax.source import write_atomic as write_file
    from ..trace import trace

    if args.config_file is not None:  # elsewhere (train) --config is a file of options
        raise UsageError("trace takes no --config file of options; the callable's keyword arguments are "
                         "--kwargs JSON, e.g. --kwargs '{\"n_embd\": 12}'")
    try:
        config = json.loads(args.kwargs)
    except json.JSONDecodeError as e:
        raise UsageError(f"--kwargs: not JSON ({e})") from None
    if not isinstance(config, dict):
        raise UsageError("--kwargs: expected a JSON object of keyword arguments")
    if len(args.example) > 2:
        raise UsageError("--example: give it once, or twice (two sequence lengths)")
    module = _user(f"{args.target}(**config)", _callable(args.target), **config)
    if not isinstance(module, torch.nn.Module):
        raise DiagError(f"'{args.target}' made a {type(module).__name__}, not a torch.nn.Module")
    gen = torch.Generator().manual_seed(0)
    examples = [tuple(torch.randn(s, generator=gen) if v is None else torch.randint(0, v, s, generator=gen)
                      for s, v in _shapes(e)) for e in args.example]
    t = _user(f"tracing {args.target} on the examples", trace, module, examples[0],
              examples[1] if len(examples) > 1 else None, file=args.output)
    for w in t.warnings:
        print(w, file=sys.stderr)
    write_file(args.output, t.text, what="the diagram")
    print(f"wrote {args.output}: diagram {t.name} ({len(t.warnings)} warnings)")
    if args.weights:
        write_atomic(args.weights, t.weights.tensors(module.state_dict()), {"diagram": t.name}, "weights")
        print(f"wrote {args.weights}: {len(t.weights.mapping)} tensors")
    return 0
