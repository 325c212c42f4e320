"""Parse trees as ``lalr.py`` builds them, and the walk that reads one into typed nodes.

The same shapes as lark's ``Token``, ``Tree`` and ``Meta`` (the attributes the readers use), so
that the readers (``ast.py``, ``rules_ast.py``, ``deriv_ast.py``, ``tax_ast.py``) need no lark:
a token is a ``str`` with its type and position; a tree's ``meta`` spans its children, extended
over the parentheses a ``?rule`` drops (lark's ``propagate_positions``).
"""
from __future__ import annotations


class Token(str):
    """A terminal as read: its text, its terminal's name and where it starts and ends."""

    __slots__ = ("type", "start_pos", "line", "column", "end_line", "end_column", "end_pos")
    type: str
    start_pos: int
    line: int
    column: int
    end_line: int
    end_column: int
    end_pos: int

    def __new__(cls, type_: str, value: str, start_pos: int = 0, line: int = 1, column: int = 1,
                end_line: int = 0, end_column: int = 0, end_pos: int = 0):
        self = str.__new__(cls, value)
        self.type, self.start_pos, self.line, self.column = type_, start_pos, line, column
        self.end_line, self.end_column, self.end_pos = end_line, end_column, end_pos
        return self

    @property
    def value(self) -> str:
        return str(self)

    def __repr__(self) -> str:
        return f"Token({self.type!r}, {str(self)!r})"


class Meta:
    """Where a tree's text is: unset (``empty``) when it spans no token."""

    __slots__ = ("empty", "line", "column", "start_pos", "end_line", "end_column", "end_pos", "outer_start",
                 "outer_end")

    def __init__(self):
        self.empty = True

    def spread(self, children: list) -> None:
        """From the first to the last child that has a place; ``outer_*`` is the span a parent
        sees, wider than the tree's own when a ``?rule`` kept it alone between dropped tokens."""
        first = last = None
        for c in children:
            first = _start(c)
            if first is not None:
                break
        if first is None:
            return
        for c in reversed(children):
            last = _end(c)
            if last is not None:
                break
        assert last is not None
        if self.empty:
            self.line, self.column, self.start_pos = first
            self.end_line, self.end_column, self.end_pos = last
            self.empty = False
        self.outer_start, self.outer_end = first, last


def _start(c) -> tuple[int, int, int] | None:
    if isinstance(c, Token):
        return c.line, c.column, c.start_pos
    if isinstance(c, Tree) and not c.meta.empty:
        return c.meta.outer_start
    return None


def _end(c) -> tuple[int, int, int] | None:
    if isinstance(c, Token):
        return c.end_line, c.end_column, c.end_pos
    if isinstance(c, Tree) and not c.meta.empty:
        return c.meta.outer_end
    return None


class Tree:
    """A rule's node: its name (the rule's, or its ``-> alias``), children and span."""

    __slots__ = ("data", "children", "meta")

    def __init__(self, data: str, children: list, meta: Meta | None = None):
        self.data, self.children, self.meta = data, children, meta or Meta()

    def __eq__(self, other) -> bool:
        return isinstance(other, Tree) and self.data == other.data and self.children == other.children

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"Tree({self.data!r}, {self.children!r})"


class Walker:
    """Reads a tree bottom-up, without recursion (expressions nest deeply): a rule's node goes to the
    method of its name as ``(meta, *children)``, a token to the method of its terminal's name; a
    name without a method keeps the node. A grammar's imported names (``diag__assign``) are read by
    the imported grammar's methods."""

    NAMESPACES: tuple[str, ...] = ("diag__",)

    def transform(self, tree):
        calls: dict[str, object] = {}
        stack, out = [(tree, False)], []
        while stack:
            node, done = stack.pop()
            if done:
                k = len(out) - len(node.children)
                kids = out[k:]
                del out[k:]
                f = calls[node.data] if node.data in calls else calls.setdefault(node.data, self._method(node.data))
                out.append(Tree(node.data, kids, node.meta) if f is None else f(node.meta, *kids))
            elif isinstance(node, Tree):
                stack.append((node, True))
                stack.extend((c, False) for c in reversed(node.children))
            elif isinstance(node, Token):
                f = calls[node.type] if node.type in calls else calls.setdefault(node.type, self._method(node.type))
                out.append(node if f is None else f(node))
            else:
                out.append(node)
        return out[0]

    def _method(self, name: str):
        for ns in self.NAMESPACES:
            name = name.removeprefix(ns)
        return None if name.startswith("_") else getattr(self, name, None)
