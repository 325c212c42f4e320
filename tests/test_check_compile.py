"""`check` names everything `compile` would refuse for a reason in the source: on every gallery
diagram, and on small programs each holding one such reason."""
from pathlib import Path

import pytest

import stringdiag
from stringdiag import DiagError
from stringdiag.analysis.combine import dimensions
from stringdiag.analysis.compilable import obstacles
from stringdiag.cli.main import main
from stringdiag.elaborate.loader import prelude

GALLERY = Path(__file__).resolve().parents[1] / "gallery"
IMPLEMENTED = frozenset(n for n, b in prelude().boxes.items() if b.box == "fixed")


def _compile_error(d) -> str | None:
    """What compile says with every fixed size given (3), or None when it compiles."""
    sizes = {n: 3 for n, owner in dimensions(d).items()
             if (decl := owner.program.lookup_dim(n)) is not None and decl.kind == "fixed"}
    sizes |= {str(g): 3 for g in d.generics}  # a generic definition is compiled at chosen sizes
    try:
        stringdiag.compile(d, dims=sizes)
    except DiagError as e:
        return e.message
    return None


DIAGRAMS = [(f.name, name) for f in sorted(GALLERY.glob("*.diag")) if f.name != "mechanisms.diag"
            for name in stringdiag.load(f).own]


@pytest.mark.parametrize("file,name", DIAGRAMS)
def test_check_finds_an_obstacle_exactly_when_compile_refuses(file, name):
    d = stringdiag.load(GALLERY / file)[name]
    found = obstacles(d, IMPLEMENTED)
    refused = _compile_error(d)
    assert bool(found) == (refused is not None), (found, refused)


BAD = {
    "no implementation": ("fixed mystery : [] -> []\n"
                          "diagram D(x: [s]) -> [s] {\n  y[i] = mystery(x[i])\n  return y\n}", 3, 10, True),
    "tensor with two outputs": ("learn T : -> [d], [d]\n"
                                "diagram D(x: [s, d]) -> [s, d] {\n  a, b = T()\n  y[i] = x[i] + a\n  return y\n}",
                                3, 10, True),
    "abstract family": ("abstract f : [d] -> [d]\n"
                        "diagram D(x: [s, d]) -> [s, d] {\n  y[i] = f(x[i])\n  return y\n}", 3, 10, False),
    "length no input carries": ("diagram D(x: [d]) -> [s, d] {\n  y[j, a] = x[a] * ones<s>()[j]\n  return y\n}",
                                1, 9, False),
}
HEAD = "dim s : seq\ndim d : fixed\n"


@pytest.mark.parametrize("case", sorted(BAD))
def test_each_reason_compile_refuses_is_named_by_check_at_its_place(case, tmp_path, capsys):
    body, line, col, defect = BAD[case]
    path = tmp_path / "bad.diag"
    path.write_text(HEAD + body)
    d = stringdiag.load(path)["D"]
    assert _compile_error(d) is not None  # compile refuses it ...
    code = main(["check", str(path)])
    err = capsys.readouterr().err
    severity = "error" if defect else "warning"
    assert f"bad.diag:{line + 2}:{col}: {severity}:" in err, err  # ... and check said where, first
    assert code == (1 if defect else 0)
