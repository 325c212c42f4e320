"""The grammars' LALR tables, made by lark at build time and shipped as data (``grammars/*.tables.json``).

Reading a source file needs only the tables, a lexer and a small driver (``lalr.py``); lark itself
(its import and its table construction were most of a short command's start-up) is needed only to
make them, here. What is extracted is lark's own result, not a re-derivation: the parse table, each
rule's tree shaping (filtered tokens, inlined ``_rules``, ``[x]`` placeholders, ``?rule``), and for
each parser state the terminals its contextual lexer tries, in lark's order, with the keywords a
regular terminal absorbs. States are renumbered in a canonical order, so the files are the same
from run to run. ``tests/test_lalr.py`` checks the files are fresh and parse as lark does.

    .venv/bin/python -m stringdiag.syntax.lalrgen          # rewrite grammars/*.tables.json
"""
from __future__ import annotations

import json
import sys
from pathlib import Path

GRAMMARS = ("diag.lark", "rules.lark", "deriv.lark", "tax.lark")


def grammar_dir() -> Path:
    from ..resources import folder

    return folder("grammars")


def table_path(grammar: str) -> Path:
    from .lalr import table_name

    return grammar_dir() / table_name(grammar)


def build_lark(grammar: str):
    """lark's LALR parser of a grammar, with the options the tool has always parsed with."""
    from lark import Lark

    path = grammar_dir() / grammar
    return Lark(path.read_text(encoding="utf-8"), parser="lalr", propagate_positions=True,
                maybe_placeholders=True, import_paths=[str(path.parent)], source_path=str(path))


def tables(grammar: str) -> dict:
    """The data ``lalr.py`` parses ``grammar`` with (plain JSON values)."""
    lark = build_lark(grammar)
    table = lark.parser.parser.parser.parse_table
    order = _state_order(table)
    number = {s: i for i, s in enumerate(order)}
    rules = sorted(lark.rules, key=_rule_key)
    rule_id = {id(r): i for i, r in enumerate(rules)}
    states = [{sym: (number[arg] if act.name == "Shift" else ~rule_id[id(arg)])
               for sym, (act, arg) in sorted(table.states[s].items())} for s in order]
    contextual = lark.parser.lexer
    lexers: list[list] = []
    lexer_of: dict[str, int] = {}
    state_lexer = [_lexer_index(contextual.lexers[s], lexers, lexer_of) for s in order]
    root = _lexer_index(contextual.root_lexer, lexers, lexer_of)
    terminals = {t.name: [t.pattern.type, t.pattern.value if t.pattern.type == "str" else t.pattern.to_regexp()]
                 for t in sorted(lark.terminals, key=lambda t: t.name)}
    if any(t.pattern.flags for t in lark.terminals):
        raise ValueError(f"{grammar}: a terminal with regex flags; lalr.py reads none")
    return {"grammar": grammar, "start": number[table.start_states["start"]],
            "end": number[table.end_states["start"]], "ignore": sorted(lark.lexer_conf.ignore),
            "newline": sorted(contextual.root_lexer.newline_types), "terminals": terminals,
            "lexers": lexers, "root_lexer": root, "state_lexer": state_lexer,
            "rules": [_shape(r, lark.options.maybe_placeholders) for r in rules], "states": states}


def _state_order(table) -> list[int]:
    """States breadth first from the start, symbols in name order: independent of hash seeds."""
    start = table.start_states["start"]
    order, seen = [start], {start}
    for s in order:
        for _, (act, arg) in sorted(table.states[s].items()):
            if act.name == "Shift" and arg not in seen:
                seen.add(arg)
                order.append(arg)
    end = table.end_states["start"]
    if end not in seen:
        order.append(end)
    if len(order) != len(table.states):
        raise ValueError("unreachable parser states")
    return order


def _rule_key(rule) -> tuple:
    return rule.origin.name, tuple(s.name for s in rule.expansion), rule.alias or ""


def _shape(rule, placeholders: bool) -> list:
    """[origin, length, tree name, ?rule, children kept (index, spliced, Nones before) or null for all,
    Nones after]: lark's own child filter for the rule, read back."""
    from lark.parse_tree_builder import maybe_create_child_filter

    opts = rule.options
    made = maybe_create_child_filter(rule.expansion, opts.keep_all_tokens, False,
                                     opts.empty_indices if placeholders else None)  # type: ignore[arg-type]
    if made is None:
        keep, tail = None, 0
    elif len(made.args) == 2:  # (to_include, nones at the end)
        keep, tail = [[i, int(x), n] for i, x, n in made.args[0]], made.args[1]
    else:  # without placeholders: (index, spliced) pairs
        keep, tail = [[i, int(x), 0] for i, x in made.args[0]], 0
    if opts.template_source:
        raise ValueError("templates are not read by lalr.py")
    return [rule.origin.name, len(rule.expansion), rule.alias or rule.origin.name,
            int(bool(opts.expand1 and not rule.alias)), keep, tail]


def _lexer_index(basic, lexers: list, seen: dict) -> int:
    """One contextual lexer: its terminals in the order lark tries them, and for each regular
    terminal the keywords it absorbs (``learn`` read as NAME, then typed LEARN)."""
    scanner = basic.scanner  # builds lark's order and its keyword callbacks
    order = [t.name for t in scanner.terminals]
    unless = {name: {t.pattern.value: t.name for t in cb.scanner.terminals}
              for name, cb in sorted(basic.callback.items())}
    key = json.dumps([order, unless])
    if key not in seen:
        seen[key] = len(lexers)
        lexers.append([order, unless])
    return seen[key]


def render(grammar: str) -> str:
    return json.dumps(tables(grammar), ensure_ascii=False, separators=(",", ":"), sort_keys=False) + "\n"


def main(argv: list[str] | None = None) -> int:
    for grammar in argv or GRAMMARS:
        path = table_path(grammar)
        text = render(grammar)
        if not path.exists() or path.read_text(encoding="utf-8") != text:
            path.write_text(text, encoding="utf-8")
            print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
