"""A classification problem of Theorem 2.4: N labelled sequences in R^d and disjoint target sets.

The target sets S^1..S^M are open balls (centre, radius > 0): open, so that landing in one is a
strict inequality that float64 rounding of the readout cannot undo. Assumption i) is read on
token *sets*: the transformer is permutation-equivariant and the readout (2.2) a mean, so two
sequences that are one another's permutations cannot be told apart (our reading; the paper says
"pairwise distinct" sequences). Assumption ii) is lifted as Remark 2.6 says: a token repeated w times
is one token of mass w, weighted as in (2.7), which is what hardmax with ties averaged does to the
copies; so i) is read on tokens with their shares, and {a, b} and {a, a, b, b} are one sequence.
"""
from __future__ import annotations

import json
from contextlib import contextmanager
import math
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from ..errors import DiagError, Pos
from .geometry import RELATIVE, masses, near_copy

FORMAT = """\
FILE.json holds one object:
  {"sequences": [{"label": "pos", "tokens": [[0.0, 1.0], [2.0, 0.5]]},
                 {"label": "neg", "tokens": [[1.0, 1.0]]}, ...],
   "targets": {"pos": {"center": [0, 3], "radius": 1},
               "neg": {"center": [0, -3], "radius": 1}}}
Each sequence is a non-empty list of tokens, points of R^d (d >= 2, the same d for all); a label is
a string or an integer. "targets" gives each label its target set S^c, an open ball; the balls must
be disjoint. Without "targets", the k-th label (in order of first use) gets the ball of radius 1/2
around 2k e_1. Theorem 2.4 assumes i) the sequences pairwise distinct (here: as tokens with their
shares of the sequence, since a transformer with a mean readout cannot tell a sequence from its
permutations, nor from the sequence with every token repeated equally often). Assumption ii) (the
tokens of a sequence pairwise distinct) is lifted as Remark 2.6 says: a token may repeat exactly,
and is then one token of more mass (2.7); tokens closer than 1e-9 of the data's scale but not equal
are refused."""


@dataclass(frozen=True)
class TargetBall:
    """An open ball S^c = {y : |y - centre| < radius}."""

    centre: np.ndarray = field(repr=False)
    radius: float

    def holds(self, y: np.ndarray) -> bool:
        return float(np.linalg.norm(np.asarray(y) - self.centre)) < self.radius


@dataclass(frozen=True)
class ClassificationInstance:
    sequences: tuple[np.ndarray, ...] = field(repr=False)
    labels: tuple[str, ...]
    targets: dict[str, TargetBall]

    @property
    def d(self) -> int:
        return self.sequences[0].shape[1]


def _points(raw, what: str) -> np.ndarray:
    ok = isinstance(raw, list) and raw and all(isinstance(t, list) for t in raw)
    ok = ok and all(isinstance(x, (int, float)) and not isinstance(x, bool) for t in raw for x in t)
    if not ok or len({len(t) for t in raw}) != 1:
        raise DiagError(f"{what} is not a non-empty list of tokens, each a list of the same number of numbers")
    arr = np.array(raw, dtype=np.float64)
    if not np.isfinite(arr).all():
        raise DiagError(f"{what} has a number that is not finite")
    return arr


def _label(raw, what: str) -> str:
    if isinstance(raw, bool) or not isinstance(raw, (str, int)):
        raise DiagError(f"{what} has no label (a string or an integer)")
    return str(raw)


def default_targets(labels, d: int) -> dict[str, TargetBall]:
    order = list(dict.fromkeys(labels))
    return {c: TargetBall(np.eye(d)[0] * 2.0 * k, 0.5) for k, c in enumerate(order)}


def _target(raw, label: str, d: int) -> TargetBall:
    what = f"the target of label {json.dumps(label)}"
    if not isinstance(raw, dict) or set(raw) != {"center", "radius"}:
        raise DiagError(f'{what} is not an object {{"center": [...], "radius": r}}')
    centre = _points([raw["center"]], f"{what}'s center")[0]
    r = raw["radius"]
    if centre.shape != (d,):
        raise DiagError(f"{what} has a center in R^{centre.shape[0]}, but the tokens are in R^{d}")
    if isinstance(r, bool) or not isinstance(r, (int, float)) or not math.isfinite(r) or r <= 0:
        raise DiagError(f"{what} has radius {json.dumps(r)}; an open ball needs a finite radius > 0")
    return TargetBall(centre, float(r))


def make_instance(sequences, labels, targets=None) -> ClassificationInstance:
    """The checked instance (raises DiagError naming the violated assumption)."""
    seqs = tuple(_points(getattr(s, "tolist", lambda s=s: s)(), f"sequence {n + 1}") for n, s in enumerate(sequences))
    labs = tuple(_label(c, f"sequence {n + 1}") for n, c in enumerate(labels))
    if not seqs or len(seqs) != len(labs):
        raise DiagError(f"{len(seqs)} sequences but {len(labs)} labels; give one label per sequence, N >= 1")
    d = seqs[0].shape[1]
    if any(s.shape[1] != d for s in seqs):
        n = next(n for n, s in enumerate(seqs) if s.shape[1] != d)
        raise DiagError(f"sequence {n + 1} has tokens in R^{seqs[n].shape[1]}, sequence 1 in R^{d}")
    if d < 2:
        raise DiagError(f"the tokens are in R^{d}; Theorem 2.4 needs d >= 2")
    tg = default_targets(labs, d) if targets is None else {
        str(c): t if isinstance(t, TargetBall) else _target(t, str(c), d) for c, t in targets.items()}
    inst = ClassificationInstance(seqs, labs, tg)
    check(inst)
    return inst


def check(inst: ClassificationInstance) -> None:
    """Theorem 2.4's assumptions, and that the target sets are disjoint and cover every label."""
    tol = RELATIVE * max(float(np.abs(np.concatenate(inst.sequences)).max()), 1e-300)
    for n, s in enumerate(inst.sequences):
        near = near_copy(s, tol)
        if near is not None:
            j, i = near
            raise DiagError(f"sequence {n + 1} has tokens {j + 1} and {i + 1} closer than rounding but not equal "
                            f"({s[j].tolist()}, {s[i].tolist()}): write them equal (one token of more mass, "
                            "Remark 2.6) or further apart")
        mine = masses(s)
        for m in range(n):
            t = inst.sequences[m]
            theirs = masses(t)
            if same_masses(mine, theirs, tol):
                how = "" if len(s) == len(t) else ", each token in the same share of the sequence"
                raise DiagError(f"sequences {m + 1} and {n + 1} have the same tokens"
                                + (" (in another order)" if len(s) == len(t) and not np.array_equal(s, t) else how)
                                + ": Theorem 2.4 assumes i) the sequences pairwise distinct (as tokens with their "
                                "shares: the mean readout of a transformer cannot tell a sequence from its "
                                "permutations)")
    missing = [c for c in dict.fromkeys(inst.labels) if c not in inst.targets]
    if missing:
        raise DiagError(f"label {json.dumps(missing[0])} has no target set")
    names = list(inst.targets)
    for a in range(len(names)):
        for b in range(a):
            ta, tb = inst.targets[names[a]], inst.targets[names[b]]
            if np.linalg.norm(ta.centre - tb.centre) < ta.radius + tb.radius:
                raise DiagError(f"the target sets of labels {json.dumps(names[b])} and {json.dumps(names[a])} "
                                "overlap: Theorem 2.4 needs disjoint sets S^1..S^M")


def same_masses(a, b, tol: float) -> bool:
    """Whether two sequences, as (distinct tokens, shares), are one another's up to ``tol``."""
    return (a[0].shape == b[0].shape and bool(np.abs(a[0] - b[0]).max() <= tol)
            and bool(np.abs(a[1] - b[1]).max() <= 1e-12))


@contextmanager
def overflow_named(sequences):
    """Numeric overflow in the construction is an error that says so, never a numpy warning."""
    try:
        with np.errstate(over="raise", invalid="raise"):
            yield
    except FloatingPointError as e:
        big = max(float(np.abs(np.asarray(z, dtype=np.float64)).max()) for z in sequences)
        raise DiagError(f"numeric overflow in the construction ({e}): the tokens reach {big:.3g}, beyond what its "
                        "float64 arithmetic (squared distances, products) can hold; scale the tokens down") from None


MAX_DEPTH = 32  # an instance nests 4 deep; Python's parser would recurse once per level


def too_deep(text: str, limit: int = MAX_DEPTH) -> tuple[int, int] | None:
    """The line and column where ``text``'s JSON nesting passes ``limit``, if it does."""
    depth, in_string, escaped, line, col = 0, False, False, 1, 0
    for ch in text:
        col += 1
        if ch == "\n":
            line, col = line + 1, 0
        elif in_string:
            escaped, in_string = (not escaped and ch == "\\"), in_string and (escaped or ch != '"')
        elif ch == '"':
            in_string = True
        elif ch in "[{":
            depth += 1
            if depth > limit:
                return line, col
        elif ch in "]}":
            depth -= 1
    return None


def read_instance(path: str | Path) -> ClassificationInstance:
    """An instance from FILE.json (the format is FORMAT); bad JSON is reported at its line and column."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as e:
        raise DiagError(f"cannot read {path}: {getattr(e, 'strerror', None) or e}") from None
    deep = too_deep(text)
    if deep is not None:
        raise DiagError(f"JSON nested deeper than {MAX_DEPTH} levels: an instance is an object of lists of tokens",
                        Pos(str(path), *deep))  # no source line: it may be megabytes long
    try:
        raw = json.loads(text)
    except json.JSONDecodeError as e:
        raise DiagError(f"not valid JSON: {e.msg}", Pos(str(path), e.lineno, e.colno), text) from None
    if not isinstance(raw, dict) or not isinstance(raw.get("sequences"), list) or set(raw) - {"sequences", "targets"}:
        raise DiagError(f'{path}: expected an object {{"sequences": [...], "targets": {{...}}}} (see --help)')
    items = raw["sequences"]
    bad = next((n for n, it in enumerate(items) if not isinstance(it, dict) or set(it) != {"label", "tokens"}), None)
    if bad is not None:
        raise DiagError(f'{path}: sequence {bad + 1} is not an object {{"label": ..., "tokens": [[...], ...]}}')
    seqs = [_points(it["tokens"], f"{path}: sequence {n + 1}") for n, it in enumerate(items)]
    labels = [_label(it["label"], f"{path}: sequence {n + 1}") for n, it in enumerate(items)]
    targets = raw.get("targets")
    if targets is not None and not isinstance(targets, dict):
        raise DiagError(f'{path}: "targets" is not an object from labels to balls')
    try:
        with overflow_named(seqs):
            return make_instance(seqs, labels, targets)
    except DiagError as e:
        raise DiagError(f"{path}: {e.message}") from None


def grid_instance(rng: np.random.Generator, n: int, d: int = 2) -> tuple[list[np.ndarray], list[int]]:
    """n distinct token sets of d-dimensional points drawn from a small integer grid pool (so the
    sequences share tokens, the hard case for the construction), with labels in {0, 1, 2}: the
    random instances the tests and the temperature sweep use."""
    pool = np.unique(rng.integers(-2, 3, size=(4 + n // 3, d)).astype(float), axis=0)
    seqs: list[np.ndarray] = []
    seen: set[frozenset[int]] = set()
    while len(seqs) < n:
        idx = rng.choice(len(pool), size=int(rng.integers(1, min(4, len(pool)) + 1)), replace=False)
        if frozenset(idx.tolist()) not in seen:
            seen.add(frozenset(idx.tolist()))
            seqs.append(pool[idx])
    return seqs, rng.integers(0, 3, size=n).tolist()
