"""``train --config FILE``: every option as a key of a TOML or JSON file, checked as the command
line checks it, the command line winning; a run writes its resolved options beside its
checkpoint, and ``--config`` on that file repeats the run."""
from __future__ import annotations

import json

import pytest

from stringdiag.cli.main import main, parse

TINY = {"diagram": "M1", "data": "synthetic", "layers": 1, "d-model": 16, "heads": 2, "context": 8,
        "batch_size": 4, "dims": "k=8", "max-steps": 2, "no-test": True}


def _toml(values: dict) -> str:
    return "".join(f"{k} = {json.dumps(v)}\n" for k, v in values.items())  # JSON scalars are TOML scalars


def test_a_toml_file_sets_options_and_the_command_line_wins(tmp_path):
    (tmp_path / "run.toml").write_text(_toml({**TINY, "output": "from-file"}))
    args = parse(["train", "x.diag", "--config", str(tmp_path / "run.toml"), "--max-steps", "7"])
    assert (args.diagram, args.layers, args.d_model, args.batch_size, args.no_test) == ("M1", 1, 16, 4, True)
    assert args.max_steps == 7 and args.out == "from-file"
    assert parse(["train", "x.diag", "-d", "M0", "--config", str(tmp_path / "run.toml")]).diagram == "M0"


@pytest.mark.parametrize("values, message", [
    ({"max-stpes": 3}, "no option 'max-stpes' (the options: "),
    ({"max-steps": 0}, "'max-steps': expected a positive integer (at least 1), got '0'"),
    ({"no-test": "yes"}, "'no-test' is a switch: true or false, not 'yes'"),
    ({"approximator": "cubic"}, "'approximator': expected one of linear, mlp, got 'cubic'"),
    ({"dims": "k"}, "'dims': expected NAME=POSITIVE_INTEGER, got 'k'"),
    ({"dims": [1, 2]}, "'dims': expected one value as the command line takes it, not [1, 2]"),
    ({"max-steps": [3, 4]}, "'max-steps': expected one value as the command line takes it, not [3, 4]"),
    ({"file": 3}, "'file': expected the path of the command's FILE, not 3"),
])
def test_a_bad_key_or_value_is_a_usage_error_naming_it(tmp_path, capsys, values, message):
    (tmp_path / "run.json").write_text(json.dumps({**TINY, **values}))
    assert main(["train", "x.diag", "--config", str(tmp_path / "run.json")]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"error: --config {tmp_path / 'run.json'}: ") and message in err


def test_dims_may_be_a_table(tmp_path):
    (tmp_path / "run.toml").write_text(_toml({k: v for k, v in TINY.items() if k != "dims"}) + "[dims]\nk = 8\nm = 4\n")
    assert parse(["train", "x.diag", "--config", str(tmp_path / "run.toml")]).dims == "k=8,m=4"


def test_a_file_that_is_not_toml_is_refused_at_once(tmp_path, capsys):
    (tmp_path / "run.toml").write_text("max-steps = = 3\n")
    assert main(["train", "x.diag", "--config", str(tmp_path / "run.toml")]) == 1
    assert "run.toml: not TOML: " in capsys.readouterr().err


def test_the_resolved_config_repeats_the_run(tmp_path, capsys):
    (tmp_path / "run.toml").write_text(_toml(TINY))
    first, second = tmp_path / "a", tmp_path / "b"
    assert main(["train", "stringdiag:gallery/anatomy.diag", "--config", str(tmp_path / "run.toml"),
                 "-o", str(first)]) == 0
    saved = json.loads((first / "run-config.json").read_text())
    assert saved["file"] == "stringdiag:gallery/anatomy.diag" and saved["max-steps"] == 2 and saved["layers"] == 1
    assert saved["output"] == str(first) and saved["clock"] == "wall" and "resume" not in saved
    assert main(["train", "stringdiag:gallery/anatomy.diag", "--config", str(first / "run-config.json"),
                 "-o", str(second)]) == 0
    capsys.readouterr()
    again = json.loads((second / "run-config.json").read_text())
    assert again == {**saved, "output": str(second)}
    rows = [json.loads((d / "result.json").read_text()) for d in (first, second)]
    assert rows[0]["valid_ppl"] == rows[1]["valid_ppl"] and rows[0]["steps"] == rows[1]["steps"] == 2


LM = {"diagram": "GPT", "data": "synthetic", "dims": "d=8,h=2,k=4,f=16,L=1", "context": 8, "batch-size": 4,
      "max-steps": 2, "no-test": True}


@pytest.mark.parametrize("values, argv, message", [
    ({"dims": "q=3"}, [], "--config {cfg}: 'dims': 'q' is not a fixed dimension that 'GPT' uses (it takes v, d, L, h, "
                          "k, f)"),
    ({"d-model": 999}, [], "--config {cfg}: 'd-model' builds the head recipe's model; 'GPT' has its own width d"),
    ({"dims": "k=4"}, ["--dims", "q=3"], "--dims: 'q' is not a fixed dimension"),  # the command line's own value
])
def test_an_error_about_a_value_the_file_set_names_its_key(tmp_path, capsys, values, argv, message):
    cfg = tmp_path / "run.toml"
    cfg.write_text(_toml({**LM, **values}))
    assert main(["train", "stringdiag:gallery/lm.diag", "--config", str(cfg), *argv, "-o", str(tmp_path / "o")]) == 1
    assert capsys.readouterr().err.startswith("error: " + message.format(cfg=cfg))


def test_a_resolved_config_alone_repeats_the_run_file_included(tmp_path, capsys):
    first, second = tmp_path / "a", tmp_path / "b"
    (tmp_path / "run.toml").write_text(_toml(LM))
    assert main(["train", "stringdiag:gallery/lm.diag", "--config", str(tmp_path / "run.toml"), "-o", str(first)]) == 0
    saved = first / "run-config.json"
    assert parse(["train", "--config", str(saved)]).file == "stringdiag:gallery/lm.diag"
    assert parse(["train", "x.diag", "--config", str(saved)]).file == "x.diag"  # the command line wins
    assert main(["train", "--config", str(saved), "-o", str(second)]) == 0
    capsys.readouterr()
    assert json.loads((second / "run-config.json").read_text()) == {**json.loads(saved.read_text()),
                                                                    "output": str(second)}
    rows = [json.loads((d / "result.json").read_text()) for d in (first, second)]
    assert rows[0]["valid_ppl"] == rows[1]["valid_ppl"] and rows[0]["steps"] == rows[1]["steps"] == 2


def test_without_a_file_in_the_config_file_is_still_required(tmp_path, capsys):
    (tmp_path / "run.toml").write_text(_toml(LM))
    assert main(["train", "--config", str(tmp_path / "run.toml")]) == 2
    assert "the following arguments are required: FILE" in capsys.readouterr().err
