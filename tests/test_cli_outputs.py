"""Every output a command writes is checked when the command line is read, before any work: the
name's kind (a .deriv, a .diag, a picture, a folder) and a folder that is there and takes a new
file (tried, not guessed: /proc says yes to root's permission check and no to every new file).
Also: an abbreviated ``--json`` is ``--json`` for errors too; ``serve`` refuses an input as the
other commands do; a late failure to write names the file once."""
from __future__ import annotations

import argparse
import errno
import json
import os
from pathlib import Path

import pytest

from stringdiag.cli import outputs
from stringdiag.cli.main import build_parser, main

ROOT = Path(__file__).resolve().parents[1]
ATTENTION = str(ROOT / "gallery" / "attention.diag")
SCORES = str(ROOT / "gallery" / "scores.diag")
A, B = f"{SCORES}:MultiplicativeAttention", f"{SCORES}:MappedQueryDotAttention"
NO_FILES = "/proc"  # a folder that exists and in which no file can be made, for root too
OUTPUT_OPTIONS = {"-o", "--write", "--weights", "--grid", "--stages", "--separation"}
BLOCK = ("import torch\nfrom torch import nn\n\n\nclass Block(nn.Module):\n    def __init__(self, width=4):\n"
         "        super().__init__()\n        self.up = nn.Linear(width, width)\n\n"
         "    def forward(self, x):\n        return x + self.up(x)\n")


def run(capsys, argv) -> tuple[int, str, str]:
    rc = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return rc, out, err


@pytest.fixture
def no_search(monkeypatch):
    """Fail the test if a search starts."""
    from stringdiag.search import cheapest, find

    def search(*a, **k):
        raise AssertionError("the search ran although its output cannot be written")

    monkeypatch.setattr(find, "find", search)
    monkeypatch.setattr(cheapest, "optimize", search)


@pytest.fixture
def no_run(monkeypatch, no_search):
    """Fail the test if any command starts its work (its ``run``)."""
    from stringdiag.cli import main as M

    real = M.command

    def command(name):
        mod = real(name)

        class Refusing:
            def __getattr__(self, attr):
                return getattr(mod, attr)

            @staticmethod
            def run(args):
                raise AssertionError(f"{name} ran although its output cannot be written")

        return Refusing()

    monkeypatch.setattr(M, "command", command)


@pytest.fixture
def model(tmp_path) -> str:
    src = tmp_path / "m.py"
    src.write_text(BLOCK)
    return f"{src}:Block"


CASES = [  # (argv with {out} for the output, the option named, the output's name)
    (["derive", "--find", A, B, "--write", "{out}"], "--write", "luong.deriv"),
    (["optimize", A, "--write", "{out}"], "--write", "o.deriv"),
    (["discover", "--write", "{out}"], "--write", "found.rules"),
    (["trace", "{model}", "--example", "2x5x4", "-o", "{out}"], "-o/--output", "t.diag"),
    (["trace", "{model}", "--example", "2x5x4", "-o", "{tmp}/t.diag", "--weights", "{out}"], "--weights",
     "w.safetensors"),
    (["taxonomy", str(ROOT / "gallery" / "taxonomy.tax"), "-o", "{out}"], "-o/--output", "t.svg"),
    (["derive", str(ROOT / "gallery" / "linearize.deriv"), "-o", "{out}"], "-o/--output", "x.svg"),
    (["render", ATTENTION, "-o", "{out}"], "-o/--output", "pics/"),
    (["normalize", ATTENTION, "-d", "SelfAttention", "-o", "{out}"], "-o/--output", "n.svg"),
    (["enumerate", ATTENTION, "-o", "{out}"], "-o/--output", "m.diag"),
    (["enumerate", ATTENTION, "--grid", "{out}"], "--grid", "g.svg"),
    (["construct", "veronese", "--n", "2", "--p", "2", "-o", "{out}"], "-o/--output", "c"),
    (["construct", "hardmax-classifier", "--sequences", "s.json", "-o", "{tmp}/c", "--stages", "{out}"], "--stages",
     "s.svg"),
    (["study", ATTENTION, "-o", "{out}"], "-o/--output", "st"),
    (["examples", "{out}"], "DIR", "ex"),
]


# a folder's missing parents are made with it: "no folder" is a refusal for files only
UNWRITABLE = [(*case, where) for case in CASES for where in ("no folder", "a folder that takes no file")
              if where != "no folder" or not outputs.names_directory(case[2])]


@pytest.mark.parametrize("argv, option, name, where", UNWRITABLE,
                         ids=[f"{c[0][0]} {c[1]} {c[2]} {c[3]}" for c in UNWRITABLE])
def test_an_output_that_cannot_be_written_is_refused_before_any_work(capsys, tmp_path, model, no_run, argv, option,
                                                                      name, where):
    out = f"{tmp_path}/nodir/{name}" if where == "no folder" else f"{NO_FILES}/{name}"
    rc, _, err = run(capsys, [a.format(out=out, model=model, tmp=tmp_path) for a in argv])
    assert rc == 2, err
    assert err.startswith(f"error: argument {option}: cannot write {out}: "), err
    assert ("there is no folder" in err) if where == "no folder" else ("no file can be made in /proc" in err), err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["m.py"]  # nothing written, nothing made


def test_every_output_option_of_every_command_is_checked():
    """Each output option's argparse type is one of the checks above (train's are its own; compile -o
    is checked first thing in its run, where a name that cannot be imported is told from a disk that
    refuses it)."""
    sub = next(a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction))
    seen = set()
    for name, parser in sub.choices.items():
        for action in parser._actions:
            if name not in ("train", "compile") and OUTPUT_OPTIONS & set(action.option_strings):
                seen.add((name, action.option_strings[-1]))
                assert getattr(action.type, "__module__", None) in ("stringdiag.cli.outputs", "stringdiag.cli.enumerate"), \
                    (name, action.option_strings)
    assert {("trace", "--weights"), ("derive", "--write"), ("optimize", "--write"), ("discover", "--write"),
            ("construct", "--separation"), ("study", "--output")} <= seen


@pytest.mark.parametrize("argv, name", [(["derive", "--find", A, B], "MultiplicativeAttention_to_MappedQueryDotAttention"),
                                        (["optimize", A], "MultiplicativeAttention_optimized")])
def test_a_default_output_is_checked_before_the_search(capsys, monkeypatch, no_search, argv, name):
    monkeypatch.chdir(NO_FILES)
    rc, _, err = run(capsys, argv)
    assert rc == 2 and err.startswith(f"error: argument --write: cannot write {name}.deriv: no file can be made in ."), err


@pytest.mark.parametrize("argv, message", [
    (["trace", "{model}", "--example", "2x5x4", "-o", "{tmp}/out.svg"], "the command writes a diagram file here, so the name ends with .diag"),
    (["trace", "{model}", "--example", "2x5x4", "-o", "{tmp}/t.diag", "--weights", "{tmp}/w.pt"],
     "the command writes weights here, so the name ends with .safetensors"),
    (["derive", "--find", A, B, "--write", "{tmp}/x.svg"], "the command writes a derivation here, so the name ends with .deriv"),
    (["discover", "--write", "{tmp}/x.diag"], "the command writes a rule file here, so the name ends with .rules"),
    (["construct", "veronese", "--n", "2", "--p", "2", "-o", "{tmp}/m.py"], "it is a file, not a folder"),
    (["optimize", A, "--write", "{tmp}"], "it is a directory"),
])
def test_an_output_named_as_what_the_command_does_not_write_is_a_usage_error(capsys, tmp_path, model, no_run, argv,
                                                                               message):
    rc, _, err = run(capsys, [a.format(model=model, tmp=tmp_path) for a in argv])
    assert rc == 2 and message in err, err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["m.py"]


def test_compile_checks_its_folder_before_reading_the_diagram(capsys, monkeypatch):
    from stringdiag.cli import compile as C

    def load(*a, **k):
        raise AssertionError("the diagram was read although the output cannot be written")

    monkeypatch.setattr(C, "load_reporting", load)
    rc, _, err = run(capsys, ["compile", ATTENTION, "-d", "SelfAttention", "-o", f"{NO_FILES}/m"])
    assert rc == 2 and err.startswith(f"error: argument -o/--output: cannot write {NO_FILES}/m: no file can be made "
                                      "in /proc"), err


def test_the_check_leaves_nothing_behind(tmp_path):
    for check, name in ((outputs.picture, "a.svg"), (outputs.folder, "sub/dir"), (outputs.file_of("x", ".deriv"), "a.deriv"),
                        (outputs.picture_or_directory, "pics/")):
        assert check(str(tmp_path / name)) == str(tmp_path / name)
    assert list(tmp_path.iterdir()) == []


def test_a_late_failure_to_write_the_weights_names_the_file_once(capsys, tmp_path, model, monkeypatch):
    from stringdiag.lower import tensorfile

    def full(tensors, path, metadata=None):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(tensorfile, "save_file", full)
    weights = tmp_path / "w.safetensors"
    rc, _, err = run(capsys, ["trace", model, "--example", "2x5x4", "-o", tmp_path / "t.diag", "--weights", weights])
    assert rc == 1
    assert err == (f"error: cannot write weights {weights}: No space left on device (the previous weights, if any, "
                   "is kept)\n"), err
    assert not weights.exists()


# -- --json, abbreviated ---------------------------------------------------------------------
BROKEN = "dim s : seq\ndiagram X(x: [s]) -> [s] {\n  return y\n}\n"


@pytest.mark.parametrize("spelling", ["--json", "--jso", "--js", "--j"])
def test_an_abbreviated_json_reports_errors_as_json_too(capsys, tmp_path, spelling):
    src = tmp_path / "ty1.diag"
    src.write_text(BROKEN)
    rc, out, err = run(capsys, ["info", src, spelling])
    assert rc == 1 and err == ""
    assert json.loads(out)["error"] == {"file": str(src), "line": 3, "col": 10, "severity": "error",
                                        "message": "undefined name 'y'"}
    rc, out, err = run(capsys, ["info", src, spelling, "--frob"])  # a bad command line, read as argparse reads it
    assert rc == 2 and err == "" and json.loads(out)["error"]["message"].startswith("unrecognized arguments: --frob")


def test_json_is_not_read_where_the_command_has_none_or_after_double_dash(capsys, tmp_path):
    src = tmp_path / "ty1.diag"
    src.write_text(BROKEN)
    rc, out, err = run(capsys, ["render", src, "--jso"])  # render has no --json: a text error
    assert rc == 2 and out == "" and err.startswith("error: unrecognized arguments: --jso")
    rc, out, err = run(capsys, ["check", "--", src, "--json"])  # a file named --json, not the option
    assert rc == 1 and out.count('"error"') == 0 and "cannot read --json" in err


# -- inputs that are directories ---------------------------------------------------------------
def test_serve_refuses_an_input_as_check_does(capsys, tmp_path):
    folder = tmp_path / "dir.diag"
    folder.mkdir()
    (tmp_path / "dir.py").mkdir()
    rc, _, err = run(capsys, ["trace", f"{tmp_path}/dir.py:Block", "--example", "2x5x4", "-o", tmp_path / "t.diag"])
    assert rc == 2 and err == f"error: '{tmp_path}/dir.py': it is a directory\n"
    for path, message in ((folder, "it is a directory"), (tmp_path / "nothere.diag", "No such file or directory")):
        rc, _, served = run(capsys, ["serve", path])
        rc_check, _, checked = run(capsys, ["check", path])
        assert rc == rc_check == 1 and served == checked == f"error: cannot read {path}: {message}\n"


@pytest.fixture
def no_corpus(monkeypatch):
    """Fail the test if training reads its corpus (the first slow step of a run)."""
    import stringdiag.data

    def load_corpus(*a, **k):
        raise AssertionError("the corpus was read although the run cannot go on")

    monkeypatch.setattr(stringdiag.data, "load_corpus", load_corpus)


@pytest.mark.parametrize("diagram", [(ATTENTION, "SelfAttention"), (str(ROOT / "gallery" / "lm.diag"), "GPT")])
def test_train_checks_its_folder_and_checkpoint_before_the_corpus(tmp_path, monkeypatch, capsys, no_corpus, diagram):
    """A file given as the run's folder, a file's name (``run.txt``), and ``--resume`` with no
    checkpoint are refused before the corpus is read; no folder is made."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "taken.diag").write_text("")
    file, name = diagram
    base = ["train", file, "-d", name, "--max-steps", "1"]
    rc, _, err = run(capsys, [*base, "-o", "taken.diag"])
    assert rc == 2 and "cannot write taken.diag: it is a file, not a folder" in err, err
    rc, _, err = run(capsys, [*base, "-o", "run.txt"])
    assert rc == 2 and "cannot write run.txt: a folder goes here, and .txt names a file" in err, err
    rc, _, err = run(capsys, [*base, "-o", "fresh", "--resume"])
    assert rc == 1 and err.startswith("error: --resume: no checkpoint in fresh (checkpoint.safetensors)"), err
    rc, _, err = run(capsys, [*base, "--resume"])
    assert rc == 1 and f"no checkpoint in runs/{name} " in err, err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["taken.diag"]


def test_a_folder_under_a_file_is_named_as_the_user_wrote_it(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "afile").write_text("")
    rc, _, err = run(capsys, ["examples", "afile/sub"])
    assert rc == 2 and "cannot write afile/sub: afile is a file, not a folder" in err, err
    assert str(tmp_path) not in err
