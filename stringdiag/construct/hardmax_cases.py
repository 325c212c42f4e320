"""Figures 3-5 of Alcalde, Fantuzzi and Zuazua (2025) drawn from a constructed classifier: the separation
stage (Lemma 3.5) half-block by half-block, so that its cases can be seen apart. Case 1: a feed-forward
layer shifts the tokens along v, then attention pulls each token towards its sequence's leader (the
arrows). Case 2: attention with A = 0 pulls every token towards its sequence's centre of mass (the +
markers), separating the shared leader; then Case 1. Case 3: equal centres of mass are first made to
differ by a Lemma 3.4 feed-forward layer; then as Case 2. The case each block handles is in its note.
"""
from __future__ import annotations

import textwrap
from pathlib import Path

import numpy as np

from ..errors import DiagError
from .blocks import apply_all, feed_forward


def separation_panels(con) -> list[tuple[str, list[np.ndarray], list[np.ndarray] | None]]:
    """(title, tokens, the tokens they moved from or None) from the separation stage's input through
    each of its blocks' feed-forward and attention layers."""
    blocks = list(con.blocks)
    sep = [k for k, b in enumerate(blocks) if b.stage == "separation"]
    if not sep:
        raise DiagError("the sequences are disjoint once preprocessed: the construction uses no separation "
                        "block (Lemma 3.5), so there is no case to draw")
    zs = [np.asarray(z, dtype=np.float64) for z in con.instance.sequences]
    for blk in blocks[:sep[0]]:
        zs = apply_all(blk, zs)
    panels: list = [("before separation", zs, None)]
    for n, k in enumerate(sep, 1):
        blk, case = blocks[k], blocks[k].note.split(": ", 1)[-1]
        moved = [feed_forward(blk, z) for z in zs]
        shifted = not all(np.array_equal(a, b) for a, b in zip(moved, zs))
        if shifted:
            panels.append((f"FF of block {n}: {case}", moved, zs))
        after = apply_all(blk, zs)
        panels.append((f"SA of block {n}" + ("" if shifted else f": {case}"), after, moved))
        zs = after
    return [(f"({chr(ord('a') + i)}) {t}", z, f) for i, (t, z, f) in enumerate(panels)]


def gaps(zs: list[np.ndarray]) -> str:
    """The smallest distance between two sequences' centres of mass and between two sequences' tokens."""
    pairs = [(a, b) for a in range(len(zs)) for b in range(a)]
    centre = min(float(np.linalg.norm(zs[a].mean(0) - zs[b].mean(0))) for a, b in pairs)
    token = min(float(np.linalg.norm(zs[a][:, None] - zs[b][None], axis=2).min()) for a, b in pairs)
    return f"centres {centre:.2g} apart, tokens {token:.2g}"


def draw_separation(con, path: str | Path) -> Path:
    """Write the panels to ``path`` (.svg, .png or .pdf): tokens by sequence (one marker each, coloured
    by label), each sequence's centre of mass (+), arrows from where a layer found each token."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from .hardmax_stages import MARKERS

    panels = separation_panels(con)
    labels = list(dict.fromkeys(con.instance.labels))
    colours = plt.get_cmap("tab10")
    fig, axes = plt.subplots(1, len(panels), figsize=(3.3 * len(panels), 3.5), squeeze=False)
    for ax, (title, zs, before) in zip(axes[0], panels):
        for j, (z, c) in enumerate(zip(zs, con.instance.labels)):
            colour = colours(labels.index(c) % 10)
            for a, b in zip(before[j] if before is not None else (), z):
                if np.abs(a - b).max() > 0:
                    ax.annotate("", xy=(b[0], b[1]), xytext=(a[0], a[1]),
                                arrowprops={"arrowstyle": "->", "color": "red", "lw": 0.8})
            # earlier sequences drawn larger, so that a shared token shows every sequence's marker
            ax.scatter(z[:, 0], z[:, 1], marker=MARKERS[j % len(MARKERS)], s=110 / (1 + j), color=colour,
                       edgecolors="black", linewidths=0.5, zorder=3 + j)
            m = z.mean(axis=0)
            ax.scatter([m[0]], [m[1]], marker="+", s=90, color=colour, linewidths=1.5, zorder=9)
        every = np.concatenate([*zs, *(before or [])])
        pad = 0.08 * max(float(np.ptp(every, axis=0).max()), 1e-9)
        ax.set_xlim(every[:, 0].min() - pad, every[:, 0].max() + pad)
        ax.set_ylim(every[:, 1].min() - pad, every[:, 1].max() + pad)
        ax.set_title(textwrap.fill(title, 34) + "\n" + gaps(zs), fontsize=8)
        ax.tick_params(labelsize=7)
    from .hardmax_stages import save

    return save(fig, path)
