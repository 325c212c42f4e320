"""A study's results: rows of ``results.csv``, families, values relative to M1, merging.

One row per finished run (mechanism x layers). Test perplexity, seconds per epoch and
peak memory are also given relative to the reference mechanism (M1, the Vaswani
transformer, as the paper's Fig. 4) at the same depth; the standard deviations are scaled
by the same number, the reference's median, so M1 itself is 1.0 with its own spread.

>>> fam = {"linear": ("LinAttPrep", "LinAttApply"), "dot": ("AttPrep", "AttApply")}
>>> family({"AttPrep", "AttApply"}, fam), family({"LinAttPrep", "AttApply"}, fam), family(set(), fam)
('dot', 'both', 'none')
"""
from __future__ import annotations

import csv
import io
import json
import math
from pathlib import Path
from typing import Iterable, Mapping

from ..graph.box import Kind
from ..errors import DiagError
from ..syntax.source import write_atomic

REFERENCE = "M1"
# which generators make a family (App. C, Fig. 2's colours): data the user may replace
DEFAULT_FAMILIES: dict[str, tuple[str, ...]] = {"linear": ("LinAttPrep", "LinAttApply"), "dot": ("AttPrep", "AttApply")}
BOTH, NONE = "both", "none"  # a mechanism with generators of several families; of none
CONTROL = "control"  # the attention-free baseline's run name and family

COLUMNS = ["mechanism", "family", "layers", "seed", "parameters", "steps", "test_ppl", "test_acc",
           "seconds_per_epoch", "seconds_per_epoch_std", "peak_memory_bytes", "peak_memory_std",
           "test_ppl_rel", "seconds_per_epoch_rel", "seconds_per_epoch_rel_std", "peak_memory_rel",
           "peak_memory_rel_std", "timing_repeats", "device", "timing_clock"]
# tables written before seeds and tasks have neither a seed nor an accuracy column
REQUIRED = [c for c in COLUMNS[:12] if c not in ("seed", "test_acc")]
MEASURED = ("seconds_per_epoch", "seconds_per_epoch_std", "peak_memory_bytes", "peak_memory_std")  # of timing
TRAINED = ("family", "parameters", "steps", "test_ppl", "test_acc")  # what training gave: equal wherever it reruns
INTS = {"layers", "seed", "parameters", "steps", "timing_repeats"}
TEXT = {"mechanism", "family", "device", "timing_clock"}
BYTES = {"peak_memory_bytes"}  # a whole count where the file writes one: `study --report` keeps it exact


def family(uses: Iterable[str], families: Mapping[str, Iterable[str]] = DEFAULT_FAMILIES) -> str:
    """The family whose generators are the only ones a mechanism uses; ``both`` if it uses those of
    several families, ``none`` if it uses none (as ``stringdiag enumerate`` names them)."""
    used = set(uses)
    hit = [name for name, gens in families.items() if used & set(gens)]
    return hit[0] if len(hit) == 1 else BOTH if hit else NONE


def uses(diagram) -> list[str]:
    """Every definition a diagram uses, directly or inside the definitions it uses, sorted."""
    seen: set[str] = set()
    todo, visited = [diagram], set()
    while todo:
        d = todo.pop()
        if id(d) in visited:
            continue
        visited.add(id(d))
        for b in d.boxes():
            node = d.record(b)
            if node.kind is Kind.DIAGRAM:
                seen.add(node.op)
                if node.ref is not None:
                    todo.append(node.ref)
    return sorted(seen)


def _median(xs: list[float]) -> float:
    s = sorted(xs)
    n = len(s)
    return s[n // 2] if n % 2 else (s[n // 2 - 1] + s[n // 2]) / 2


def _mean(xs: list[float]) -> float:
    return sum(xs) / len(xs)


def _std(xs: list[float]) -> float:
    """Sample standard deviation (n - 1); 0 for a single value."""
    if len(xs) < 2:
        return 0.0
    m = sum(xs) / len(xs)
    return math.sqrt(sum((x - m) ** 2 for x in xs) / (len(xs) - 1))


def summarise(samples: list[float]) -> tuple[float, float]:
    """Median and standard deviation of timing repeats."""
    return _median(samples), _std(samples)


def row(result: Mapping, families: Mapping[str, Iterable[str]] = DEFAULT_FAMILIES) -> dict:
    """The CSV row of one finished run's ``result.json``."""
    fam = CONTROL if result.get("control") else family(result.get("uses", ()), families)
    return {"mechanism": result["mechanism"], "family": fam, "layers": result["layers"],
            "seed": result.get("seed", 0), "parameters": result["parameters"], "steps": result.get("steps"),
            "test_ppl": result["test_ppl"], "test_acc": result.get("test_acc"),
            # a run trained but not yet timed has no timings (yet)
            **{c: result.get(c) for c in ("seconds_per_epoch", "seconds_per_epoch_std", "peak_memory_bytes",
                                          "peak_memory_std")},
            "timing_repeats": len(result.get("seconds_per_epoch_samples", ())) or None,
            "device": result.get("device"),
            # cpu: the process's CPU seconds; wall: the wall clock (a GPU, or a run timed before CPU time was)
            "timing_clock": result.get("timing_clock") or ("wall" if result.get("seconds_per_epoch") else None)}


def relative(rows: list[dict], reference: str = REFERENCE) -> list[dict]:
    """The rows with their ``*_rel`` columns filled against the reference at the same depth
    (left empty where the reference is not among the rows)."""
    refs = {n: _means([r for r in rows if r["mechanism"] == reference and r["layers"] == n])
            for n in {r["layers"] for r in rows if r["mechanism"] == reference}}
    out = []
    for r in rows:
        r = {**r}
        ref = refs.get(r["layers"])
        for col, std in (("test_ppl", None), ("seconds_per_epoch", "seconds_per_epoch_std"),
                         ("peak_memory_bytes", "peak_memory_std")):
            name = "peak_memory" if col == "peak_memory_bytes" else col
            base = ref.get(col) if ref else None
            ok = base not in (None, 0) and r.get(col) is not None and math.isfinite(base)
            r[f"{name}_rel"] = r[col] / base if ok else None
            if std:
                r[f"{name}_rel_std"] = r[std] / base if ok and r.get(std) is not None else None
        out.append(r)
    return out


def _means(rows: list[dict]) -> dict:
    """The reference at one depth: each column's mean over its seeds."""
    out: dict = {}
    for col in ("test_ppl", "seconds_per_epoch", "peak_memory_bytes"):
        vals = [v for r in rows if (v := r.get(col)) is not None]
        out[col] = sum(vals) / len(vals) if len(vals) == len(rows) else None
    return out


def sort_key(r: Mapping) -> tuple:
    return (natural(r["mechanism"]), r["layers"], r.get("seed") or 0)


SUMMARY = ["mechanism", "family", "layers", "seeds", "parameters", "metric", "mean", "std", "reference", "pairs",
           "diff_mean", "diff_rel", "diff_low", "diff_high", "p", "p_holm", "verdict", "verdict_95"]


def metric(rows: list[dict]) -> str:
    """What a study compares: test accuracy where its runs have one (a recall task), else perplexity."""
    return "test_acc" if rows and all(r.get("test_acc") is not None for r in rows) else "test_ppl"


def references(rows: list[dict]) -> list[str]:
    """What every mechanism is compared with: M1, then each control (natural order)."""
    controls = sorted({r["mechanism"] for r in rows if r.get("family") == CONTROL}, key=natural)
    return ([REFERENCE] if any(r["mechanism"] == REFERENCE for r in rows) else []) + controls


def summary(rows: list[dict]) -> list[dict]:
    """One row per mechanism, depth and reference (M1 and each control at that depth): the
    mechanism's mean and sample standard deviation over seeds, and the seed-paired comparison
    with the reference (:mod:`.paired`: mean difference, its 95 % interval, p-values, Holm's
    correction across every comparison here, the verdict). A mechanism with no reference at its
    depth has one row with the reference empty."""
    from .paired import comparisons

    col = metric(rows)
    groups: dict[tuple, list[dict]] = {}
    for r in rows:
        groups.setdefault((r["mechanism"], r["layers"]), []).append(r)
    by_key: dict[tuple, list] = {}
    for c in comparisons(rows, references(rows), col):
        by_key.setdefault((c.mechanism, c.layers), []).append(c)
    order = {ref: i for i, ref in enumerate(references(rows))}
    out = []
    for (mech, layers), g in sorted(groups.items(), key=lambda kv: (natural(kv[0][0]), kv[0][1])):
        vals = [r[col] for r in g if r.get(col) is not None]
        base = {"mechanism": mech, "family": g[0]["family"], "layers": layers, "seeds": len(g),
                "parameters": g[0]["parameters"], "metric": col,
                "mean": _mean(vals) if vals else None, "std": _std(vals) if vals else None}
        found = sorted(by_key.get((mech, layers), []), key=lambda c: order.get(c.reference, 0))
        if not found:
            out.append({**base, "reference": None})
        for c in found:
            out.append({**base, "reference": c.reference, "pairs": c.pairs, "diff_mean": c.mean,
                        "diff_rel": c.relative, "diff_low": c.low, "diff_high": c.high, "p": c.p,
                        "p_holm": c.p_holm, "verdict": c.verdict, "verdict_95": c.verdict_95})
    return out


def verdict(rows: list[dict]) -> str:
    """What the study supports, in sentences: for each reference, the mechanisms that beat it, tie
    with it and lose to it (seed-paired, Holm-corrected), with their mean differences and intervals."""
    from .paired import BEATS, LOSES, ONE, TIES

    table = [r for r in summary(rows) if r.get("reference")]
    if not table:
        return "No reference (M1 or a control) was trained at the depths of these runs: nothing can be compared.\n"
    acc = metric(rows) == "test_acc"
    tested = sum(1 for r in table if r["p"] is not None)
    unit = "accuracy, in points" if acc else "perplexity"
    lines = [f"Seed-paired comparisons: each mechanism against M1 and each control at the same depth, as the mean "
             f"difference in test {unit}, between runs of the same seed (negative: lower), "
             "with its 95 % t-interval; " + (f"beats/ties/loses after Holm's correction across all {tested} comparisons "
             "with two seeds or more (family-wise error 5 %)" if tested else "no comparison has two seeds, so none "
             "is tested (beats/ties/loses need an interval)") + ". A comparison of one seed has no interval."]
    scale = 100.0 if acc else 1.0

    def show(r: dict) -> str:
        d = f"{scale * r['diff_mean']:+.1f}"
        rel = "" if acc else f" ({r['diff_rel']:+.1%})"
        if r["diff_low"] is None:
            return f"{r['mechanism']} L{r['layers']} {d}{rel}"
        return (f"{r['mechanism']} L{r['layers']} {d}{rel} [{scale * r['diff_low']:+.1f}, {scale * r['diff_high']:+.1f}],"
                f" {r['pairs']} seeds, p_holm {r['p_holm']:.2g}")

    for ref in references(rows):
        part = [r for r in table if r["reference"] == ref]
        if not part:
            continue
        what = "the reference of the paper's Fig. 4" if ref == REFERENCE else \
            "the control, by default one that mixes no tokens" if ref == CONTROL else "a control"
        lines.append(f"Against {ref} ({what}):")
        for word in (BEATS, TIES, LOSES, ONE):
            group = [r for r in part if r["verdict"] == word]
            if group:
                title = {BEATS: f"beat {ref}", TIES: f"cannot be told from {ref}", LOSES: f"lose to {ref}",
                         ONE: "one seed shared (no interval)"}[word]
                lines.append(f"  {len(group)} {title}: " + "; ".join(show(r) for r in group) + ".")
    return "\n".join(lines) + "\n"


def write_summary(out: Path, rows: list[dict], groups: Mapping[str, str] | None = None) -> None:
    """``summary.csv``, ``verdict.txt`` and ``tables.md`` beside ``results.csv``."""
    from .markdown import markdown, read_groups

    buf = io.StringIO()
    w = csv.DictWriter(buf, fieldnames=SUMMARY, lineterminator="\n")
    w.writeheader()
    for r in summary(rows):
        w.writerow({c: _fmt(r.get(c)) for c in SUMMARY})
    write_atomic(Path(out) / "summary.csv", buf.getvalue())
    write_atomic(Path(out) / "verdict.txt", verdict(rows))
    write_atomic(Path(out) / "tables.md", markdown(summary(rows), references(rows),
                                                       read_groups(out) if groups is None else groups))


def natural(name: str) -> tuple:
    """M2 before M10: digits compare as numbers.

    >>> sorted(["M10", "M2", "M1", "A"], key=natural)
    ['A', 'M1', 'M2', 'M10']
    """
    import re

    parts = re.split(r"([0-9]+)", name)
    return tuple(int(p) if i % 2 else p for i, p in enumerate(parts))


# -- files ------------------------------------------------------------------------------
def _fmt(v) -> str:
    if v is None:
        return ""
    if isinstance(v, bool):
        return str(v).lower()
    if isinstance(v, int):
        return str(v)
    if isinstance(v, float):  # six significant digits: far below the spread of repeats
        return repr(float(f"{v:.6g}")) if math.isfinite(v) else ("inf" if v > 0 else "nan")
    return str(v)


def write_json(path: Path, data) -> None:
    write_atomic(path, json.dumps(data, indent=2) + "\n")


def read_json(path: Path) -> dict:
    try:
        data = json.loads(Path(path).read_text())
    except OSError as e:
        raise DiagError(f"cannot read {path}: {e.strerror or e}") from None
    except ValueError as e:
        raise DiagError(f"{path} is damaged: it is not JSON ({e})") from None
    if not isinstance(data, dict):
        raise DiagError(f"{path} is damaged: it is not a JSON object")
    return data


def write_csv(path: Path, rows: list[dict]) -> None:
    buf = io.StringIO()
    w = csv.DictWriter(buf, fieldnames=COLUMNS, extrasaction="ignore", lineterminator="\n")
    w.writeheader()
    for r in sorted(rows, key=sort_key):
        w.writerow({c: _fmt(r.get(c)) for c in COLUMNS})
    write_atomic(path, buf.getvalue())


def read_csv(path: Path) -> list[dict]:
    """A ``results.csv`` back as typed rows (numbers as numbers, empty cells as None)."""
    path = Path(path)
    try:
        text = path.read_text()
    except OSError as e:
        raise DiagError(f"cannot read {path}: {e.strerror or e}") from None
    except UnicodeDecodeError:
        raise DiagError(f"{path} is not a study's results.csv (it is not text)") from None
    reader = csv.DictReader(io.StringIO(text))
    missing = [c for c in REQUIRED if c not in (reader.fieldnames or [])]
    if missing:
        raise DiagError(f"{path} is not a study's results.csv (it lacks the column(s) {', '.join(missing)})")
    rows = []
    for line, raw in enumerate(reader, start=2):
        r: dict = {}
        for c in COLUMNS:
            v = (raw.get(c) or "").strip()
            if c in TEXT:
                r[c] = v or None
                continue
            if not v:
                r[c] = None
                continue
            try:
                r[c] = int(v) if c in INTS or (c in BYTES and v.isdigit()) else float(v)
            except ValueError:
                raise DiagError(f"{path}:{line}: {c} is {v!r}, not a number") from None
        if not r["mechanism"] or r["layers"] is None:
            raise DiagError(f"{path}:{line}: a row without a mechanism or a layer count")
        rows.append(r)
    return rows


def merge(sources: list[tuple[str, list[dict]]], reference: str = REFERENCE,
          notes: list[str] | None = None) -> list[dict]:
    """Rows of several studies (shards) as one, relative columns recomputed across all of them.
    The same run in two sources is an error unless the two rows agree on what training gave (a
    deterministic run trains to the same result wherever it runs again); where only its timing
    differs (timed again, in other conditions), the first source's is kept and ``notes`` says so."""
    seen: dict[tuple, tuple[str, dict]] = {}
    for source, rows in sources:
        for r in rows:
            key = (r["mechanism"], r["layers"], r.get("seed") or 0)
            if key in seen:
                other, prev = seen[key]
                if any(prev.get(c) != r.get(c) for c in TRAINED):
                    raise DiagError(f"{key[0]} with {key[1]} layer(s), seed {key[2]}, has different results in "
                                    f"{other} and {source}")
                if notes is not None and any(prev.get(c) != r.get(c) for c in MEASURED):
                    notes.append(f"{key[0]} with {key[1]} layer(s), seed {key[2]}: trained alike in {other} and "
                                 f"{source}, timed differently; the timing of {other} is kept")
                continue
            seen[key] = (source, r)
    return relative(sorted((r for _, r in seen.values()), key=sort_key), reference)
