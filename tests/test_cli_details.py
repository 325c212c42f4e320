"""Small things a new user meets: a mistyped command gets the nearest one; a picture is never
written into folders made from a file's name; --test-tokens too small for one window is refused
before training; compile -o's refusals are usage errors (status 2), as docs/cli.md says."""
from __future__ import annotations

import pytest

from stringdiag.cli.main import main


def _run(capsys, argv):
    rc = main(argv)
    out, err = capsys.readouterr()
    return rc, out, err


@pytest.mark.parametrize("typed, meant", [("chek", "check"), ("rendr", "render"), ("derve", "derive")])
def test_a_mistyped_command_names_the_nearest(capsys, typed, meant):
    rc, _, err = _run(capsys, [typed, "x.diag"])
    assert rc == 2 and f"invalid choice: '{typed}'" in err and f"; did you mean '{meant}'?" in err


def test_no_suggestion_when_nothing_is_near(capsys):
    rc, _, err = _run(capsys, ["zzz", "x.diag"])
    assert rc == 2 and "did you mean" not in err


@pytest.mark.parametrize("argv", [
    ["render", "stringdiag:gallery/attention.diag", "-d", "SelfAttention", "-o", "{tmp}/a/b/x.svg"],
    ["derive", "stringdiag:gallery/linearize.deriv", "-o", "{tmp}/a/x.html"],
])
def test_a_picture_in_a_missing_folder_is_refused_before_any_work(tmp_path, capsys, argv):
    rc, out, err = _run(capsys, [a.format(tmp=tmp_path) for a in argv])
    assert rc == 2 and out == "" and f"there is no folder {tmp_path}/a" in err
    assert not (tmp_path / "a").exists()


def test_a_named_folder_is_still_made(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    rc, out, _ = _run(capsys, ["render", "stringdiag:gallery/attention.diag", "-d", "SelfAttention", "-o", "pics/"])
    assert rc == 0 and (tmp_path / "pics" / "attention.SelfAttention.svg").is_file()


def test_too_few_test_tokens_are_refused_before_training(tmp_path, capsys):
    rc, out, err = _run(capsys, ["train", "stringdiag:gallery/anatomy.diag", "-d", "M1", "--data", "synthetic",
                                 "--context", "16", "--test-tokens", "10", "-o", str(tmp_path / "run")])
    assert rc == 2 and out == ""
    assert err.strip() == "error: --test-tokens 10: the test scores windows of --context 16 tokens, so give at " \
                          "least 16 (or --no-test)"
    assert not (tmp_path / "run").exists()


@pytest.mark.parametrize("name", ["x.py", "1bad"])
def test_compile_output_refusals_are_usage_errors(tmp_path, capsys, monkeypatch, name):
    monkeypatch.chdir(tmp_path)
    rc, _, err = _run(capsys, ["compile", "stringdiag:gallery/attention.diag", "-d", "SelfAttention",
                               "--dims", "d=8,k=4", "-o", name])
    assert rc == 2 and err.startswith(f"error: cannot write {name}: ")


@pytest.mark.parametrize("argv, status, message", [
    (["info", "{tmp}/nothere.diag", "--json"], 1, "cannot read {tmp}/nothere.diag: No such file or directory"),
    (["derive", "{tmp}/bad.deriv", "--json"], 1, "unexpected"),
    (["compile", "stringdiag:gallery/attention.diag", "-d", "SelfAttention", "--dims", "d=x", "--json"], 2, "--dims"),
])
def test_json_errors_are_json_on_stdout(tmp_path, capsys, argv, status, message):
    import json

    (tmp_path / "bad.deriv").write_text("start\n")
    rc, out, err = _run(capsys, [a.format(tmp=tmp_path) for a in argv])
    assert rc == status and err == ""
    error = json.loads(out)["error"]
    assert error["severity"] == "error" and message.format(tmp=tmp_path) in error["message"]
    assert set(error) == {"file", "line", "col", "severity", "message"}
