"""An LALR(1) driver and a contextual lexer over the tables ``lalrgen.py`` ships (no lark at run time).

It reads as lark's LALR parser with its contextual lexer does, on the same tables: in each parser
state the lexer tries only the terminals that state accepts (and the ignored ones), in lark's
order, the first that matches winning (a regular expression's alternation); a keyword a regular
terminal absorbs is retyped (``learn`` is NAME's match, typed LEARN). Trees are shaped by each
rule's recorded filter and spanned as lark spans them. A failure says what lark's would: an
unexpected character, or an unexpected token with the terminals that could follow it (the
``accepts`` of lark's interactive parser: those that would be shifted after the reductions they
cause).
"""
from __future__ import annotations

import re
from functools import lru_cache

from . import datacache
from .parsetree import Token, Tree


class BadCharacter(Exception):
    """No terminal (allowed here or anywhere) matches at this character."""

    def __init__(self, pos: int, line: int, column: int):
        super().__init__(f"unexpected character at {line}:{column}")
        self.pos, self.line, self.column = pos, line, column


class BadToken(Exception):
    """A token the parser cannot take here (``$END`` for the end of the text)."""

    def __init__(self, token: Token, expected: set[str], accepts: set[str]):
        super().__init__(f"unexpected {token.type} at {token.line}:{token.column}")
        self.token, self.expected, self.accepts = token, expected, accepts
        self.line, self.column = token.line, token.column


class Tables:
    """One grammar's shipped tables, with each terminal's pattern compiled on first use."""

    def __init__(self, data: dict):
        self.grammar: str = data["grammar"]
        self.start, self.end = data["start"], data["end"]
        self.ignore = frozenset(data["ignore"])
        self.newline = frozenset(data["newline"])
        self.terminals: dict[str, list[str]] = data["terminals"]
        self.rules: list[list] = data["rules"]
        self.states: list[dict[str, int]] = data["states"]
        self.state_lexer: list[int] = data["state_lexer"]
        self.root_lexer: int = data["root_lexer"]
        self._lexers: list = data["lexers"]
        self._made: dict[int, tuple] = {}
        self._patterns: dict[str, object] = {}

    def lexer(self, index: int) -> tuple:
        """(terminals as (name, str or compiled pattern), keyword retyping) of one lexer."""
        made = self._made.get(index)
        if made is None:
            order, unless = self._lexers[index]
            made = self._made[index] = ([(n, self._matcher(n)) for n in order], unless)
        return made

    def _matcher(self, name: str):
        if name not in self._patterns:
            kind, value = self.terminals[name]
            self._patterns[name] = value if kind == "str" else re.compile(value)
        return self._patterns[name]

    def allowed(self, index: int) -> set[str]:
        names = set(self._lexers[index][0]) - self.ignore
        return names or {"<END-OF-FILE>"}


KEPT = 16  # table files kept in the cache (one a grammar and version of its tables)


@lru_cache(maxsize=None)
def tables(grammar: str) -> Tables:
    """A grammar's shipped tables (``grammars/NAME.tables.json``), read from a copy in the user's
    cache (``datacache.py``, keyed by the shipped file's bytes): decoding the JSON, and importing
    ``json``, were most of reading them."""
    from ..resources import folder

    shipped = (folder("grammars") / table_name(grammar)).read_bytes()
    key = datacache.digest(f"{datacache.INTERPRETER}\0".encode(), shipped)
    path = datacache.cache_dir() / f"tables-{grammar.removesuffix('.lark')}-{key[:16]}.marshal"
    data = datacache.load(path, key)
    if type(data) is dict:
        try:
            return Tables(data)
        except (KeyError, TypeError):  # not tables: read the shipped file
            pass
    import json

    data = json.loads(shipped)
    datacache.store(path, key, data, KEPT)
    return Tables(data)


def table_name(grammar: str) -> str:
    return f"{grammar.removesuffix('.lark')}.tables.json"


def _match(lexer: tuple, text: str, pos: int) -> tuple[str, str] | None:
    for name, m in lexer[0]:
        if type(m) is str:
            if text.startswith(m, pos):
                return name, m
        else:
            found = m.match(text, pos)
            if found:
                value = found.group()
                keywords = lexer[1].get(name)
                return (keywords.get(value, name) if keywords else name), value
    return None


class _Cursor:
    """The position the lexer has reached: character, line, and where that line starts."""

    __slots__ = ("pos", "line", "line_start")

    def __init__(self):
        self.pos, self.line, self.line_start = 0, 1, 0

    def next(self, t: Tables, lexer: tuple, text: str) -> Token | None:
        """The next token not ignored (None at the end); BadCharacter where nothing matches."""
        pos, line, line_start = self.pos, self.line, self.line_start
        tok = None
        while tok is None and pos < len(text):
            found = _match(lexer, text, pos)
            if found is None:
                self.pos, self.line, self.line_start = pos, line, line_start
                raise BadCharacter(pos, line, pos - line_start + 1)
            name, value = found
            end, end_line, end_start = pos + len(value), line, line_start
            if name in t.newline and "\n" in value:
                end_line, end_start = line + value.count("\n"), pos + value.rindex("\n") + 1
            if name not in t.ignore:
                tok = Token(name, value, pos, line, pos - line_start + 1, end_line, end - end_start + 1, end)
            pos, line, line_start = end, end_line, end_start
        self.pos, self.line, self.line_start = pos, line, line_start
        return tok


def parse(text: str, grammar: str) -> Tree:
    """The parse tree of ``text``; BadCharacter or BadToken where it is not in the language."""
    t = tables(grammar)
    stack: list[int] = [t.start]
    values: list = []
    cursor, last = _Cursor(), None
    while True:
        lexer_index = t.state_lexer[stack[-1]]
        try:
            tok = cursor.next(t, t.lexer(lexer_index), text)
        except BadCharacter as e:
            _explain(t, stack, cursor, text, lexer_index, e)
        if tok is None:
            break
        _feed(t, stack, values, tok, False)
        last = tok
    end = Token("$END", "", 0, 1, 1)
    if last is not None:  # lark's end token borrows the last token's place
        end = Token("$END", "", last.start_pos, last.line, last.column, last.end_line, last.end_column, last.end_pos)
    return _feed(t, stack, values, end, True)


def _explain(t: Tables, stack: list[int], cursor: _Cursor, text: str, lexer_index: int, e: BadCharacter):
    """A character no terminal of this state matches: if a terminal of the grammar does, the
    error is that token (lark's contextual lexer does the same), else the character."""
    tok = cursor.next(t, t.lexer(t.root_lexer), text)  # raises BadCharacter again if none
    assert tok is not None  # a terminal matched here, and the ignored ones were tried before
    raise BadToken(tok, t.allowed(lexer_index), accepts(t, stack)) from None


def _feed(t: Tables, stack: list[int], values: list, tok: Token, at_end: bool):
    """Reduce as the token asks, then shift it (or, at the end, return the whole tree)."""
    states, rules = t.states, t.rules
    while True:
        action = states[stack[-1]].get(tok.type)
        if action is None:
            expected = {s for s in states[stack[-1]] if s.isupper()}
            raise BadToken(tok, expected, accepts(t, stack))
        if action >= 0:
            stack.append(action)
            values.append(tok)
            return None
        origin, size, name, expand1, keep, tail = rules[~action]
        kids = values[len(values) - size:]
        del stack[len(stack) - size:]
        del values[len(values) - size:]
        stack.append(states[stack[-1]][origin])
        values.append(_build(kids, name, expand1, keep, tail))
        if at_end and stack[-1] == t.end:
            return values[-1]


def _build(kids: list, name: str, expand1: int, keep: list | None, tail: int):
    children = kids
    if keep is not None:
        children = []
        for i, spliced, nones in keep:
            if nones:
                children.extend([None] * nones)
            if spliced:
                children.extend(kids[i].children)
            else:
                children.append(kids[i])
        if tail:
            children.extend([None] * tail)
    made = children[0] if expand1 and len(children) == 1 else Tree(name, children)
    if isinstance(made, Tree):
        made.meta.spread(kids)
    return made


def accepts(t: Tables, stack: list[int]) -> set[str]:
    """The terminals this state would shift (or end on), after the reductions each one causes."""
    found = set()
    for sym in t.states[stack[-1]]:
        if sym.isupper() and _shifts(t, list(stack), sym):
            found.add(sym)
    return found


def _shifts(t: Tables, stack: list[int], sym: str) -> bool:
    while True:
        action = t.states[stack[-1]].get(sym)
        if action is None:
            return False
        if action >= 0:
            return True
        origin, size = t.rules[~action][:2]
        del stack[len(stack) - size:]
        stack.append(t.states[stack[-1]][origin])
        if sym == "$END" and stack[-1] == t.end:  # the end is taken by reducing to the start
            return True
