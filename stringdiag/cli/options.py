"""Checked values for the command line: numbers, ``--dims``, and the memory sizes would need.

Every numeric option is parsed by one of the ``argparse`` types below, which accept
ASCII digits only (Python's ``int`` and ``float`` also take ``²``, ``١``, ``1_000``,
``nan`` and ``inf``) and raise ``argparse.ArgumentTypeError`` with a message that says
what was expected, so argparse reports the option by name.
"""
from __future__ import annotations

import argparse
import math
import os
import re
from pathlib import Path
from typing import Callable

from ..errors import INT64_MAX, DiagError, shown

# (patterns compiled by re's cache when first matched: most command lines have no number)
INT = r"[+-]?[0-9]+"
DIGITS = r"[0-9]+"
FLOAT = r"[+-]?([0-9]+\.?[0-9]*|\.[0-9]+)([eE][+-]?[0-9]+)?"


class UsageError(DiagError):
    """A command line that cannot be right whatever the files hold: an option's value, a file of
    the wrong kind, an output named wrongly. Reported in one ``error:`` line with exit status 2
    (argparse's convention), where an error in a file's content is status 1. A DiagError, so
    that code catching the tool's errors catches these too."""


def short(path: object, limit: int = 120) -> str:
    """A path for a one-line message: a shipped file by its package name; a very long one keeps
    its two ends."""
    text = shown(str(path))
    return text if len(text) <= limit else f"{text[:limit // 2 - 2]}...{text[-(limit // 2 - 2):]}"


def _show(text: str, limit: int = 40) -> str:
    return repr(text if len(text) <= limit else text[:limit] + "...")


def integer(low: int = 1, high: int = INT64_MAX, what: str | None = None) -> Callable[[str], int]:
    """An argparse type: an integer of ASCII digits in ``[low, high]``."""
    what = what or ("a positive integer" if low == 1 else "a non-negative integer" if low == 0 else "an integer")

    def parse(text: str) -> int:
        s = text.strip()
        if not re.fullmatch(INT, s):
            raise argparse.ArgumentTypeError(f"expected {what}, got {_show(text)}")
        v = int(s)
        if v < low:
            raise argparse.ArgumentTypeError(f"expected {what} (at least {low}), got {_show(text)}")
        if v > high:
            raise argparse.ArgumentTypeError(f"expected {what} (at most {high}), got {_show(text)}")
        return v

    parse.__name__ = "integer"
    return parse


def number(low: float = 0.0, high: float = math.inf, low_open: bool = True,
           what: str = "a positive number") -> Callable[[str], float]:
    """An argparse type: a finite decimal number in ``(low, high]`` (``[low, high]`` if not ``low_open``)."""

    def parse(text: str) -> float:
        s = text.strip()
        if not re.fullmatch(FLOAT, s):
            raise argparse.ArgumentTypeError(f"expected {what}, got {_show(text)}")
        v = float(s)
        if not math.isfinite(v):
            raise argparse.ArgumentTypeError(f"expected {what}, got {_show(text)}, which is too large")
        if v < low or (low_open and v == low) or v > high:
            bound = f"greater than {low:g}" if low_open else f"at least {low:g}"
            if math.isfinite(high):
                bound += f" and at most {high:g}"
            raise argparse.ArgumentTypeError(f"expected {what} ({bound}), got {_show(text)}")
        return v

    parse.__name__ = "number"
    return parse


positive = integer(1)
seed = integer(0, 2 ** 32 - 1, "a seed from 0 to 4294967295")


# -- --dims -----------------------------------------------------------------------------
def parse_dims(text: str, diagram=None, label: str = "--dims") -> dict[str, int]:
    """``d=64,k=16`` -> {'d': 64, 'k': 16}, with a clear error for anything else, which starts
    with ``label`` (where the text came from: the option, or a config file's key).

    With ``diagram``, every name must be a dimension it or its file declares
    (:func:`..graph.arguments.check_dim_names`).
    """
    dims: dict[str, int] = {}
    for part in filter(None, (p.strip() for p in text.split(","))):
        name, eq, value = (s.strip() for s in part.partition("="))
        if not eq or not name.isidentifier() or not name.isascii() or not re.fullmatch(DIGITS, value) or int(value) < 1:
            raise UsageError(f"{label}: expected NAME=POSITIVE_INTEGER, got {_show(part)}")
        if int(value) > INT64_MAX:
            raise UsageError(f"{label}: {name}={_show(value)[1:-1]} is too large (at most 2^63 - 1)")
        if name in dims:
            raise UsageError(f"{label}: '{name}' is given twice ({name}={dims[name]} and {name}={int(value)})")
        dims[name] = int(value)
    if diagram is not None:
        from ..graph.arguments import check_dim_names  # (the Python API's check: the same names, the same words)

        check_dim_names(diagram, dims, label)
    return dims


# -- memory -----------------------------------------------------------------------------
def human(n: float) -> str:
    """Bytes for people: 7.3 TB, 512 MB (powers of 1000)."""
    n = float(n)
    for unit in ("bytes", "kB", "MB", "GB", "TB", "PB", "EB", "ZB", "YB"):
        if n < 1000 or unit == "YB":
            return f"{n:.0f} {unit}" if unit == "bytes" else f"{n:.3g} {unit}" if n < 1e6 else f"{n:.1e} {unit}"
        n /= 1000
    return ""  # pragma: no cover


def available_memory() -> int | None:
    """Memory this process may still allocate (MemAvailable, within a cgroup's limit), if known."""
    avail = None
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    avail = int(line.split()[1]) * 1024
                    break
    except (OSError, ValueError, IndexError):
        pass
    if avail is None:
        try:
            avail = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_AVPHYS_PAGES")
        except (ValueError, OSError, AttributeError):
            pass
    try:
        text = Path("/sys/fs/cgroup/memory.max").read_text().strip()
        if text != "max":
            room = max(int(text) - int(Path("/sys/fs/cgroup/memory.current").read_text()), 0)
            avail = room if avail is None else min(avail, room)
    except (OSError, ValueError):
        pass
    return avail




class TooLarge(Exception):
    """A tensor would have more elements than torch can count (2^63)."""


def _overflow(e: BaseException) -> bool:
    return isinstance(e, OverflowError) or "overflow" in str(e).lower()


def count_parameters(build: Callable[[Callable[[int, int], object]], object], approximator: str) -> int | None:
    """The parameter count of ``build(factory)``, found without allocating: the model is
    built on torch's meta device. None if that cannot be done (then nothing is checked);
    :class:`TooLarge` if some tensor is past 2^63 elements."""
    import torch
    from torch import nn

    from ..analysis.combine import FORMULAS
    from ..lower.approximators import factory

    base, formula, extra = factory(approximator), FORMULAS.get(approximator), [0]

    def counting(n_in: int, n_out: int):
        try:
            return base(n_in, n_out)
        except (RuntimeError, TypeError, ValueError, OverflowError) as e:
            if formula is None or not _overflow(e):
                raise
            extra[0] += formula(n_in, n_out)
            return nn.Identity()

    try:
        with torch.device("meta"):
            model = build(counting)
    except DiagError:
        raise
    except (RuntimeError, TypeError, ValueError, OverflowError) as e:
        if _overflow(e):
            raise TooLarge() from None
        return None
    except Exception:  # the estimate is a courtesy: the real build reports its own errors
        return None
    return sum(p.numel() for p in model.parameters()) + extra[0]


def too_large() -> DiagError:
    return DiagError(f"these sizes are too large: a single tensor of parameters would need more than "
                     f"{human(2 ** 63)} (2^63 bytes), more than torch can address")


def check_memory(need: int, detail: str) -> None:
    """Refuse before allocating when ``need`` bytes cannot fit in this machine's memory."""
    avail = available_memory()
    if avail is not None and need > avail:
        raise DiagError(f"these sizes need about {human(need)} {detail}; this machine has "
                        f"{human(avail)} of memory available (choose smaller --dims or model sizes)")


def out_of_memory(e: BaseException) -> DiagError | None:
    """The tool's error for an allocation that failed after all (None if ``e`` is something else)."""
    if isinstance(e, MemoryError) or (isinstance(e, RuntimeError) and (
            "can't allocate memory" in str(e) or "out of memory" in str(e).lower())):
        return DiagError("out of memory: these sizes need more memory than this machine has "
                         "(choose smaller --dims or model sizes)")
    return None
