"""Plain data kept between runs under the user's cache directory, checked and read without running code.

A short command reads the parser's tables and the cached syntax trees of the prelude and the rule
library at every start; JSON's decoder (and importing ``json``) was several milliseconds of that.
A cache file here is one ASCII line, ``KEY DIGEST``, then the data as :mod:`marshal` writes it:
tuples, lists, dicts, strings, bytes and numbers only; each reader checks the shape it uses (the
syntax trees' programs value by value, the tables their fields) and parses again where it is not. The key
names what the data was made from and the interpreter (``marshal``'s format is the interpreter's);
the digest is BLAKE2b of the data, so a damaged, half-written or stale file is never unmarshalled,
just ignored (the caller makes the data again and stores it). Files are written atomically (a
temporary file renamed over the old one), and each kind keeps only its newest files.
"""
from __future__ import annotations

import marshal
import os
import sys
from pathlib import Path
from typing import Any

from ..errors import DiagError

INTERPRETER = f"{sys.implementation.cache_tag}/marshal{marshal.version}"  # part of every key


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
    """Where stringdiag keeps what it can make again (syntax trees, tables, Graphviz's plugin folder,
    corpora): ``$STRINGDIAG_CACHE``, else ``$XDG_CACHE_HOME/stringdiag``, else ``~/.cache/stringdiag``;
    for a user with no home to find (a container's, say), a folder of the temporary directory."""
    if mine := os.environ.get("STRINGDIAG_CACHE"):
        return Path(mine)
    root = os.environ.get("XDG_CACHE_HOME")
    if not root:
        try:
            root = str(Path.home() / ".cache")
        except (RuntimeError, KeyError):  # no $HOME and no password entry
            import tempfile

            return Path(tempfile.gettempdir()) / f"stringdiag-{getattr(os, 'getuid', lambda: 'cache')()}"
    return Path(root) / "stringdiag"


def load(path: Path, key: str) -> Any:
    """The data stored at ``path`` under ``key``; None when the file is absent, holds another
    key, or its data is not what its digest says."""
    try:
        data = path.read_bytes()
    except OSError:
        return None
    head, _, payload = data.partition(b"\n")
    saved_key, _, saved_digest = head.decode("ascii", "replace").partition(" ")
    if saved_key != key or saved_digest != digest(payload):
        return None
    try:
        return marshal.loads(payload)
    except (EOFError, ValueError, TypeError):
        return None


def store(path: Path, key: str, data: Any, kept: int) -> None:
    """Write ``data`` (plain values only) under ``key``, then keep the ``kept`` newest files of
    its kind (named as ``path`` is, up to its first ``-``). A cache that cannot be written (a
    read-only home) is no error: the data is made again next time."""
    from .source import write_atomic

    payload = marshal.dumps(data)
    try:
        write_atomic(path, f"{key} {digest(payload)}\n".encode() + payload)
    except DiagError:
        return
    prune(path.parent, path.name.split("-", 1)[0] + "-*", kept)


def prune(folder: Path, pattern: str, kept: int) -> None:
    """Keep the ``kept`` most recently written files matching ``pattern`` (a cache, not a record
    of every checkout that ever ran)."""
    try:
        files = sorted(folder.glob(pattern), key=lambda f: f.stat().st_mtime, reverse=True)
        for old in files[kept:]:
            old.unlink(missing_ok=True)
    except OSError:
        pass
