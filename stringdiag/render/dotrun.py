"""Graphviz run once for a picture and its placed layout.

A step of a derivation's chain is laid out by ``dot`` and, where dot turns untouched boxes round,
stacked by ``stacked.py`` from dot's placed layout (``-Tdot``) of the same source: one run with
``-Tsvg -Tdot`` writes both from one layout, kept for the next ask (``_MEMO``). Only those steps
ask for both: Graphviz 2.43 orders frames by where their names lie in memory, so asking for a
second format can reorder a large picture's frames in its SVG (the taxonomy's did; no step of
the gallery's derivations), and for the same reason each graph gets a process of its own (one
``dot`` reading graph after graph would save its start, ~12 ms of CPU, but lays a graph out
differently after others).
"""
from __future__ import annotations

import subprocess
import sys

from ..errors import DiagError

PROGRAMS = {"dot": ["dot", "-Tsvg"], "placed": ["dot", "-Tsvg", "-Tdot"],
            "neato": ["neato", "-n2", "-Gsplines=true", "-Tsvg"]}
_MEMO: dict[tuple[str, str], tuple[str, ...]] = {}  # (program, source) -> its documents: the last few
MEMO_SIZE = 4


class DotNotFound(DiagError):
    """Graphviz's programs are not installed (no ``dot`` on the PATH): the tool's error, saying
    how to install them, whichever picture (SVG, PNG, TikZ, a page) needed them."""

    def __init__(self, program: str):
        super().__init__(f"Graphviz's '{program}' is not installed: apt-get install -y graphviz "
                         "(or your platform's graphviz package)")


def _run(cmd: list[str], source: str) -> subprocess.CompletedProcess:
    """``cmd`` (a Graphviz program) with ``source`` on its stdin; DotNotFound where it is not installed."""
    try:
        return subprocess.run(cmd, input=source.encode(), capture_output=True)
    except FileNotFoundError:
        raise DotNotFound(cmd[0]) from None


def piped(source: str, fmt: str, quiet: bool = False) -> bytes:
    """``dot -T{fmt}``'s output for ``source``; its warnings go to stderr unless ``quiet``. Raises
    ``subprocess.CalledProcessError`` (with Graphviz's stderr) where it exits with an error."""
    cmd = ["dot", "-Kdot", f"-T{fmt}"]
    done = _run(cmd, source)
    if done.stderr and not quiet:
        sys.stderr.write(done.stderr.decode(getattr(sys.stderr, "encoding", None) or "utf-8", errors="replace"))
        sys.stderr.flush()
    if done.returncode:
        raise subprocess.CalledProcessError(done.returncode, cmd, done.stdout, done.stderr)
    return done.stdout


def laid_out(source: str, program: str = "dot", quiet: bool = True) -> tuple[str, ...]:
    """``program``'s documents for ``source``: (SVG,) for ``dot``; (SVG, placed DOT) for ``placed``
    (dot with ``-Tdot`` too); (SVG,) for ``neato`` (``-n2``: places and curves as given). Raises ``subprocess.CalledProcessError`` where Graphviz
    exits with an error; its warnings go to stderr unless ``quiet``."""
    key = (program, source)
    if key not in _MEMO:
        done = _run(PROGRAMS[program], source)
        err = done.stderr.decode(errors="replace")
        if done.returncode:
            raise subprocess.CalledProcessError(done.returncode, PROGRAMS[program], "", err)
        if err and not quiet:
            sys.stderr.write(err)
        out = done.stdout.decode()
        cut = out.index("</svg>") + len("</svg>\n")
        _MEMO[key] = (out[:cut], out[cut:]) if program == "placed" else (out,)
        while len(_MEMO) > MEMO_SIZE:
            del _MEMO[next(iter(_MEMO))]
    return _MEMO[key]
