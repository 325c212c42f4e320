"""Spline degrees (seed 000, Lai, Lim and Liu, Theorem 3.3), statically and on compiled modules.

The claims are the theorem's, computed here from its formulas (3, 5, 3^t, 3^(t+s) + 3^t - 3^s)
and, per input, from its recursion tau_i(X, Y) = phi_i(gamma_i(eps_s(X), beta_i(tau_{i-1}(X,
Y)))) (Sec. 1.8) with gamma of degree 2 in its first argument and 1 in its second (proof of
Thm 3.3). The static pass (analysis/degree.py) must give them; the compiled float64 module
(verify/measured_degree.py) must show them: along random lines inside one linear region where the
degree is at most 9, and by positive homogeneity (biases zero) for every degree up to 729.

Stacks are generated as .diag text: explicit compositions of the gallery's blocks. Each use
of EncoderBlock is a fresh instance with its own weights (its heads and feed-forward network
declare their learnables locally), as the seed's eps_s = phi_s alpha_s ... phi_1 alpha_1 has.
"""
from __future__ import annotations

import functools
import subprocess
import sys
from pathlib import Path

import pytest
import sympy
from hypothesis import given, settings, strategies as st

from stringdiag.analysis.degree import degree, describe
from stringdiag.cli.main import main
from stringdiag.elaborate.loader import load, loads

ROOT = Path(__file__).resolve().parent.parent
SPLINES = ROOT / "gallery" / "splines.diag"
DIMS = {"d": 2, "k": 2, "m": 2, "h": 2, "df": 4}  # tiny; df 4 so that fewer ReLU networks are dead


def stack(block: str, t: int) -> str:
    """A t-layer encoder (or decoder): t uses of the block, each with its own weights."""
    body = [f"  h{i} = {block}(h{i - 1})" for i in range(1, t + 1)]
    return "\n".join([f'import "{SPLINES}"', "diagram Stack(x: [s, d]) -> [s, d] {", "  h0 = x", *body,
                      f"  return h{t}", "}"])


def repeated(block: str, t: int) -> str:
    """The same stack written with ``repeat``: one box, composed t times by the analysis."""
    return "\n".join([f'import "{SPLINES}"', "diagram Stack(x: [s, d]) -> [s, d] {",
                      f"  h = repeat {t} {block}(x)", "  return h", "}"])


def encoder_decoder(s: int, t: int) -> str:
    """Sec. 1.8: an s-layer encoder eps_s, whose output feeds every one of t encoder-decoder
    blocks, tau_i(X, Y) = tau-block(eps_s(X), tau_{i-1}(X, Y)), tau_0(X, Y) = Y."""
    enc = [f"  e{i} = EncoderBlock(e{i - 1})" for i in range(1, s + 1)]
    dec = [f"  z{i} = EncoderDecoderBlock(e{s}, z{i - 1})" for i in range(1, t + 1)]
    return "\n".join([f'import "{SPLINES}"', "diagram Stack(x: [s, d], y: [t, d]) -> [t, d] {", "  e0 = x",
                      "  z0 = y", *enc, *dec, f"  return z{t}", "}"])


def per_input(s: int, t: int) -> dict[str, int]:
    """Degrees of tau_t in X and in Y by the seed's recursion: gamma is (2, 1) in (keys and
    values, queries), beta cubic, phi linear, eps_s of degree 3^s."""
    a, b = 0, 1  # tau_0 = Y
    for _ in range(t):
        a, b = 2 * 3 ** s + 3 * a, 3 * b
    return {"x": a, "y": b}


BLOCKS = [("ReluAttention", 3, None), ("MaskedReluAttention", 3, None),
          ("CrossReluHeads", 3, {"x": 2, "y": 1}),  # "quadratic in X ... linear in Y" (proof of Thm 3.3)
          ("EncoderBlock", 3, None), ("DecoderBlock", 3, None),
          ("EncoderDecoderBlock", 5, {"x": 2, "y": 3})]  # "quadratic in X and cubic in Y, and thus quintic"
STACKS = ([(f"encoder t={t}", stack("EncoderBlock", t), 3 ** t, None) for t in (1, 2, 3)]
          + [(f"decoder t={t}", stack("DecoderBlock", t), 3 ** t, None) for t in (1, 2, 3)]
          + [(f"repeat {t} {b}", repeated(b, t), 3 ** t, None) for t in (2, 3) for b in ("EncoderBlock", "DecoderBlock")]
          + [(f"encoder-decoder s={s} t={t}", encoder_decoder(s, t), 3 ** (t + s) + 3 ** t - 3 ** s, per_input(s, t))
             for s in range(4) for t in range(1, 4)])


TABLE = [(name, None, k, per) for name, k, per in BLOCKS] + STACKS
IDS = [row[0] for row in TABLE]


@functools.lru_cache(maxsize=None)
def diagram_of(name: str, text: str | None):
    """Parsed when a test asks (not at collection), once for both tests of a row."""
    return load(SPLINES)[name] if text is None else loads(text)["Stack"]


@pytest.mark.parametrize("name,text,claimed,per", TABLE, ids=IDS)
def test_theorem_3_3_statically(name, text, claimed, per):
    (r,) = degree(diagram_of(name, text))
    assert r.spline and r.degree == claimed
    if per is not None:
        assert r.per_input == per
    else:
        assert r.per_input == {"x": claimed}


@pytest.mark.parametrize("name,text,claimed,per", TABLE, ids=IDS)
def test_theorem_3_3_numerically(name, text, claimed, per):
    from stringdiag.verify.measured_degree import confirm

    checks = confirm(diagram_of(name, text), dims=DIMS)
    assert all(c.ok for c in checks), "\n".join(c.describe() for c in checks)
    wanted = {"all inputs": claimed, **(per or {})}
    by_scaling = {c.inputs: c.measured for c in checks if c.method.startswith("scaling")}
    assert by_scaling == wanted  # every claim, however large, by homogeneity
    on_lines = {c.inputs: c.measured for c in checks if "line" in c.method}
    assert on_lines == {k: v for k, v in wanted.items() if v <= 9}  # and by lines where differences reach


def test_the_theorem_table_reaches_729():
    assert max(k for _, _, k, _ in TABLE) == 729  # s = t = 3: 3^6 + 27 - 27


def test_a_line_measures_the_degree_and_a_wrong_claim_fails():
    """The line method, against hand-written references: a wrong claim (2, for cubic
    attention) is measured 3, so it fails; and the regions it finds are those of the
    scores' signs, computed here by hand from the module's Q and K (ReLU's only input)."""
    import torch

    from stringdiag.lower import compile
    from stringdiag.verify.measured_degree import line_degree, regions
    from stringdiag.verify.oracle import draw

    gen = torch.Generator().manual_seed(1)
    f = compile(load(SPLINES)["ReluAttention"], dims=DIMS, approximator="linear", dtype=torch.float64)
    draw(f, gen)
    measured = max(line_degree(f, [torch.randn(3, 2, generator=gen, dtype=torch.float64)], [0], 2, gen)[0]
                   for _ in range(4))
    assert measured == 3

    def signs(p):
        with torch.no_grad():
            return torch.einsum("if,jf->ij", f.Q(p), f.K(p)) > 0

    x, v = (torch.randn(3, 2, generator=gen, dtype=torch.float64) for _ in range(2))
    segs = regions(f, [x], [v])
    assert len(segs) > 1  # the line crosses ReLU boundaries
    (lo, hi), (lo2, hi2) = segs[:2]
    inside = [signs(x + tau * v) for tau in torch.linspace(lo, hi, 9).tolist()]
    assert all(torch.equal(s, inside[0]) for s in inside)
    assert not torch.equal(signs(x + (lo2 + hi2) / 2 * v), inside[0])


def test_scaling_tells_a_non_homogeneous_map():
    """Softmax attention is no polynomial: scaling finds no single exponent."""
    import torch

    from stringdiag.lower import compile
    from stringdiag.verify.measured_degree import scaling_degree
    from stringdiag.verify.oracle import draw

    gen = torch.Generator().manual_seed(2)
    f = compile(load(ROOT / "gallery" / "attention.diag")["SelfAttention"], dims={"d": 3, "k": 2},
                approximator="linear", dtype=torch.float64)
    draw(f, gen)
    k, why = scaling_degree(f, [torch.randn(4, 3, generator=gen, dtype=torch.float64)], [0])
    assert k is None and "not homogeneous" in why


def test_softmax_attention_is_no_spline_and_the_softmax_is_named():
    path = ROOT / "gallery" / "attention.diag"
    (r,) = degree(load(path)["SelfAttention"])
    assert r.degree is None and not r.spline
    lines = path.read_text().splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("diagram SelfAttention"))
    row = next(i for i in range(start, len(lines)) if "softmax(" in lines[i])
    (op, pos), (inner, _) = r.chain
    assert (op, pos.line, pos.col) == ("softmax", row + 1, lines[row].index("softmax(") + 1)
    assert inner == "exp" and "exp is not piecewise polynomial" in r.reason


def test_hardmax_attention_is_piecewise_linear_but_jumps():
    (r,) = degree(load(ROOT / "gallery" / "hardmax.diag")["HardmaxAttention"])
    assert r.degree == 1 and not r.spline and r.jump[0][0] == "hardmax"
    assert "not continuous" in describe(r)


RULES = loads('''dim s : seq
dim d : fixed
diagram ByVariable(x: [d], y: [d]) -> [d] {
  return x / y
}
diagram ByConstant(x: [d]) -> [d] {
  return (x * x) / 3
}
diagram Step(h: [d], x: [d]) -> [d], [d] {
  y = h * x
  return y, y
}
diagram Affine(h: [d], x: [d]) -> [d], [d] {
  y = relu(h + max(x, 2 * x))
  return y, y
}
diagram Growing(x: [s, d]) -> [d] {
  last, ys[i] = scan Step(ones<d>(), x[i])
  return last
}
diagram Settling(x: [s, d]) -> [d] {
  last, ys[i] = scan Affine(ones<d>(), x[i])
  return last
}
diagram Constants(x: [d]) -> [d] {
  return x * sqrt(exp(2))
}
''')


@pytest.mark.parametrize("name,text", [
    ("ByVariable", "not a spline: division by a value that depends on the input"),
    ("ByConstant", "2, a spline"),
    ("Growing", "no degree independent of the sequence length: the degree grows with the number of steps of the "
                "scan 'Step', at Step"),
    ("Settling", "1, a spline"),
    ("Constants", "1, a spline"),  # exp of a constant is a constant
])
def test_rules(name, text):
    (r,) = degree(RULES[name])
    assert describe(r).startswith(text)


@st.composite
def expressions(draw, depth=3, minus=True):
    """A scalar expression in x and y: its text, and its polynomial for sympy with every
    ReLU open (the identity) and max(a, b) read as a + b (each piece is a or b)."""
    x, y = sympy.symbols("x y")
    if depth == 0 or draw(st.booleans()):
        return draw(st.sampled_from([("x", x), ("y", y), ("2", sympy.Integer(2)), ("3", sympy.Integer(3))]))
    ops = ["+", "*", "relu", "max"] + (["-"] if minus else [])
    op = draw(st.sampled_from(ops))
    a = draw(expressions(depth - 1, minus))
    if op == "relu":
        return f"relu({a[0]})", a[1]
    b = draw(expressions(depth - 1, minus))
    if op == "max":
        return f"max({a[0]}, {b[0]})", a[1] + b[1]
    return f"({a[0]} {op} {b[0]})", {"+": a[1] + b[1], "-": a[1] - b[1], "*": a[1] * b[1]}[op]


def _static(text: str):
    (r,) = degree(loads(f"diagram E(x: [], y: []) -> [] {{\n  return {text}\n}}")["E"])
    return r


@settings(max_examples=40, deadline=None)
@given(expressions(minus=False))
def test_degrees_without_cancellation_are_sympys(e):
    """Positive coefficients cannot cancel: the static degrees are the polynomial's, exactly."""
    text, poly = e
    r = _static(text)
    p = sympy.Poly(sympy.expand(poly), *sympy.symbols("x y"))
    assert r.degree == p.total_degree()
    assert r.per_input == {"x": p.degree(0), "y": p.degree(1)}


@settings(max_examples=40, deadline=None)
@given(expressions())
def test_degrees_bound_sympys(e):
    """With subtraction, terms may cancel: the static degree is an upper bound."""
    text, poly = e
    r = _static(text)
    p = sympy.Poly(sympy.expand(poly), *sympy.symbols("x y"))
    assert r.degree >= p.total_degree()
    assert r.per_input["x"] >= p.degree(0) and r.per_input["y"] >= p.degree(1)


def test_cli_degree(capsys):
    assert main(["info", str(SPLINES), "-d", "EncoderDecoderBlock", "--degree"]) == 0
    out = capsys.readouterr().out
    assert "degree: 5, a spline (continuous piecewise polynomial); in x: 2, in y: 3" in out.splitlines()


def test_cli_degree_json_and_not_a_spline(capsys):
    import json

    assert main(["info", str(ROOT / "gallery" / "attention.diag"), "-d", "SelfAttention", "--degree", "--json"]) == 0
    (r,) = json.loads(capsys.readouterr().out)["degree"]
    assert r["degree"] is None and r["at"].startswith("softmax (") and "> exp (prelude.diag:" in r["at"]


def test_cli_confirm(capsys):
    assert main(["info", str(SPLINES), "-d", "CrossReluHeads", "--confirm"]) == 0
    out = capsys.readouterr().out.splitlines()
    checks = [line for line in out if line.startswith("  ") and "measured" in line]
    assert len(checks) == 6 and all(line.startswith("  confirmed: ") for line in checks)


def test_degree_imports_no_torch():
    code = ("import sys; from stringdiag.cli.main import main; "
            f"main(['info', {str(SPLINES)!r}, '-d', 'EncoderDecoderBlock', '--degree']); "
            "assert 'torch' not in sys.modules, 'torch imported'")
    subprocess.run([sys.executable, "-c", code], check=True, cwd=ROOT, capture_output=True)


def test_help_names_degree(capsys):
    with pytest.raises(SystemExit):
        main(["info", "--help"])
    out = capsys.readouterr().out
    assert "--degree" in out and "--confirm" in out
