"""Text to lark parse tree, for the grammars in ``grammars/``, with positioned errors.

The typed trees the tool reads are built from these by ``ast.py`` (.diag), ``rules_ast.py``
(.rules) and ``deriv_ast.py`` (.deriv)."""
from __future__ import annotations

import re
from functools import lru_cache
from pathlib import Path

from lark import Lark, Token, Tree
from lark.exceptions import UnexpectedCharacters, UnexpectedEOF, UnexpectedInput, UnexpectedToken

from ..errors import DiagError, Pos
from ..resources import folder
from .tables import cached_lark

# How terminals read in a message.
_FRIENDLY = {
    "NAME": "a name",
    "NUMBER": "a number",
    "INT": "an integer",
    "STRING": 'a "quoted" path',
    "SUM": "sum_<index>",
    "$END": "end of file",
    "FILEREF": "FILE.diag:NAME",
    "QNAME": "a name",  # o.Name is a name too (of a file imported as o)
    "QREF": "a name",
}


def grammar_path(name: str = "diag.lark") -> Path:
    return folder("grammars") / name


@lru_cache(maxsize=None)
def parser(name: str = "diag.lark") -> Lark:
    """The LALR parser of a grammar; one grammar may import another beside it (rules.lark
    imports diag.lark's statements)."""
    path = grammar_path(name)
    return cached_lark(path, parser="lalr", propagate_positions=True, maybe_placeholders=True,
                       import_paths=[str(path.parent)], source_path=str(path))


def _describe(term: str, lark: Lark) -> str:
    if term in _FRIENDLY:
        return _FRIENDLY[term]
    try:
        pattern = lark.get_terminal(term).pattern
    except KeyError:
        return term
    if pattern.type == "str":
        return f"'{pattern.value}'"
    return term.lower()


def _token_text(tok: Token) -> str:
    if tok.type == "$END":
        return "end of file"
    return f"'{tok}'"


def parse(text: str, file: str = "<string>", grammar: str = "diag.lark") -> Tree:
    """Parse source text; a syntax error becomes a positioned DiagError."""
    lark = parser(grammar)
    try:
        return lark.parse(text)
    except UnexpectedInput as e:
        raise syntax_error(_own_names(e), text, file, lark) from None


_NS = re.compile(r"^diag__")


def _own_names(e: UnexpectedInput) -> UnexpectedInput:
    """Terminals a grammar imports from diag.lark come back namespaced (``diag__NUMBER``);
    messages name them as diag.lark's own do."""
    expected = getattr(e, "expected", None)  # (the subclasses' attribute)
    if isinstance(expected, (set, frozenset, list)):
        setattr(e, "expected", {_NS.sub("", n) for n in expected})
    if isinstance(e, UnexpectedToken):
        e._accepts = {_NS.sub("", n) for n in (e.accepts or e.expected)}
    return e


def syntax_error(e: UnexpectedInput, text: str, file: str, lark: Lark) -> DiagError:
    """lark's error as the tool's: positioned, naming what was found and what could follow."""
    line = getattr(e, "line", None)
    col = getattr(e, "column", None)
    at_end = isinstance(e, UnexpectedEOF) or (isinstance(e, UnexpectedToken) and e.token.type == "$END")
    if at_end or not isinstance(line, int) or line < 1:  # point just past the last character
        lines = text.rstrip().splitlines() or [""]
        line, col = len(lines), len(lines[-1]) + 1
    pos = Pos(file, line, col if isinstance(col, int) else 1)
    if isinstance(e, UnexpectedCharacters):
        at = e.pos_in_stream
        ch = text[at] if at is not None and at < len(text) else "?"
        msg = f"unexpected character {ch!r}"
    elif isinstance(e, UnexpectedEOF):
        msg = "unexpected end of file"
    elif isinstance(e, UnexpectedToken):
        msg = f"unexpected {_token_text(e.token)}"
    else:  # pragma: no cover - lark has no other kinds today
        msg = "syntax error"
    expected = sorted({_describe(t, lark) for t in (getattr(e, "expected", None) or ())})
    if isinstance(e, UnexpectedToken):
        expected = sorted({_describe(t, lark) for t in e.accepts or e.expected})
    if expected and len(expected) <= 8:
        msg += "; expected " + (expected[0] if len(expected) == 1 else "one of " + ", ".join(expected))
    if expected == ["':'"] and isinstance(e, UnexpectedToken) and e.token.value in ("]", ","):
        msg += (" (an index is a name or a number; the entry at an offset a + 1 is the one-wide slice "
                "x[:, a + 1:a + 2], and y[i, 0] then drops its axis)")
    return DiagError(msg, pos, text)

