"""Checkpoints as safetensors: tensors plus JSON metadata, written atomically.

Nothing is unpickled on load: model and optimizer tensors are stored by name, and the
rest of the state (step, epoch, configuration, optimizer hyper-parameters) is JSON in
the file's metadata. Random-number generator states are stored as uint8 tensors, so a
resumed run continues exactly where it stopped.

The metadata carries a SHA-256 checksum of every tensor (name, dtype, shape and bytes, in
name order). Loading checks the checksum, the metadata, and every tensor's name, shape and
dtype against the model and optimizer *before* applying any of it: a checkpoint that does
not fit, or was damaged, is the tool's error and leaves model, optimizer and RNG untouched.
"""
from __future__ import annotations

import json
import math
import os
from pathlib import Path
from typing import Any, TypeGuard

import torch
from safetensors import SafetensorError, safe_open
from safetensors.torch import load_file

from ..errors import DiagError
from ..lower.tensorfile import checksum, write_atomic

NAME = "checkpoint.safetensors"  # a run folder's checkpoint: train writes it, --resume, sample and the study read it
RNG = "rng.torch"
# settings an optimizer group has gained since older checkpoints were written (the learning-rate
# scheduler's base rate): such a checkpoint still loads, the setting taken from the optimizer
ADDED_SETTINGS = ("initial_lr",)


def save(path: str | Path, model: torch.nn.Module, optimizer: torch.optim.Optimizer, meta: dict[str, Any]) -> None:
    """Write atomically: the file at ``path`` is the previous checkpoint until this one is complete.

    A failure to write (a full disk, say) is the tool's error, and the previous file stays."""
    path = Path(path)
    tensors: dict[str, torch.Tensor] = {f"model.{k}": v.detach().contiguous() for k, v in model.state_dict().items()}
    opt = optimizer.state_dict()
    for pid, state in opt["state"].items():
        for name, value in state.items():
            if torch.is_tensor(value):
                tensors[f"optim.{pid}.{name}"] = value.detach().contiguous()
    tensors[RNG] = torch.get_rng_state()
    write_atomic(path, tensors, {**meta, "param_groups": opt["param_groups"]}, "checkpoint")


def read_meta(path: str | Path) -> dict[str, Any]:
    if os.path.exists(path) and not os.path.isfile(path):  # a FIFO would block, a directory is no file
        raise DiagError(f"{path} is not a stringdiag checkpoint (it is not a regular file)")
    try:
        with safe_open(str(path), framework="pt") as f:
            meta = json.loads((f.metadata() or {})["stringdiag"])
    except (OSError, KeyError, ValueError, SafetensorError) as e:
        raise DiagError(f"{path} is not a stringdiag checkpoint ({e})") from None
    if not isinstance(meta, dict):
        raise DiagError(f"{path} is not a stringdiag checkpoint (its metadata is not a JSON object)")
    return meta


def load(path: str | Path, model: torch.nn.Module, optimizer: torch.optim.Optimizer | None = None) -> dict[str, Any]:
    """Restore model (and optimizer, and the RNG) in place; return the metadata.

    Everything is checked first; nothing is changed unless all of it fits."""
    meta = read_meta(path)
    try:
        tensors = load_file(str(path))
    except (OSError, ValueError, RuntimeError, SafetensorError) as e:
        raise DiagError(f"{path} is not a readable checkpoint ({e})") from None
    _check_integrity(Path(path), meta, tensors)  # first: a damaged file says so, whatever else is wrong
    upgrade = getattr(model, "upgrade_checkpoint", None)  # an older layout of the same model
    if upgrade is not None:
        tensors, meta = upgrade(tensors, meta)
    state, opt_state, rng = _validate(Path(path), meta, tensors, model, optimizer)
    model.load_state_dict(state, strict=True)
    if optimizer is not None:
        optimizer.load_state_dict(opt_state)
    torch.set_rng_state(rng)
    return meta


# -- validation -------------------------------------------------------------------------
def _bad(path: Path, why: str) -> DiagError:
    return DiagError(f"{path} is not a valid checkpoint: {why}")


def _whole(x: Any) -> TypeGuard[int]:
    return isinstance(x, int) and not isinstance(x, bool)


def _check_integrity(path: Path, meta: dict, tensors: dict[str, torch.Tensor]) -> None:
    saved = meta.get("checksum")
    if not isinstance(saved, str):
        raise _bad(path, "it has no checksum (it was not written by this version of stringdiag)")
    if checksum(tensors) != saved:
        raise DiagError(f"{path} is damaged: its tensors do not match the checksum saved with them")


def _validate(path: Path, meta: dict, tensors: dict[str, torch.Tensor], model: torch.nn.Module,
              optimizer: torch.optim.Optimizer | None):
    step = meta.get("step")
    if not _whole(step) or step < 0:
        raise _bad(path, f"its step is {json.dumps(step)}, not a whole number of steps")
    history = meta.get("history", [])
    if not isinstance(history, list) or not all(isinstance(r, dict) for r in history):
        raise _bad(path, "its history is not a list of rows")
    keys, last = None, 0
    for row in history:
        s = row.get("step")
        if not _whole(s) or not last <= s <= step:
            raise _bad(path, f"its history has a row at step {json.dumps(s)} (the checkpoint is at step {step})")
        if keys is not None and set(row) != keys:
            raise _bad(path, "its history rows do not all have the same columns")
        keys, last = set(row), s
    config, ours = meta.get("config"), getattr(model, "config", None)
    if isinstance(config, dict) and isinstance(ours, dict):
        diff = [f"{k} {config[k]!r} there, {ours[k]!r} here" for k in ours if k in config and config[k] != ours[k]]
        if diff:
            raise DiagError(f"{path} does not fit this model ({'; '.join(diff[:3])}); "
                            "was it trained with other options?")

    # the model: exactly its tensors, with their shapes and dtypes
    expected = model.state_dict()
    state = {k[len("model."):]: v for k, v in tensors.items() if k.startswith("model.")}
    missing = [k for k in expected if k not in state]
    unexpected = [k for k in state if k not in expected]
    if missing or unexpected:
        raise DiagError(f"{path} does not fit this model (missing {missing[:3]}, unexpected {unexpected[:3]}); "
                        "was it trained with other options?")
    for k, v in state.items():
        want = expected[k]
        if v.shape != want.shape or v.dtype != want.dtype:
            raise DiagError(f"{path} does not fit this model: '{k}' is {_describe(v)} there, {_describe(want)} "
                            "here; was it trained with other options?")
    others = [k for k in tensors if not k.startswith(("model.", "optim.")) and k != RNG]
    if others:
        raise _bad(path, f"unexpected tensors {others[:3]}")

    opt_state = _validate_optimizer(path, meta, tensors, optimizer, step) if optimizer is not None else None

    if RNG not in tensors:
        raise _bad(path, "it has no random-number generator state")
    rng = tensors[RNG]
    try:  # on a scratch generator: the global one changes only once everything fits
        if rng.dtype != torch.uint8 or rng.dim() != 1:
            raise ValueError(f"{_describe(rng)}, not bytes")
        torch.Generator().set_state(rng)
    except (RuntimeError, TypeError, ValueError) as e:
        raise _bad(path, f"its random-number generator state is unusable ({e})") from None
    return state, opt_state, rng


def _describe(t: torch.Tensor) -> str:
    return f"{str(t.dtype).removeprefix('torch.')} {list(t.shape)}"


def _same_kind(saved: Any, current: Any) -> bool:
    """Whether a saved optimizer setting can stand where the current one does."""
    if isinstance(current, bool) or current is None:
        return saved is None or isinstance(saved, bool)
    if isinstance(current, (int, float)):
        return isinstance(saved, (int, float)) and not isinstance(saved, bool) and math.isfinite(saved)
    if isinstance(current, (list, tuple)):
        return isinstance(saved, (list, tuple)) and len(saved) == len(current) and all(
            _same_kind(a, b) for a, b in zip(saved, current))
    if isinstance(current, str):
        return isinstance(saved, str)
    return True


def _validate_optimizer(path: Path, meta: dict, tensors: dict[str, torch.Tensor],
                        optimizer: torch.optim.Optimizer, step: int) -> dict:
    current = optimizer.state_dict()["param_groups"]
    groups = meta.get("param_groups")
    if not isinstance(groups, list) or len(groups) != len(current) or not all(isinstance(g, dict) for g in groups):
        n = len(groups) if isinstance(groups, list) else 0
        raise _bad(path, f"it has {n} optimizer parameter group(s) where the optimizer has {len(current)}")
    params = [p for g in optimizer.param_groups for p in g["params"]]
    fixed = []
    for i, (saved, cur) in enumerate(zip(groups, current)):
        if saved.get("params") != cur["params"]:
            raise _bad(path, f"optimizer group {i} holds other parameters than the optimizer's")
        for key, value in cur.items():
            if key == "params":
                continue
            if key not in saved and key not in ADDED_SETTINGS:
                raise _bad(path, f"optimizer group {i} has no setting '{key}'")
            if key not in saved:
                continue
            if not _same_kind(saved[key], value):
                raise _bad(path, f"optimizer group {i} has {key} = {json.dumps(saved[key])}")
        fixed.append({**{k: cur[k] for k in ADDED_SETTINGS if k in cur}, **saved,
                      **{k: tuple(saved[k]) for k, v in cur.items() if isinstance(v, tuple)}})

    per: dict[int, dict[str, torch.Tensor]] = {}
    for k, v in tensors.items():
        if not k.startswith("optim."):
            continue
        _, number, name = (k.split(".", 2) + ["", ""])[:3]
        if not (number.isascii() and number.isdigit()) or int(number) >= len(params) or not name:
            raise _bad(path, f"optimizer tensor '{k}' belongs to no parameter")
        per.setdefault(int(number), {})[name] = v
    want = None
    if isinstance(optimizer, (torch.optim.Adam, torch.optim.AdamW)):
        want = {"step", "exp_avg", "exp_avg_sq"} | (
            {"max_exp_avg_sq"} if any(g.get("amsgrad") for g in optimizer.param_groups) else set())
    if step > 0 and want and not per:
        raise _bad(path, f"it has no optimizer state after {step} steps")
    for pid, state in sorted(per.items()):
        names = set(state)
        if want is not None and names != want:
            lacks = sorted(want - names)
            raise _bad(path, f"the optimizer state of parameter {pid} "
                       + (f"lacks {', '.join(lacks)}" if lacks else f"has unknown {', '.join(sorted(names - want))}"))
        p = params[pid]
        for name, v in state.items():
            if name == "step":
                ok = v.numel() == 1 and v.is_floating_point()
                value = float(v.reshape(-1)[0]) if ok else float("nan")
                if not ok or not math.isfinite(value) or value < 0 or value != int(value):
                    raise _bad(path, f"the optimizer step of parameter {pid} is not a whole number")
            elif v.shape != p.shape or v.dtype != p.dtype:
                raise _bad(path, f"the optimizer's '{name}' for parameter {pid} is {_describe(v)}, "
                           f"its parameter {_describe(p.detach())}")
    return {"state": per, "param_groups": fixed}
