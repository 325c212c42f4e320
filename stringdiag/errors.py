"""Errors that carry a source position, printed as ``FILE:LINE:COL: error: MESSAGE``."""
from __future__ import annotations

import os
from pathlib import Path

PREFIX = "stringdiag:"  # a file shipped with the package, named from anywhere (resources.py)
FOLDERS = ("gallery", "grammars", "prelude", "rules")  # the shipped folders


PACKAGE = Path(__file__).resolve().parent


def shown(file: str | os.PathLike) -> str:
    """A file as users are shown it: one inside the installed package by its package name
    (``stringdiag:gallery/attention.diag``), never by where the package happens to be installed
    (a site-packages path); any other as given (a checkout's ``gallery/`` is the user's own).

    >>> shown(PACKAGE / "gallery" / "attention.diag")
    'stringdiag:gallery/attention.diag'
    >>> shown("mine/attention.diag")
    'mine/attention.diag'
    """
    text = os.fspath(file)
    if not os.path.isabs(text):
        return text
    path = Path(text)
    for name in FOLDERS:
        if path.is_relative_to(PACKAGE / name):
            return PREFIX + path.relative_to(PACKAGE).as_posix()
    return text


class Pos:
    """A place in a source file (1-based line and column): a frozen record, as a frozen dataclass
    behaves (equality, hash and repr by its fields), written out because every start would
    otherwise import ``dataclasses`` (and ``inspect``) for it."""

    __slots__ = ("file", "line", "col")
    __match_args__ = _fields = ("file", "line", "col")
    file: str
    line: int
    col: int

    def __init__(self, file: str, line: int, col: int) -> None:
        put = object.__setattr__
        put(self, "file", file)
        put(self, "line", line)
        put(self, "col", col)

    def __eq__(self, other: object) -> bool:
        if other.__class__ is not self.__class__:
            return NotImplemented
        return (self.file, self.line, self.col) == (other.file, other.line, other.col)  # type: ignore[attr-defined]

    def __hash__(self) -> int:
        return hash((self.file, self.line, self.col))

    def __repr__(self) -> str:
        return f"Pos(file={self.file!r}, line={self.line!r}, col={self.col!r})"

    def __setattr__(self, name: str, value: object) -> None:
        from dataclasses import FrozenInstanceError  # (only on this mistake)

        raise FrozenInstanceError(f"cannot assign to field {name!r}")

    def __delattr__(self, name: str) -> None:
        from dataclasses import FrozenInstanceError

        raise FrozenInstanceError(f"cannot delete field {name!r}")

    def __reduce__(self):
        return Pos, (self.file, self.line, self.col)

    def __str__(self) -> str:
        return f"{shown(self.file)}:{self.line}:{self.col}"


class DiagError(Exception):
    """The tool's own error: bad input, reported with its position; never a traceback."""

    severity = "error"
    # the imports that reached the file it is in, outermost first (set by the loader): an
    # editor shows an error inside an imported file on the line of the open file that leads to it
    imported_at: tuple[Pos, ...] = ()

    def __init__(self, message: str, pos: Pos | None = None, source: str | None = None):
        super().__init__(message)
        self.message = message
        self.pos = pos
        self.source = source

    def __str__(self) -> str:
        """``FILE:LINE:COL: error: MESSAGE`` when the position is known (raised in Python, in a
        notebook), else the message; :meth:`render` adds the line and a caret."""
        return f"{self.pos}: {self.severity}: {self.message}" if self.pos else self.message

    def _render_traceback_(self) -> list[str]:
        """What IPython shows instead of a traceback: the message as the command line prints it."""
        return self.render(self.severity).splitlines()

    def render(self, severity: str = "error") -> str:
        """The message as a compiler prints it, with the offending line and a caret (at most
        :data:`QUOTED` characters of it; a message that quotes a huge name is cut too)."""
        message = self.message if len(self.message) <= 10 * QUOTED else self.message[:10 * QUOTED] + "..."
        head = f"{self.pos}: {severity}: {message}" if self.pos else f"{severity}: {message}"
        if self.pos is None:
            return head
        source = self.source
        if source is None:  # raised far from the text (compiling, say): read the file again
            try:
                if os.path.getsize(self.pos.file) > 16 * 2 ** 20:  # not one this tool would have read
                    return head
                with open(self.pos.file, encoding="utf-8") as f:
                    source = f.read()
            except (OSError, ValueError):
                return head
        line = _line(source, self.pos.line)
        if line is None:
            return head
        text, col = quoted(line.expandtabs(1), self.pos.col)
        caret = " " * max(col - 1, 0) + "^"
        return f"{head}\n    {text}\n    {caret}"


QUOTED = 200  # the most characters of a source line a message quotes
INT64_MAX = 2 ** 63 - 1  # the largest size a user may give (a tensor's dimension is an int64)


def _line(source: str, number: int) -> str | None:
    """Line ``number`` (from 1) of ``source``, found without splitting the whole text."""
    if number < 1:
        return None
    start = 0
    for _ in range(number - 1):
        start = source.find("\n", start) + 1
        if start == 0:
            return None
    if start >= len(source):  # past the last line
        return None
    end = source.find("\n", start)
    line = source[start:] if end < 0 else source[start:end]
    return line.rstrip("\r")


def quoted(text: str, col: int) -> tuple[str, int]:
    """At most :data:`QUOTED` characters of a line around column ``col``, ``...`` where cut,
    and the column in what is quoted."""
    if len(text) <= QUOTED:
        return text, col
    start = max(0, min(col - 1 - QUOTED // 2, len(text) - QUOTED))
    cut = text[start:start + QUOTED]
    head, tail = ("..." if start > 0 else ""), ("..." if start + QUOTED < len(text) else "")
    return head + cut + tail, col - start + len(head)


class NoSuchDiagram(DiagError, KeyError):
    """``program['NAME']`` for a name it does not define: the tool's error, so that ``except
    DiagError`` catches it, and a ``KeyError``, as a mapping's lookup raises (``args[0]`` is the
    message)."""


def kind(value: object) -> str:
    """A wrong argument as a message names it: ``3 (an int)``, at most 40 characters of its repr.

    >>> kind(3), kind("d=8")
    ('3 (an int)', "'d=8' (a str)")
    """
    text = repr(value)
    text = text if len(text) <= 40 else text[:37] + "..."
    name = type(value).__name__
    return f"{text} (a{'n' if name[:1] in 'aeiouAEIOU' else ''} {name})"


class DiagWarning(DiagError):
    """A diagnostic that does not stop the tool (e.g. a wire that is never used)."""

    severity = "warning"
