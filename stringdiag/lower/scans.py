"""A user's ``scan`` compiled through its chunked form, when the recurrence laws say it may be.

A scan whose cell is affine in a matrix state, ``S' = a S + k v^T`` read out ``q^T S'``, is a
masked attention without softmax (``rules/recurrence.rules``); where that attention is one the
fast paths take whole to a chunked kernel (``rules/fastpath.rules``: the causal sum to
``causal_linear_attention``, the segsum decay to ``causal_decay_attention``), the compiler
rewrites the scan by the law before the fast paths run, and the loop of s steps becomes one pass
over blocks. Which laws qualify is read from the rules themselves (:func:`laws`): a law whose
right side the fast paths leave with no ``[s, s]`` wire. A gate with no such kernel (any
``a_t``, RetNet's constant, a gate per channel) keeps its loop: its parallel form is O(s^2).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from functools import lru_cache

from ..analysis.complexity import Complexity, analyse
from ..errors import Pos
from ..graph.box import Kind, Scan
from ..graph.diagram import Diagram
from ..graph.expand import substituted
from ..graph.types import Dim
from ..rewrite.match import Index, find_matches
from ..rewrite.rule import RULES_DIR, Rule, load_rules
from .fastpath import apply, fuse, fused
from .table import native

RECURRENCE = RULES_DIR / "recurrence.rules"
# the law whose right side each kernel computes (its docstring says so): its cost is the kernel's
CHUNKING = {"causal_linear_attention": "chunk_sum", "causal_linear_sum": "chunk_sum",
            "causal_decay_attention": "chunk_log_gate"}


@dataclass(frozen=True)
class Chunked:
    """One scan the compiler lowered through its chunked form."""

    cell: str              # the scanned cell
    pos: Pos | None        # where the scan is written
    law: str               # the recurrence law that made the scan its parallel form
    kernel: str            # the fused process the fast paths made of that form
    dims: dict[str, Dim] = field(default_factory=dict)  # the law's sizes: n (steps), f (key), e (value)

    def cost(self) -> tuple[Complexity, str]:
        """The chunked form's cost, from its chunking law's right side at this scan's sizes, in
        blocks: m blocks of c positions (other letters where the diagram's own are m or c)."""
        rule = _recurrence()[CHUNKING[self.kernel]]
        taken = {n for d in self.dims.values() for n in d.names()}
        m, c = next((m, c) for m, c in (("m", "c"), ("mb", "cb"), ("m_", "c_")) if not {m, c} & taken)
        sub = {"m": Dim.var(m), "c": Dim.var(c), "f": self.dims["f"], "e": self.dims.get("e", Dim.const(1))}
        return analyse(substituted(rule.rhs, sub)), f"{m} blocks of {c} positions, {self.dims['n']} = {m}·{c}"

    def describe(self) -> str:
        where = f"{self.pos}: " if self.pos else ""
        cost, blocks = self.cost()
        return (f"{where}scan {self.cell} compiled through its chunked form ({self.law}, then {self.kernel}): "
                f"time O({cost.time}), memory O({cost.memory}) over {blocks}; chosen over the loop of "
                f"{self.dims['n']} steps")

    def as_dict(self) -> dict:
        cost, blocks = self.cost()
        return {"cell": self.cell, "position": str(self.pos) if self.pos else "", "law": self.law,
                "kernel": self.kernel, "time": cost.time, "memory": cost.memory, "blocks": blocks,
                "text": self.describe()}


@dataclass(frozen=True)
class Law:
    """A recurrence law whose parallel form the fast paths make one fused process, that process."""

    rule: Rule
    kernel: str


@lru_cache(maxsize=None)
def _recurrence() -> dict[str, Rule]:
    """``rules/recurrence.rules`` by name (loaded once)."""
    return {r.name: r for r in load_rules(RECURRENCE)}


@lru_cache(maxsize=None)
def _scan_laws() -> dict[str, Rule]:
    """The recurrence laws with a scan on their left side, by name."""
    return {n: r for n, r in _recurrence().items() if any(isinstance(r.lhs.record(b).loop, Scan)
                                                           for b in r.lhs.boxes())}


@lru_cache(maxsize=None)
def _kernel(name: str) -> str | None:
    """The fused process the fast paths turn law ``name``'s right side into, whole (no wire of the
    fused form is ``[n, n]``), or None. Found once per law, and only for a law some scan matches."""
    side = _scan_laws()[name].rhs.copy()
    fuse(side)
    side.drop_dead()
    kernels = [side.record(b).op for b in side.boxes() if side.record(b).kind is Kind.DIAGRAM
               and native(side.record(b))]
    return kernels[0] if kernels and not any(_square(side.wire_type(w)) for w in side.wires()) else None


def laws() -> tuple[Law, ...]:
    """The recurrence laws from a scan to a parallel form that the fast paths turn, whole,
    into one fused process."""
    return tuple(Law(r, k) for name, r in _scan_laws().items() if (k := _kernel(name)) is not None)


def _square(ty) -> bool:
    return len(set(ty)) < len(ty)


def through_chunks(d: Diagram, chosen: list[Chunked]) -> int:
    """Rewrite ``d`` in place: every scan a law of :func:`laws` matches becomes its parallel
    form (the fast paths make it one kernel afterwards); each is recorded in ``chosen``."""
    if not any(isinstance(d.record(b).loop, Scan) for b in d.boxes()):
        return 0
    ix, done = Index(d), 0
    for name, rule in _scan_laws().items():
        if not find_matches(d, rule, index=ix, limit=1) or (kernel := _kernel(name)) is None:
            continue

        def seen(m, name=name, kernel=kernel):
            (b,) = [b for b in m.targets if isinstance(d.record(b).loop, Scan)]
            box = d.record(b)
            chosen.append(Chunked(box.op, box.pos, name, kernel, dict(m.dims)))
        done += apply(d, rule, ix, seen)
    if done:
        _one_each(d)
    return done


def _one_each(d: Diagram) -> None:
    """The fixed boxes without inputs that make the same value (the causal mask each law brought
    in) made once, their readers reading the one kept (the naturality of copy, read backwards):
    so that a numerator and a normaliser share their mask, as the fast path ``causal_linear_pair``
    needs to compute both in one pass."""
    kept: dict[tuple, int] = {}
    for b in list(d.boxes()):
        node = d.record(b)
        if node.kind is not Kind.FIXED or d.box_inputs(b) or node.simd:
            continue
        key = (node.op, tuple(node.generics))
        if key not in kept:
            kept[key] = b
            continue
        for old, new in zip(d.box_outputs(b), d.box_outputs(kept[key])):
            d.replace_uses(old, new)
        d.remove_box(b)


def prepared(d: Diagram, chosen: list[Chunked]) -> Diagram:
    """A copy of ``d`` with its scans through their chunked form where the laws apply, then
    its definitions' fast paths (``fastpath.fused``); the scans rewritten go to ``chosen``."""
    top = fused(d, prepare=lambda x: through_chunks(x, chosen))
    through_chunks(top, chosen)
    return top


def planned(d: Diagram) -> list[Chunked]:
    """The scans ``compile`` lowers through their chunked form, found as it finds them (on
    copies: ``d`` is left as it is)."""
    chosen: list[Chunked] = []
    prepared(d, chosen)
    return chosen


__all__ = ["Chunked", "laws", "planned", "prepared", "through_chunks"]
