"""construct's --help examples read their inputs from the package (stringdiag:gallery/construct.*.json)
and run, in order, from an empty folder (the wheel test runs every command's examples, slowly)."""
from __future__ import annotations

import argparse
import shlex

from stringdiag.cli.main import build_parser, main


def _examples(command: str) -> list[list[str]]:
    sub = next(a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction))
    text = sub.choices[command].format_help()
    lines = text.split("\nexamples:\n", 1)[1].replace("\\\n", " ").splitlines()
    return [shlex.split(line)[1:] for line in lines if line.strip()]


def test_constructs_examples_run_from_an_empty_folder(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    examples = _examples("construct")
    assert len(examples) == 8 and sum(any(a.startswith("stringdiag:gallery/construct.") for a in argv)
                                      for argv in examples) == 7  # all but veronese, which reads no file
    for argv in examples:
        assert main(argv) == 0, argv
    out = capsys.readouterr().out
    assert out.count("every sequence lands in its target set (3 of 3") == 2  # and the --json one
    assert out.count("matches its target on 16 random X") == 4 and "matches f on 16 random X" in out
    assert (tmp_path / "stages.svg").is_file() and (tmp_path / "separation.svg").is_file()
