"""Errors that carry a source position, printed as ``FILE:LINE:COL: error: MESSAGE``."""
from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Pos:
    """A place in a source file (1-based line and column)."""

    file: str
    line: int
    col: int

    def __str__(self) -> str:
        return f"{self.file}:{self.line}:{self.col}"


class DiagError(Exception):
    """The tool's own error: bad input, reported with its position; never a traceback."""

    severity = "error"

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
        """The message as a compiler prints it, with the offending line and a caret."""
        head = f"{self.pos}: {severity}: {self.message}" if self.pos else f"{severity}: {self.message}"
        if self.pos is None:
            return head
        source = self.source
        if source is None:  # raised far from the text (compiling, say): read the file again
            try:
                with open(self.pos.file, encoding="utf-8") as f:
                    source = f.read()
            except (OSError, ValueError):
                return head
        lines = source.splitlines()
        if not 1 <= self.pos.line <= len(lines):
            return head
        text = lines[self.pos.line - 1].expandtabs(1)
        caret = " " * max(self.pos.col - 1, 0) + "^"
        return f"{head}\n    {text}\n    {caret}"


class DiagWarning(DiagError):
    """A diagnostic that does not stop the tool (e.g. a wire that is never used)."""

    severity = "warning"
