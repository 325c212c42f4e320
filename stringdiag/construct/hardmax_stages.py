"""Figure 2 (a)-(f) of Alcalde, Fantuzzi and Zuazua (2025) drawn from a constructed classifier: the
tokens of every sequence before the transformer and after each stage of (3.1) (preprocessing,
separation, clustering, label matching, classification), coloured by label, one marker per sequence,
the target balls in the last panel. Tokens in R^d with d > 2 are drawn by their first two coordinates.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np

from ..errors import DiagError
from .blocks import apply_all

MARKERS = "os*^vD<>pPhX"


def stage_tokens(con) -> list[tuple[str, list[np.ndarray]]]:
    """(title, tokens of every sequence) before the blocks and after each stage that has blocks."""
    zs = [np.asarray(z, dtype=np.float64) for z in con.instance.sequences]
    out = [("(a) the sequences", zs)]
    for k, blk in enumerate(con.blocks):
        zs = apply_all(blk, zs)
        if k + 1 == len(con.blocks) or con.blocks[k + 1].stage != blk.stage:
            used = sum(b.stage == blk.stage for b in con.blocks)
            out.append((f"({chr(ord('a') + len(out))}) after {blk.stage} ({used} block{'s' * (used > 1)})", zs))
    final = np.array([z.mean(axis=0) for z in zs])
    if not np.allclose(final, con.readouts, rtol=1e-9, atol=1e-9):
        raise DiagError("internal: the drawn stages do not end where the compiled classifier does")
    return out


def draw(con, path: str | Path) -> Path:
    """Write the panels to ``path`` (its suffix picks the format: .svg, .png, .pdf)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    panels = stage_tokens(con)
    labels = list(dict.fromkeys(con.instance.labels))
    colours = plt.get_cmap("tab10")
    fig, axes = plt.subplots(1, len(panels), figsize=(3.2 * len(panels), 3.4), squeeze=False)
    for ax, (title, zs) in zip(axes[0], panels):
        for j, (z, c) in enumerate(zip(zs, con.instance.labels)):
            ax.scatter(z[:, 0], z[:, 1 % z.shape[1]], marker=MARKERS[j % len(MARKERS)], s=36,
                       color=colours(labels.index(c) % 10), edgecolors="black", linewidths=0.4)
        ax.set_title(title, fontsize=9)
        ax.tick_params(labelsize=7)
    last = axes[0][-1]
    for c, t in con.instance.targets.items():
        centre = np.asarray(t.centre)
        last.add_patch(plt.Circle((centre[0], centre[1 % len(centre)]), t.radius, fill=False,
                                  color=colours(labels.index(c) % 10) if c in labels else "grey", linestyle="--"))
    last.set_aspect("equal", adjustable="datalim")
    return save(fig, path)


def save(fig, path: str | Path) -> Path:
    """Write and close a figure; an SVG without its date, so that a redraw of the same data is
    byte-identical (the gallery's pictures are checked for freshness)."""
    import matplotlib.pyplot as plt

    fig.tight_layout()
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, metadata={"Date": None} if path.suffix == ".svg" else None)
    plt.close(fig)
    return path
