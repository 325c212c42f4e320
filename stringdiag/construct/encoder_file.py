"""A constructed encoder as the project's artefacts: a ``.diag`` chain of gallery/spline_encoder.diag's
``SplineBlock`` and its float64 weights by the compiled module's parameter names."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import torch

from ..errors import DiagError
from ..elaborate.loader import load, loads
from ..lower import compile as lower
from ..lower.tensorfile import write_atomic
from ..resources import shipped
from ..syntax.source import write_atomic as write_text
from .spline_blocks import SplineLayer

GALLERY = shipped("gallery/spline_encoder.diag")
NAME, HELD = "SplineEncoder", 64  # the position tables' length (``where s <= 64`` in the gallery file)


def source(layers: list[SplineLayer], n: int, title: list[str], block: str = "SplineBlock") -> str:
    """``x_k = SplineBlock<a, h, w, b>(x_{k-1})`` for each block (``MaskedSplineBlock`` for a decoder),
    each with weights of its own."""
    out = layers[-1].dims[3]
    lines = [f"# {t}" for t in title] + [
        "# Written by `stringdiag construct`; weights in encoder.safetensors (float64).",
        'import "spline_encoder.diag"', "", f"diagram {NAME}(x0: [s, {n}]) -> [s, {out}] {{"]
    for k, layer in enumerate(layers, 1):
        a, h, w, b = layer.dims
        lines.append(f"  x{k} = {block}<{a}, {h}, {w}, {b}>(x{k - 1})    # {layer.stage}: {layer.note}")
    return "\n".join(lines + [f"  return x{len(layers)}", "}", ""])


def weights(layers: list[SplineLayer]) -> dict[str, torch.Tensor]:
    """Block k's weights as ``xk = SplineBlock<...>(...)`` compiles them (its heads are ``xk.z``)."""
    t = lambda x: torch.as_tensor(np.ascontiguousarray(x), dtype=torch.float64).clone()  # noqa: E731
    out: dict[str, torch.Tensor] = {}
    for k, layer in enumerate(layers, 1):
        p = f"x{k}."
        for name in ("aq", "ak", "av"):
            out[f"{p}z.A{name[1].upper()}.weight"] = t(getattr(layer, name))
        for name in ("bq", "bk", "bv"):
            table = getattr(layer, name)
            held = np.zeros((HELD, table.shape[1]))
            held[:table.shape[0]] = table
            out[f"{p}z.B{name[1].upper()}.weight"] = t(held)
        out |= {p + "A1.weight": t(layer.a1), p + "A1.bias": t(layer.b1), p + "A2.weight": t(layer.a2),
                p + "A2.bias": t(layer.b2)}
    return out


def build(text: str | None, file: Path, state: dict[str, torch.Tensor]) -> torch.nn.Module:
    """Compile the encoder's source (its import resolved next to ``file``) and load ``state``."""
    prog = loads(text, str(file)) if text is not None else load(file)
    module = lower(prog[NAME], approximator="linear", dtype=torch.float64)
    ours = module.state_dict()
    if set(ours) != set(state) or any(ours[k].shape != v.shape for k, v in state.items()):
        raise DiagError("internal: the constructed weights do not match the compiled module's parameters")
    module.load_state_dict(state, strict=True)
    return module


def in_memory(text: str, state: dict[str, torch.Tensor]) -> torch.nn.Module:
    if not GALLERY.is_file():
        raise DiagError(f"cannot find the blocks' definitions: {GALLERY} is missing")
    return build(text, GALLERY.with_name("<constructed>.diag"), state)


def write(out: Path, text: str, state: dict[str, torch.Tensor], meta: dict) -> tuple[Path, Path]:
    """OUT/encoder.diag, OUT/spline_encoder.diag (the blocks it imports) and OUT/encoder.safetensors."""
    out.mkdir(parents=True, exist_ok=True)
    write_text(out / "spline_encoder.diag", GALLERY.read_text(encoding="utf-8"))
    write_text(out / "encoder.diag", text)
    write_atomic(out / "encoder.safetensors", state, meta, "weights file")
    return out / "encoder.diag", out / "encoder.safetensors"
