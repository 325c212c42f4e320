"""The editor support in editors/vscode/: the TextMate grammar highlights every keyword the
parser's grammars (grammars/*.lark) define and nothing that is a plain name, its comments are the
language's; the extension's manifest names files that exist, the file kinds the tool reads, and
starts the language server as ``stringdiag lsp``."""
from __future__ import annotations

import json
import re
from pathlib import Path

from stringdiag.cli.kinds import BY_EXTENSION

ROOT = Path(__file__).resolve().parents[1]
EXT = ROOT / "editors" / "vscode"
GRAMMAR = json.loads((EXT / "syntaxes" / "diag.tmLanguage.json").read_text())
WORD_KINDS = ("keyword", "step", "declaration", "contraction")


def _scope(text: str) -> str | None:
    """The scope the grammar's first matching top-level rule gives the whole of ``text``."""
    for include in GRAMMAR["patterns"]:
        rule = GRAMMAR["repository"][include["include"].lstrip("#")]
        pattern = rule.get("match") or re.escape(rule["begin"])
        if re.fullmatch(pattern, text) or (rule.get("begin") and text.startswith(rule["begin"])):
            return include["include"].lstrip("#")
    return None


# grammars/maxdef.lark is construct's small formula language (max, min, x[i, j]), not a source file's
LANGUAGE_GRAMMARS = ("diag.lark", "rules.lark", "deriv.lark", "tax.lark")


def test_every_grammar_is_the_editors_or_named_as_not():
    assert {p.name for p in (ROOT / "grammars").glob("*.lark")} == {*LANGUAGE_GRAMMARS, "maxdef.lark"}


def test_every_keyword_of_the_parser_is_highlighted():
    words = set()
    for name in LANGUAGE_GRAMMARS:  # the editor's language: .diag, .rules, .deriv and .tax files
        words |= set(re.findall(r'"([a-z_]+)"i?', (ROOT / "grammars" / name).read_text()))
    assert {"diagram", "learn", "import", "rule", "specialise", "root"} <= words
    for word in sorted(words):
        scope = _scope(word)
        assert scope in ("keyword", "step"), (word, scope)


def test_names_numbers_comments_and_contractions_are_told_apart():
    assert _scope("softmax") is None and _scope("SelfAttention") is None
    assert _scope("sum_f") == "contraction" and _scope("sum") is None
    assert _scope("3.5e-2") == "number"
    assert _scope("# a comment") == "comment" and _scope("// a comment") == "comment"
    declared = re.fullmatch(GRAMMAR["repository"]["declaration"]["match"], "diagram SelfAttention")
    assert declared and declared.group(2) == "SelfAttention"
    call = re.match(GRAMMAR["repository"]["call"]["match"], "Q(x[i])")
    assert call and call.group(1) == "Q"


def test_the_gallery_is_highlighted_without_a_keyword_inside_a_name():
    keyword = re.compile(GRAMMAR["repository"]["keyword"]["match"])
    text = (ROOT / "gallery" / "attention.diag").read_text()
    for m in keyword.finditer(text):
        before, after = text[m.start() - 1:m.start()], text[m.end():m.end() + 1]
        assert not (before.isalnum() or before == "_") and not (after.isalnum() or after == "_")


def test_the_extension_manifest():
    pkg = json.loads((EXT / "package.json").read_text())
    (lang,) = pkg["contributes"]["languages"]
    assert sorted(lang["extensions"]) == sorted(BY_EXTENSION)
    (grammar,) = pkg["contributes"]["grammars"]
    assert grammar["scopeName"] == GRAMMAR["scopeName"] and (EXT / grammar["path"]).is_file()
    assert (EXT / lang["configuration"]).is_file() and (EXT / pkg["main"]).is_file()
    assert pkg["contributes"]["configuration"]["properties"]["stringdiag.command"]["default"] == ["stringdiag", "lsp"]
    assert "vscode-languageclient" in pkg["dependencies"]
