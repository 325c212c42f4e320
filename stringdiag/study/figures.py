"""The study's two figures, after Khatri et al.'s (2024) Figs. 2 and 4, as SVG and PNG.

``perplexity``: (a) test perplexity against trainable parameters, one line per mechanism
through its depths (the mean over seeds, its 95 % Student-t interval as error bars), coloured by
family (magenta: linear attention generators only; cyan: dot-product only; orange: both, as
the paper; grey: none; black dashed: the controls); (b) the same with App. C's
published PTB perplexities as reference lines (Fig. 2(b); another corpus, for scale only). A
recall task's study draws accuracy instead, in one panel. ``cost``: seconds per epoch and peak memory
relative to M1 at the same depth, one bar per mechanism and depth, with one standard
deviation as error bars.

matplotlib is used through ``Figure`` objects and its Agg/SVG canvases only: no pyplot,
no global backend switched, nothing shown on a screen.
"""
from __future__ import annotations

import math
from pathlib import Path

from ..errors import DiagError
from .results import BOTH, CONTROL, NONE, REFERENCE, metric, natural

COLOURS = {"linear": "magenta", "dot": "darkturquoise", BOTH: "orange", NONE: "grey", CONTROL: "black"}
EXTRA = ["tab:green", "tab:blue", "tab:red", "tab:brown", "tab:purple", "tab:olive"]
NAMES = ("perplexity", "cost")
LABEL_PT, SLOT_PT = 7.5, 17  # a name's height at 7 points, and the width of a slot for one "M29"


def _colour(fam: str, seen: dict[str, str]) -> str:
    if fam in COLOURS:
        return COLOURS[fam]
    if fam not in seen:
        seen[fam] = EXTRA[len(seen) % len(EXTRA)]
    return seen[fam]


def _save(fig, out: Path, name: str) -> list[Path]:
    """SVG and PNG, each written atomically under a name of its own (several processes of one
    study may redraw the figures at once)."""
    from ..syntax.source import write_atomic

    paths = []
    for ext, meta in (("svg", {"Date": None}), ("png", {"Software": None})):
        path = out / f"{name}.{ext}"

        def save(tmp: str, ext: str = ext, meta: dict = meta) -> None:
            fig.savefig(tmp, format=ext, metadata=meta, dpi=150)

        write_atomic(path, save, what="figure")
        paths.append(path)
    return paths


def _count(v: float) -> str:
    """6500000 -> '6.5M'."""
    for scale, unit in ((1e9, "G"), (1e6, "M"), (1e3, "k")):
        if abs(v) >= scale:
            return f"{v / scale:g}{unit}"
    return f"{v:g}"


def published() -> list[tuple[float, str]]:
    """App. C's table of published PTB perplexities (``published.csv`` beside this module)."""
    import csv

    from importlib.resources import files

    text = files(__package__).joinpath("published.csv").read_text()  # package data, in a wheel too
    rows = csv.DictReader(line for line in text.splitlines() if not line.startswith("#"))
    return [(float(r["test_ppl"]), f"{r['model']} ({r['source']})") for r in rows]


def _by_depth(rows: list[dict], col: str) -> dict[str, list[tuple[int, float, float, float]]]:
    """mechanism -> [(parameters, mean, half-width, layers)] over seeds, one point per depth (finite
    values): the half-width of the mean's 95 % Student-t interval, 0 for one seed."""
    from .paired import t_quantile

    groups: dict[tuple[str, int], list[dict]] = {}
    for r in rows:
        v = r.get(col)  # a diverged run (inf) has no place on a log axis
        if v is not None and math.isfinite(v) and (v > 0 or col == "test_acc") and r.get("parameters"):
            groups.setdefault((r["mechanism"], r["layers"]), []).append(r)
    out: dict[str, list] = {}
    for (mech, layers), g in sorted(groups.items(), key=lambda kv: kv[0][1]):
        vals = [r[col] for r in g]
        mean = sum(vals) / len(vals)
        std = math.sqrt(sum((v - mean) ** 2 for v in vals) / (len(vals) - 1)) if len(vals) > 1 else 0.0
        half = t_quantile(0.975, len(vals) - 1) * std / math.sqrt(len(vals)) if len(vals) > 1 else 0.0
        out.setdefault(mech, []).append((g[0]["parameters"], mean, half, layers))
    return out


def _panel(ax, rows: list[dict], col: str, families: dict[str, str], extra: dict[str, str],
           marks: list) -> list[float]:
    """One line per mechanism through its depths (mean over seeds, its 95 % interval as bars)."""
    by_mech = _by_depth(rows, col)
    fam_of = {r["mechanism"]: r.get("family") or NONE for r in rows}
    for mech in sorted(by_mech, key=natural):
        pts = by_mech[mech]
        fam = fam_of[mech]
        colour = _colour(fam, extra)
        families[fam] = colour
        xs, ys, errs = [p[0] for p in pts], [p[1] for p in pts], [p[2] for p in pts]
        style = "--" if fam == CONTROL else "-"
        ax.errorbar(xs, ys, yerr=errs, fmt=style + "o", color=colour, markersize=4, linewidth=1.2, capsize=2)
        marks.append((xs[-1], ys[-1], mech, colour, len(pts) > 1))
    return [p[1] for v in by_mech.values() for p in v]


def _label(ax, marks: list[tuple[float, float, str, str, bool]], size_pt: tuple[float, float]) -> None:
    """Name each line at its last point; a name that would print over one already placed moves
    right by a slot until it is clear (many members share a parameter count and a perplexity)."""
    def at(value: float, lim: tuple[float, float], log: bool, length: float) -> float:
        f = math.log if log else float
        return (f(value) - f(lim[0])) / ((f(lim[1]) - f(lim[0])) or 1.0) * length

    xlim, ylim = ax.get_xlim(), ax.get_ylim()  # autoscaled by now
    placed: list[tuple[float, float]] = []  # left and middle of each name, in points
    for x, y, name, colour, _ in sorted(marks, key=lambda m: (m[0], m[1])):
        px = at(x, xlim, ax.get_xscale() == "log", size_pt[0])
        py = at(y, ylim, ax.get_yscale() == "log", size_pt[1])
        slot = next(k for k in range(len(marks) + 1)
                    if all(abs(px + SLOT_PT * k - qx) >= SLOT_PT or abs(py - qy) >= LABEL_PT for qx, qy in placed))
        placed.append((px + SLOT_PT * slot, py))
        ax.annotate(name, (x, y), textcoords="offset points", xytext=(4 + SLOT_PT * slot, -2), fontsize=7,
                    color=colour)


def perplexity_figure(rows: list[dict]):
    """(a) the study's runs; (b) the same beside App. C's published PTB perplexities (for scale only:
    another corpus). A recall task's runs are drawn as accuracy, in one panel."""
    from matplotlib.figure import Figure
    from matplotlib.lines import Line2D
    from matplotlib.ticker import FuncFormatter

    col = metric(rows)
    panels = 1 if col == "test_acc" else 2
    fig = Figure(figsize=(7 * panels, 4.8), layout="constrained")
    axes = fig.subplots(1, panels, squeeze=False)[0]
    extra: dict[str, str] = {}
    families: dict[str, str] = {}
    plain = FuncFormatter(lambda v, _: f"{v:g}")
    for k, ax in enumerate(axes):
        marks: list = []
        ys = _panel(ax, rows, col, families, extra, marks)
        if k == 1:
            for j, (ppl, label) in enumerate(sorted(published())):  # neighbours' labels on alternate sides
                ax.axhline(ppl, color="black", linewidth=0.7, linestyle=":")
                ax.annotate(f"{label}: {ppl:g}", (0.01 + 0.5 * (j % 2), ppl), xycoords=("axes fraction", "data"),
                            fontsize=6, va="bottom")
            ys = ys + [p for p, _ in published()]
        xs = [p[0] for v in _by_depth(rows, col).values() for p in v]
        if xs and max(xs) > 10 * min(xs):
            ax.set_xscale("log")
        ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _: _count(v)))
        ax.set_xlabel("trainable parameters")
        if col == "test_acc":
            ax.set_ylabel("test accuracy (answers)")
            ax.set_ylim(0, 1.02)
        else:
            ax.set_yscale("log")
            ax.yaxis.set_major_formatter(plain)
            ax.yaxis.set_minor_formatter(plain)  # never 2×10^2 beside a plain 100
            ax.set_ylabel("test perplexity")
        ax.grid(True, which="both", alpha=0.3)
        if k == 1:  # for scale: only the lines through depths are named; (a) names every point
            marks = [m for m in marks if m[4]]
        _label(ax, marks, (0.85 * 72 * fig.get_figwidth() / panels, 0.8 * 72 * fig.get_figheight()))
        if not ys:
            ax.text(0.5, 0.5, "no finished runs", ha="center", va="center", transform=ax.transAxes)
    what = "Test accuracy" if col == "test_acc" else "Test perplexity"
    axes[0].set_title(f"(a) {what} against parameters (mean over seeds, one line per mechanism across depths)",
                      fontsize=8)
    if panels == 2:
        axes[1].set_title("(b) The same, with published PTB perplexities (App. C; another corpus) for scale",
                          fontsize=8)
    order = [f for f in ("linear", "dot", BOTH) if f in families] + sorted(f for f in families
                                                                           if f not in ("linear", "dot", BOTH))
    axes[0].legend([Line2D([], [], color=families[f], marker="o", linestyle="--" if f == CONTROL else "-")
                    for f in order], order, title="family", fontsize=8)
    return fig


def timing_noise(rows: list[dict]) -> float | None:
    """How much a run's timing repeats disagree: the median over runs of their standard deviation
    over their median (the bars' own noise, stated on the figure)."""
    spreads = sorted(r["seconds_per_epoch_std"] / r["seconds_per_epoch"] for r in rows
                     if r.get("seconds_per_epoch") and r.get("seconds_per_epoch_std") is not None)
    return spreads[len(spreads) // 2] if spreads else None


def cost_figure(rows: list[dict], reference: str = REFERENCE):
    from matplotlib import colormaps
    from matplotlib.figure import Figure

    fig = Figure(figsize=(10, 4.2), layout="constrained")
    axes = fig.subplots(1, 2)
    mechs = sorted({r["mechanism"] for r in rows}, key=natural)
    depths = sorted({r["layers"] for r in rows})
    width = 0.8 / max(len(depths), 1)
    cmap = colormaps["viridis"]
    clocks = {r.get("timing_clock") for r in rows if r.get("seconds_per_epoch") is not None}
    time_label = "CPU time per epoch" if clocks == {"cpu"} else "time per epoch"
    for ax, col, label in ((axes[0], "seconds_per_epoch", time_label),
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
        ax.set_title(f"{label[0].upper()}{label[1:]}, relative to {reference} at the same depth"
                     + (f"\n(repeats spread {noise:.0%}: median over runs of sd / median)"
                        if col == "seconds_per_epoch" and (noise := timing_noise(rows)) is not None else ""),
                     fontsize=9)
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
