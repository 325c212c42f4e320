"""The constructed transformer as the project's artefacts: a ``.diag`` chain of gallery/hardmax.diag's
``ScalarHardmaxBlock`` ending in ``HardmaxReadout``, and its weights by the compiled module's names.
"""
from __future__ import annotations

from pathlib import Path

import torch

from ..errors import DiagError
from ..elaborate.loader import load, loads
from ..lower import compile as lower
from ..lower.tensorfile import write_atomic
from ..resources import shipped
from ..syntax.source import write_atomic as write_text
from .blocks import Block

GALLERY = shipped("gallery/hardmax.diag")
BLOCK, READOUT, NAME = "ScalarHardmaxBlock", "HardmaxReadout", "HardmaxClassifier"


def source(blocks: list[Block], n: int, d: int) -> str:
    """The classifier: z_k = ScalarHardmaxBlock(z_{k-1}) for each block, then the readout (2.2)."""
    lines = [f"# A hardmax transformer classifying {n} sequences in R^{d} exactly, with {len(blocks)} blocks",
             "# (Alcalde, Fantuzzi and Zuazua (2025), Theorem 2.4, built as in Sec. 3).",
             "# Written by `stringdiag construct hardmax-classifier`; weights in classifier.safetensors;",
             "# compile with --dims d=%d,m=1 --approximator linear, in float64." % d,
             'import "hardmax.diag"', "",
             f"diagram {NAME}(z0: [s, d]) -> [d] {{"]
    lines += [f"  z{k} = {BLOCK}(z{k - 1})    # {b.stage}: {b.note}" for k, b in enumerate(blocks, 1)]
    lines += [f"  y = {READOUT}(z{len(blocks)})", "  return y", "}", ""]
    return "\n".join(lines)


def weights(blocks: list[Block]) -> dict[str, torch.Tensor]:
    """Block k's parameters under the names its use ``zk = ScalarHardmaxBlock(...)`` compiles to
    (``zk.U.weight``: lower/param_names.py)."""
    t = lambda x: torch.as_tensor(x, dtype=torch.float64).clone()  # noqa: E731
    out: dict[str, torch.Tensor] = {}
    for k, b in enumerate(blocks, 1):
        p = f"z{k}."
        out |= {p + "U.weight": t(b.u)[None, :], p + "U.bias": t([b.b]), p + "W.weight": t(b.w)[:, None],
                p + "W.bias": torch.zeros(len(b.w), dtype=torch.float64), p + "vA.weight": t(b.v),
                p + "lam.weight": t(b.lam), p + "rho.weight": t(b.rho)}
    return out


def build(text: str | None, file: Path, d: int, state: dict[str, torch.Tensor]) -> torch.nn.Module:
    """Compile the classifier's source (its import resolved next to ``file``; None: ``file``
    read) and load ``state``."""
    prog = loads(text, str(file)) if text is not None else load(file)
    module = lower(prog[NAME], dims={"d": d, "m": 1}, approximator="linear", dtype=torch.float64)
    ours = module.state_dict()
    if set(ours) != set(state) or any(ours[k].shape != v.shape for k, v in state.items()):
        raise DiagError("internal: the constructed weights do not match the compiled module's parameters")
    module.load_state_dict(state, strict=True)
    return module


def in_memory(text: str, d: int, state: dict[str, torch.Tensor]) -> torch.nn.Module:
    if not GALLERY.is_file():
        raise DiagError(f"cannot find the blocks' definitions: {GALLERY} is missing")
    return build(text, GALLERY.with_name("<constructed>.diag"), d, state)


def write(out: Path, text: str, state: dict[str, torch.Tensor], meta: dict) -> tuple[Path, Path]:
    """OUT/classifier.diag, OUT/hardmax.diag (the blocks it imports) and OUT/classifier.safetensors."""
    out.mkdir(parents=True, exist_ok=True)
    write_text(out / "hardmax.diag", GALLERY.read_text(encoding="utf-8"))
    write_text(out / "classifier.diag", text)
    write_atomic(out / "classifier.safetensors", state, meta, "weights file")
    return out / "classifier.diag", out / "classifier.safetensors"
