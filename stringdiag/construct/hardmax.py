"""Theorem 2.4 (Alcalde, Fantuzzi and Zuazua 2025) made concrete: for N labelled sequences, the
transformer of Sec. 3 with explicit float64 weights, compiled, and checked on every sequence.

T = T_cla ∘ T_lab ∘ T_clu ∘ T_sep ∘ T_pre (3.1), then the readout (2.2). The weights are chosen
block by block from the proof's formulas (nothing is trained); the finished diagram is compiled by
stringdiag.lower and every sequence's readout must lie in its target set.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch

from ..errors import DiagError
from . import artefacts
from .blocks import Block, apply_all
from .classify import classify
from .collapse import cluster, match_labels
from .geometry import groups, tolerance
from .instance import ClassificationInstance, make_instance, overflow_named
from .separate import preprocess, separate

# each stage's number of blocks in the paper's count (Sec. 3.1, "Complexity of the construction")
PAPER = {"preprocessing": lambda n: 1, "separation": lambda n: 2 * (n - 1), "clustering": lambda n: 1,
         "label matching": lambda n: n - 1, "classification": lambda n: 5 * (n + 1)}


@dataclass(frozen=True)
class Construction:
    """The transformer built for an instance, the compiled module, and what it did on the data."""

    instance: ClassificationInstance
    blocks: tuple[Block, ...]
    source: str = field(repr=False)
    weights: dict[str, torch.Tensor] = field(repr=False)
    parameters: int
    readouts: np.ndarray = field(repr=False)
    module: Any = field(repr=False, compare=False)

    @property
    def n(self) -> int:
        return len(self.instance.sequences)

    @property
    def bound(self) -> int:
        """Theorem 2.4's bound on the number of blocks, 8N + 4."""
        return 8 * self.n + 4

    def stages(self) -> dict[str, tuple[int, int]]:
        """Per stage of (3.1): (blocks used, the paper's count for that stage)."""
        return {s: (sum(b.stage == s for b in self.blocks), f(self.n)) for s, f in PAPER.items()}

    def nonzero(self) -> int:
        return int(sum(int((t != 0).sum()) for t in self.weights.values()))


def choose_blocks(inst: ClassificationInstance, seed: int = 0) -> list[Block]:
    """The blocks of (3.1), each stage chosen on the tokens the previous stages produce."""
    rng = np.random.default_rng(seed)
    zs = [z.copy() for z in inst.sequences]
    pre = preprocess(zs, rng)
    zs = apply_all(pre, zs)
    sep, zs = separate(zs, rng)
    clu, points = cluster(zs, rng)
    lab, points = match_labels(points, list(inst.labels), rng)
    reps = [g[0] for g in groups(points, tolerance([points]))]
    centres = np.array([inst.targets[inst.labels[i]].centre for i in reps])
    cla, _ = classify(points[reps], centres, rng)
    return [pre, *sep, clu, *lab, *cla]


def verify(module: torch.nn.Module, inst: ClassificationInstance) -> np.ndarray:
    """Every sequence through the compiled module; each readout must lie in its label's target set."""
    with torch.no_grad():
        out = np.array([module(torch.as_tensor(z, dtype=torch.float64)).numpy() for z in inst.sequences])
    for j, (y, c) in enumerate(zip(out, inst.labels)):
        t = inst.targets[c]
        resolution = 1e-9 * max(1.0, float(np.abs(t.centre).max()), float(np.abs(y).max()))
        if not t.holds(y) and t.radius < resolution:
            raise DiagError(f"the target set of label {c!r} has radius {t.radius:g}, below what float64 arithmetic "
                            f"resolves at this scale (about {resolution:.1g}): choose a larger radius")
        if not t.holds(y):
            raise DiagError(f"the constructed transformer sends sequence {j + 1} to {y.tolist()}, outside the "
                            f"target set of its label {c!r} (a bug in the construction)")
    return out


def hardmax_classifier(sequences, labels, targets=None, seed: int = 0) -> Construction:
    """Build, compile and check the classifier for ``sequences`` (each (len, d)) with ``labels``;
    ``targets`` maps each label to a TargetBall or {"center": [...], "radius": r} (default: see FORMAT)."""
    with overflow_named(sequences):
        inst = make_instance(sequences, labels, targets)
        blocks = _generic_blocks(inst, seed)
    text = artefacts.source(blocks, len(inst.sequences), inst.d)
    state = artefacts.weights(blocks)
    module = artefacts.in_memory(text, inst.d, state)
    readouts = verify(module, inst)
    count = sum(p.numel() for p in module.parameters())
    return Construction(inst, tuple(blocks), text, state, count, readouts, module)


def _generic_blocks(inst, seed: int, tries: int = 8) -> list:
    """The proof picks directions and step sizes "generically": almost every choice works, so a
    choice that does not (a rare tie) is drawn again from the next seed, a few times."""
    for k in range(tries):
        try:
            return choose_blocks(inst, seed + k)
        except DiagError as e:
            if not e.message.startswith("internal:"):
                raise
            reason = e.message.removeprefix("internal: ")
    raise DiagError(f"the generic choices of the construction failed for seeds {seed} to {seed + tries - 1} "
                    f"({reason}); try another --seed")


def write(con: Construction, out: str | Path) -> tuple[Path, Path]:
    """Write the classifier to directory ``out``, then compile what was written and check it again."""
    meta = {"construction": "hardmax-classifier", "n": con.n, "d": con.instance.d, "blocks": len(con.blocks),
            "stages": {s: used for s, (used, _) in con.stages().items()}}
    diag, tensors = artefacts.write(Path(out), con.source, con.weights, meta)
    from safetensors.torch import load_file

    state = {k: v for k, v in load_file(str(tensors)).items()}
    verify(artefacts.build(None, diag, con.instance.d, state), con.instance)
    return diag, tensors
