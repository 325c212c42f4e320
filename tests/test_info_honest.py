"""``info`` tells the truth about what ``compile`` builds: learnable boxes and costs inside
``scan`` bodies count, and the dimension list is every size the compiler asks for.

References are independent of the analysis: the compiled module's own weight sets and
parameters, the same work written as a parallel map (which the expansion-based cost
analysis already handles and ``test_info_linear.py`` checks against ``expand()``), and the
compiler's refusal when a size is missing.
"""
from __future__ import annotations

import pytest

import stringdiag
from stringdiag.analysis.complexity import analyse
from stringdiag.analysis.combine import parameter_count
from stringdiag.cli.summary import summarize

ELMAN = """dim s : seq
dim d, h : fixed
diagram Cell(st: [h], x: [d]) -> [h], [h] {
  learn W : [h], [d] -> [h]
  n = W(st, x)
  return n, n
}
diagram Elman(x: [s, d]) -> [s, h] {
  _last, y[i] = scan Cell(zeros<h>(), x[i])
  return y
}
diagram Step(x: [d]) -> [h] {
  _n, o = Cell(zeros<h>(), x)
  return o
}
diagram Parallel(x: [s, d]) -> [s, h] {
  y[i] = Step(x[i])
  return y
}
diagram Twice(x: [s, d]) -> [s, h] {
  _a, y[i] = scan Cell(zeros<h>(), x[i])
  _b, z[i] = scan Cell(zeros<h>(), x[i])
  return y + z
}
"""


@pytest.fixture(scope="module")
def elman():
    return stringdiag.loads(ELMAN, "elman.diag")


def test_learnable_boxes_inside_a_scan_are_listed_as_the_compiler_names_them(elman):
    listed = {entry["name"] for entry in summarize(elman["Elman"])["learnable"]}
    gm = stringdiag.compile(elman["Elman"], dims={"d": 3, "h": 4})
    compiled = {key[2] for key in gm.weight_sets if key[0] == "learn"}
    assert listed == compiled == {"Cell#1/W"}


def test_two_scans_of_one_cell_are_two_weight_sets(elman):
    listed = {entry["name"] for entry in summarize(elman["Twice"])["learnable"]}
    gm = stringdiag.compile(elman["Twice"], dims={"d": 3, "h": 4})
    assert listed == {key[2] for key in gm.weight_sets if key[0] == "learn"}
    assert len(listed) == 2


def test_parameters_of_a_scan_agree_with_the_compiled_module(elman):
    for name in ("Elman", "Twice"):
        gm = stringdiag.compile(elman[name], dims={"d": 3, "h": 4})
        assert parameter_count(elman[name], {"d": 3, "h": 4}) == sum(p.numel() for p in gm.parameters())


def test_a_scan_costs_what_the_same_steps_cost_in_parallel(elman):
    scanned, parallel = analyse(elman["Elman"]), analyse(elman["Parallel"])
    assert scanned.time == parallel.time == "s·d·h^2"
    assert scanned.seq_time == "s"


def test_a_scan_body_is_not_free():
    # a cell with a quadratic body: the scan is s times it, not the size of its inputs and outputs
    prog = stringdiag.loads("""dim s : seq
dim d : fixed
diagram Cell(st: [d], x: [d]) -> [d], [d] {
  o[a, b] = st[a] * x[b]
  n = sum_b o[:, b]
  return n, n
}
diagram R(x: [s, d]) -> [s, d] {
  _l, y[i] = scan Cell(zeros<d>(), x[i])
  return y
}""")
    assert analyse(prog["R"]).memory.startswith("s·d^2")


GALLERY = ["anatomy.diag", "attention.diag", "transformer.diag", "bahdanau.diag"]


def _compilable(prog):
    for name in prog.diagrams:
        d = prog[name]
        if d.generics or any(d.expand().record(b).kind == "abstract" for b in d.expand().boxes()):
            continue
        yield name, d


@pytest.mark.parametrize("file", GALLERY)
def test_the_dimension_list_is_every_size_the_compiler_needs(file):
    prog = stringdiag.load(f"gallery/{file}")
    for name, d in _compilable(prog):
        dims = summarize(d)["dimensions"]
        sizes = {n: 2 + k for k, (n, kind) in enumerate(dims.items()) if kind == "fixed"}
        stringdiag.compile(d, dims=sizes)  # no "give sizes for ..." error
        for n in sizes:
            decl = prog.lookup_dim(n)
            if decl is not None and decl.default is None:
                with pytest.raises(stringdiag.DiagError, match="give sizes"):
                    stringdiag.compile(d, dims={k: v for k, v in sizes.items() if k != n})


def test_dimensions_used_only_inside_definitions_are_listed():
    prog = stringdiag.load("gallery/anatomy.diag")
    assert "k" in summarize(prog["M1"])["dimensions"]
