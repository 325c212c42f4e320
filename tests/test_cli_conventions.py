"""Conventions every command shares: file kinds, outputs checked before work, exit codes 2 and 1,
one spelling per option, --json, an example in every --help, shell completion, the prelude cache
and a start-up that imports nothing heavy when nothing is read."""
from __future__ import annotations

import argparse
import json
import marshal
import re
import subprocess
import sys
from pathlib import Path

import pytest

from stringdiag.cli import main as M
from stringdiag.cli.main import build_parser, main
from stringdiag.errors import Pos

ROOT = Path(__file__).resolve().parents[1]
ATTENTION = str(ROOT / "gallery" / "attention.diag")
LINEARIZE = str(ROOT / "gallery" / "linearize.deriv")
ALGEBRA = str(ROOT / "rules" / "algebra.rules")

SMALL = """\
dim s : seq
dim d : fixed
learn F : [d] -> [d]
diagram A(x: [s, d]) -> [s, d] {
  y[i] = F(x[i])
  return y
}
diagram B(x: [s, d]) -> [s, d] {
  y[i] = F(x[i])
  return y
}
"""


def run(capsys, argv) -> tuple[int, str, str]:
    rc = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return rc, out, err


def subcommands() -> dict[str, argparse.ArgumentParser]:
    sub = next(a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction))
    return dict(sub.choices)


@pytest.fixture
def no_work(monkeypatch):
    """Fail the test if any file is loaded or any derivation run."""
    from stringdiag.derive import derivation as D
    import stringdiag.elaborate.loader as P

    def refuse(*a, **k):
        raise AssertionError("work was done before the command line was refused")

    monkeypatch.setattr(P, "load", refuse)
    monkeypatch.setattr(D, "load_derivation", refuse)


# -- file kinds -----------------------------------------------------------------------
def test_a_diagram_given_to_derive_names_the_command_that_reads_it(capsys, no_work):
    rc, out, err = run(capsys, ["derive", ATTENTION])
    assert rc == 2 and out == ""
    assert err == (f"error: {ATTENTION} is a diagram file (.diag); derive expects a derivation (.deriv) — "
                   f"try 'stringdiag check {ATTENTION}'\n")


def test_a_derivation_given_to_check_names_derive(capsys, no_work):
    rc, _, err = run(capsys, ["check", LINEARIZE])
    assert rc == 2
    assert err == (f"error: {LINEARIZE} is a derivation (.deriv); check expects a diagram file (.diag) or a rule "
                   f"file (.rules) — try 'stringdiag derive {LINEARIZE}'\n")


@pytest.mark.parametrize("argv, kind, reader", [
    (["info", LINEARIZE], "a derivation (.deriv)", "derive"),
    (["render", ALGEBRA], "a rule file (.rules)", "check"),
    (["taxonomy", ATTENTION], "a diagram file (.diag)", "check"),
    (["compile", LINEARIZE, "-d", "X"], "a derivation (.deriv)", "derive"),
    (["normalize", ATTENTION, "-d", "SelfAttention", "--rules", LINEARIZE], None, None),
])
def test_every_command_refuses_files_of_another_kind(capsys, no_work, argv, kind, reader):
    rc, _, err = run(capsys, argv)
    assert rc == 2 and len(err.splitlines()) == 1, err
    if kind:
        assert f"is {kind}; {argv[0]} expects" in err and f"try 'stringdiag {reader} " in err


def test_kind_by_content_when_the_extension_says_nothing(capsys, tmp_path, no_work):
    deriv = tmp_path / "steps.txt"
    deriv.write_text("# a derivation\nstart attention.diag:SelfAttention\nprune\n")
    rc, _, err = run(capsys, ["check", deriv])
    assert rc == 2 and f"{deriv} is a derivation (.deriv), by its content; check expects" in err


def test_a_known_extension_that_reads_as_another_kind(capsys, tmp_path, no_work):
    wrong = tmp_path / "steps.diag"
    wrong.write_text("start attention.diag:SelfAttention\nunfold X\n")
    rc, _, err = run(capsys, ["check", wrong])
    assert rc == 2 and err == (f"error: {wrong} is named as a diagram file (.diag) but reads as a derivation "
                               "(.deriv); rename it, then derive reads it\n")


def test_files_of_the_right_kind_still_check(capsys, tmp_path):
    plain = tmp_path / "small.txt"  # no known extension: its content says it is a diagram file
    plain.write_text(SMALL)
    no_rules = tmp_path / "only_dims.rules"  # a rule file may hold only what a .diag file does
    no_rules.write_text("dim s : seq\n")
    rc, out, err = run(capsys, ["check", plain, no_rules])
    assert rc == 0, err
    assert f"{plain}: ok (2 diagrams: A, B)" in out and f"{no_rules}: ok (0 rules" in out


# -- outputs --------------------------------------------------------------------------
def test_render_to_an_unknown_format_creates_nothing(capsys, tmp_path, no_work):
    out = tmp_path / "out.jpg"
    rc, _, err = run(capsys, ["render", ATTENTION, "-d", "SelfAttention", "-o", out])
    assert rc == 2 and err.startswith(f"error: argument -o/--output: cannot write {out}: .jpg is not a picture "
                                      "format (.dot, .gv, .html, .pdf, .png, .svg, .tex), nor a directory")
    assert not out.exists() and list(tmp_path.iterdir()) == []


def test_derive_refuses_a_format_before_running(capsys, tmp_path, no_work):
    rc, _, err = run(capsys, ["derive", LINEARIZE, "-o", tmp_path / "x.jpg"])
    assert rc == 2 and "cannot write" in err and list(tmp_path.iterdir()) == []


def test_several_chains_need_a_directory_not_a_file_name(capsys, tmp_path, no_work):
    out = tmp_path / "chains.svg"
    rc, _, err = run(capsys, ["derive", LINEARIZE, LINEARIZE, "-o", out])
    assert rc == 2 and "derive draws 2 chains, so -o names a directory" in err
    assert not out.exists()


@pytest.mark.parametrize("argv", [["normalize", ATTENTION, "-d", "SelfAttention", "-o"], ["taxonomy", "t.tax", "-o"]])
def test_one_picture_outputs_refuse_directories_and_unknown_formats(capsys, tmp_path, no_work, argv):
    for out in (tmp_path, tmp_path / "tree.jpeg"):
        rc, _, err = run(capsys, argv + [out])
        assert rc == 2 and "cannot write" in err
    assert list(tmp_path.iterdir()) == []


def test_render_into_a_directory_only_when_named_as_one(capsys, tmp_path):
    src = tmp_path / "small.diag"
    src.write_text(SMALL)
    rc, out, err = run(capsys, ["render", src, "-o", tmp_path / "pics", "--format", "dot"])
    assert rc == 0, err
    assert sorted(p.name for p in (tmp_path / "pics").iterdir()) == ["small.A.dot", "small.B.dot"]
    rc, _, _ = run(capsys, ["render", src, "-d", "A", "-o", tmp_path / "a.dot"])
    assert rc == 0 and (tmp_path / "a.dot").is_file()


# -- exit codes -----------------------------------------------------------------------
@pytest.mark.parametrize("argv", [[], ["frob"], ["check"], ["check", ATTENTION, "--frob"],
                                  ["render", ATTENTION, "--format", "gif"],
                                  ["normalize", ATTENTION, "-d", "SelfAttention", "--max-rounds", "0"]])
def test_usage_errors_exit_2(capsys, argv):
    rc, _, err = run(capsys, argv)
    assert rc == 2 and err.startswith("error: ") and len(err.splitlines()) == 1, err


def test_errors_in_a_file_exit_1(capsys, tmp_path):
    bad = tmp_path / "bad.diag"
    bad.write_text("dim s : seq\ndiagram A(x: [s]) -> [s] {\n  return y\n}\n")
    rc, _, err = run(capsys, ["check", bad])
    assert rc == 1 and err.startswith(f"{bad}:3:10: error: undefined name 'y'")
    rc, _, err = run(capsys, ["check", tmp_path / "missing.diag"])
    assert rc == 1 and "cannot read" in err


def test_dims_that_cannot_be_read_are_usage_errors(capsys):
    rc, _, err = run(capsys, ["compile", ATTENTION, "-d", "SelfAttention", "--dims", "d=²"])
    assert rc == 2 and err == "error: --dims: expected NAME=POSITIVE_INTEGER, got 'd=²'\n"


# -- one spelling per option ----------------------------------------------------------
def test_outputs_are_spelt_o_output_everywhere():
    for name, p in subcommands().items():
        for action in p._actions:
            if "-o" in action.option_strings:
                assert action.option_strings == ["-o", "--output"], (name, action.option_strings)
            assert "--out" not in action.option_strings, name


def test_the_old_out_still_parses_with_a_warning(capsys):
    p = build_parser(["train"])
    args = p.parse_args(["train", ATTENTION, "-d", "SelfAttention", "--out", "runs/x"])
    assert args.out == "runs/x"
    assert p.parse_args(["train", ATTENTION, "-d", "SelfAttention", "--output", "runs/y"]).out == "runs/y"
    M.warn_deprecated(["train", "--out", "x"])
    assert capsys.readouterr().err == "warning: --out is deprecated; write -o/--output\n"


def test_rules_are_files_and_rule_names_are_rule(capsys, tmp_path):
    rc, _, err = run(capsys, ["normalize", ATTENTION, "-d", "SelfAttention", "--rules", "assoc"])
    assert rc == 2 and "--rules takes rule files (.rules); for the rule named 'assoc' write --rule assoc" in err
    own = tmp_path / "mine.rules"
    own.write_text("rule same<n>(x: [n]) -> [n] {\n  return 1 * x\n} == {\n  return 1 * x\n}\n")
    rc, _, err = run(capsys, ["normalize", ATTENTION, "-d", "SelfAttention", "--rule", "assoc", "same"])
    assert rc == 1 and "no rule named 'same'" in err  # not in the library ...
    rc, out, err = run(capsys, ["normalize", ATTENTION, "-d", "SelfAttention", "--rule", "assoc", "same",
                                "--rules", own])
    assert rc == 0, err                                 # ... but in the file given
    assert out.startswith("SelfAttention: ")
    for name, p in subcommands().items():
        for action in p._actions:
            assert "--rules" not in action.option_strings or action.metavar in ("FILE.rules", "R.rules"), name


# -- --json ---------------------------------------------------------------------------
def test_check_json_lists_each_files_diagrams_and_diagnostics(capsys, tmp_path):
    bad = tmp_path / "bad.diag"
    bad.write_text("dim s : seq\ndiagram A(x: [s]) -> [s] {\n  return y\n}\n")
    rc, out, err = run(capsys, ["check", ATTENTION, bad, "--json"])
    assert rc == 1 and err == ""
    good, wrong = json.loads(out)
    assert good == {"file": ATTENTION, "ok": True, "diagnostics": [],
                    "diagrams": ["SelfAttention", "MaskedSelfAttention", "CrossAttention", "MultiHeadAttention"]}
    assert wrong == {"file": str(bad), "ok": False, "diagrams": [], "diagnostics": [
        {"file": str(bad), "line": 3, "col": 10, "severity": "error", "message": "undefined name 'y'"}]}
    rc, out, _ = run(capsys, ["check", ALGEBRA, "--json"])
    (rules,) = json.loads(out)
    found = rules["diagnostics"]
    assert rc == 0 and rules["ok"] and "mul_one" in rules["rules"] and "diagrams" not in rules
    assert found and {d["severity"] for d in found} == {"warning"}
    assert all(set(d) == {"file", "line", "col", "severity", "message"} for d in found)


def test_derive_json_is_the_step_table(capsys):
    rc, out, _ = run(capsys, ["derive", LINEARIZE, "--json"])
    (d,) = json.loads(out)
    assert rc == 0 and d["start"] == "GenericSimilarityAttention" and d["target"] == "LinearAttention"
    rows = d["rows"]
    assert [r["step"] for r in rows] == list(range(d["steps"] + 1))
    assert rows[0]["time"] == "O(s^2)" and rows[-1]["time"] == "O(s)"  # linearised: quadratic to linear


def test_taxonomy_json_has_members_and_relations(capsys, tmp_path):
    (tmp_path / "x.diag").write_text(SMALL)
    (tmp_path / "ab.deriv").write_text("start x.diag:A\ntarget x.diag:B\n")
    tax = tmp_path / "t.tax"
    tax.write_text('root a = x.diag:A "the first"\nnode b = x.diag:B family "copies"\nedge a -> b by "ab.deriv"\n')
    rc, out, err = run(capsys, ["taxonomy", tax, "--json"])
    assert rc == 0, err
    t = json.loads(out)
    assert t["root"] == "a" and set(t["members"]) == {"a", "b"}
    assert t["members"]["b"] == {"diagram": "B", "file": "x.diag", "title": "B (copies)", "family": "copies",
                                 "root": False}
    assert t["edges"] == [{"parent": "a", "child": "b", "derivation": "ab.deriv", "relations": [], "verified": 0,
                           "changed_boxes": 0}]


# -- help, defaults, completion -------------------------------------------------------
def test_every_help_has_an_example_of_its_own_command():
    """Another command's example only to make what the command's own examples read (sample's
    run, trained first): before them all."""
    for name, p in subcommands().items():
        text = p.format_help()
        assert "\nexamples:\n" in text, name
        examples = text.split("\nexamples:\n", 1)[1].replace("\\\n", " ").splitlines()  # a command may go on
        own = [f"{line} ".startswith(f"  stringdiag {name} ") for line in examples if line.strip()]
        assert own and all(line.startswith("  stringdiag ") for line in examples if line.strip()), name
        assert own[own.index(True):] == [True] * (len(own) - own.index(True)), name


def test_the_examples_name_shipped_files_that_exist():
    """By package name (stringdiag:gallery/...), so that each runs from any folder against an
    installed wheel; a path into a checkout (gallery/...) would not."""
    from stringdiag.resources import PREFIX, argument

    helps = {name: p.format_help() for name, p in subcommands().items()} | {"": M.build_parser().format_help()}
    for name, text in helps.items():
        for line in text.split("\nexamples:\n", 1)[1].splitlines():
            for word in line.split():
                assert not word.startswith(("gallery/", "rules/")), (name, word)  # shipped names only
                if word.startswith(PREFIX):  # FILE.diag:NAME (derive --find, optimize) names a diagram of one
                    assert Path(argument(re.sub(r"\.diag:[A-Za-z_]\w*$", ".diag", word))).is_file(), (name, word)


def test_a_tuple_default_shows_as_typed():
    assert "(default: 1/1)" not in " ".join(subcommands()["study"].format_help().split())  # its help says "all runs"
    action = argparse.Action(["--pair"], "pair", default=(2, 3), metavar="A:B", type=None)
    assert M.shown(action) == "2:3"
    action = argparse.Action(["--xs"], "xs", default=[1, 2], metavar="N", type=None)
    assert M.shown(action) == "1,2"


@pytest.mark.parametrize("shell", ["bash", "zsh"])
def test_completion_script_names_every_command(capsys, shell):
    rc, out, _ = run(capsys, ["--completion", shell])
    assert rc == 0 and "stringdiag" in out
    for name in M.COMMANDS:
        assert name in out
    assert "--verify" in out and "--output" in out


# -- start-up -------------------------------------------------------------------------
PROBE = """
import sys
from stringdiag.cli.main import main
try:
    code = main({argv!r})
except SystemExit as e:
    code = e.code
print("LOADED", sorted({{m.split('.')[0] for m in sys.modules}} & {{'networkx', 'lark', 'numpy', 'torch'}}), code)
"""


@pytest.mark.parametrize("argv, code", [(["--version"], 0), (["check", "--frob", "x.diag"], 2),
                                        (["derive", ATTENTION], 2), (["render", ATTENTION, "-o", "x.jpg"], 2)])
def test_what_reads_no_file_imports_no_graph_library(tmp_path, argv, code):
    r = subprocess.run([sys.executable, "-c", PROBE.format(argv=argv)], cwd=tmp_path, capture_output=True,
                       text=True, env={"XDG_CACHE_HOME": str(tmp_path), "PATH": "", "PYTHONPATH": str(ROOT)})
    assert r.stdout.splitlines()[-1] == f"LOADED [] {code}", (r.stdout, r.stderr[-2000:])


def test_prelude_cache_is_checked_data_and_equals_a_fresh_parse(tmp_path, monkeypatch):
    from stringdiag.elaborate.loader import PRELUDE
    from stringdiag.syntax import ast as A
    from stringdiag.syntax import astcache

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    text, file = PRELUDE.read_text(), str(PRELUDE)
    fresh = A.read(text, file)
    assert astcache.read_cached(text, file) == fresh                # parsed, then written
    (cached,) = (tmp_path / "stringdiag").glob("ast-*.marshal")
    head, _, payload = cached.read_bytes().partition(b"\n")
    assert len(head.decode("ascii").split()) == 2                      # KEY DIGEST
    assert astcache.decode(marshal.loads(payload), file) == fresh     # the data: the items' programs
    calls = []
    monkeypatch.setattr(A, "read", lambda *a: calls.append(a) or fresh)
    assert astcache.read_cached(text, file) == fresh and not calls   # read back, not parsed
    at = payload.index(b"softmax")
    cached.write_bytes(head + b"\n" + payload[:at] + b"softmix" + payload[at + 7:])  # checksum no longer holds
    assert astcache.read_cached(text, file) == fresh and len(calls) == 1
    cached.write_bytes(head + b"\n" + payload[:100])                 # a run killed mid-write
    assert astcache.read_cached(text, file) == fresh and len(calls) == 2
    assert astcache.read_cached(text + "\n", file) == fresh and len(calls) == 3  # another text: another key


def test_prelude_cache_refuses_records_it_does_not_know():
    from stringdiag.syntax import astcache as C

    with pytest.raises(ValueError):                                    # an op past the known records
        C.decode(((bytes([C.VALUE, C.RECORD + len(C.CLASSES)]), ("rm -rf /",)), ()))
    pos = C.RECORD + C.CLASSES.index(Pos)
    assert C.decode(((bytes([C.VALUE, C.VALUE, C.VALUE, pos, C.TUPLE]), ("f", 1, 2, 1)), ()))[0].line == 1


def test_a_reader_that_goes_away_is_no_error():
    """`stringdiag ... | head`: when the reader has gone, the output is dropped quietly (exit 141, as
    SIGPIPE), never an `error: Broken pipe`. The pipe is closed before the child writes anything."""
    proc = subprocess.Popen([sys.executable, "-m", "stringdiag", "info", str(ROOT / "gallery" / "attention.diag"),
                             "-d", "SelfAttention"], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    proc.stdout.close()
    err = proc.stderr.read().decode()
    assert proc.wait(timeout=120) == 141 and err == "", err


def test_the_help_shows_no_markup():
    assert "``" not in build_parser().format_help()
