"""The data the package ships (grammars, the rule library, the gallery, the prelude), found in
one place.

In an installed wheel the repository's top-level folders ``grammars/``, ``rules/`` and
``gallery/`` are package data beside the modules (``setup.py`` maps them into the package at
build time); in a source checkout (the tests, an editable install) they are those top-level
folders themselves. The package is the folder of this module (what ``importlib.resources.files``
would return for it, without importing that module and the archive readers it brings, a tenth of
a short command's start-up); :func:`folder` picks whichever of the two holds the folder. The
package must be installed as files (not zipped): the grammars and rules are read by path.

A source file names a shipped file by package name, ``"stringdiag:gallery/anatomy.diag"``
(:data:`PREFIX`), wherever it names a file (``import``, ``use``, ``by``, a command's
argument): that resolves inside the package from anywhere, while a plain name stays relative
to the file that writes it.

>>> locate("stringdiag:rules/fastpath.rules", Path(".")) == folder("rules") / "fastpath.rules"
True
>>> locate("other.diag", Path("models"))
PosixPath('models/other.diag')
"""
from __future__ import annotations

import os
from pathlib import Path, PurePosixPath

from .errors import FOLDERS, PREFIX, DiagError, Pos, shown


def folder(name: str) -> Path:
    """A shipped folder: inside the installed package, else the source checkout's top level."""
    package = Path(__file__).parent
    for place in (package / name, package.parent / name):
        if place.is_dir():
            return place
    raise DiagError(f"this installation of stringdiag lacks its {name}/ folder (looked in {package}); "
                    "reinstall the package")


def shipped(name: str, pos: Pos | None = None, source: str | None = None) -> Path:
    """The shipped file ``FOLDER/FILE`` (``gallery/anatomy.diag``); it need not exist yet."""
    parts = PurePosixPath(name).parts
    if ".." in parts:
        raise DiagError(f"'{PREFIX}{name}' leaves the shipped folders: a package name has no '..'", pos, source)
    if len(parts) < 2 or parts[0] not in FOLDERS:
        raise DiagError(f"'{PREFIX}{name}' names no shipped file: write {PREFIX}FOLDER/FILE with FOLDER one of "
                        f"{', '.join(FOLDERS)}", pos, source)
    return folder(parts[0]).joinpath(*parts[1:])


MAX_NAME = 4096  # bytes in a file reference (PATH_MAX); a folder or file name at most NAME_MAX
MAX_PART = 255


def check_name(name: str, pos: Pos | None = None, source: str | None = None, kinds: tuple[str, ...] = ()) -> None:
    """Refuse a file reference no file system could hold (a NUL or other control character, a
    name too long) or one of the wrong kind (``kinds``: the extensions it may have)."""
    bad = next((c for c in name if ord(c) < 32 or c == "\x7f"), None)
    if bad is not None:
        raise DiagError(f"the file name {name!r} holds the control character {bad!r}: no file has such a name", pos, source)
    if not name.strip():
        raise DiagError("an empty file name", pos, source)
    if len(name.encode("utf-8", "surrogatepass")) > MAX_NAME or \
            any(len(part.encode("utf-8", "surrogatepass")) > MAX_PART for part in PurePosixPath(name).parts):
        raise DiagError(f"the file name '{name[:40]}...' is too long ({len(name)} characters; at most {MAX_NAME}, "
                        f"{MAX_PART} per folder or file name)", pos, source)
    if kinds and not name.endswith(kinds):
        raise DiagError(f"'{name}' is not {' or '.join('a ' + k + ' file' for k in kinds)}", pos, source)


def locate(name: str, base: Path, pos: Pos | None = None, source: str | None = None,
           kinds: tuple[str, ...] = ()) -> Path:
    """The file a source file means by ``name``: a shipped one for ``stringdiag:...``, else
    ``name`` relative to ``base`` (the writing file's folder); a name no file could have, or
    not of one of ``kinds`` (extensions), is refused at ``pos``."""
    check_name(name, pos, source)
    found = shipped(name[len(PREFIX):], pos, source) if name.startswith(PREFIX) else base / name
    check_name(name, pos, source, kinds)  # after: a package name that names no shipped file says so first
    return found


def argument(path: str | Path) -> str | Path:
    """A file a caller names (a command's argument, ``load``'s): a shipped name resolves, any
    other path is kept as given (so messages show it as the user wrote it)."""
    return shipped(str(path)[len(PREFIX):]) if str(path).startswith(PREFIX) else path


def hint(name: str | Path) -> str:
    """For a file that is not there: the shipped file of that name, when there is one (a
    README's ``gallery/attention.diag`` read from a folder other than a checkout), as
    ``; the copy shipped with stringdiag is stringdiag:gallery/attention.diag``; else ''."""
    parts = PurePosixPath(Path(name).as_posix()).parts
    if os.path.isabs(name) or ".." in parts or len(parts) < 2 or parts[0] not in FOLDERS:
        return ""
    try:
        there = shipped("/".join(parts)).is_file()
    except DiagError:
        return ""
    return f"; the copy shipped with stringdiag is {PREFIX}{'/'.join(parts)}" if there else ""


__all__ = ["PREFIX", "FOLDERS", "folder", "shipped", "check_name", "locate", "argument", "shown", "hint"]
