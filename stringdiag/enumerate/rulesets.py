"""The rule files an enumeration uses: those named, and each one's companions for other typings.

Rule (5) names the generator it absorbs into (``AttPrep(ConcatFF(x, x))``), so a rule set is
written for one typing of the generators. A generator file that types them otherwise
(``gallery/anatomy_qk.diag``: the preparations read a query and a key stream) has its own
rules beside the named file, ``R_SUFFIX.rules`` for ``R.rules`` (``rules/absorb_qk.rules``).
A companion is used when every generator-like box it names (a use of a defined diagram) is
one of the generators enumerated, so each typing's reductions fire without being named.
"""
from __future__ import annotations

from pathlib import Path

from ..graph.box import Kind
from ..rewrite.rule import load_rules


def _uses(rules) -> set[str]:
    """The defined diagrams the rules' sides use."""
    return {d.record(b).op for r in rules for d in (r.lhs, r.rhs) for b in d.boxes()
            if d.record(b).kind is Kind.DIAGRAM}


def load_for(paths: list[str], generators: list[str]) -> dict[str, list]:
    """``{path: rules}`` for the named files (a directory: its ``.rules`` files) and the
    companions written for ``generators``."""
    out: dict[str, list] = {}
    paths = [str(f) for p in paths for f in (sorted(Path(p).glob("*.rules")) if Path(p).is_dir() else [p])]
    for path in paths:
        out[path] = load_rules(path)
        p = Path(path)
        for companion in sorted(p.parent.glob(f"{p.stem}_*.rules")):
            name = str(companion) if p.parent != Path(".") else companion.name
            if name in out or name in paths:
                continue
            rules = load_rules(companion)
            uses = _uses(rules)
            if uses and uses <= set(generators):
                out[name] = rules
    return out


__all__ = ["load_for"]
