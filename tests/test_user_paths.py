"""What a user sees of paths, run from an empty folder as a user of the installed tool would:
files named as the user named them (relative to where they ran, or by a shipped file's package
name ``stringdiag:...``), never by a resolved or installation path; a declaration a derivation
may make once refused when repeated; the derivations ``derive --find`` writes read back from
their own folder."""
from __future__ import annotations

import os
import re
from pathlib import Path

import pytest

import stringdiag
from stringdiag.cli.main import main

CHECKOUT = Path(stringdiag.__file__).resolve().parent.parent  # where shipped names resolve here

MODELS = """\
dim s : seq
dim d : fixed
learn F, G : [d] -> [d]

diagram A(x: [s, d]) -> [s, d] {
  y[i] = F(x[i])
  return y
}

diagram B(x: [s, d]) -> [s, d] {
  y[i] = G(F(x[i]))
  return y
}
"""

RULE = "dim d : fixed\nrule same(x: [d]) -> [d] {\n  return x\n} == {\n  return x\n}\n"


@pytest.fixture
def here(tmp_path, monkeypatch) -> Path:
    """An empty folder the commands run in, holding the user's own model file m/a.diag."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "m").mkdir()
    (tmp_path / "m" / "a.diag").write_text(MODELS)
    (tmp_path / "out").mkdir()  # (where derivations are written)
    return tmp_path


def run(capsys, *argv: str) -> tuple[int, str, str]:
    status = main(list(argv))
    out = capsys.readouterr()
    return status, out.out, out.err


def write(path: str, text: str) -> None:
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    Path(path).write_text(text)


def no_resolved_paths(err: str, here: Path) -> None:
    """Neither the folder the user ran in nor the installation appears whole in a message."""
    assert str(here) not in err and str(here.resolve()) not in err, err
    assert str(CHECKOUT) not in err, err


def test_a_second_target_is_refused_at_its_line(here, capsys):
    """Taking one of two targets would pass a derivation whose other claim is false."""
    write("two.deriv", "start m/a.diag:A\ntarget m/a.diag:B\ntarget m/a.diag:A\n")
    status, _, err = run(capsys, "derive", "two.deriv")
    assert status == 1
    assert err.startswith("two.deriv:3:1: error: a derivation has at most one 'target"), err
    write("one.deriv", "start m/a.diag:A\ntarget m/a.diag:B\n")
    status, _, err = run(capsys, "derive", "one.deriv")  # the first target alone is wrong
    assert status == 1 and "not the target 'B'" in err, err


def test_two_files_in_use_may_not_define_one_rule_name(here, capsys):
    """A later file's rule would silently replace an earlier one's of the same name."""
    write("m/one.rules", RULE)
    write("m/two.rules", RULE)
    write("r.deriv", 'use "m/one.rules"\nuse "m/two.rules"\nstart m/a.diag:A\n')
    status, _, err = run(capsys, "derive", "r.deriv")
    assert status == 1
    assert err.startswith("r.deriv:2:5: error: rule 'same' is already defined by a file in use "
                          "(at m/one.rules:2:6)"), err
    write("r2.deriv", 'use "m/one.rules"\nuse "m/one.rules"\nstart m/a.diag:A\n')  # one file twice: one rule
    assert run(capsys, "derive", "r2.deriv")[0] == 0


def test_derive_find_writes_a_shipped_name_as_given(here, capsys):
    status, _, err = run(capsys, "derive", "--find", "stringdiag:gallery/scores.diag:MultiplicativeAttention",
                         "stringdiag:gallery/scores.diag:MappedQueryDotAttention", "--write", "out/luong.deriv")
    assert status == 0, err
    text = Path("out/luong.deriv").read_text()
    assert re.search(r"^start stringdiag:gallery/scores\.diag:MultiplicativeAttention$", text, re.M), text
    assert re.search(r"^target stringdiag:gallery/scores\.diag:MappedQueryDotAttention$", text, re.M), text
    assert str(CHECKOUT) not in text and ".." not in text
    assert run(capsys, "derive", "out/luong.deriv")[0] == 0  # and it reads back


def test_derive_find_writes_a_relative_name_from_the_written_files_folder(here, capsys, monkeypatch):
    status, _, err = run(capsys, "derive", "--find", "m/a.diag:A", "m/a.diag:B", "--write", "out/ab.deriv",
                         "--max-states", "2")
    assert status == 1  # (A has no equal form that is B: the steps tried are written all the same)
    assert re.search(r"^start \.\./m/a\.diag:A$", Path("out/ab.deriv").read_text(), re.M)
    monkeypatch.chdir(here / "out")
    assert run(capsys, "derive", "ab.deriv")[0] == 0


@pytest.mark.parametrize("argv, said", [
    (["optimize", "stringdiag:gallery/anatomy.diag:Nope"],
     "error: stringdiag:gallery/anatomy.diag:Nope: no diagram named 'Nope' in stringdiag:gallery/anatomy.diag"),
    (["derive", "--find", "m/a.diag:A", "m/a.diag:Nope"],
     "error: m/a.diag:Nope: no diagram named 'Nope' in m/a.diag"),
    (["derive", "--find", "m/a.diag:Nope", "m/a.diag:A"],
     "error: m/a.diag:Nope: no diagram named 'Nope' in m/a.diag"),
])
def test_a_search_reports_a_wrong_argument_against_the_argument(here, capsys, argv, said):
    """Not against a line of a .deriv file that was never written."""
    status, _, err = run(capsys, *argv)
    assert status == 1
    assert err.startswith(said), err
    assert ".deriv" not in err and "\n    " not in err  # (no quoted line of a file)
    no_resolved_paths(err, here)
    assert not list(here.glob("*.deriv"))


@pytest.mark.parametrize("argv", [("derive", "--find", "m/a.diag:A", "m/a.diag"), ("optimize", "m/a.diag"),
                                  ("optimize", "m/a.diag:not-a-name")])
def test_a_search_with_an_argument_that_is_not_a_reference_is_a_usage_error(here, capsys, argv):
    status, _, err = run(capsys, *argv)
    assert status == 2 and err.startswith(f"error: '{argv[-1]}' is not FILE.diag:NAME"), err
    assert not list(here.glob("*.deriv"))


FILES = {
    "b/i1.diag": 'import "stringdiag:gallery/nope.diag"\n',
    "b/i2.diag": 'import "nope.diag"\n',
    "b/i3.diag": 'import "sub.diag"\n',
    "b/d1.deriv": 'use "stringdiag:gallery/nope.diag"\nstart A\n',
    "b/d2.deriv": "start nope.diag:A\n",
    "b/d3.deriv": "start ../m/a.diag:Nope\n",
    "b/d4.deriv": "start stringdiag:gallery/similarity.diag:Nope\n",
    "b/d5.deriv": 'use "stringdiag:rules/nope.rules"\nstart ../m/a.diag:A\n',
    "b/d6.deriv": 'use "my.rules"\nstart ../m/a.diag:A\n',
    "b/my.rules": "rule bad(x: [d]) -> [d] {\n  return x\n} == {\n  return x\n}\n",
    "b/t1.tax": "root a = nope.diag:A\n",
    "b/t2.tax": 'root a = ../m/a.diag:A\nnode b = ../m/a.diag:B\nedge a -> b by "stringdiag:gallery/nope.deriv"\n',
    "b/t3.tax": "root a = stringdiag:gallery/scores.diag:Nope\n",
    "b/t4.tax": 'root a = ../m/a.diag:A\nnode b = ../m/a.diag:B\nedge a -> b by "nope.deriv"\n',
}


@pytest.mark.parametrize("argv, said", [
    (["check", "b/i1.diag"], 'b/i1.diag:1:8: error: cannot import "stringdiag:gallery/nope.diag": no such file '
                             "stringdiag:gallery/nope.diag"),
    (["check", "b/i2.diag"], 'b/i2.diag:1:8: error: cannot import "nope.diag": no such file b/nope.diag'),
    (["check", "b/i3.diag"], 'b/i3.diag:1:8: error: cannot import "sub.diag": b/sub.diag is a directory'),
    (["derive", "b/d1.deriv"], "b/d1.deriv:1:5: error: no such file stringdiag:gallery/nope.diag"),
    (["derive", "b/d2.deriv"], "b/d2.deriv:1:7: error: no such file nope.diag (looked for b/nope.diag)"),
    (["derive", "b/d3.deriv"], "b/d3.deriv:1:7: error: no diagram named 'Nope' in b/../m/a.diag"),
    (["derive", "b/d4.deriv"], "b/d4.deriv:1:7: error: no diagram named 'Nope' in stringdiag:gallery/similarity.diag"),
    (["derive", "b/d5.deriv"], "b/d5.deriv:1:5: error: no such file stringdiag:rules/nope.rules"),
    (["derive", "b/d6.deriv"], "b/my.rules:1:14: error: undefined dimension 'd'"),
    (["taxonomy", "b/t1.tax"], "b/t1.tax:1:10: error: no such file nope.diag (looked for b/nope.diag)"),
    (["taxonomy", "b/t2.tax"], "b/t2.tax:3:16: error: no such file stringdiag:gallery/nope.deriv"),
    (["taxonomy", "b/t3.tax"], "b/t3.tax:1:10: error: no diagram named 'Nope' in stringdiag:gallery/scores.diag"),
    (["taxonomy", "b/t4.tax"], "b/t4.tax:3:16: error: no such file nope.deriv (looked for b/nope.deriv)"),
])
def test_a_missing_file_or_diagram_is_named_as_the_user_named_it(here, capsys, argv, said):
    for name, text in FILES.items():
        write(name, text)
    (here / "b" / "sub.diag").mkdir()
    status, _, err = run(capsys, *argv)
    assert status == 1
    assert err.startswith(said), err
    no_resolved_paths(err, here)


@pytest.mark.parametrize("text, said", [
    ("start m/a.diag:Nope", "<string>:1:7: error: no diagram named 'Nope' in m/a.diag"),
    ("start nope.diag:A", "<string>:1:7: error: no such file nope.diag"),
    ('use "stringdiag:gallery/nope.diag"\nstart A', "<string>:1:5: error: no such file stringdiag:gallery/nope.diag"),
])
def test_the_derive_function_names_files_as_written(here, text, said):
    with pytest.raises(stringdiag.DiagError) as e:
        stringdiag.derive(text)
    assert str(e.value) == said
    no_resolved_paths(str(e.value), here)


def test_an_import_that_cannot_be_read_is_named_as_imported(here, capsys):
    write("b/i5.diag", 'import "pipe.diag"\n')
    os.mkfifo(here / "b" / "pipe.diag")
    status, _, err = run(capsys, "check", "b/i5.diag")
    assert status == 1
    assert err.startswith('b/i5.diag:1:8: error: cannot import "pipe.diag": b/pipe.diag: it is a FIFO'), err
    no_resolved_paths(err, here)


@pytest.mark.parametrize("argv", [["derive", "b/e.deriv"], ["taxonomy", "b/e.tax"]])
def test_an_error_in_a_file_a_derivation_reads_is_placed_where_the_user_named_it(here, capsys, argv):
    write("m/bad.diag", "dim d : fixed\ndiagram A(x: [d]) -> [d] {\n  return nope(x)\n}\n")
    write("b/e.deriv", "start ../m/bad.diag:A\n")
    write("b/e.tax", "root a = ../m/bad.diag:A\n")
    status, _, err = run(capsys, *argv)
    assert status == 1
    assert err.startswith("b/../m/bad.diag:3:10: error: "), err
    no_resolved_paths(err, here)
