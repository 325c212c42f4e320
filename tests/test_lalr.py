"""The shipped LALR tables (grammars/*.tables.json) and the driver that reads them (syntax/lalr.py),
against lark itself: the tables are what lark makes of the grammars today, and on every shipped
source, every example of the docs, and generated and mutated text, the driver gives lark's tree
(names, children, tokens and every position) or fails where lark fails, in the same way (an
unexpected character, or the same token with the same terminals that could follow)."""
from __future__ import annotations

import json
import re
from functools import lru_cache
from pathlib import Path

import lark
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from lark.exceptions import UnexpectedCharacters, UnexpectedToken

from stringdiag.syntax import lalr, lalrgen, parsetree

ROOT = Path(__file__).resolve().parents[1]
SUFFIX = {"diag.lark": ".diag", "rules.lark": ".rules", "deriv.lark": ".deriv", "tax.lark": ".tax"}
FENCE = {"diag.lark": "diag", "rules.lark": "rules", "deriv.lark": "deriv", "tax.lark": "tax"}


@lru_cache(maxsize=None)
def reference(grammar: str) -> lark.Lark:
    return lalrgen.build_lark(grammar)


def canon(x):
    """A tree as plain data: rule names, tokens with their types and positions, and spans."""
    if isinstance(x, (lark.Tree, parsetree.Tree)):
        m = x.meta
        span = None if m.empty else (m.line, m.column, m.start_pos, m.end_line, m.end_column, m.end_pos)
        return x.data, span, [canon(c) for c in x.children]
    if isinstance(x, (lark.Token, parsetree.Token)):
        return x.type, str(x), x.start_pos, x.line, x.column, x.end_line, x.end_column, x.end_pos
    assert x is None, x
    return None


def by_lark(grammar: str, text: str):
    try:
        return "tree", canon(reference(grammar).parse(text))
    except UnexpectedCharacters as e:
        return "character", e.line, e.column, e.pos_in_stream
    except UnexpectedToken as e:
        return "token", e.line, e.column, e.token.type, str(e.token), frozenset(e.accepts or e.expected)


def by_driver(grammar: str, text: str):
    try:
        return "tree", canon(lalr.parse(text, grammar))
    except lalr.BadCharacter as e:
        return "character", e.line, e.column, e.pos
    except lalr.BadToken as e:
        return "token", e.line, e.column, e.token.type, str(e.token), frozenset(e.accepts or e.expected)


def corpus(grammar: str) -> list[tuple[str, str]]:
    """(where, text): the shipped sources of the grammar's kind and the docs' blocks fenced as it."""
    found = [(str(p.relative_to(ROOT)), p.read_text(encoding="utf-8"))
             for folder in ("gallery", "rules", "stringdiag/prelude", "tests") for p in sorted((ROOT / folder).rglob(
                 f"*{SUFFIX[grammar]}")) if ".pytest" not in str(p)]
    fence = re.compile(rf"^```{FENCE[grammar]}\n(.*?)^```", re.S | re.M)
    for page in [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]:
        found += [(f"{page.name} block {i}", m.group(1))
                  for i, m in enumerate(fence.finditer(page.read_text(encoding="utf-8")))]
    return found


@pytest.mark.parametrize("grammar", lalrgen.GRAMMARS)
def test_the_shipped_tables_are_what_lark_makes_of_the_grammars_today(grammar):
    shipped = lalrgen.table_path(grammar).read_text(encoding="utf-8")
    assert shipped == lalrgen.render(grammar), (
        f"{lalrgen.table_path(grammar).name} is stale: run .venv/bin/python -m stringdiag.syntax.lalrgen")
    json.loads(shipped)  # plain data: nothing to execute


@pytest.mark.parametrize("grammar", lalrgen.GRAMMARS)
def test_every_shipped_source_and_docs_example_parses_as_lark_parses_it(grammar):
    texts = corpus(grammar)
    assert len(texts) >= 3
    trees = 0
    for where, text in texts:
        want = by_lark(grammar, text)
        assert by_driver(grammar, text) == want, where
        trees += want[0] == "tree"
    assert trees >= len(texts) // 2  # mostly valid text: the trees themselves are compared


def _samples(grammar: str) -> list[str]:
    """Pieces of text: each keyword and symbol of the grammar, words its patterns read, and junk."""
    strings = [v for kind, v in lalr.tables(grammar).terminals.values() if kind == "str"]
    return strings + ["x", "Q", "_a1", "sum_j", "sum_{i, j}", "o.Name", "f.diag:N", '"a.diag"', "12", "0.5",
                      "1e3", "# note\n", "\n", "{ return x }", "apply", "at", "ConcatFF#1/y", "$", "@", "'",
                      "\t", "==", "=>", "≡", "-", ":=", "{", "}", "\"open"]


@st.composite
def token_soup(draw, grammar: str) -> str:
    pieces = draw(st.lists(st.sampled_from(_samples(grammar)), max_size=30))
    gaps = draw(st.lists(st.sampled_from(["", " ", "\n", "  "]), min_size=len(pieces), max_size=len(pieces)))
    return "".join(p + g for p, g in zip(pieces, gaps))


@st.composite
def mutated(draw, grammar: str) -> str:
    """A shipped text cut short, with a piece deleted, or with a sample put in anywhere."""
    _, text = draw(st.sampled_from(corpus(grammar)))
    at = draw(st.integers(0, len(text)))
    how = draw(st.sampled_from(["cut", "delete", "insert"]))
    if how == "cut":
        return text[:at]
    if how == "delete":
        return text[:at] + text[at + draw(st.integers(1, 12)):]
    return text[:at] + draw(st.sampled_from(_samples(grammar))) + text[at:]


FUZZ = settings(max_examples=100, derandomize=True, deadline=None,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
MUTANTS = settings(FUZZ, max_examples=60)  # each a whole source: lark takes a few ms a mutant


@pytest.mark.parametrize("grammar", lalrgen.GRAMMARS)
@FUZZ
@given(data=st.data())
def test_generated_text_parses_or_fails_as_lark_does(grammar, data):
    text = data.draw(token_soup(grammar))
    assert by_driver(grammar, text) == by_lark(grammar, text), text


@pytest.mark.parametrize("grammar", lalrgen.GRAMMARS)
@MUTANTS
@given(data=st.data())
def test_mutated_sources_parse_or_fail_as_lark_does(grammar, data):
    text = data.draw(mutated(grammar))
    assert by_driver(grammar, text) == by_lark(grammar, text), text


def test_a_keyword_is_a_name_where_no_keyword_is_expected():
    """The contextual lexer: `learn` is LEARN where a declaration may start, NAME after `dim`."""
    tree = lalr.parse("dim learn : seq\nlearn F : [learn] -> []\n", "diag.lark")
    kinds = [(t.type, str(t)) for t in _tokens(tree)]
    assert kinds[:2] == [("NAME", "learn"), ("SEQ", "seq")] and ("LEARN", "learn") in kinds
    assert by_driver("diag.lark", "dim learn : seq\n") == by_lark("diag.lark", "dim learn : seq\n")


def _tokens(tree):
    for c in tree.children:
        if isinstance(c, parsetree.Tree):
            yield from _tokens(c)
        elif c is not None:
            yield c


def test_deep_nesting_reads_without_recursion():
    from stringdiag.syntax.ast import read

    depth = 5000
    text = f"dim s : seq\ndiagram D(x: [s]) -> [s] {{\n  return {'(' * depth}x{')' * depth}\n}}\n"
    (_, diagram) = read(text)
    assert diagram.body[0].values[0].name.text == "x"
