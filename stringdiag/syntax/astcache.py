"""A cache of a shipped source's typed syntax tree, so that it is not parsed again by every run.

The prelude is most of what a short command parses, and the rule library (``rules/*.rules``,
read by ``derive``) needs a grammar of its own whose tables cost more than the parse of a
user's file. Their items (:mod:`.ast`'s and :mod:`.rules_ast`'s frozen records) are kept as
lines of JSON data (each diagram's body a line of its own, which the prelude decodes when the
diagram is first used) under the user's cache directory (``$XDG_CACHE_HOME/stringdiag`` or
``~/.cache/stringdiag``), one file a source (named by its path too, at most :data:`KEPT` files),
keyed by a hash of the text, its file name and the record definitions (``ast.py``, ``rules_ast.py``); the file
carries a BLAKE2b digest of its payload. Reading it runs no code: every object is one of the records
named in those modules (or ``Pos``), built from its fields; anything else, a stale key, a bad
checksum or a half-written file is ignored and the text parsed again. Written atomically (a
temporary file renamed over the old one). A user's own files are always parsed.
"""
from __future__ import annotations

import json
import os
from pathlib import Path

from ..errors import DiagError, Pos
from typing import Callable

from . import ast as A
from . import rules_ast as RA
from .records import Record
from .source import write_atomic

FORMAT = 5
RECORDS = {c.__name__: c for m in (A, RA) for c in vars(m).values()
           if isinstance(c, type) and issubclass(c, Record) and c.__module__ == m.__name__} | {"Pos": Pos}
Reader = Callable[[str, str], tuple]


class Unkept(Exception):
    """A value the cache does not hold (the text is then parsed every time)."""


def encode(x, file: str | None = None):
    """Records as ``{"r": NAME, "f": [fields]}``, tuples as ``{"t": [...]}``, a position in
    ``file`` (the cached source's, nearly every node's) as ``{"p": [line, col]}``; plain values as
    they are."""
    if x is None or type(x) in (str, int, float, bool):
        return x
    if type(x) is tuple:
        return {"t": [encode(v, file) for v in x]}
    if type(x) is Pos and x.file == file:
        return {"p": [x.line, x.col]}
    name = type(x).__name__
    if RECORDS.get(name) is type(x):
        return {"r": name, "f": [encode(getattr(x, f), file) for f in x._fields]}  # (a Record, or Pos)
    raise Unkept(name)


def to_lines(items: tuple, file: str | None = None) -> bytes:
    """The items as lines of JSON: the first holds them all (``encode``), each diagram's body
    written ``{"b": k}``; line ``k + 1`` holds body ``k`` (so that it can be read on its own)."""
    bodies: list[bytes] = []

    def item(x):
        if type(x) is not A.DiagramDecl:
            return encode(x, file)
        bodies.append(_dumps(encode(x.body, file)))
        return {"r": "DiagramDecl", "f": [{"b": len(bodies) - 1} if f == "body" else encode(getattr(x, f), file)
                                          for f in x._fields]}

    return b"\n".join([_dumps({"t": [item(x) for x in items]}), *bodies])


def _dumps(x) -> bytes:
    return json.dumps(x, separators=(",", ":")).encode()  # (no newline: strings' are escaped)


class Later:
    """A diagram's body left encoded until its definition is elaborated (``decode(lazy=True)``: a
    command uses a few of the prelude's definitions, and their bodies are most of its payload)."""

    __slots__ = ("_read",)

    def __init__(self, read: Callable[[], tuple]):
        self._read = read

    def read(self) -> tuple:
        return self._read()


def decode(payload: bytes, file: str | None = None, lazy: bool = False) -> tuple:
    """The items ``to_lines`` wrote (positions in ``file``); KeyError for a record not known here.
    A position met twice is one (frozen) object. With ``lazy`` each diagram's body is a
    :class:`Later`, decoded when read."""
    head, *bodies = payload.split(b"\n")
    places: dict[tuple, Pos] = {}

    def body(k: int) -> tuple:
        return json.loads(bodies[k], object_hook=hook)

    def hook(obj: dict):
        if "t" in obj:
            return tuple(obj["t"])
        if "p" in obj:
            at = tuple(obj["p"])
            if at not in places:
                if file is None:
                    raise ValueError("a position with no file to place it in")
                places[at] = Pos(file, *at)
            return places[at]
        if "b" in obj:
            k = obj["b"]
            return Later(lambda: body(k)) if lazy else body(k)
        return RECORDS[obj["r"]](*obj["f"])

    items = json.loads(head, object_hook=hook)
    if not isinstance(items, tuple):
        raise ValueError("not a tuple of items")
    return items


def digest(*parts: bytes) -> str:
    """BLAKE2b (128 bits) of the parts, from the interpreter's own module: hashlib would load
    OpenSSL, a few ms of every start."""
    try:
        from _blake2 import blake2b
    except ImportError:  # an interpreter without it
        from hashlib import blake2b
    h = blake2b(digest_size=16)
    for p in parts:
        h.update(p)
    return h.hexdigest()


def cache_dir() -> Path:
    root = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(root) / "stringdiag"


def key(text: str, file: str) -> str:
    """(The reader follows from the file's suffix, which the name in the key holds.)"""
    sources = [Path(m.__file__ or "").read_bytes() for m in (A, RA)]
    return digest(f"{FORMAT}\0{file}\0".encode(), *sources, text.encode())


KEPT = 64  # the most cache files kept: the oldest go first (every checkout or install has its own)


def _path(file: str) -> Path:
    """One file a source, named by its path too: two checkouts (or a checkout and a wheel) would
    otherwise overwrite each other's cache at every run."""
    name = Path(file).name
    label = Path(file).stem if name.endswith(".diag") else name
    return cache_dir() / f"ast-{label}-{digest(os.path.abspath(file).encode())[:16]}.json"


def _prune(folder: Path) -> None:
    """Keep the :data:`KEPT` most recently written cache files (a cache, not a record of every
    checkout that ever ran)."""
    try:
        files = sorted(folder.glob("ast-*.json"), key=lambda f: f.stat().st_mtime, reverse=True)
        for old in files[KEPT:]:
            old.unlink(missing_ok=True)
    except OSError:
        pass


def read_cached(text: str, file: str, read: Reader | None = None, lazy: bool = False) -> tuple:
    """``read(text, file)`` (``ast.read`` or ``rules_ast.read_rules``), from the cache when it
    holds this text; ``lazy``: each diagram's body a :class:`Later` (``decode``). The file is a
    line of JSON (its key and the payload's digest), then the payload."""
    read = read or A.read
    path, k = _path(file), key(text, file)
    try:
        head, _, payload = path.read_bytes().partition(b"\n")
        saved = json.loads(head)
        if saved["key"] == k and saved["digest"] == digest(payload):
            return decode(payload, file, lazy)
    except Exception:  # absent, stale, damaged or foreign: parse the text
        pass
    items = read(text, file)
    _write(path, k, items, file)
    return items


def _write(path: Path, k: str, items: tuple, file: str) -> None:
    try:
        data = to_lines(items, file)
    except Unkept:
        return
    head = json.dumps({"key": k, "digest": digest(data)}).encode()
    try:
        write_atomic(path, head + b"\n" + data)
    except DiagError:
        return  # a read-only home: parse each time
    _prune(path.parent)
