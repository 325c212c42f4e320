"""Safetensors files written atomically, with a checksum of every tensor in their metadata.

Shared by training checkpoints and constructed weights: the file at a path is the previous one
until the new one is complete and on disk, and what was written can be checked on reading.
"""
from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

import torch
from safetensors import SafetensorError
from safetensors.torch import save_file

from ..errors import DiagError
from ..syntax.source import write_atomic as write_file


def checksum(tensors: dict[str, torch.Tensor]) -> str:
    """SHA-256 over the tensors in name order: each one's name, dtype, shape, then its bytes."""
    h = hashlib.sha256()
    for name in sorted(tensors):
        t = tensors[name].detach().cpu().contiguous()
        h.update(f"{name}\0{str(t.dtype).removeprefix('torch.')}\0{list(t.shape)}\0".encode())
        if t.numel():
            h.update(t.reshape(-1).view(torch.uint8).numpy())
    return "sha256:" + h.hexdigest()


def write_atomic(path: str | Path, tensors: dict[str, torch.Tensor], meta: dict[str, Any], what: str) -> None:
    """Write ``tensors`` with ``meta`` (plus their checksum) as JSON under the key ``stringdiag``.

    A failure to write (a full disk, say) is the tool's error naming ``what``, and the previous
    file stays."""
    meta = {**meta, "checksum": checksum(tensors)}
    tensors = {k: v.detach().cpu() for k, v in tensors.items()}  # a model on a GPU is saved from the host
    try:
        write_file(path, lambda tmp: save_file(tensors, tmp, metadata={"stringdiag": json.dumps(meta)}),
                   f" (the previous {what}, if any, is kept)", what)
    except SafetensorError as e:
        raise DiagError(f"cannot write {what} {path}: {e} (the previous {what}, if any, is kept)") from None
