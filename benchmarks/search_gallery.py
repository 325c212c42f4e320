"""Rediscover every gallery derivation from its ``start`` and ``target`` alone with
``stringdiag derive --find`` (the search of ``stringdiag/search/``), and write the table of
docs/derivations.md's search section: found or not (and why not), CPU seconds, steps, states.

Each search runs with reductions allowed (the gallery's chains specialise universal
approximators; a proof of gallery/proofs/ without the rule it proves), within 60 CPU seconds,
8 steps and 400 states; a chain found is written out and read back by ``derive --verify``,
so a row marked found is a checked derivation.

    python benchmarks/search_gallery.py                 # the table on stdout
    python benchmarks/search_gallery.py --docs          # ... and into docs/derivations.md
    python benchmarks/search_gallery.py --only linearize --budget 10
    python benchmarks/search_gallery.py --part 1/2 --save a.json   # half the rows, kept as JSON
    python benchmarks/search_gallery.py --rows a.json b.json --docs   # the table from saved rows
"""
from __future__ import annotations

import argparse
import dataclasses
import json
import re
import sys
import tempfile
from pathlib import Path

from stringdiag.search.engine import Bounds
from stringdiag.search.find import find
from stringdiag.syntax import deriv_ast as D
from stringdiag.syntax.source import read_source

ROOT = Path(__file__).resolve().parent.parent

BEGIN, END = "<!-- search-gallery: begin -->", "<!-- search-gallery: end -->"


def refs(path: Path) -> tuple[str | None, str | None, bool]:
    """The start and target of a .deriv as FILE.diag:NAME from here, and whether it rewires."""
    items = D.read_deriv(read_source(path), str(path))
    uses = [i.path.value for i in items if isinstance(i, D.UseDecl) and i.alias is None]

    def where(ref: D.Ref) -> str | None:
        if ref.file is not None:
            return f"{(path.parent / ref.file).resolve()}:{ref.name}"
        for u in uses:  # a name of a file in use
            f = (path.parent / u).resolve()
            if re.search(rf"diagram\s+{ref.name}\b", f.read_text()):
                return f"{f}:{ref.name}"
        return None

    start = next((where(i.ref) for i in items if isinstance(i, D.StartDecl)), None)
    target = next((where(i.ref) for i in items if isinstance(i, D.TargetDecl)), None)
    return start, target, any(isinstance(i, D.Rewire) for i in items)


def row(path: Path, bounds: Bounds, out: Path) -> dict:
    name = path.relative_to(ROOT / "gallery").as_posix()
    start, target, rewires = refs(path)
    if start is None or target is None:
        return {"name": name, "found": False, "why": "no target named"}
    if rewires:  # a structural change (≠) is no chain of rules: nothing to search for
        return {"name": name, "found": False, "why": "not searched: the written chain rewires (≠, a structural "
                "change, not a rule), so no chain of rules and specialisations reaches its target"}
    if path.parent.name == "proofs":  # the proof of a library rule: found without that rule
        bounds = dataclasses.replace(bounds, without=frozenset({path.stem}))
    f = find(start, target, out / (path.stem + ".found.deriv"), bounds)
    o = f.outcome
    base = {"name": name, "seconds": o.seconds, "states": o.states}
    if f.found:
        rel = "⇒" if o.reduction else "≡"
        return {**base, "found": True, "steps": len(o.found.steps), "relation": rel,
                "written": len(_steps(path))}
    if f.refused:
        return {**base, "found": False, "why": f"proposed, refused by the checker: {f.refused.splitlines()[0]}"}
    why = f"not found: {o.why}; closest form {o.closest.distance} boxes apart"
    return {**base, "found": False, "why": why}


def _steps(path: Path) -> list:
    items = D.read_deriv(read_source(path), str(path))
    return [i for i in items if not isinstance(i, (D.StartDecl, D.UseDecl, D.TargetDecl))]


def table(rows: list[dict], bounds: Bounds) -> tuple[str, str]:
    """The summary line, and the table (Markdown)."""
    found = sum(r["found"] for r in rows)
    plain = [r for r in rows if not r["name"].startswith("proofs/")]
    head = (f"{found} of {len(rows)} gallery derivations ({sum(r['found'] for r in plain)} of the {len(plain)} that "
            "are not proofs of library rules) rediscovered from their start and target alone "
            f"(within {bounds.time_budget:g} CPU s, {bounds.max_steps} steps and {bounds.max_states:,} states "
            "each; reductions allowed), each written out and read back by `derive --verify`. CPU s is the "
            "search's own (the read-back with the oracle not counted), on a 2-core machine shared with other work.")
    lines = ["| derivation | found | relation | steps (found / written) | CPU s | states | why not |",
             "|---|---|---|---|---|---|---|"]
    for r in rows:
        secs = f"{r['seconds']:.1f}" if "seconds" in r else ""
        states = str(r.get("states", ""))
        if r["found"]:
            lines.append(f"| {r['name']} | yes | {r['relation']} | {r['steps']} / {r['written']} | {secs} | {states} | |")
        else:
            lines.append(f"| {r['name']} | no | | | {secs} | {states} | {_why(r['why'])} |")
    return head, "\n".join(lines) + "\n"


def _why(text: str) -> str:
    """One wording for the bounds, whichever version of the search wrote the row."""
    text = re.sub(r"^not (within|found:) (the bound of|--max-states) ([\d,]+)( states)?( reached)?",
                  r"not found within \3 states", text)
    text = re.sub(r"^not (within|found:) every chain", "not found: every chain", text)
    text = re.sub(r"^not (within|found:) the time budget (of ([\d.]+) CPU s spent|\(([\d.]+) CPU s\))",
                  lambda m: f"not found within the time budget ({m.group(3) or m.group(4)} CPU s)", text)
    return text.replace("closest form 0 boxes apart", "closest form has the target's boxes, wired otherwise")


def into_docs(head: str, text: str) -> None:
    """The table into benchmarks/search_gallery.md, and quoted from there in docs/derivations.md."""
    (ROOT / "benchmarks" / "search_gallery.md").write_text(f"{head}\n\n{text}")
    splice(BEGIN, END, f"{head}\n\n<!-- quoted from: benchmarks/search_gallery.md -->\n{text}")


def splice(begin: str, end: str, text: str) -> None:
    """``text`` between the markers ``begin`` and ``end`` of docs/derivations.md, in place of what was there."""
    doc = ROOT / "docs" / "derivations.md"
    old = doc.read_text()
    if begin not in old:
        raise SystemExit(f"docs/derivations.md has no {begin} marker")
    before, _, rest = old.partition(begin)
    _, _, after = rest.partition(end)
    doc.write_text(f"{before}{begin}\n{text}\n{end}{after}")  # a blank line ends a quoted table


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--budget", type=float, default=60.0, help="CPU seconds per derivation")
    ap.add_argument("--only", nargs="*", default=None, help="stems of the derivations to run")
    ap.add_argument("--docs", action="store_true", help="write the table into docs/derivations.md")
    ap.add_argument("--part", default="1/1", help="K/N: run every N-th derivation from the K-th (two processes)")
    ap.add_argument("--save", default=None, help="write the rows run to this JSON file")
    ap.add_argument("--rows", nargs="*", default=None, help="build the table from saved rows instead of searching")
    args = ap.parse_args()
    import torch

    torch.set_num_threads(1)
    bounds = Bounds(max_steps=8, time_budget=args.budget, max_states=400, reductions=True)
    paths = sorted((ROOT / "gallery").glob("*.deriv")) + sorted((ROOT / "gallery" / "proofs").glob("*.deriv"))
    if args.only:
        paths = [p for p in paths if p.stem in args.only]
    k, n = (int(x) for x in args.part.split("/"))
    paths = paths[k - 1::n]
    rows = []
    if args.rows is not None:
        for f in args.rows:
            rows += json.loads(Path(f).read_text())
        rows = sorted({r["name"]: r for r in rows}.values(), key=lambda r: (r["name"].count("/"), r["name"]))
    else:
        with tempfile.TemporaryDirectory() as tmp:
            for p in paths:
                rows.append(row(p, bounds, Path(tmp)))
                print(rows[-1], file=sys.stderr, flush=True)
                if args.save:
                    Path(args.save).write_text(json.dumps(rows, indent=1, ensure_ascii=False))
    head, text = table(rows, bounds)
    print(head + "\n\n" + text)
    if args.docs:
        into_docs(head, text)


if __name__ == "__main__":
    main()
