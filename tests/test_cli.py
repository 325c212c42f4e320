"""The command line: exit codes, messages, pictures and descriptions."""
from __future__ import annotations

import json
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from helpers import ATTENTION_DECLS, SELF_ATTENTION
from stringdiag.cli.main import main

GOOD = ATTENTION_DECLS + "\n" + SELF_ATTENTION + """
diagram Twice(x: [s, d]) -> [s, d] {
  return SelfAttention(SelfAttention(x))
}
"""

BAD = """\
dim s : seq
dim d : fixed
learn F : [d] -> [d]
diagram A(x: [s, d]) -> [s, d] {
  y = F(z)
  return y
}
"""


@pytest.fixture
def good(tmp_path: Path) -> Path:
    p = tmp_path / "good.diag"
    p.write_text(GOOD)
    return p


@pytest.fixture
def bad(tmp_path: Path) -> Path:
    p = tmp_path / "bad.diag"
    p.write_text(BAD)
    return p


def test_check_ok(good, capsys):
    assert main(["check", str(good)]) == 0
    assert capsys.readouterr().out == f"{good}: ok (2 diagrams: SelfAttention, Twice)\n"


def test_check_error_has_position_line_and_caret(bad, good, capsys):
    assert main(["check", str(bad), str(good)]) == 1
    out, err = capsys.readouterr()
    assert err == (f"{bad}:5:9: error: undefined name 'z'\n"
                   "      y = F(z)\n"
                   "            ^\n")
    assert "good.diag: ok" in out  # the other file is still checked


def test_missing_file_is_an_error_not_a_traceback(tmp_path, capsys):
    assert main(["check", str(tmp_path / "nope.diag")]) == 1
    err = capsys.readouterr().err
    assert err.startswith("error: cannot read") and "Traceback" not in err


def test_render_every_diagram_to_valid_svg(good, tmp_path, capsys):
    out = tmp_path / "pics"
    out.mkdir()
    assert main(["render", str(good), "-o", str(out)]) == 0
    files = sorted(p.name for p in out.iterdir())
    assert files == ["good.SelfAttention.svg", "good.Twice.svg"]
    root = ET.parse(out / "good.SelfAttention.svg").getroot()
    assert root.tag.endswith("svg")
    text = " ".join(t.text or "" for t in root.iter() if t.tag.endswith("text"))
    for word in ("Q", "K", "V", "softmax", "i : s", "j : s"):
        assert word in text


def test_render_one_diagram_by_extension(good, tmp_path):
    assert main(["render", str(good), "-d", "Twice", "-o", str(tmp_path / "t.png")]) == 0
    assert (tmp_path / "t.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert main(["render", str(good), "-d", "Twice", "-o", str(tmp_path / "t.dot"), "--expand"]) == 0
    dot = (tmp_path / "t.dot").read_text()
    assert dot.startswith("digraph") and "cluster" in dot and "SelfAttention" in dot


def test_render_expand_opens_definitions(good, tmp_path):
    main(["render", str(good), "-d", "Twice", "-o", str(tmp_path / "c.dot")])
    main(["render", str(good), "-d", "Twice", "-o", str(tmp_path / "e.dot"), "--expand"])
    collapsed, expanded = (tmp_path / "c.dot").read_text(), (tmp_path / "e.dot").read_text()
    assert "peripheries=2" in collapsed and "label=Q " not in collapsed
    assert "label=Q " in expanded and "exp" in expanded


def test_render_unknown_diagram_and_format(good, tmp_path, capsys):
    assert main(["render", str(good), "-d", "Selfattention"]) == 1
    assert "did you mean 'SelfAttention'" in capsys.readouterr().err
    assert main(["render", str(good), "-o", str(tmp_path / "x.svg")]) == 1
    assert "give -d NAME" in capsys.readouterr().err


def test_info_json(good, capsys):
    assert main(["info", str(good), "-d", "Twice", "--json"]) == 0
    info = json.loads(capsys.readouterr().out)
    assert info["signature"] == "Twice : [s, d] -> [s, d]"
    assert info["inputs"] == [{"name": "x", "indices": ["s", "d"]}]
    # k only appears inside the definitions Twice uses, but compiling Twice needs its size
    assert info["dimensions"] == {"s": "seq", "d": "fixed", "k": "fixed"}
    assert info["boxes"]["by_kind"] == {"diagram": 2}
    assert info["boxes"]["expanded"]["learn"] == 6
    # top-level learnables are shared: each is one parameter used twice
    assert [(p["name"], p["uses"], p["signature"]) for p in info["learnable"]] == [
        ("Q", 2, "[d] -> [k]"), ("K", 2, "[d] -> [k]"), ("V", 2, "[d] -> [d]")]


def test_info_text(good, capsys):
    assert main(["info", str(good), "-d", "SelfAttention"]) == 0
    out = capsys.readouterr().out
    assert "inputs:\n  x     [s, d]" in out
    assert "  s     seq\n  d     fixed\n  k     fixed" in out


def test_console_script_runs_without_traceback(bad):
    exe = Path(sys.executable).parent / "stringdiag"
    r = subprocess.run([str(exe), "check", str(bad)], capture_output=True, text=True)
    assert r.returncode == 1
    assert r.stderr.startswith(f"{bad}:5:9: error:") and "Traceback" not in r.stderr


def test_info_reports_complexity_in_the_sequence_length(capsys):
    gallery = Path(__file__).resolve().parents[1] / "gallery"
    assert main(["info", str(gallery / "similarity.diag"), "--json"]) == 0
    info = {d["name"]: d["complexity"] for d in json.loads(capsys.readouterr().out)}
    assert info["GenericSimilarityAttention"]["seq_time"] == "s^2"
    assert info["GenericSimilarityAttention"]["seq_memory"] == "s^2"
    assert info["LinearAttention"] == {"time": "s·d^2 + s·d·k", "memory": "s·d + s·k + d·k",
                                       "seq_time": "s", "seq_memory": "s"}


def test_compile_prints_code_and_counts_parameters(good, capsys):
    assert main(["compile", str(good), "-d", "SelfAttention", "--dims", "d=8,k=4", "--approximator", "linear"]) == 0
    printed = capsys.readouterr().out
    # Q, K: 8*4 + 4 each; V: 8*8 + 8
    assert printed.startswith("SelfAttention : [s, d] -> [s, d]: 144 parameters (linear approximators)")
    code = printed.split("\n", 1)[1]  # the forward code; -o writes a folder (tests/test_export.py)
    assert compile(code, "forward", "exec") is not None
    assert "def forward(self, x):" in code and "scaled_dot_product_attention" in code


def test_every_missing_size_is_named_at_once_with_its_diagram(capsys):
    """TransformerEncoder's own dimensions and those of the layer it uses, in one message."""
    assert main(["compile", "stringdiag:gallery/transformer.diag", "-d", "TransformerEncoder", "--dims", "v=10"]) == 1
    assert capsys.readouterr().err.strip() == (
        "error: give sizes for the fixed dimension(s) of 'TransformerEncoder' and what it uses: dm (TransformerEncoder); "
        "df, dh, h (EncoderLayer) (e.g. --dims df=64,dh=64,dm=64,h=64)")
    assert main(["compile", "stringdiag:gallery/transformer.diag", "-d", "TransformerEncoder",
                 "--dims", "df=8,dh=4,dm=8,h=2,v=10"]) == 0
    assert "TransformerEncoder : " in capsys.readouterr().out


def test_compile_reports_bad_dims(good, capsys):
    assert main(["compile", str(good), "-d", "SelfAttention", "--dims", "d=8"]) == 1
    assert "give sizes for the fixed dimension(s) of 'SelfAttention' and what it uses: k (SelfAttention)" \
        in capsys.readouterr().err
    assert main(["compile", str(good), "-d", "SelfAttention", "--dims", "d=eight"]) == 2  # a bad command line
    assert "expected NAME=POSITIVE_INTEGER, got 'd=eight'" in capsys.readouterr().err


def test_train_on_the_synthetic_corpus_and_resume(tmp_path, capsys):
    gallery = Path(__file__).resolve().parents[1] / "gallery"
    args = ["train", str(gallery / "anatomy.diag"), "-d", "M1", "--data", "synthetic", "--layers", "1",
            "--heads", "2", "--d-model", "16", "--context", "8", "--eval-every", "20", "--approximator", "linear",
            "-o", str(tmp_path / "run")]
    assert main(args + ["--max-steps", "20", "--no-test"]) == 0
    first = capsys.readouterr().out
    assert "unigram perplexity on valid" in first and "step 20: mean train loss" in first
    assert main(args + ["--max-steps", "40", "--resume"]) == 0
    out = capsys.readouterr().out
    assert "resumed from" in out and "at step 20" in out and "step 40:" in out
    result = json.loads((tmp_path / "run" / "result.json").read_text())
    assert result["steps"] == 40 and result["test_ppl"] < result["unigram_ppl"]
    last = out.strip().splitlines()[-1]  # the verdict comes last, with both numbers
    assert last.startswith(f"test perplexity {result['test_ppl']:.1f}")
    assert f": better than unigram on the same targets ({result['unigram_scored_ppl']:.1f})" in last
    assert result["unigram_scored_ppl"] == result["unigram_test_ppl"]  # the whole split: the same targets
    assert "over the first" not in last and result["test_tokens"] > 0  # all of it: no budget was given
    assert len((tmp_path / "run" / "log.csv").read_text().splitlines()) == 3  # header, step 20, step 40


def test_unwritable_output_is_an_error_not_a_traceback(good, capsys):
    assert main(["render", str(good), "-d", "Twice", "-o", "/proc/x.svg"]) == 2  # a folder that refuses files
    err = capsys.readouterr().err
    assert err.startswith("error: argument -o/--output: cannot write /proc/x.svg") and "Traceback" not in err


def test_compile_error_far_from_the_text_still_shows_the_line(tmp_path, capsys):
    src = tmp_path / "a.diag"
    src.write_text("dim s : seq\ndim k : fixed\nabstract sim : [k], [k] -> []\n"
                   "diagram A(x: [s, k]) -> [s, s] {\n  e[i, j] = sim(x[i], x[j])\n  return e\n}\n")
    assert main(["compile", str(src), "-d", "A", "--dims", "k=2"]) == 1
    assert capsys.readouterr().err.splitlines()[1:] == ["      e[i, j] = sim(x[i], x[j])", "                ^"]


def test_every_option_shows_its_default_in_help():
    import argparse

    from stringdiag.cli.main import build_parser

    sub = next(a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction))
    missing = []
    for name, command in sub.choices.items():
        text = command.format_help()
        for action in command._actions:
            default = action.default
            if not action.option_strings or default is None or default is False or default in ("", [], (), argparse.SUPPRESS):
                continue
            if "default" not in (action.help or "") or "default" not in text:
                missing.append(f"{name} {action.option_strings[-1]}")
    assert not missing, missing
