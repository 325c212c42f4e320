"""Qualified imports: ``import "attention.diag" as att`` then ``att.SelfAttention`` (.diag),
``use "attention.diag" as att`` then ``att.SelfAttention`` (.deriv). Two gallery files that
both declare a top-level ``Q`` can then be used together, and their two ``Q`` stay two sets
of weights."""
from __future__ import annotations

from pathlib import Path

import pytest

import stringdiag
from stringdiag.cli.main import main
from stringdiag.derive.derivation import load_derivation
from stringdiag.errors import DiagError
from stringdiag.graph.weights import weight_sets

GALLERY = Path(__file__).resolve().parents[1] / "gallery"


def write(tmp_path: Path, name: str, text: str) -> Path:
    p = tmp_path / name
    p.write_text(text)
    return p


def test_two_files_declaring_q_clash_unqualified(tmp_path):
    """The defect: both declare ``learn Q``."""
    p = write(tmp_path, "both.diag", f'import "{GALLERY}/attention.diag"\nimport "{GALLERY}/similarity.diag"\n')
    with pytest.raises(DiagError, match="'Q' is already defined"):
        stringdiag.load(p)


def test_qualified_imports_use_both(tmp_path):
    p = write(tmp_path, "both.diag", f'''import "{GALLERY}/attention.diag" as att
import "{GALLERY}/similarity.diag" as sim
diagram Both(x: [s, d]) -> [s, d] {{
  return att.SelfAttention(x) + sim.LinearAttention(x)
}}
diagram Twice(x: [s, d]) -> [s, d] {{
  return att.SelfAttention(x) + att.SelfAttention(x)
}}
''')
    prog = stringdiag.load(p)
    both = prog["Both"].expand()
    learn = {k[-1] for k in weight_sets(both) if k[0] == "learn"}
    assert learn == {"att.Q", "att.K", "att.V", "sim.Q", "sim.K", "sim.V"}  # two Q, two sets
    twice = prog["Twice"].expand()
    assert {k[-1] for k in weight_sets(twice) if k[0] == "learn"} == {"att.Q", "att.K", "att.V"}  # one file: shared
    # the file's own diagram, qualified, is the same computation as imported plainly
    plain = stringdiag.load(GALLERY / "attention.diag")["SelfAttention"]
    assert len(prog["att.SelfAttention"].expand()) == len(plain.expand())


@pytest.mark.parametrize("body, message, col", [
    ("return atx.SelfAttention(x)", "unknown qualifier 'atx' (the qualified imports here: att)", 10),
    ("return att.SelfAtention(x)", "'att' (an import) has no box or diagram 'SelfAtention'; did you mean "
                                   "'SelfAttention'?", 10),
])
def test_unknown_qualifiers_are_positioned_errors(tmp_path, capsys, body, message, col):
    p = write(tmp_path, "bad.diag", f'import "{GALLERY}/attention.diag" as att\n'
                                    f'diagram Bad(x: [s, d]) -> [s, d] {{\n  {body}\n}}\n')
    assert main(["check", str(p)]) == 1
    err = capsys.readouterr().err
    assert f"bad.diag:3:{col}: error: {message}" in err and "Traceback" not in err


def test_an_alias_names_one_import(tmp_path, capsys):
    p = write(tmp_path, "twice.diag", f'import "{GALLERY}/attention.diag" as att\n'
                                      f'import "{GALLERY}/similarity.diag" as att\n')
    assert main(["check", str(p)]) == 1
    assert "twice.diag:2:" in capsys.readouterr().err


def test_a_derivation_uses_two_files_by_qualifier(tmp_path):
    d = write(tmp_path, "q.deriv", f'''use "{GALLERY}/similarity.diag" as sim
use "{GALLERY}/attention.diag" as att
start sim.GenericSimilarityAttention
specialise sim(p, r) := {{ return sum_f elu1(p)[f] * elu1(r)[f] }}
apply div_out
copy a
apply assoc
apply assoc_mv
target sim.LinearAttention
''')
    deriv = load_derivation(d)
    assert deriv.target.name == "LinearAttention" and len(deriv.steps) == 6


def test_a_derivation_reports_an_unknown_qualifier(tmp_path, capsys):
    d = write(tmp_path, "q.deriv", f'use "{GALLERY}/attention.diag" as att\nstart atx.SelfAttention\n')
    assert main(["derive", str(d)]) == 1
    err = capsys.readouterr().err
    assert "q.deriv:2:7: error: unknown qualifier 'atx' (the qualified imports here: att); write use" in err
