"""Whole language models: a diagram from token ids to logits (``[s] of v -> [s, v]``), trained
as it is written, beside the App. C recipe of ``model.py`` (a head inside the paper's
layer), which this module leaves alone.

The model is the compiled diagram with every fixed dimension sized: by the caller, else by the
default its file declares (``dim L : fixed = 2``), never guessed; the vocabulary dimension by the
tokenizer. What rebuilds it is data: the ``.diag`` sources (the file and every file it imports,
read again from this record, never from disk), the diagram's name, the sizes and the approximator.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Mapping

import torch
from torch import nn

from ..analysis.combine import dimensions
from ..errors import DiagError
from ..graph.diagram import Diagram
from ..graph.types import DimKind
from ..lower.interface import vocab_dim  # (train_lm and cli/train ask it too)
from ..elaborate.loader import loads
from ..lower import compile
from ..resources import PREFIX, argument
from ..syntax import ast as A
from .model import assert_causal

SOURCES = "sources"  # the folder of a rebuilt model's .diag files (a temporary one)


@dataclass(frozen=True)
class Sizes:
    """Every fixed dimension of the model, and which of them took their file's default."""

    dims: dict[str, int]
    defaulted: tuple[str, ...]

    def line(self) -> str:
        shown = ", ".join(f"{n} {v}" + (" (default)" if n in self.defaulted else "") for n, v in self.dims.items())
        return f"sizes: {shown}"


def fixed_names(d: Diagram) -> list[str]:
    """The fixed dimensions that ``d`` and the diagrams it uses need sized, in the order they are met."""
    out = []
    for name, owner in dimensions(d).items():
        decl = d.program.lookup_dim(name) or owner.program.lookup_dim(name)
        if decl is not None and decl.kind is DimKind.FIXED:
            out.append(name)
    return out


def sizes(d: Diagram, given: Mapping[str, int], vocab: int) -> Sizes:
    """Each fixed dimension the compiled model needs: the vocabulary's from the tokenizer, the
    others as ``given``, else their declared default; one with neither is an error naming it."""
    v = vocab_dim(d)
    if v is not None and v in given and given[v] != vocab:
        raise DiagError(f"--dims: '{v}' is the vocabulary's size, {vocab:,} here (the tokenizer's); leave it out")
    dims, defaulted, missing = {}, [], []
    for name, owner in dimensions(d).items():
        decl = d.program.lookup_dim(name) or owner.program.lookup_dim(name)
        if decl is None or decl.kind is not DimKind.FIXED:
            continue
        if name == v:
            dims[name] = vocab
        elif name in given:
            dims[name] = given[name]
        elif decl.default is not None:
            dims[name] = decl.default
            defaulted.append(name)
        else:
            missing.append(name)
    if missing:
        raise DiagError(f"'{d.name}' has fixed dimension(s) with no size and no default: {', '.join(missing)}; "
                        f"give them with --dims (e.g. --dims {missing[0]}=64) or declare a default "
                        f"(dim {missing[0]} : fixed = 64)")
    return Sizes(dims, tuple(defaulted))


@dataclass
class Spec:
    """What rebuilds a trained language model: the sources, the diagram, its sizes, the approximator,
    and the width the learning-rate schedule is scaled by."""

    sources: dict[str, str]  # path (relative to the folder that holds them all) -> text
    main: str  # the file defining the diagram, a key of sources
    diagram: str
    dims: dict[str, int]
    approximator: str = "mlp"
    d_model: int = 128
    kind: str = "lm"
    extra: dict = field(default_factory=dict)

    def to_json(self) -> dict:
        return asdict(self)

    @classmethod
    def from_json(cls, data: Mapping) -> "Spec":
        try:
            spec = cls(**{k: data[k] for k in ("sources", "main", "diagram", "dims", "approximator", "d_model")})
        except (KeyError, TypeError) as e:
            raise DiagError(f"not a stringdiag language model's configuration (missing or bad {e})") from None
        if not isinstance(spec.sources, dict) or spec.main not in spec.sources \
                or not all(isinstance(t, str) for t in spec.sources.values()):
            raise DiagError("not a stringdiag language model's configuration (its sources do not hold its file)")
        sized = isinstance(spec.dims, dict) and all(isinstance(n, str) and type(v) is int and v > 0
                                                    for n, v in spec.dims.items())
        if not sized or type(spec.d_model) is not int or spec.approximator not in ("linear", "mlp"):
            raise DiagError("not a stringdiag language model's configuration (bad sizes, width or approximator)")
        return spec


def sources(path: str | Path) -> tuple[dict[str, str], str]:
    """The text of a file and of every file it imports (transitively; the package's own imports
    excepted), keyed by their paths relative to the folder that holds them all; and the file's key."""
    path = argument(path)  # a shipped name (stringdiag:gallery/lm.diag) is the installed file
    found: dict[Path, str] = {}
    todo = [Path(path).resolve()]
    while todo:
        p = todo.pop()
        if p in found:
            continue
        found[p] = p.read_text()
        for item in A.read(found[p], str(p)):
            if isinstance(item, A.Import) and not item.path.value.startswith(PREFIX):
                todo.append((p.parent / item.path.value).resolve())
    root = Path(*_common([q.parent.parts for q in found]))
    return {str(q.relative_to(root)): text for q, text in found.items()}, str(Path(path).resolve().relative_to(root))


def _common(parts: list[tuple[str, ...]]) -> tuple[str, ...]:
    out: list[str] = []
    for level in zip(*parts):
        if len(set(level)) > 1:
            break
        out.append(level[0])
    return tuple(out)


def diagram_of(spec: Spec, folder: Path) -> Diagram:
    """The spec's diagram, its sources written under ``folder`` (imports resolve among them)."""
    for rel, text in spec.sources.items():
        target = (folder / rel).resolve()
        if folder.resolve() not in target.parents:
            raise DiagError(f"a model's source path {rel!r} leaves its folder")
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text)
    main = folder / spec.main
    prog = loads(main.read_text(), str(main))
    if spec.diagram not in prog.defs:
        raise DiagError(f"the model's sources define no diagram '{spec.diagram}'")
    return prog[spec.diagram]


class WholeModel(nn.Module):
    """A language-model diagram compiled as it is: token ids ``[batch, s]`` -> logits
    ``[batch, s, v]``. ``config`` is what the training loop and checkpoints read."""

    def __init__(self, diagram: Diagram, spec: Spec, check_causal: bool = True):
        super().__init__()
        self.spec = spec
        self.net = compile(diagram, dims=spec.dims, approximator=spec.approximator)
        v = vocab_dim(diagram)
        if v is None:
            raise DiagError(f"'{diagram.name}' is no language model: one of type [s] of v -> [s, v] is")
        self.config: dict[str, Any] = {"kind": "lm", "head": diagram.name, "diagram": diagram.name, "vocab": spec.dims[v],
                       "d_model": spec.d_model, "dims": dict(spec.dims), "approximator": spec.approximator,
                       "spec": spec.to_json()}
        if check_causal:
            assert_causal(self)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        return self.net(tokens)
