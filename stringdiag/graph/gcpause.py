"""Pause Python's cyclic garbage collector during passes that build large graphs.

Building a diagram allocates many long-lived objects; each allocation burst triggers
collections that rescan everything built so far, which makes a linear pass look
quadratic on large inputs. Nothing in these passes creates cycles that need collecting.
"""
from __future__ import annotations

import gc
from contextlib import contextmanager
from typing import Iterator


@contextmanager
def gc_paused() -> Iterator[None]:
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()
