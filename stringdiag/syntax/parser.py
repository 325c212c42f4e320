"""Text to parse tree, for the grammars in ``grammars/``, with positioned errors.

The tables are lark's, made at build time (``lalrgen.py``); the driver is ``lalr.py``, so reading
a file imports no lark. The typed trees the tool reads are built from these by ``ast.py``
(.diag), ``rules_ast.py`` (.rules), ``deriv_ast.py`` (.deriv) and ``tax_ast.py`` (.tax)."""
from __future__ import annotations

from ..errors import DiagError, Pos
from .lalr import BadCharacter, BadToken, Tables, tables
from .lalr import parse as lalr_parse
from .parsetree import Token, Tree

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


def _describe(term: str, t: Tables) -> str:
    if term in _FRIENDLY:
        return _FRIENDLY[term]
    if term not in t.terminals:
        return term
    kind, value = t.terminals[term]
    return f"'{value}'" if kind == "str" else term.lower()


def _token_text(tok: Token) -> str:
    if tok.type == "$END":
        return "end of file"
    return f"'{tok}'"


def parse(text: str, file: str = "<string>", grammar: str = "diag.lark") -> Tree:
    """Parse source text; a syntax error becomes a positioned DiagError."""
    try:
        return lalr_parse(text, grammar)
    except (BadCharacter, BadToken) as e:
        raise syntax_error(e, text, file, tables(grammar)) from None


def _own_name(term: str) -> str:
    """Terminals a grammar imports from diag.lark come namespaced (``diag__NUMBER``); messages
    name them as diag.lark's own do."""
    return term.removeprefix("diag__")


def syntax_error(e: BadCharacter | BadToken, text: str, file: str, t: Tables) -> DiagError:
    """A parse failure as the tool's error: positioned, naming what was found and what could follow."""
    line, col = e.line, e.column
    at_end = isinstance(e, BadToken) and e.token.type == "$END"
    if at_end or line < 1:  # point just past the last character
        lines = text.rstrip().splitlines() or [""]
        line, col = len(lines), len(lines[-1]) + 1
    pos = Pos(file, line, col)
    expected: list[str] = []
    if isinstance(e, BadCharacter):
        msg = f"unexpected character {text[e.pos]!r}"
    else:
        msg = f"unexpected {_token_text(e.token)}"
        expected = sorted({_describe(_own_name(n), t) for n in (e.accepts or e.expected)})
    if expected and len(expected) <= 8:
        msg += "; expected " + (expected[0] if len(expected) == 1 else "one of " + ", ".join(expected))
    if expected == ["':'"] and isinstance(e, BadToken) and e.token in ("]", ","):
        msg += (" (an index is a name or a number; the entry at an offset a + 1 is the one-wide slice "
                "x[:, a + 1:a + 2], and y[i, 0] then drops its axis)")
    return DiagError(msg, pos, text)
