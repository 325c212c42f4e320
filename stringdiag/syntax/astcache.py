"""A cache of a shipped source's typed syntax tree, so that it is not parsed again by every run.

The prelude is most of what a short command parses, and the rule library (``rules/*.rules``,
read by ``derive``) needs a grammar of its own whose tables cost more than the parse of a
user's file. Their items (:mod:`.ast`'s and :mod:`.rules_ast`'s frozen records) are kept as a
flat program of plain values (:func:`to_data`), each diagram's body a program of its own, which
the prelude runs when the diagram is first used, in a :mod:`.datacache` file under the user's
cache directory (``$XDG_CACHE_HOME/stringdiag`` or ``~/.cache/stringdiag``), one file a source
(named by its path too, at most :data:`KEPT` files), keyed by a hash of the text, its file name,
the record definitions (``ast.py``, ``rules_ast.py``) and the interpreter, and checked by a
digest. Reading it runs no code: every object made is one of the records named in those modules
(or ``Pos``), a tuple, or a plain value; anything else, a stale key, a bad digest or a
half-written file is ignored and the text parsed again. A user's own files are always parsed.
"""
from __future__ import annotations

import os
from pathlib import Path
from typing import Callable

from ..errors import Pos
from . import ast as A
from . import rules_ast as RA
from . import datacache
from .datacache import cache_dir, digest
from .records import Record

FORMAT = 7
RECORDS = {c.__name__: c for m in (A, RA) for c in vars(m).values()
           if isinstance(c, type) and issubclass(c, Record) and c.__module__ == m.__name__} | {"Pos": Pos}
Reader = Callable[[str, str], tuple]

# A program is (ops, values): ``ops`` bytes, one a node in post-order, ``values`` the plain values
# they take in turn. VALUE pushes the next value; PLACE a position in the cached file (its line and
# column as one number, line << 20 | column: nearly every node has one; a position past column
# 2^20 is a Pos record); TUPLE the last n pushed (n the next value) as a tuple;
# BODY the diagram body numbered by the next value; RECORD + i a record of class CLASSES[i], its
# fields the last pushed.
VALUE, PLACE, TUPLE, BODY, RECORD = range(5)
CLASSES = tuple(RECORDS[name] for name in sorted(RECORDS))
_OPCODE = {cls: RECORD + i for i, cls in enumerate(CLASSES) if RECORD + i < 256}  # (one byte an op; past it, unkept)
_SETTERS = tuple(tuple(getattr(cls, f).__set__ for f in cls._fields) for cls in CLASSES)  # each field's slot
_PLAIN = frozenset({str, int, float, bool, type(None)})
_RECORD_OPS = bytes(range(RECORD, 256))  # the ops that take no value (VALUE, PLACE, TUPLE and BODY take one)
_COLUMN_BITS = 20
_COLUMN_MASK = (1 << _COLUMN_BITS) - 1


class Unkept(Exception):
    """A value the cache does not hold (the text is then parsed every time)."""


def encode(x, file: str | None, ops: bytearray, values: list, bodies: list | None = None) -> None:
    """Append ``x``'s program to ``ops`` and ``values``; with ``bodies``, each diagram's body is
    encoded there as a program of its own and stands here as BODY."""
    if x is None or type(x) in _PLAIN:
        ops.append(VALUE)
        values.append(x)
    elif type(x) is tuple:
        for v in x:
            encode(v, file, ops, values, bodies)
        ops.append(TUPLE)
        values.append(len(x))
    elif type(x) is Pos and x.file == file and type(x.line) is type(x.col) is int and 0 <= x.col <= _COLUMN_MASK:
        ops.append(PLACE)
        values.append(x.line << _COLUMN_BITS | x.col)
    elif _OPCODE.get(type(x)) is None:
        raise Unkept(type(x).__name__)
    else:
        for f in x._fields:
            if bodies is not None and f == "body" and type(x) is A.DiagramDecl:
                bodies.append(program(getattr(x, f), file))
                ops.append(BODY)
                values.append(len(bodies) - 1)
            else:
                encode(getattr(x, f), file, ops, values, bodies)
        ops.append(_OPCODE[type(x)])


def program(x, file: str | None) -> tuple[bytes, tuple]:
    ops: bytearray = bytearray()
    values: list = []
    encode(x, file, ops, values)
    return bytes(ops), tuple(values)


def to_data(items: tuple, file: str | None = None) -> tuple:
    """The items as plain data: ``(program, bodies)``, the program making the tuple of items
    with each diagram's body a BODY, ``bodies`` the body programs."""
    bodies: list = []
    ops: bytearray = bytearray()
    values: list = []
    encode(items, file, ops, values, bodies)
    return (bytes(ops), tuple(values)), tuple(bodies)


class Later:
    """A diagram's body left encoded until its definition is elaborated (``decode(lazy=True)``: a
    command uses a few of the prelude's definitions, and their bodies are most of its payload)."""

    __slots__ = ("_read",)

    def __init__(self, read: Callable[[], tuple]):
        self._read = read

    def read(self) -> tuple:
        return self._read()


def decode(data: tuple, file: str | None = None, lazy: bool = False) -> tuple:
    """The items ``to_data`` made (positions in ``file``); ValueError for data it could not have
    made. A position met twice is one (frozen) object. With ``lazy`` each diagram's body is a
    :class:`Later`, made when read."""
    head, bodies = data
    if type(bodies) is not tuple or not all(type(b) is tuple and len(b) == 2 for b in bodies):
        raise ValueError("not a tuple of body programs")
    places: dict[tuple, Pos] = {}

    def body(k: int):
        return run(bodies[k], file, places, None)

    def stored(k) -> int:
        if type(k) is not int or not 0 <= k < len(bodies):
            raise ValueError("a body that was not stored")
        return k

    def later(k) -> Later:
        j = stored(k)  # (checked now: a body is read in the middle of elaborating)
        return Later(lambda: body(j))

    items = run(head, file, places, later if lazy else lambda k: body(stored(k)))
    if type(items) is not tuple:
        raise ValueError("not a tuple of items")
    return items


def run(prog: tuple, file: str | None, places: dict, body: Callable[[int], object] | None):
    """The one object ``prog`` (from :func:`program`) makes; ValueError if it is not one of ours.
    (The ops most frequent first: the loop is most of reading a cache.)"""
    ops, values = prog
    if type(ops) is not bytes or type(values) is not tuple or not _PLAIN.issuperset(map(type, values)):
        raise ValueError("not a program of plain values")
    if len(values) != len(ops.translate(None, _RECORD_OPS)):
        raise ValueError("ops and values do not match")
    stack: list = []
    push, take, new = stack.append, iter(values).__next__, object.__new__
    for op in ops:
        if op == PLACE:
            at = take()
            pos = places.get(at)
            if pos is None:
                if file is None:
                    raise ValueError("a position with no file to place it in")
                pos = places[at] = Pos(file, at >> _COLUMN_BITS, at & _COLUMN_MASK)
            push(pos)
        elif op >= RECORD:
            if op - RECORD >= len(CLASSES):
                raise ValueError("a record of no class known here")
            made = new(CLASSES[op - RECORD])  # (what __init__ does with every field given, without its call)
            setters = _SETTERS[op - RECORD]
            if len(stack) < len(setters):
                raise ValueError("a record with fewer fields than its class")
            if setters:
                for put, value in zip(setters, stack[-len(setters):]):
                    put(made, value)
                del stack[-len(setters):]
            push(made)
        elif op == VALUE:
            push(take())
        elif op == TUPLE:
            n = take()
            if type(n) is not int or not 0 <= n <= len(stack):
                raise ValueError("a tuple of more values than were made")
            if n:
                made = tuple(stack[-n:])
                del stack[-n:]
                push(made)
            else:
                push(())
        elif body is not None:
            push(body(take()))
        else:
            raise ValueError("a body inside a body")
    if len(stack) != 1:
        raise ValueError("not one object")
    return stack[0]


def key(text: str, file: str) -> str:
    """(The reader follows from the file's suffix, which the name in the key holds.)"""
    sources = [Path(m.__file__ or "").read_bytes() for m in (A, RA)]
    return digest(f"{FORMAT}\0{datacache.INTERPRETER}\0{file}\0".encode(), *sources, text.encode())


KEPT = 64  # the most cache files kept: the oldest go first (every checkout or install has its own)


def _path(file: str) -> Path:
    """One file a source, named by its path too: two checkouts (or a checkout and a wheel) would
    otherwise overwrite each other's cache at every run."""
    name = Path(file).name
    label = Path(file).stem if name.endswith(".diag") else name
    where = f"{datacache.INTERPRETER}\0{os.path.abspath(file)}"  # (two interpreters sharing a cache: a file each)
    return cache_dir() / f"ast-{label}-{digest(where.encode())[:16]}.marshal"


def read_cached(text: str, file: str, read: Reader | None = None, lazy: bool = False) -> tuple:
    """``read(text, file)`` (``ast.read`` or ``rules_ast.read_rules``), from the cache when it
    holds this text; ``lazy``: each diagram's body a :class:`Later` (``decode``)."""
    read = read or A.read
    path, k = _path(file), key(text, file)
    data = datacache.load(path, k)
    if data is not None:
        try:
            return decode(data, file, lazy)
        except Exception:  # not what to_data makes: parse the text
            pass
    items = read(text, file)
    try:
        datacache.store(path, k, to_data(items, file), KEPT)
    except Unkept:
        pass
    return items
