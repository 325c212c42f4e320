"""Where and in what precision a model trains: the device a ``--device`` names, autocast and its
gradient scaler for ``--precision``, and the process group's backend (nccl on CUDA, else gloo).

A device that is not there is refused before any work, in words: ``--device cuda`` on a machine
without CUDA is the tool's error, never a fall-back to the CPU."""
from __future__ import annotations

import os
from contextlib import nullcontext
from enum import Enum

import torch

from ..errors import DiagError

DEVICES = "auto, cpu, cuda, cuda:N or mps"


class Precision(Enum):
    """The dtype autocast computes in; parameters and optimiser state stay float32 (or the default dtype)."""

    FP32 = "fp32"
    BF16 = "bf16"
    FP16 = "fp16"


def resolve(spec: str) -> torch.device:
    """The device ``spec`` names. ``auto`` is CUDA when torch sees one, else the CPU. Under
    ``torchrun`` (``LOCAL_RANK``), ``cuda`` and ``auto`` give each process its own GPU."""
    if spec == "auto":
        spec = "cuda" if torch.cuda.is_available() else "cpu"
    if spec == "cpu":
        return torch.device("cpu")
    if spec == "mps":
        if not torch.backends.mps.is_available():
            raise DiagError("--device mps: torch sees no MPS (Apple GPU) device on this machine")
        return torch.device("mps")
    kind, colon, index = spec.partition(":")
    if kind != "cuda" or (colon and not (index.isascii() and index.isdigit())):
        raise DiagError(f"--device: expected {DEVICES}, got {spec!r}")
    if not torch.cuda.is_available():
        raise DiagError(f"--device {spec}: torch sees no CUDA device on this machine (try --device cpu)")
    local = os.environ.get("LOCAL_RANK")
    if colon and local is not None and int(os.environ.get("WORLD_SIZE", "1")) > 1:
        raise DiagError(f"--device {spec}: under torchrun every process takes its own GPU (LOCAL_RANK); "
                        "give --device cuda")
    i = int(index) if colon else int(local or 0)
    n = torch.cuda.device_count()
    if i >= n:
        raise DiagError(f"--device {spec}: this machine has {n} CUDA device(s), numbered from 0"
                        + ("" if colon else f" (LOCAL_RANK is {i})"))
    return torch.device("cuda", i)


def check_precision(precision: Precision, device: torch.device) -> None:
    """bf16 needs a device that computes in it (any CPU does; CUDA from Ampere on)."""
    if precision is Precision.BF16 and device.type == "cuda" and not torch.cuda.is_bf16_supported():
        raise DiagError(f"--precision bf16: {torch.cuda.get_device_name(device)} does not compute in bfloat16 "
                        "(try --precision fp16)")


def backend(device: torch.device) -> str:
    """The collective backend for DistributedDataParallel on ``device``."""
    return "nccl" if device.type == "cuda" else "gloo"


def autocast(device: torch.device, precision: Precision):
    """The forward pass's precision: autocast to bf16/fp16, or nothing at fp32."""
    if precision is Precision.FP32:
        return nullcontext()
    dtype = torch.bfloat16 if precision is Precision.BF16 else torch.float16
    return torch.autocast(device.type, dtype=dtype)


def scaler(device: torch.device, precision: Precision) -> torch.amp.GradScaler:
    """Loss scaling, which fp16 needs so that small gradients do not flush to zero; disabled
    (a pass-through) otherwise."""
    return torch.amp.GradScaler(device.type, enabled=precision is Precision.FP16)
