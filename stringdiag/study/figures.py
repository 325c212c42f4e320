"""The study's two figures, after Khatri et al.'s (2024) Figs. 2 and 4, as SVG and PNG.

``perplexity``: test perplexity against trainable parameters, one line per mechanism
through its depths, coloured by family (magenta: linear attention generators only; cyan:
dot-product only; orange: both, as the paper; grey: none). ``cost``: seconds per epoch and peak memory
relative to M1 at the same depth, one bar per mechanism and depth, with one standard
deviation as error bars.

matplotlib is used through ``Figure`` objects and its Agg/SVG canvases only: no pyplot,
no global backend switched, nothing shown on a screen.
"""
from __future__ import annotations

import math
from pathlib import Path

from ..errors import DiagError
from .results import BOTH, NONE, REFERENCE, natural

COLOURS = {"linear": "magenta", "dot": "darkturquoise", BOTH: "orange", NONE: "grey"}
EXTRA = ["tab:green", "tab:blue", "tab:red", "tab:brown", "tab:purple", "tab:olive"]
NAMES = ("perplexity", "cost")


def _colour(fam: str, seen: dict[str, str]) -> str:
    if fam in COLOURS:
        return COLOURS[fam]
    if fam not in seen:
        seen[fam] = EXTRA[len(seen) % len(EXTRA)]
    return seen[fam]


def _save(fig, out: Path, name: str) -> list[Path]:
    paths = []
    for ext, meta in (("svg", {"Date": None}), ("png", {"Software": None})):
        path = out / f"{name}.{ext}"
        tmp = out / f".{name}.tmp.{ext}"
        try:
            fig.savefig(tmp, format=ext, metadata=meta, dpi=150)
            tmp.replace(path)
        except OSError as e:
            raise DiagError(f"cannot write {path}: {e.strerror or e}") from None
        finally:
            if tmp.exists():
                tmp.unlink()
        paths.append(path)
    return paths


def _count(v: float) -> str:
    """6500000 -> '6.5M'."""
    for scale, unit in ((1e9, "G"), (1e6, "M"), (1e3, "k")):
        if abs(v) >= scale:
            return f"{v / scale:g}{unit}"
    return f"{v:g}"


def perplexity_figure(rows: list[dict]):
    from matplotlib.figure import Figure
    from matplotlib.lines import Line2D
    from matplotlib.ticker import FuncFormatter

    fig = Figure(figsize=(7, 4.8), layout="constrained")
    ax = fig.add_subplot()
    extra: dict[str, str] = {}
    families: dict[str, str] = {}
    by_mech: dict[str, list[dict]] = {}
    for r in rows:
        ppl = r.get("test_ppl")  # a diverged run (inf) has no place on a log axis
        if ppl is not None and math.isfinite(ppl) and ppl > 0 and r.get("parameters"):
            by_mech.setdefault(r["mechanism"], []).append(r)
    for mech in sorted(by_mech, key=natural):
        pts = sorted(by_mech[mech], key=lambda r: r["layers"])
        fam = pts[0].get("family") or NONE
        colour = _colour(fam, extra)
        families[fam] = colour
        xs, ys = [r["parameters"] for r in pts], [r["test_ppl"] for r in pts]
        ax.plot(xs, ys, "-o", color=colour, markersize=4, linewidth=1.2)
        ax.annotate(mech, (xs[-1], ys[-1]), textcoords="offset points", xytext=(4, 2), fontsize=7, color=colour)
    xs = [r["parameters"] for v in by_mech.values() for r in v]
    if xs and max(xs) > 10 * min(xs):
        ax.set_xscale("log")
    ax.set_yscale("log")
    plain = FuncFormatter(lambda v, _: f"{v:g}")
    ys = [r["test_ppl"] for v in by_mech.values() for r in v]
    ax.yaxis.set_major_formatter(plain)
    if ys and max(ys) < 10 * min(ys):  # within a decade the minor ticks are the only labels
        ax.yaxis.set_minor_formatter(plain)
    ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _: _count(v)))
    ax.set_xlabel("trainable parameters")
    ax.set_ylabel("test perplexity")
    ax.set_title("Test perplexity against parameters (one line per mechanism, across depths)", fontsize=9)
    ax.grid(True, which="both", alpha=0.3)
    order = [f for f in ("linear", "dot", BOTH) if f in families] + sorted(f for f in families
                                                                           if f not in ("linear", "dot", BOTH))
    ax.legend([Line2D([], [], color=families[f], marker="o") for f in order], order, title="family", fontsize=8)
    if not by_mech:
        ax.text(0.5, 0.5, "no finished runs", ha="center", va="center", transform=ax.transAxes)
    return fig


def cost_figure(rows: list[dict], reference: str = REFERENCE):
    from matplotlib import colormaps
    from matplotlib.figure import Figure

    fig = Figure(figsize=(10, 4.2), layout="constrained")
    axes = fig.subplots(1, 2)
    mechs = sorted({r["mechanism"] for r in rows}, key=natural)
    depths = sorted({r["layers"] for r in rows})
    width = 0.8 / max(len(depths), 1)
    cmap = colormaps["viridis"]
    for ax, col, label in ((axes[0], "seconds_per_epoch", "time per epoch"),
                           (axes[1], "peak_memory", "peak memory")):
        drawn = False
        for k, depth in enumerate(depths):
            xs, ys, errs = [], [], []
            for i, mech in enumerate(mechs):
                r = next((r for r in rows if r["mechanism"] == mech and r["layers"] == depth), None)
                if r is None or r.get(f"{col}_rel") is None:
                    continue
                xs.append(i - 0.4 + width * (k + 0.5))
                ys.append(r[f"{col}_rel"])
                errs.append(r.get(f"{col}_rel_std") or 0.0)
            if xs:
                drawn = True
                colour = cmap(k / max(len(depths) - 1, 1) * 0.85)
                ax.bar(xs, ys, width=width, yerr=errs, capsize=2, color=colour,
                       label=f"{depth} layer{'s' if depth != 1 else ''}")
        ax.axhline(1.0, color="black", linewidth=0.8, linestyle="--")
        ax.set_xticks(range(len(mechs)), mechs, rotation=45 if len(mechs) > 8 else 0, fontsize=8)
        ax.set_ylabel(f"{label} relative to {reference}")
        ax.set_title(f"{label[0].upper()}{label[1:]}, relative to {reference} at the same depth", fontsize=9)
        ax.grid(True, axis="y", alpha=0.3)
        if drawn:
            ax.legend(fontsize=8)
        else:
            ax.text(0.5, 0.5, f"no {reference} among these runs", ha="center", va="center", transform=ax.transAxes)
    return fig


def draw(rows: list[dict], out: str | Path, reference: str = REFERENCE) -> list[Path]:
    """Both figures into ``out`` (``perplexity.svg/png``, ``cost.svg/png``); their paths."""
    out = Path(out)
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise DiagError(f"cannot write {out}: {e.strerror or e}") from None
    return _save(perplexity_figure(rows), out, "perplexity") + _save(cost_figure(rows, reference), out, "cost")
