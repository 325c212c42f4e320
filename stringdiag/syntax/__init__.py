"""Text to typed syntax trees: the grammars' LALR parsers (tables made by lark at build time, read by
our own driver) and the records they build."""
from __future__ import annotations

import sys


def import_lark_without_regex() -> None:
    """Import lark with the third-party ``regex`` module hidden, then unhide it.

    lark imports ``regex`` at import whenever it is installed (it comes with ``transformers``),
    though only lark's ``regex=True`` option and ``\\p{...}`` terminals use it; our grammars use
    neither, and importing it costs about 15 ms of CPU, a third of a bare interpreter's start.
    A ``None`` entry in ``sys.modules`` makes ``import regex`` fail (the import system's
    documented rule), so lark falls back to ``re``; the entry is removed at once, so a later
    ``import regex`` (transformers, in ``trace``) works. The command line calls this, in a
    process it owns, for the commands that use lark (``construct``); the library never does, so a
    program that uses lark itself keeps all of it.
    """
    if "lark" in sys.modules or "regex" in sys.modules:
        return
    sys.modules["regex"] = None  # type: ignore[assignment]
    try:
        import lark  # noqa: F401
    finally:
        del sys.modules["regex"]
