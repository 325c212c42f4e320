"""Files shipped with the package, named ``stringdiag:FOLDER/FILE``, work in every command from
any folder, and a README path (``gallery/attention.diag``) read where there is no checkout says
which shipped name to write instead."""
from __future__ import annotations

from pathlib import Path

import pytest

from stringdiag.cli.main import main
from stringdiag.errors import PACKAGE, shown

ROOT = Path(__file__).resolve().parents[1]


def test_a_diagram_file_given_to_derive_by_package_name_is_the_wrong_kind(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    assert main(["derive", "stringdiag:gallery/attention.diag"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: stringdiag:gallery/attention.diag is a diagram file (.diag); derive expects")
    assert "try 'stringdiag check stringdiag:gallery/attention.diag'" in err


@pytest.mark.parametrize("argv, name", [
    (["check", "gallery/attention.diag"], "gallery/attention.diag"),
    (["derive", "gallery/linearize.deriv"], "gallery/linearize.deriv"),
    (["normalize", "gallery/attention.diag", "-d", "SelfAttention", "--rules", "rules/algebra.rules"],
     "gallery/attention.diag"),
])
def test_a_checkout_path_read_elsewhere_names_the_shipped_file(tmp_path, monkeypatch, capsys, argv, name):
    monkeypatch.chdir(tmp_path)  # no gallery/ here
    assert main(argv) == 1
    err = capsys.readouterr().err.strip()
    assert err == f"error: cannot read {name}: No such file or directory; " \
                  f"the copy shipped with stringdiag is stringdiag:{name}"


def test_no_hint_where_nothing_of_that_name_is_shipped(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    assert main(["check", "gallery/no_such_model.diag"]) == 1
    assert capsys.readouterr().err.strip() == "error: cannot read gallery/no_such_model.diag: No such file or directory"


def test_render_of_a_shipped_file_writes_here_not_into_the_package(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    assert main(["render", "stringdiag:gallery/attention.diag", "-d", "SelfAttention"]) == 0
    assert capsys.readouterr().out.strip() == "wrote attention.SelfAttention.svg"
    assert (tmp_path / "attention.SelfAttention.svg").read_text().lstrip().startswith(("<?xml", "<svg"))


def test_a_whole_language_model_reads_its_sources_by_package_name(tmp_path, monkeypatch):
    from stringdiag.train.lm import sources

    monkeypatch.chdir(tmp_path)
    texts, main_key = sources("stringdiag:gallery/lm.diag")
    assert main_key == "lm.diag" and texts[main_key] == (ROOT / "gallery" / "lm.diag").read_text()


def test_a_file_inside_the_installed_package_is_shown_by_package_name():
    inside = PACKAGE / "gallery" / "proofs" / "x.deriv"
    assert shown(inside) == "stringdiag:gallery/proofs/x.deriv"
    assert shown(str(PACKAGE / "rules" / "algebra.rules")) == "stringdiag:rules/algebra.rules"
    assert shown(PACKAGE / "cli" / "main.py") == str(PACKAGE / "cli" / "main.py")  # not a shipped folder
    assert shown(ROOT / "gallery" / "attention.diag") == str(ROOT / "gallery" / "attention.diag")  # a checkout's own
    assert shown("gallery/attention.diag") == "gallery/attention.diag"


def test_a_shipped_rule_file_is_read_as_rules(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    assert main(["check", "stringdiag:rules/algebra.rules"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("stringdiag:rules/algebra.rules: ok (") and " rules: mul_one, " in out
