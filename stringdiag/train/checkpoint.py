"""Checkpoints as safetensors: tensors plus JSON metadata, written atomically.

Nothing is unpickled on load: model and optimizer tensors are stored by name, and the
rest of the state (step, epoch, configuration, optimizer hyper-parameters) is JSON in
the file's metadata. Random-number generator states are stored as uint8 tensors, so a
resumed run continues exactly where it stopped.
"""
from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path
from typing import Any

import torch
from safetensors import SafetensorError, safe_open
from safetensors.torch import load_file, save_file

from ..errors import DiagError


def save(path: str | Path, model: torch.nn.Module, optimizer: torch.optim.Optimizer, meta: dict[str, Any]) -> None:
    path = Path(path)
    tensors: dict[str, torch.Tensor] = {f"model.{k}": v.detach().contiguous() for k, v in model.state_dict().items()}
    opt = optimizer.state_dict()
    for pid, state in opt["state"].items():
        for name, value in state.items():
            if torch.is_tensor(value):
                tensors[f"optim.{pid}.{name}"] = value.detach().contiguous()
    tensors["rng.torch"] = torch.get_rng_state()
    meta = {**meta, "param_groups": opt["param_groups"]}
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    os.close(fd)
    try:
        save_file(tensors, tmp, metadata={"stringdiag": json.dumps(meta)})
        os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)


def read_meta(path: str | Path) -> dict[str, Any]:
    try:
        with safe_open(str(path), framework="pt") as f:
            return json.loads((f.metadata() or {})["stringdiag"])
    except (OSError, KeyError, ValueError, SafetensorError) as e:
        raise DiagError(f"{path} is not a stringdiag checkpoint ({e})") from None


def load(path: str | Path, model: torch.nn.Module, optimizer: torch.optim.Optimizer | None = None) -> dict[str, Any]:
    """Restore model (and optimizer, and the RNG) in place; return the metadata."""
    meta = read_meta(path)
    tensors = load_file(str(path))
    state = {k[len("model."):]: v for k, v in tensors.items() if k.startswith("model.")}
    missing, unexpected = model.load_state_dict(state, strict=False)
    if missing or unexpected:
        raise DiagError(f"{path} does not fit this model (missing {missing[:3]}, unexpected {unexpected[:3]}); "
                        "was it trained with other options?")
    if optimizer is not None:
        per: dict[int, dict[str, torch.Tensor]] = {}
        for k, v in tensors.items():
            if k.startswith("optim."):
                _, pid, name = k.split(".", 2)
                per.setdefault(int(pid), {})[name] = v
        optimizer.load_state_dict({"state": per, "param_groups": meta["param_groups"]})
    if "rng.torch" in tensors:
        torch.set_rng_state(tensors["rng.torch"])
    return meta
