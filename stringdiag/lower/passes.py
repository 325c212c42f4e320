"""The passes a diagram goes through before its boxes become array code, in order, as data:

0. ``budget``: a compile that would lower more boxes than its limit is refused with the
   figure, before any work (``graph/budget.py``; a scanned body is counted with its caller);
1. ``fast paths``: its scans through their chunked form where a recurrence law applies
   (``scans.py``; the incremental form keeps a scan as its own step) and each definition's
   fused attention (``fastpath.fused``), once per definition, before anything is opened;
2. ``open``: the definitions opened down to primitives, keeping the prelude's native ones
   (``table.NATIVE``) unless asked to open them too;
3. ``fuse``: the fast-path rules again on the opened diagram, for what crosses definitions.

``fast`` off skips 1 and 3 (as does ``native`` off: a fused process is native). The diagram
before the pass that opens definitions is the one whose boxes name the parameters
(``param_names.sites``)."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Mapping, NamedTuple

from ..graph.budget import Build, refuse_above
from ..graph.diagram import Diagram
from .fastpath import fuse
from .scans import Chunked, prepared
from .table import native as native_use


@dataclass
class Settings:
    """What the passes read: the compile options, the scans chosen (filled by the first pass)
    and how scans are prepared (``scans.prepared``; the incremental form's own)."""

    fast: bool = True
    native: bool = True
    path: str = ""  # a scanned body's weight paths are its caller's
    chunked: list[Chunked] = field(default_factory=list)
    chunk: Callable[[Diagram, list], Diagram] = prepared
    sizes: Mapping[str, int] = field(default_factory=dict)  # the fixed dimensions' sizes given
    max_boxes: int | None = None  # the most boxes lowered (None: not counted here, as in a scanned body)


class LoweringPass(NamedTuple):
    name: str
    run: Callable[[Diagram, Settings], Diagram]
    opens: bool = False  # whether it opens definitions (the diagram before it names the parameters)


class Prepared(NamedTuple):
    top: Diagram   # before definitions are opened: its boxes name the parameters
    flat: Diagram  # after every pass: what becomes array code


def _budget(d: Diagram, s: Settings) -> Diagram:
    if s.max_boxes is not None:
        refuse_above(d, Build.LOWERED, s.max_boxes, "max_boxes, compile --max-boxes", s.sizes)
    return d


def _fast_paths(d: Diagram, s: Settings) -> Diagram:
    return s.chunk(d, s.chunked) if s.fast else d


def _open(d: Diagram, s: Settings) -> Diagram:
    return d.expand(keep=native_use if s.native else frozenset(), path=s.path)


def _fuse(d: Diagram, s: Settings) -> Diagram:
    if s.fast:
        fuse(d)  # in place: ``d`` is the opened copy
    return d


PASSES: tuple[LoweringPass, ...] = (LoweringPass("budget", _budget), LoweringPass("fast paths", _fast_paths),
                                    LoweringPass("open", _open, opens=True), LoweringPass("fuse", _fuse))


def run_passes(diagram: Diagram, settings: Settings, passes: tuple[LoweringPass, ...] = PASSES) -> Prepared:
    """``diagram`` through ``passes`` in order (it is not changed: the first pass that edits copies)."""
    top = d = diagram
    for p in passes:
        if p.opens:
            top = d
        d = p.run(d, settings)
    return Prepared(top, d)


__all__ = ["LoweringPass", "PASSES", "Prepared", "Settings", "run_passes"]
