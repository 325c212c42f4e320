"""``stringdiag examples [DIR]``: copy the shipped gallery and rule library into a folder.

The documentation's commands name the example files as a checkout has them
(``stringdiag check gallery/attention.diag``). After a wheel install, ``stringdiag examples``
in an empty folder puts the same files there (the sources the wheel ships: ``gallery/`` without
its pictures or study results, and ``rules/``), so every command of the docs runs as shown;
naming a file ``stringdiag:gallery/attention.diag`` needs no copy at all. A file already there
with the same bytes is left alone; one that differs is never overwritten (nothing is written).
"""
from __future__ import annotations

import argparse
from pathlib import Path

from ..resources import folder, shown
from .options import UsageError
from .outputs import folder as output_folder

HELP = "copy the shipped gallery/ and rules/ into a folder (default: here), so the docs' commands run as shown"
EXAMPLES = """\
stringdiag examples
stringdiag examples my-examples"""

# what the wheel ships of each folder (pyproject.toml's package-data; tests/test_wheel.py compares)
SHIPPED = {"gallery": ("*.diag", "*.deriv", "*.tax", "*.json", "proofs/*.deriv", "modern/*.diag"),
           "rules": ("*.rules",)}


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("dir", nargs="?", default=".", metavar="DIR", type=output_folder,
                   help="the folder to copy into (made if absent)")


def shipped_files() -> dict[str, Path]:
    """``{"gallery/attention.diag": its shipped path, ...}``: the files ``examples`` copies."""
    found = {}
    for name, patterns in SHIPPED.items():
        root = folder(name)
        for pattern in patterns:
            for path in root.glob(pattern):
                if path.is_file():
                    found[f"{name}/{path.relative_to(root).as_posix()}"] = path
    return dict(sorted(found.items()))


def run(args: argparse.Namespace) -> int:
    target = Path(args.dir)
    if target.exists() and not target.is_dir():
        raise UsageError(f"{shown(target)} is a file, not a folder")
    files = shipped_files()
    todo = {}
    for rel, source in files.items():
        there = target / rel
        if there.exists() and (not there.is_file() or there.read_bytes() != source.read_bytes()):
            raise UsageError(f"{shown(there)} is already there and differs from the shipped copy; "
                             "move it away or choose another folder (nothing was copied)")
        if not there.exists():
            todo[rel] = source
    for rel, source in todo.items():
        (target / rel).parent.mkdir(parents=True, exist_ok=True)
        (target / rel).write_bytes(source.read_bytes())
    counts = ", ".join(f"{n} in {name}/" for name in SHIPPED
                       if (n := sum(r.startswith(name + "/") for r in files)))
    kept = len(files) - len(todo)
    print(f"copied {len(todo)} of the {len(files)} example files ({counts}) into {shown(target)}"
          + (f"; {kept} were there already" if kept else ""))
    print(f"try: stringdiag check {shown(target / 'gallery' / 'attention.diag')}")
    return 0
