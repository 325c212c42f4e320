"""Copies the tables that pages quote from the files the tools wrote: after every
``<!-- quoted from: PATH#HEADING -->`` in README.md and docs/*.md, the table that follows is
replaced by the table under ``## HEADING`` of PATH (a study's ``tables.md``). Prose quotations
are left alone: ``tests/test_docs.py`` says which of their numbers the files no longer hold.

    python tools/quotes.py          # rewrite the quoted tables in place, say which changed
    python tools/quotes.py --check  # exit 1 if any is stale
"""
from __future__ import annotations

import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
QUOTED = re.compile(r"^<!--\s*quoted from:\s*([^,#]+)#([^,]+?)\s*-->\s*$")


def section_table(path: Path, heading: str) -> list[str]:
    """The first table's lines under ``## heading`` of a Markdown file."""
    lines = path.read_text(encoding="utf-8").splitlines()
    start = lines.index(f"## {heading}")
    rows = []
    for line in lines[start + 1:]:
        if line.startswith("## "):
            break
        if line.startswith("|"):
            rows.append(line)
        elif rows:
            break
    return rows


def refresh(page: Path) -> bool:
    """Rewrite one page's quoted tables; True if anything changed."""
    lines = page.read_text(encoding="utf-8").splitlines()
    out, k = [], 0
    while k < len(lines):
        out.append(lines[k])
        m = QUOTED.match(lines[k])
        k += 1
        if m and k < len(lines) and lines[k].startswith("|"):
            while k < len(lines) and lines[k].startswith("|"):
                k += 1
            out += section_table(ROOT / m.group(1).strip(), m.group(2).strip())
    text = "\n".join(out) + "\n"
    changed = text != page.read_text(encoding="utf-8")
    if changed and "--check" not in sys.argv:
        page.write_text(text, encoding="utf-8")
    return changed


if __name__ == "__main__":
    stale = [p for p in [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))] if refresh(p)]
    for p in stale:
        print(f"{'stale' if '--check' in sys.argv else 'rewrote'}: {p.relative_to(ROOT)}")
    sys.exit(1 if stale and "--check" in sys.argv else 0)
