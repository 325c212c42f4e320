"""The study's tables in Markdown (``tables.md`` beside ``summary.csv``), drawn from the summary so
that a page quoting them quotes the runs: one table per depth, a row per mechanism (its seeds, mean
and spread) and a column per reference (M1 and each control) holding the seed-paired difference
with its 95 % interval, in bold where it survives Holm's correction.

A study directory may hold ``groups.csv`` (columns ``mechanism,group``): a structural grouping of
the mechanisms written by hand from their diagrams, shown as a column and used to order the rows.

>>> cell({"pairs": 3, "diff_mean": -21.09, "diff_low": -23.8, "diff_high": -18.4, "verdict": "beats"}, False)
'-21.1 [-23.8, -18.4] **better**'
>>> cell({"pairs": 1, "diff_mean": 0.52, "diff_low": None, "diff_high": None, "verdict": "one pair"}, False)
'+0.5 (one seed)'
"""
from __future__ import annotations

import csv
from pathlib import Path
from typing import Mapping

from .paired import BEATS, LOSES

GROUPS = "groups.csv"


def read_groups(folder: Path) -> dict[str, str]:
    """``groups.csv`` of a study directory as mechanism → group ({} when there is none)."""
    path = Path(folder) / GROUPS
    if not path.is_file():
        return {}
    with path.open(encoding="utf-8", newline="") as fh:
        return {r["mechanism"]: r["group"] for r in csv.DictReader(fh)}


def cell(r: Mapping, acc: bool) -> str:
    """One comparison: the mean paired difference, its interval, and the verdict where it is one."""
    scale = 100.0 if acc else 1.0
    text = f"{scale * r['diff_mean']:+.1f}"
    if r.get("diff_low") is None:
        return text + (" (one seed)" if r.get("pairs") == 1 else "")
    text += f" [{scale * r['diff_low']:+.1f}, {scale * r['diff_high']:+.1f}]"
    # perplexity: lower is better; accuracy: higher is better (the verdict already says which)
    word = {BEATS: "better", LOSES: "worse"}.get(str(r.get("verdict")))
    return text + (f" **{word}**" if word else "")


def _spread(r: Mapping, acc: bool) -> str:
    scale, unit = (100.0, " %") if acc else (1.0, "")
    if r["mean"] is None:
        return "–"
    if r["seeds"] > 1 and r.get("std") is not None:
        return f"{scale * r['mean']:.1f} ± {scale * r['std']:.1f}{unit}"
    return f"{scale * r['mean']:.1f}{unit}"


def table(summary: list[dict], layers: int, refs: list[str], groups: Mapping[str, str]) -> list[str]:
    """The Markdown lines of one depth's table, rows in the summary's order (grouped if groups)."""
    rows: dict[str, dict] = {}
    for r in summary:
        if r["layers"] == layers:
            rows.setdefault(r["mechanism"], {"base": r, "refs": {}})["refs"][r.get("reference")] = r
    acc = any(r["metric"] == "test_acc" for r in summary)
    what = "test accuracy" if acc else "test ppl"
    head = ["mechanism", *(["group"] if groups else []), "family", "seeds", f"{what} (mean ± sd)",
            *(f"− {ref}" for ref in refs)]
    out = ["| " + " | ".join(head) + " |",
           "|" + "|".join("---" if k < 2 + bool(groups) else "---:" for k in range(len(head))) + "|"]
    order = sorted(rows, key=lambda m: groups.get(m, "~")) if groups else list(rows)  # stable
    for mech in order:
        base = rows[mech]["base"]
        cells = [mech, *([groups.get(mech, "")] if groups else []), base["family"], str(base["seeds"]),
                 _spread(base, acc)]
        for ref in refs:
            r = rows[mech]["refs"].get(ref)
            cells.append("–" if r is None or ref == mech else cell(r, acc))
        out.append("| " + " | ".join(cells) + " |")
    return out


def markdown(summary: list[dict], refs: list[str], groups: Mapping[str, str] | None = None) -> str:
    """Every depth's table, each under a heading that names the depth."""
    groups = dict(groups or {})
    parts = ["<!-- written by `stringdiag study --report` from this folder's runs: do not edit -->", ""]
    for layers in sorted({r["layers"] for r in summary}):
        parts += [f"## {layers} layer{'s' if layers != 1 else ''}", "", *table(summary, layers, refs, groups), ""]
    return "\n".join(parts)
