"""``stringdiag discover``: rules proposed from small diagrams by their numbers (TASO's idea,
Jia et al. 2019, with this tool's oracle), kept only when verified and not derivable.

1. Every term over the scalar inputs ``x, y`` and the chosen primitives of the prelude, up to
   ``size`` boxes, is written as a diagram ``(x: [], y: []) -> []``.
2. Each is evaluated in NumPy (float64) at a few fixed random points: its *fingerprint*. Terms
   with equal fingerprints (to 1e-9, relative) form a group; each member of a group proposes
   the rule *member ≡ smallest member* (up to the names of the inputs).
3. A proposal is kept when the oracle (``verify.oracle``: random inputs of several
   distributions, float64) finds its sides equal, and when ``derive --find`` cannot derive it
   within a small bound from the library and the rules kept before it (smallest first): what
   is left is what ``rules/`` lacks.

Rules for scalars apply elementwise inside any SIMD box (``rules/algebra.rules``).
"""
from __future__ import annotations

import itertools
import re
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterable, Iterator, Sequence

import numpy as np

from ..errors import DiagError
from .engine import Bounds, search
from .find import moves_of
from .session import DiagramRef, Session

# the primitives discover knows how to evaluate (NumPy), by arity; all of ``[] -> []`` or ``[], [] -> []``
UNARY: dict[str, Callable] = {"neg": np.negative, "exp": np.exp, "relu": lambda a: np.maximum(a, 0.0),
                              "tanh": np.tanh, "sigmoid": lambda a: 1 / (1 + np.exp(-a))}
BINARY: dict[str, Callable] = {"add": np.add, "sub": np.subtract, "mul": np.multiply, "max": np.maximum,
                               "min": np.minimum}
VARS = ("x", "y")
POINTS = 7
# the derivation search's time bound for one candidate (discover's Bounds), the most one takes
SECONDS_EACH = 5.0


@dataclass(frozen=True)
class Term:
    text: str
    size: int
    value: tuple  # the fingerprint


@dataclass
class Discovered:
    lhs: str
    rhs: str
    error: float  # the oracle's largest relative error


def terms(primitives: list[str], size: int, rng: np.random.Generator) -> list[Term]:
    """Every term up to ``size`` boxes, each with its values at the same random points."""
    env = {v: rng.normal(size=POINTS) * 2.0 for v in VARS}
    by_size: list[list[tuple[str, np.ndarray]]] = [[(v, env[v]) for v in VARS]]
    for n in range(1, size + 1):
        made = []
        with np.errstate(all="ignore"):  # exp overflows to inf, inf - inf is nan: both expected here
            for op in primitives:
                if op in UNARY:
                    made += [(f"{op}({t})", UNARY[op](a)) for t, a in by_size[n - 1]]
                elif op in BINARY:
                    for k in range(n):
                        for (t1, a1), (t2, a2) in itertools.product(by_size[k], by_size[n - 1 - k]):
                            made.append((f"{op}({t1}, {t2})", BINARY[op](a1, a2)))
        by_size.append(made)
    return [Term(t, n, _fingerprint(t, a)) for n, level in enumerate(by_size) for t, a in level]


def _fingerprint(text: str, a: np.ndarray) -> tuple:
    """The values to 9 digits; an overflow is its signed infinity (equal overflows may be equal
    terms: the oracle decides). A value that is not a number says nothing of the term (inf - inf
    of two equal terms, or of two different ones): such a term matches no other (its own text
    is its fingerprint), so it proposes nothing rather than everything."""
    if np.isnan(a).any():
        return ("nan", text)
    return tuple(float(f"{x:.9g}") if np.isfinite(x) else str(x) for x in a)


def proposals(found: list[Term]) -> Iterator[tuple[str, str]]:
    """For each group of equal fingerprints, every larger member ≡ the smallest, once per renaming."""
    groups: dict[tuple, list[Term]] = {}
    for t in found:
        groups.setdefault(t.value, []).append(t)
    seen: set = set()
    for group in groups.values():
        group.sort(key=lambda t: (t.size, t.text))
        small = group[0]
        for t in group[1:]:
            key = _renamed(t.text, small.text)
            if key not in seen:
                seen.add(key)
                yield t.text, small.text


def _renamed(a: str, b: str) -> tuple[str, str]:
    """The pair with its inputs renamed in order of first use: x ↔ y swaps are one rule."""
    swap = {"x": "y", "y": "x"}
    sa, sb = (re.sub(r"\b[xy]\b", lambda m: swap[m.group()], s) for s in (a, b))
    return min((a, b), (sa, sb))


def rule_text(name: str, lhs: str, rhs: str, note: str = "") -> str:
    head = f"# {note}\n" if note else ""
    return f"{head}rule {name}(x: [], y: []) -> [] {{\n  return {lhs}\n}} == {{\n  return {rhs}\n}}\n"


def verified(lhs: str, rhs: str) -> float | None:
    """The oracle's largest relative error where it finds the two sides equal; None where not."""
    from ..rewrite.rule import loads_rules
    from ..verify.oracle import verify_rule

    (rule,) = loads_rules(rule_text("candidate", lhs, rhs))
    v = verify_rule(rule, trials=2)
    return v.error if v.same else None


def derivable(lhs: str, rhs: str, folder: Path, bounds: Bounds, kept: Sequence[Discovered] = ()) -> bool:
    """Whether ``derive --find`` derives rhs from lhs within ``bounds``, with the library and
    the rules ``kept`` so far (TASO's pruning: a rule that follows from others adds nothing)."""
    src, found = folder / "pair.diag", folder / "kept.rules"
    src.write_text(f"diagram L(x: [], y: []) -> [] {{\n  return {lhs}\n}}\n"
                   f"diagram R(x: [], y: []) -> [] {{\n  return {rhs}\n}}\n")
    found.write_text("\n".join(rule_text(f"kept_{k}", d.lhs, d.rhs) for k, d in enumerate(kept)))
    session = Session(DiagramRef(src.resolve(), "L"), DiagramRef(src.resolve(), "R"), folder / "pair.deriv",
                      bounds.max_boxes, (found.resolve(),) if kept else ())
    return search(session.start, session.goal, moves_of(session, bounds), bounds).found is not None


def candidates(primitives: list[str], size: int, seed: int = 0) -> tuple[list[Term], list[tuple[str, str]]]:
    """The terms and the rules they propose, smallest first (they prune the larger ones): the
    cheap first stage (under a second for every size and set of primitives allowed), counted
    before the costly one."""
    unknown = [p for p in primitives if p not in UNARY and p not in BINARY]
    if unknown:
        raise DiagError(f"discover cannot evaluate {', '.join(unknown)}; it knows {', '.join([*UNARY, *BINARY])}")
    found = terms(primitives, size, np.random.default_rng(seed))
    return found, sorted(proposals(found), key=lambda p: (len(p[0]) + len(p[1]), p))


def refusal(primitives: list[str], size: int, counts: dict[str, int], most: int) -> str:
    """Why a search too large is not started, with its figures."""
    return (f"refusing to discover over {', '.join(primitives)} up to {size} boxes: its {counts['terms']:,} terms "
            f"propose {counts['proposed']:,} candidate rules, over {most:,} (discover --max-candidates); each is "
            f"checked by the oracle and searched for a derivation from the library (a tenth of a second typically, "
            f"up to {SECONDS_EACH:g} s); use a smaller --size or fewer --primitives")


def discover(primitives: list[str], size: int, seed: int = 0, bounds: Bounds | None = None,
             log: Callable[[str], None] | None = None, max_candidates: int | None = None,
             progress: Callable[[list], Iterable] | None = None) -> tuple[list[Discovered], dict[str, int]]:
    """The rules found, and counts of each stage (terms, proposed, verified, derivable, kept);
    a :class:`DiagError` with the figures, before any is checked, when the candidates are more
    than ``max_candidates``. ``progress`` wraps the candidates' loop (a progress bar)."""
    bounds = bounds or Bounds(max_steps=3, time_budget=SECONDS_EACH, max_boxes=40, max_states=150)
    found, pairs = candidates(primitives, size, seed)
    counts = {"terms": len(found), "proposed": len(pairs), "verified": 0, "derivable": 0, "kept": 0}
    if max_candidates is not None and len(pairs) > max_candidates:
        raise DiagError(refusal(primitives, size, counts, max_candidates))
    kept: list[Discovered] = []
    with tempfile.TemporaryDirectory() as tmp:
        for lhs, rhs in (progress or iter)(pairs):
            err = verified(lhs, rhs)
            if err is None:
                continue
            counts["verified"] += 1
            if derivable(lhs, rhs, Path(tmp), bounds, kept):
                counts["derivable"] += 1
                continue
            kept.append(Discovered(lhs, rhs, err))
            if log is not None:
                log(f"{lhs} == {rhs}")
    counts["kept"] = len(kept)
    return kept, counts


def rules_file(kept: list[Discovered], primitives: list[str], size: int, counts: dict[str, int]) -> str:
    """The ``.rules`` text of what was kept, with how it was found."""
    head = (f"# Rules discovered by stringdiag discover over {', '.join(primitives)} up to {size} boxes a side:\n"
            f"# {counts['terms']} terms, {counts['proposed']} proposals by fingerprint, {counts['verified']} verified "
            f"by the oracle, {counts['derivable']} derivable from the library and the rules kept before them (pruned), "
            f"{counts['kept']} kept.\n\n")
    return head + "\n".join(rule_text(f"found_{k}", d.lhs, d.rhs, f"verified: largest relative error {d.error:.1e}")
                            for k, d in enumerate(kept, 1))


__all__ = ["discover", "candidates", "refusal", "rules_file", "terms", "proposals", "Discovered", "UNARY", "BINARY"]
