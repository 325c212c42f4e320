"""Time and memory of training steps, for comparing mechanisms (Khatri et al. (2024), Fig. 4).

One measurement builds a fresh model, runs ``warmup`` training steps (the first allocates
Adam's moments) and then ``steps`` timed ones on batches drawn from the training windows,
exactly as the train loop steps (forward, cross-entropy, backward, Adam). Seconds per step
times the steps in an epoch is the epoch-equivalent the study reports.

Peak memory: on CUDA, ``torch.cuda.max_memory_allocated`` over the steps (reset before);
on CPU, the parameters' bytes plus the growth of the process's peak resident set over the
steps: the peak (``VmHWM``) is reset by writing 5 to ``/proc/self/clear_refs`` after freed
memory has been returned to the system (``malloc_trim``), so earlier models do not hide
this one's allocations. Where the peak cannot be reset, the growth of
``getrusage``'s ``ru_maxrss`` is used, a lower bound (``method`` says which).
"""
from __future__ import annotations

import ctypes
import ctypes.util
import gc
import resource
import sys
import time
from typing import Callable, Literal

import torch
import torch.nn.functional as F

_LIBC: ctypes.CDLL | Literal[False] | None = None  # False: no C library to trim with


def _trim(collect: bool = True) -> None:
    """Give freed heap memory back to the system (glibc), so a peak measures what follows."""
    global _LIBC
    if collect:  # a full collection takes a while on a big heap: once per measurement
        gc.collect()
    if _LIBC is None:
        try:
            _LIBC = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
            _LIBC.malloc_trim.argtypes = [ctypes.c_size_t]
        except (OSError, AttributeError):
            _LIBC = False
    if _LIBC:
        _LIBC.malloc_trim(0)


def _status(key: str) -> int | None:
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith(key + ":"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return None


def _reset_peak() -> bool:
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
        return True
    except OSError:
        return False


def _maxrss() -> int:
    scale = 1 if sys.platform == "darwin" else 1024  # bytes on macOS, kilobytes on Linux
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * scale


class MemoryProbe:
    """The peak memory of what runs between ``start`` and ``peak``."""

    def __init__(self, device: torch.device, param_bytes: int):
        self.device, self.param_bytes = device, param_bytes
        self.method, self.base = "", 0

    def start(self) -> None:
        if self.device.type == "cuda":
            torch.cuda.synchronize(self.device)
            torch.cuda.reset_peak_memory_stats(self.device)
            self.method = "cuda.max_memory_allocated"
            return
        _trim()
        rss = _status("VmRSS")
        if rss is not None and _reset_peak() and _status("VmHWM") is not None:
            self.method, self.base = "rss-peak", rss
        else:
            self.method, self.base = "maxrss", _maxrss()

    def peak(self) -> int:
        if self.device.type == "cuda":
            torch.cuda.synchronize(self.device)
            return int(torch.cuda.max_memory_allocated(self.device))
        now = _status("VmHWM") if self.method == "rss-peak" else _maxrss()
        return self.param_bytes + max((now or 0) - self.base, 0)


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def measure(make_model: Callable[[], torch.nn.Module], windows: torch.Tensor, batch_size: int, steps: int,
            warmup: int = 2, device: str | torch.device = "cpu", seed: int = 0,
            lr: float = 1e-4, clock: Callable[[], float] = time.perf_counter) -> tuple[float, int, str]:
    """Seconds per training step (mean over ``steps``), peak bytes, and how memory was measured.
    ``clock``: the wall clock by default; ``time.process_time`` gives this process's CPU seconds
    (what a step costs on a CPU, whatever else the machine is doing)."""
    device = torch.device(device)
    warmup = max(warmup, 1)
    torch.manual_seed(seed)
    model = make_model().to(device)
    model.train()
    opt = torch.optim.Adam(model.parameters(), lr=lr, betas=(0.9, 0.98), eps=1e-9, weight_decay=1e-4)
    g = torch.Generator().manual_seed(seed)
    picks = torch.randint(windows.shape[0], (warmup + steps, batch_size), generator=g)
    batches = [windows[p].to(device) for p in picks]
    param_bytes = sum(p.numel() * p.element_size() for p in model.parameters())

    def step(batch: torch.Tensor) -> None:
        logits = model(batch[:, :-1])
        loss = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), batch[:, 1:].reshape(-1))
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        loss.item()

    probe = MemoryProbe(device, param_bytes)
    probe.start()
    for b in batches[:warmup]:
        step(b)
    _sync(device)
    t0 = clock()
    for b in batches[warmup:]:
        step(b)
    _sync(device)
    seconds = (clock() - t0) / steps
    peak = probe.peak()
    del model, opt, batches
    _trim(collect=False)
    return seconds, peak, probe.method
