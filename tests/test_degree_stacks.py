"""Degrees of ``repeat`` stacks (analysis/degree.py) without one pass per copy.

The reference is the stack written out: t calls of the block, each taking the previous one's
output, which the pass walks call by call. A stack whose state settles (or cycles) is followed
by arithmetic whatever its count; one whose degree still grows is refused with the figure.
"""
from __future__ import annotations

import pytest

from stringdiag.analysis import degree as degree_module
from stringdiag.analysis.degree import degree
from stringdiag.cli.main import main
from stringdiag.elaborate.loader import loads
from stringdiag.errors import DiagError

HEAD = "dim s : seq\ndim d : fixed\nlearn F : [d] -> [d]\nlearn G : [d] -> [d]\n"
BLOCKS = {  # name: (parameters, body); the first parameter is the one carried from copy to copy
    "Residual": ("x", "x + F(relu(x))"),  # degree 1 throughout: a fixed point at once
    "Square": ("x", "x * F(x)"),  # doubles: 2^t
    "Mixed": ("xy", "relu(x) * G(y) + y"),  # x's degree 1, y's grows by one a copy
    "Quadratic": ("xy", "F(y) * G(y)"),  # constant in x: settles after one copy
    "Cubic": ("xy", "x * x * relu(y) + F(y)"),
    "Soft": ("x", "x + exp(x)"),  # no polynomial piece from the first copy on
}


def _source(name: str, t: int, written_out: bool) -> str:
    names, body = BLOCKS[name]
    params = ", ".join(f"{n}: [s, d]" for n in names)
    rest = "".join(f", {n}" for n in names[1:])
    ins = ", ".join(f"{n}0: [s, d]" if n == "x" else f"{n}: [s, d]" for n in names)
    if written_out:
        calls = "".join(f"  x{i} = B(x{i - 1}{rest})\n" for i in range(1, t + 1))
        main_body = f"{calls}  return x{t}\n"
    else:
        main_body = f"  h = repeat {t} B(x0{rest})\n  return h\n"
    return (f"{HEAD}diagram B({params}) -> [s, d] {{\n  return {body}\n}}\n"
            f"diagram Main({ins}) -> [s, d] {{\n{main_body}}}\n")


@pytest.mark.parametrize("name", sorted(BLOCKS))
@pytest.mark.parametrize("shared", [False, True])
def test_a_stack_has_the_degree_of_its_copies_written_out(name, shared):
    for t in range(1, 8):
        src = _source(name, t, False)
        if shared:
            src = src.replace(f"repeat {t} B(x0", f"repeat {t} shared B(x0")
        got = [r.as_dict() for r in degree(loads(src)["Main"])]
        want = [r.as_dict() for r in degree(loads(_source(name, t, True))["Main"])]
        for g, w in zip(got, want):
            for k in ("at", "text", "output"):
                g.pop(k), w.pop(k)
        assert got == want, (name, t)


def _counting(monkeypatch, most: int = 100) -> list[int]:
    """Counts the passes over a diagram (a memo hit counts too: the loop was one per copy)."""
    calls = [0]
    run = degree_module.DegreePass.run

    def counted(self, d, ins):
        calls[0] += 1
        assert calls[0] < most, "one pass per copy of the stack"
        return run(self, d, ins)

    monkeypatch.setattr(degree_module.DegreePass, "run", counted)
    return calls


@pytest.mark.parametrize("shared", ["", "shared "])
@pytest.mark.parametrize("name, want", [("Residual", 1), ("Quadratic", 2), ("Soft", None)])
def test_a_billion_copies_that_settle_take_a_few_passes(monkeypatch, shared, name, want):
    calls = _counting(monkeypatch)
    src = _source(name, 1, False).replace("repeat 1 B", f"repeat 1000000000 {shared}B")
    (r,) = degree(loads(src)["Main"])
    assert r.degree == want and calls[0] < 10


def test_a_growing_degree_is_refused_with_the_figure(monkeypatch):
    _counting(monkeypatch, 5000)
    src = _source("Square", 1, False).replace("repeat 1 B", "repeat 1000000 B")
    with pytest.raises(DiagError, match=r"still grows after 1,000 copies .*1,000,000 copies are over the 1,000"):
        degree(loads(src)["Main"])
    # just under the limit, it is computed: 2^999
    (r,) = degree(loads(src.replace("repeat 1000000 B", "repeat 999 B"))["Main"])
    assert r.degree == 2 ** 999


def test_cli_refuses_in_words(tmp_path, capsys, monkeypatch):
    _counting(monkeypatch, 5000)
    f = tmp_path / "grow.diag"
    f.write_text(_source("Square", 1, False).replace("repeat 1 B", "repeat 1000000000 B"))
    assert main(["info", str(f), "-d", "Main", "--degree"]) == 1
    err = capsys.readouterr().err
    assert f"{f}:" in err and "error: refusing to compute the degree" in err and "Traceback" not in err
