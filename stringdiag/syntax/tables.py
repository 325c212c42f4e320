"""A cache of lark's LALR tables, so a process that only reads text does not rebuild them.

Building the three parsers is most of a short command's start-up. Their tables depend only on
the grammar files and lark's version, so they are kept under ``~/.cache/stringdiag`` (or
``$XDG_CACHE_HOME``), keyed by a hash of both, as JSON: reading the cache runs no code, unlike
lark's own pickle cache. A missing, stale or damaged cache is rebuilt; one that cannot be
written is simply not kept.
"""
from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

import lark
from lark import Lark, Token
from lark.grammar import Rule
from lark.lexer import TerminalDef

from ..errors import DiagError
from .source import write_atomic


def cache_dir() -> Path:
    root = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(root) / "stringdiag"


def cached_lark(path: Path, **options) -> Lark:
    """``Lark(path's text, **options)``, its tables read from the cache when they are there."""
    file = cache_dir() / f"{path.stem}-{_key(path, options)}.json"
    loaded = _read(file, options)
    if loaded is not None:
        return loaded
    built = Lark(path.read_text(), **options)
    _write(file, built)
    return built


def _key(path: Path, options: dict) -> str:
    """Every grammar beside this one may be imported by it, so all of them are in the key."""
    h = hashlib.sha256(f"{lark.__version__} {sorted(options.items())!r}".encode())
    for g in sorted(path.parent.glob("*.lark")):
        h.update(g.name.encode() + b"\0" + g.read_bytes())
    return h.hexdigest()[:16]


def _read(file: Path, options: dict) -> Lark | None:
    try:
        saved = json.loads(file.read_text(), object_hook=_decode)
        return Lark._load_from_dict(saved["data"], saved["memo"])
    except Exception:  # absent, half-written by a crashed run, or from another lark: rebuild
        return None


def _write(file: Path, built: Lark) -> None:
    data, memo = built.memo_serialize([TerminalDef, Rule])
    try:
        write_atomic(file, json.dumps(_encode({"data": data, "memo": memo})))
        for old in file.parent.glob(f"{file.name.rsplit('-', 1)[0]}-*.json"):
            if old != file:  # tables of an earlier grammar
                old.unlink(missing_ok=True)
    except (OSError, DiagError):
        pass  # a read-only home: build the tables each time


def _encode(x):
    """JSON keeps neither tuples nor non-string keys; tag both (every dict, so no data can
    be mistaken for a tag)."""
    if isinstance(x, Token):
        return str(x)
    if isinstance(x, dict):
        return {"m": [[_encode(k), _encode(v)] for k, v in x.items()]}
    if isinstance(x, tuple):
        return {"t": [_encode(v) for v in x]}
    if isinstance(x, list):
        return [_encode(v) for v in x]
    return x


def _decode(obj: dict):
    if "t" in obj:
        return tuple(obj["t"])
    return {k: v for k, v in obj["m"]}
