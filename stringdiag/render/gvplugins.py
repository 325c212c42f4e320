"""Graphviz with its layout plugins only, so that a picture does not depend on the machine's fonts.

Graphviz measures a label with its text-layout plugin (pango, through fontconfig) when one is
installed, and with its own Helvetica metrics when none is. The plugin makes the same picture
differ from machine to machine (the font that answers to "Helvetica" there) and costs about
12 ms of every ``dot`` run's 15 ms of CPU, loading pango, cairo and the font cache. So layouts
(SVG, placed DOT) run with ``GVBINDIR`` at a folder of the user's cache that offers Graphviz only
its core, ``dot`` and ``neato`` plugins: the same picture on every machine with the same Graphviz.
PNG and PDF, which need a rasteriser and fonts, run with Graphviz as installed.

The folder holds links to the installed plugin libraries and the configuration ``dot -c`` writes
for them; it is made on first use (two short ``dot`` runs), named by the ``dot`` found on the
PATH and remade when the installed configuration changes. Where it cannot be made, or a run with
it fails and so does an empty graph (``works``), its record says so and Graphviz runs as
installed until the installation changes. A ``GVBINDIR`` of the user's own is left as it is.
"""
from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any, Callable

from ..errors import DiagError

Spawn = Callable[..., Any]  # dotrun.spawn: (cmd, source, env) -> its Done (passed in: dotrun imports this module)

PLUGINS = ("core", "dot_layout", "neato_layout")  # the SVG and DOT writers, and the two layouts used
STAMP = "installed"  # the folder's record: the installed configuration it was made from, and its state
_made: dict[str, str | None] = {}  # dot's path -> the folder (None: Graphviz as installed), this process


def layout_environ(spawn: Spawn) -> dict[str, str] | os._Environ[str]:
    """The environment for a layout run: ``GVBINDIR`` at the layout-only folder where there is
    one, else the process's own. ``spawn`` runs ``dot`` when the folder must be made."""
    if "GVBINDIR" in os.environ:
        return os.environ
    dot = _which("dot")
    if dot is None:
        return os.environ  # (the run itself says Graphviz is missing)
    if dot not in _made:
        _made[dot] = _ready(dot, spawn)
    folder = _made[dot]
    return os.environ if folder is None else {**os.environ, "GVBINDIR": folder}


def works(spawn: Spawn) -> bool:
    """Whether the folder lays out an empty graph: after a run with it failed, whether the
    failure was the folder's (a plugin missing or broken) or the graph's own (too large, say)."""
    env = layout_environ(spawn)
    return "GVBINDIR" in env and spawn(["dot", "-Tsvg"], "digraph {}", env).returncode == 0


def give_up() -> None:
    """The folder does not work: its record says "unavailable" (kept until the installation
    changes, so that no command makes it again and fails again) and Graphviz runs as installed."""
    for dot, folder in list(_made.items()):
        if folder is not None:
            try:
                libdir, _, seen = (Path(folder) / STAMP).read_text().split("\n")[:3]
                _write_stamp(Path(folder), libdir, "unavailable", seen)
            except (OSError, ValueError, DiagError):
                pass
        _made[dot] = None


def _which(program: str) -> str | None:
    """``shutil.which``'s answer, resolved, without importing shutil (bz2, lzma: 2 to 4 ms of a
    picture's start)."""
    for d in os.environ.get("PATH", os.defpath).split(os.pathsep):
        path = os.path.join(d or ".", program)
        if os.access(path, os.X_OK) and not os.path.isdir(path):
            return os.path.realpath(path)
    return None


def _ready(dot: str, spawn: Spawn) -> str | None:
    """The folder for this ``dot``, made or remade when its record does not match the installed
    configuration; None where Graphviz must run as installed."""
    from ..syntax.datacache import cache_dir, digest

    folder = cache_dir() / f"graphviz-{digest(dot.encode())[:16]}"
    state = _recorded(folder)
    if state is None:
        return _make(dot, folder, spawn)
    return str(folder) if state == "ok" else None


def _recorded(folder: Path) -> str | None:
    """The folder's state ("ok" or "unavailable") where its record matches the installed
    configuration; None where it is absent, damaged or stale."""
    try:
        libdir, state, seen = (folder / STAMP).read_text().split("\n")[:3]
    except (OSError, ValueError):
        return None
    return state if seen == _signature(Path(libdir)) else None


def _signature(libdir: Path) -> str:
    """What changes when Graphviz is installed again: its configuration files' sizes and times."""
    try:
        files = sorted(p for p in libdir.iterdir() if p.name.startswith("config"))
        return ";".join(f"{p.name}:{p.stat().st_size}:{p.stat().st_mtime_ns}" for p in files)
    except OSError:
        return "-"


def _make(dot: str, folder: Path, spawn: Spawn) -> str | None:
    """Links to the layout plugins and ``dot -c``'s configuration of them, written beside the
    folder and renamed into place; the record says "unavailable" where that fails."""
    found = re.search(r'libdir = "([^"]+)"', spawn([dot, "-v", "-Tdot"], "digraph {}").stderr.decode(errors="replace"))
    libdir = Path(found.group(1)) if found else None
    state = "unavailable"
    try:
        import tempfile

        folder.parent.mkdir(parents=True, exist_ok=True)
        tmp = Path(tempfile.mkdtemp(prefix=f"{folder.name}.", dir=folder.parent))
        tmp.chmod(0o755)  # (mkdtemp makes it private; the cache is not secret)
    except OSError:  # a read-only cache: Graphviz as installed
        return None
    try:
        libs = [p for p in (libdir.iterdir() if libdir else ())
                if any(p.name.startswith(f"libgvplugin_{n}.") for n in PLUGINS)]
        for lib in libs:
            (tmp / lib.name).symlink_to(lib)
        code = spawn([dot, "-c"], "", {**os.environ, "GVBINDIR": str(tmp)}).returncode
        if libs and code == 0 and any(p.name.startswith("config") for p in tmp.iterdir()):
            state = "ok"
        _write_stamp(tmp, str(libdir or "-"), state, _signature(libdir) if libdir else "-")
        _install(tmp, folder)
    except (OSError, DiagError):  # a file system without links: Graphviz as installed
        _remove(tmp)
        return None
    return str(folder) if state == "ok" else None


def _write_stamp(folder: Path, libdir: str, state: str, seen: str) -> None:
    from ..syntax.source import write_atomic

    write_atomic(folder / STAMP, f"{libdir}\n{state}\n{seen}\n")


def _install(tmp: Path, folder: Path) -> None:
    """``tmp`` renamed to ``folder`` (a rename fails where the folder is there). Where another
    process put a current one there first (two commands, or a suite's workers, starting at once),
    theirs stays, as it may be in use; a stale one (Graphviz reinstalled) is set aside first."""
    try:
        tmp.rename(folder)
        return
    except OSError:
        if _recorded(folder) is not None:
            _remove(tmp)
            return
    aside = folder.with_name(f"{folder.name}.{os.getpid()}.old")
    folder.rename(aside)
    _remove(aside)
    tmp.rename(folder)


def _remove(folder: Path) -> None:
    if folder.is_dir():
        import shutil

        shutil.rmtree(folder, ignore_errors=True)
