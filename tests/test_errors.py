"""Every error a user can make is reported with the exact message and the exact place.

Each row of ``CASES`` is a bad source, the 1-based (line, column) the error must point
at, and the exact message.  Rows marked ``xfail(strict=True)`` record the message or
position a user *should* get where the tool today says something wrong or misleading;
they start passing (and so fail, being strict) once the tool is fixed.

Most sources start with ``HEAD`` (four lines), so their diagram bodies begin on line 5.
"""
from __future__ import annotations

import pytest

import stringdiag
from stringdiag import DiagError, Pos

FILE = "x.diag"

HEAD = """\
dim s, t : seq
dim d, k, h : fixed
learn Q, K : [d] -> [k]
learn V : [d] -> [d]
"""


def H(body: str) -> str:
    """A source made of HEAD and ``body``: line 1 of ``body`` is line 5 of the file."""
    return HEAD + body


def xfail(reason: str):
    return pytest.mark.xfail(strict=True, reason=reason)


EOF_POS = ("lark's $END token borrows the position of the LAST TOKEN, so the caret sits under "
           "that token's first character; parser.py means to point just past the last character")

CASES = [
    # -- syntax: unexpected token / character / end of file -----------------------------
    pytest.param("dim s seq\n", 1, 7,
                 "unexpected 'seq'; expected one of ',', ':'", id="syntax-unexpected-token"),
    pytest.param("dim s : seq\ndim d : fixed $\n", 2, 15,
                 "unexpected character '$'", id="syntax-unexpected-char"),
    pytest.param(H("diagram A(x: [s, d]) -> [s, d] {\n  y = x @ x\n  return y\n}"), 6, 9,
                 "unexpected character '@'", id="syntax-unexpected-char-in-body"),
    pytest.param("dim σ : seq\n", 1, 5, "unexpected character 'σ'", id="syntax-non-ascii-name"),
    pytest.param(H("diagram A(x: [s, d]) [s, d] {\n  return x\n}"), 5, 22,
                 "unexpected '['; expected '->'", id="syntax-missing-arrow"),
    pytest.param(H("dim z : big\n"), 5, 9,
                 "unexpected 'big'; expected one of 'fixed', 'seq'", id="syntax-bad-dim-kind"),
    pytest.param(H("diagram A(x: [s, d] y: [s, d]) -> [s, d] {\n  return x\n}"), 5, 21,
                 "unexpected 'y'; expected one of ')', ','", id="syntax-missing-comma"),
    pytest.param("}\n", 1, 1,
                 "unexpected '}'; expected one of 'abstract', 'diagram', 'dim', 'fixed', 'import', "
                 "'learn', 'random', end of file", id="syntax-stray-brace"),
    pytest.param(H("diagram A(x: [s, d]) -> [s, d] {\n  y == x\n  return y\n}"), 6, 6,
                 "unexpected '='; expected one of '(', '-', 'repeat', 'scan', a name, a number, sum_<index>",
                 id="syntax-double-equals"),
    pytest.param(H("diagram A(x: [s, d]) -> [s, d] {\n  return\n}"), 7, 1,
                 "unexpected '}'; expected one of '(', '-', a name, a number, sum_<index>",
                 id="syntax-empty-return"),
    pytest.param("dim", 1, 4, "unexpected end of file; expected a name",
                 id="syntax-eof-after-keyword"),
    pytest.param(H("diagram A(x: [s, d]) -> [s, d] {\n  y = Q(\n"), 6, 9,
                 "unexpected end of file; expected one of '(', ')', '-', a name, a number, sum_<index>",
                 id="syntax-eof-in-call"),
    pytest.param("dim s : seq\ndiagram A(x: [s]) -> [s] {\n  return x\n", 3, 11,
                 "unexpected end of file", id="syntax-eof-missing-brace"),

    # -- undefined names, dimensions and boxes (with "did you mean") --------------------
    pytest.param(H("diagram A(x: [s, d]) -> [s, d] {\n  y = V(xx)\n  return y\n}"), 6, 9,
                 "undefined name 'xx'; did you mean 'x'?", id="undefined-name-hint"),
    pytest.param(H("diagram A(x: [s, d]) -> [s, d] {\n  return z\n}"), 6, 10,
                 "undefined name 'z'", id="undefined-name"),
    pytest.param(H("diagram A(x: [s, dd]) -> [s, d] {\n  return x\n}"), 5, 18,
                 "undefined dimension 'dd'; did you mean 'd'?", id="undefined-dim-hint"),
    pytest.param(H("learn F : [e] -> [d]\n"), 5, 12,
                 "undefined dimension 'e'", id="undefined-dim-in-box"),
    pytest.param(H("diagram A(x: [s, d]) -> [s, d] {\n  return softmax<e>(x)\n}"), 6, 18,
                 "undefined dimension 'e'", id="undefined-dim-in-generic-args"),
    pytest.param(H("diagram A(x: [s, d]) -> [s, d] {\n  return softmx(x)\n}"), 6, 10,
                 "undefined box 'softmx'; did you mean 'softmax'?", id="undefined-box-hint-prelude"),
    pytest.param(H("diagram A(x: [s, d]) -> [s, k] {\n  return q(x)\n}"), 6, 10,
                 "undefined box 'q'; did you mean 'Q'?", id="undefined-box-hint-case"),
    pytest.param(H("diagram A(x: [s, d]) -> [s, d] {\n  return Frob(x)\n}"), 6, 10,
                 "undefined box 'Frob'", id="undefined-box"),
    pytest.param(H("diagram A(x: [s, d]) -> [s, d] {\n  return V\n}"), 6, 10,
                 "'V' is a box; apply it to its inputs: V(...)", id="box-used-as-value"),
    pytest.param(H("diagram A(x: [s, d]) -> [s, d] {\n  return x(x)\n}"), 6, 10,
                 "'x' is a wire, not a box; index it with [...] instead", id="wire-used-as-box"),
    pytest.param(H("diagram A(x: [s, d]) -> [s, d] {\n  return d(x)\n}"), 6, 10,
                 "'d' is a dimension, not a box", id="dimension-used-as-box"),

    # -- box inputs: types, arity, generics ---------------------------------------------
    pytest.param(H("diagram A(x: [s, k]) -> [s, k] {\n  return Q(x)\n}"), 6, 12,
                 "input 1 of 'Q' must have type [d] but has type [s, k]", id="input-type"),
    pytest.param(H("diagram A(x: [s, d]) -> [s, k] {\n  y[i] = Q(x[:, i])\n  return y\n}"), 6, 12,
                 "input 1 of 'Q' must have type [d] but has type [s]", id="input-type-after-index"),
    pytest.param(H("diagram A(x: [s, d]) -> [s, k] {\n  return Q(x, x)\n}"), 6, 10,
                 "'Q' takes 1 input but 2 were given", id="arity-too-many"),
    pytest.param(H("diagram A(x: [s, d]) -> [s, k] {\n  return Q()\n}"), 6, 10,
                 "'Q' takes 1 input but 0 were given", id="arity-none"),
    pytest.param(H("diagram A(x: [s, d]) -> [s, s] {\n  return causal()\n}"), 6, 10,
                 "cannot infer dimension 'n' of 'causal'; give it explicitly: causal<n>(...)",
                 id="generic-cannot-infer"),
    pytest.param(H("diagram A(x: [s, d]) -> [s, d] {\n  a, b = split(x)\n  return a\n}"), 6, 10,
                 "cannot infer the dimension parameters of 'split' from its inputs; "
                 "give them explicitly: split<n, m>(...)", id="generic-cannot-infer-from-sum"),
    pytest.param(H("diagram A(x: [s, d]) -> [s, d] {\n  return softmax<d, d>(x)\n}"), 6, 10,
                 "'softmax' has 1 dimension parameter(s) but 2 were given", id="generic-too-many"),
    pytest.param(H("diagram A(x: [s, d]) -> [s, d] {\n  return elu1<d>(x)\n}"), 6, 10,
                 "'elu1' has 0 dimension parameter(s) but 1 were given", id="generic-on-plain-diagram"),
    pytest.param(H("diagram A(x: [s, d]) -> [s, d] {\n  return softmax<k>(x)\n}"), 6, 21,
                 "input 1 of 'softmax' must have type [k] but has type [s, d]",
                 id="generic-explicit-mismatch"),

    # -- indices --------------------------------------------------------------------------
    pytest.param(H("diagram A(x: [s, d], y: [t, d]) -> [s, d] {\n  z[i] = x[i] + y[i]\n  return z\n}"),
                 6, 19, "index 'i' ranges over s elsewhere but over t here (axis 1 of 'y' : [t, d])",
                 id="index-range-conflict"),
    pytest.param(H("diagram A(x: [s, d], y: [t, d]) -> [d] {\n  return sum_j x[j] * y[j]\n}"), 6, 25,
                 "index 'j' ranges over s elsewhere but over t here (axis 1 of 'y' : [t, d])",
                 id="summed-index-range-conflict"),
    pytest.param(H("diagram A(x: [s, d]) -> [s, d] {\n  y = x[i]\n  return y\n}"), 6, 9,
                 "index 'i' is not bound: bind it on the left (y[i] = ...) or sum over it (sum_i ...)",
                 id="index-unbound"),
    pytest.param(H("diagram A(x: [s, s]) -> [s] {\n  y[i] = x[i, i]\n  return y\n}"), 6, 15,
                 "index 'i' is used twice on 'x' (diagonals are not supported)", id="index-twice-right"),
    pytest.param(H("diagram A(x: [s, s]) -> [s, s] {\n  y[i, i] = x[i, :]\n  return y\n}"), 6, 8,
                 "index 'i' appears twice on 'y'", id="index-twice-left"),
    pytest.param(H("diagram A(x: [s, d]) -> [s, d] {\n  y[i, j] = x\n  return y\n}"), 6, 5,
                 "index 'i' is not used on the right-hand side, so its range is unknown",
                 id="index-unused-on-right"),
    pytest.param(H("learn P : [d] -> [d], [d]\n"
                   "diagram A(x: [s, d]) -> [s, d] {\n  a[i], b = P(x)\n  return b\n}"), 7, 5,
                 "index 'i' is not used on the right-hand side, so its range is unknown",
                 id="index-unused-on-right-multi"),
    pytest.param(H("learn P : [d] -> [d], [d]\n"
                   "diagram A(x: [s, d]) -> [s, d] {\n  a[i], b = P(x[i])\n  return a\n}"), 7, 9,
                 "'b' depends on index 'i'; bind it on the left: b[i]", id="index-missing-on-one-name"),
    pytest.param(H("learn Cell : [h], [d] -> [h], [h], [h]\n"
                   "diagram R(h0: [h], x: [s, d]) -> [s, h] {\n  _, y[i], z = scan Cell(h0, x[i])\n"
                   "  return y\n}"), 7, 12,
                 "'z' depends on index 'i'; bind it on the left: z[i]", id="scan-output-missing-index"),
    pytest.param(H("diagram A(x: [s, d]) -> [s, d] {\n  y[i] = sum_j x[i]\n  return y\n}"), 6, 10,
                 "summed index 'j' is never used", id="summed-index-unused"),
    pytest.param(H("diagram A(x: [s, d]) -> [d] {\n  y[i] = sum_i x[i]\n  return y\n}"), 6, 10,
                 "index 'i' is already bound in this statement", id="summed-index-already-bound"),
    pytest.param(H("diagram A(x: [s, d]) -> [s] {\n  y[i] = sum_{j, 2} x[i, j]\n  return y\n}"), 6, 10,
                 "'2' is not an index name", id="summed-index-not-a-name"),
    pytest.param(H("diagram A(x: [s, d]) -> [s, d] {\n  y[i, j, l] = x[i, j, l]\n  return y\n}"), 6, 16,
                 "'x' has 2 axes [s, d] but 3 indices were given", id="too-many-indices"),
    pytest.param(H("diagram A(x: [s, d, k], y: [s, d, d]) -> [s, k] {\n"
                   "  z[i] = sum_j x[i, j] * y[i, j]\n  return z\n}"), 6, 26,
                 "cannot multiply values of types [k] and [d] elementwise; index the axes to contract them",
                 id="contraction-elementwise-mismatch"),
    pytest.param(H("diagram A(x: [s, d]) -> [s, d] {\n  y[i] = d[i]\n  return x\n}"), 6, 10,
                 "'d' is a constant, not a wire; it cannot be indexed", id="dimension-indexed"),
    pytest.param(H("diagram A(x: [s, d]) -> [s, d] {\n  y[i] = 3[i]\n  return x\n}"), 6, 10,
                 "'3' is a constant, not a wire; it cannot be indexed", id="number-indexed"),

    # -- definitions: wires and declarations named twice -----------------------------------
    pytest.param(H("diagram A(x: [s, d]) -> [s, d] {\n  y = x\n  y = x\n  return y\n}"), 7, 3,
                 "'y' is already defined (at x.diag:6:3); wires are named once", id="wire-redefined"),
    pytest.param(H("diagram A(x: [s, d]) -> [s, d] {\n  x = V(x)\n  return x\n}"), 6, 3,
                 "'x' is already defined (at x.diag:5:11); wires are named once", id="input-redefined"),
    pytest.param(H("diagram A(x: [s, d], x: [s, d]) -> [s, d] {\n  return x\n}"), 5, 22,
                 "input 'x' is declared twice", id="input-declared-twice"),
    pytest.param(H("fixed f<n, n> : [n] -> [n]\n"), 5, 12,
                 "dimension parameter 'n' is declared twice", id="duplicate-generic-parameter"),
    pytest.param(H("dim d : fixed\n"), 5, 5,
                 "'d' is already defined (first defined at x.diag:2:5)", id="duplicate-dim"),
    pytest.param(H("learn Q : [d] -> [d]\n"), 5, 7,
                 "'Q' is already defined (first defined at x.diag:3:7)", id="duplicate-box"),
    pytest.param(H("learn d : [d] -> [d]\n"), 5, 7,
                 "'d' is already defined (first defined at x.diag:2:5)", id="box-named-like-dim"),
    pytest.param(H("diagram A(x: [d]) -> [d] {\n  return x\n}\ndiagram A(x: [d]) -> [d] {\n  return x\n}\n"),
                 8, 9, "'A' is already defined (first defined at x.diag:5:9)", id="duplicate-diagram"),
    pytest.param(H("diagram A(x: [s, d]) -> [s, d] {\n  learn F : [d] -> [d]\n  learn F : [d] -> [d]\n"
                   "  return F(x)\n}"), 7, 9,
                 "'F' is already defined in this diagram", id="duplicate-local-learnable"),
    pytest.param(H("diagram A(x: [s, d]) -> [s, d] {\n  learn x : [d] -> [d]\n  return x\n}"), 6, 9,
                 "'x' is already defined in this diagram", id="local-learnable-named-like-input"),
    pytest.param(H("diagram A(x: [s, d]) -> [s, d] {\n  fixed F : [d] -> [d]\n  return F(x)\n}"), 6, 3,
                 "only learnable and random boxes can be declared inside a diagram, not 'fixed'",
                 id="local-fixed-box"),
    pytest.param(H("diagram A(x: [s, d]) -> [s, d] {\n  abstract F : [d] -> [d]\n  return F(x)\n}"), 6, 3,
                 "only learnable and random boxes can be declared inside a diagram, not 'abstract'",
                 id="local-abstract-box"),

    # -- returns and recursion ---------------------------------------------------------------
    pytest.param(H("diagram A(x: [s, d]) -> [s, d], [s, d] {\n  return x\n}"), 6, 3,
                 "diagram 'A' declares 2 output(s) but returns 1", id="return-too-few"),
    pytest.param(H("diagram A(x: [s, d]) -> {\n  return x\n}"), 6, 3,
                 "diagram 'A' declares 0 output(s) but returns 1", id="return-too-many"),
    pytest.param(H("diagram A(x: [s, d]) -> [s, k] {\n  return x\n}"), 6, 10,
                 "output 1 of 'A' has type [s, d] but the diagram declares [s, k]", id="return-type"),
    pytest.param(H("diagram A<n>(x: [n]) -> [n, n] {\n  return x\n}"), 6, 10,
                 "output 1 of 'A' has type [n] but the diagram declares [n, n]", id="return-type-generic"),
    pytest.param(H("diagram A(x: [s, d]) -> [s, d + k] {\n  return cat(x, x)\n}"), 6, 10,
                 "output 1 of 'A' has type [s, 2*d] but the diagram declares [s, d + k]",
                 id="return-type-dim-arithmetic"),
    pytest.param(H("diagram A(x: [s, d]) -> [s, d] {\n  y = x\n}"), 5, 9,
                 "diagram 'A' has no return statement", id="return-missing"),
    pytest.param(H("diagram A(x: [s, d]) -> [s, d] {\n  return x\n  y = x\n}"), 6, 3,
                 "return must be the last statement of a diagram", id="return-not-last"),
    pytest.param(H("diagram A(x: [s, d]) -> [s, d] {\n  return x\n  return x\n}"), 7, 3,
                 "a diagram has exactly one return statement", id="return-twice"),
    pytest.param(H("diagram A(x: [d]) -> [d] {\n  return A(x)\n}"), 6, 10,
                 "diagram 'A' uses itself (recursion is not allowed)", id="recursion"),
    pytest.param(H("diagram A(x: [d]) -> [d] {\n  return B(x)\n}\n"
                   "diagram B(x: [d]) -> [d] {\n  return A(x)\n}"),
                 9, 10, "diagram 'A' uses itself via 'B' (recursion is not allowed)", id="recursion-mutual"),

    # -- scan --------------------------------------------------------------------------------
    pytest.param(H("learn Cell : [h], [d] -> [h], [h]\n"
                   "diagram R(h0: [s, h], x: [s, d]) -> [h], [s, h] {\n"
                   "  hN, y[i] = scan Cell(h0[i], x[i])\n  return hN, y\n}"), 7, 24,
                 "the carried state (input 1 of 'Cell') must not depend on the scanned index 'i'",
                 id="scan-state-depends-on-scanned-index"),
    pytest.param(H("learn Cell : [d], [d] -> [h], [h]\n"
                   "diagram R(h0: [d], x: [s, d]) -> [h], [s, h] {\n"
                   "  hN, y[i] = scan Cell(h0, x[i])\n  return hN, y\n}"), 7, 19,
                 "'Cell' cannot be scanned: its first input and first output (the carried state) "
                 "must have the same type", id="scan-state-types-differ"),
    pytest.param(H("diagram C(h: [h], x: [d]) -> [k], [h] {\n  return Q(x), h\n}\n"
                   "diagram R(h0: [h], x: [s, d]) -> [k], [s, h] {\n"
                   "  hN, y[i] = scan C(h0, x[i])\n  return hN, y\n}"), 9, 19,
                 "'C' cannot be scanned: its first input and first output (the carried state) "
                 "must have the same type", id="scan-diagram-state-types-differ"),
    pytest.param(H("learn Cell : [h], [d] -> [h], [h]\n"
                   "diagram R(h0: [d], x: [s, d]) -> [h], [s, h] {\n"
                   "  hN, y[i] = scan Cell(h0, x[i])\n  return hN, y\n}"), 7, 24,
                 "input 1 of 'Cell' must have type [h] but has type [d]", id="scan-initial-state-type"),
    pytest.param(H("learn Cell : [h], [d] -> [h], [h]\n"
                   "diagram R(h0: [h], x: [s, d]) -> [h] {\n  hN = scan Cell(h0, x[i])\n  return hN\n}"),
                 7, 3, "scan needs the final state and at least one output: h, y[t] = scan Cell(h0, x[t])",
                 id="scan-one-target"),
    pytest.param(H("learn Cell : [h], [d] -> [h], [h]\n"
                   "diagram R(h0: [h], x: [s, d]) -> [h], [s, h] {\n"
                   "  hN, y = scan Cell(h0, x)\n  return hN, y\n}"), 7, 3,
                 "scan iterates exactly one index: bind it on the outputs but not on the state "
                 "(h, y[t] = scan Cell(h0, x[t]))", id="scan-no-index"),
    pytest.param(H("learn Cell : [h], [d] -> [h], [h]\n"
                   "diagram R(h0: [h], x: [s, t, d]) -> [h], [s, t, h] {\n"
                   "  hN, y[i, j] = scan Cell(h0, x[i, j])\n  return hN, y\n}"), 7, 3,
                 "scan iterates exactly one index: bind it on the outputs but not on the state "
                 "(h, y[t] = scan Cell(h0, x[t]))", id="scan-two-indices"),
    pytest.param(H("learn Cell : [h], [d] -> [h], [h]\n"
                   "diagram R(h0: [h], x: [d]) -> [h], [s, h] {\n"
                   "  hN, y[i] = scan Cell(h0, x)\n  return hN, y\n}"), 7, 19,
                 "no argument of 'Cell' is indexed by the scanned index 'i'", id="scan-index-unused"),
    pytest.param(H("learn Cell : [h], [d] -> [h], [h]\n"
                   "diagram R(h0: [h], x: [s, t, d]) -> [h], [s, t, h] {\n"
                   "  hN, y[i] = scan Cell(h0, x[i])\n  return hN, y\n}"), 7, 19,
                 "scan does not apply over extra axes; index every argument explicitly",
                 id="scan-extra-axes"),

    # -- broadcasting and multi-output boxes --------------------------------------------------
    pytest.param(H("diagram A(x: [s, d], y: [t, d]) -> [s, d] {\n  return x + y\n}"), 6, 10,
                 "'+' cannot combine inputs of types [t, d] and [s, d]: extra axes are matched from "
                 "the right; index them to say which go together", id="broadcast-mismatch-operator"),
    pytest.param(H("learn P : [d], [d] -> [d]\n"
                   "diagram A(x: [s, d], y: [t, d]) -> [s, d] {\n  return P(x, y)\n}"), 7, 15,
                 "'P' cannot combine inputs of types [t, d] and [s, d]: extra axes are matched from "
                 "the right; index them to say which go together", id="broadcast-mismatch-box"),
    pytest.param(H("learn P : [d] -> [d], [d]\n"
                   "diagram A(x: [s, d]) -> [s, d] {\n  return P(x) + x\n}"), 7, 10,
                 "'P' has 2 outputs; assign them to as many names (a, b = P(...))",
                 id="multi-output-in-expression"),
    pytest.param(H("learn P : [d] -> [d], [d]\n"
                   "diagram A(x: [s, d]) -> [s, d] {\n  y = P(x)\n  return y\n}"), 7, 7,
                 "'P' has 2 outputs; assign them to as many names (a, b = P(...))",
                 id="multi-output-to-one-name"),
    pytest.param(H("learn P : [d] -> [d], [d]\n"
                   "diagram A(x: [s, d]) -> [s, d] {\n  a, b, c = P(x)\n  return a\n}"), 7, 3,
                 "'P' has 2 output(s) but 3 names are assigned", id="multi-output-too-many-names"),
    pytest.param(H("diagram A(x: [s, d]) -> [s, d] {\n  a, b = x + x\n  return a\n}"), 6, 10,
                 "2 names on the left need a box with 2 outputs on the right", id="many-names-no-box"),
]


def caret_line(col: int) -> str:
    return "    " + " " * (col - 1) + "^"


@pytest.mark.parametrize("source, line, col, message", CASES)
def test_error_message_and_position(source, line, col, message):
    with pytest.raises(DiagError) as info:
        stringdiag.loads(source, file=FILE)
    err = info.value
    assert (err.message, err.pos) == (message, Pos(FILE, line, col))
    head, text, caret = err.render().split("\n")
    assert head == f"{FILE}:{line}:{col}: error: {message}"
    assert text == "    " + source.splitlines()[line - 1].expandtabs(1)
    assert caret == caret_line(col)


def test_table_is_large_enough():
    assert len(CASES) >= 30


# -- render: the caret sits under the offending column -------------------------------------

def test_render_puts_caret_under_the_column():
    src = H("diagram A(x: [s, d]) -> [s, d] {\n  y = V(xx)\n  return y\n}")
    with pytest.raises(DiagError) as info:
        stringdiag.loads(src, file="net.diag")
    assert info.value.render() == (
        "net.diag:6:9: error: undefined name 'xx'; did you mean 'x'?\n"
        "      y = V(xx)\n"
        "            ^"
    )


def test_render_with_a_tab_keeps_the_caret_aligned():
    # lark counts a tab as one column, and render expands it to one space: they agree
    src = H("diagram A(x: [s, d]) -> [s, d] {\n\treturn\tzz\n}")
    with pytest.raises(DiagError) as info:
        stringdiag.loads(src, file=FILE)
    lines = info.value.render().split("\n")
    assert lines[0] == "x.diag:6:9: error: undefined name 'zz'"
    assert lines[1] == "     return zz"
    assert lines[2] == "    " + " " * 8 + "^"
    assert lines[1][len(lines[2]) - 1:].startswith("zz")


def test_render_without_position_is_one_line():
    assert DiagError("something went wrong").render() == "error: something went wrong"


def test_error_is_an_exception_with_the_message():
    with pytest.raises(DiagError, match="undefined name 'z'"):
        stringdiag.loads(H("diagram A(x: [s, d]) -> [s, d] {\n  return z\n}"))


# -- warnings -------------------------------------------------------------------------------

def test_unused_wire_is_a_warning_with_a_position():
    p = stringdiag.loads(H("diagram A(x: [s, d]) -> [s, d] {\n  y = V(x)\n  return x\n}"), file=FILE)
    assert [(w.message, w.pos) for w in p.warnings] == [
        ("wire 'y' is never used (it is deleted)", Pos(FILE, 6, 3))]
    assert p.warnings[0].render("warning") == (
        "x.diag:6:3: warning: wire 'y' is never used (it is deleted)\n"
        "      y = V(x)\n"
        "      ^"
    )


def test_unused_input_and_local_learnable_warn():
    p = stringdiag.loads(H("diagram A(x: [s, d], z: [d]) -> [s, d] {\n  learn F : [d] -> [d]\n"
                           "  return x\n}"), file=FILE)
    assert [(w.message, w.pos) for w in p.warnings] == [
        ("input 'z' is never used (it is deleted)", Pos(FILE, 5, 22)),
        ("learnable 'F' is declared but never used", Pos(FILE, 6, 9)),
    ]


def test_underscore_names_do_not_warn():
    p = stringdiag.loads(H("learn P : [d] -> [d], [d]\n"
                           "diagram A(x: [s, d]) -> [s, d] {\n  _a, b = P(x)\n  _c = V(x)\n  return b\n}"))
    assert p.warnings == []


def test_valid_program_has_no_warnings():
    p = stringdiag.loads(H("diagram A(x: [s, d]) -> [s, d] {\n  y[i] = V(x[i])\n  return y\n}"))
    assert p.warnings == []


# -- imports (files in tmp_path) ------------------------------------------------------------

def load_error(tmp_path, text: str, name: str = "main.diag") -> DiagError:
    with pytest.raises(DiagError) as info:
        stringdiag.loads(text, file=str(tmp_path / name))
    return info.value


def test_import_of_a_missing_file(tmp_path):
    err = load_error(tmp_path, 'dim d : fixed\nimport "nope.diag"\n')
    assert err.message == f'cannot import "nope.diag": no such file {tmp_path / "nope.diag"}'
    assert err.pos == Pos(str(tmp_path / "main.diag"), 2, 8)
    assert err.render().endswith('\n    import "nope.diag"\n           ^')


def test_import_of_itself(tmp_path):
    text = 'import "self.diag"\n'
    (tmp_path / "self.diag").write_text(text)
    err = load_error(tmp_path, text, "self.diag")
    assert (err.message, err.pos) == ("import cycle: self.diag imports itself",
                                      Pos(str(tmp_path / "self.diag"), 1, 8))


def test_import_cycle_names_the_cycle(tmp_path):
    (tmp_path / "a.diag").write_text('import "b.diag"\ndim d : fixed\n')
    (tmp_path / "b.diag").write_text('import "a.diag"\n')
    err = load_error(tmp_path, 'import "a.diag"\n')
    assert (err.message, err.pos) == ("import cycle: a.diag -> b.diag -> a.diag",
                                      Pos(str(tmp_path / "b.diag"), 1, 8))


def test_import_cycle_is_reported_in_the_importing_file(tmp_path):
    # what the tool says today; the position is right even if the message is not (see above)
    (tmp_path / "a.diag").write_text('import "b.diag"\ndim d : fixed\n')
    (tmp_path / "b.diag").write_text('import "a.diag"\n')
    err = load_error(tmp_path, 'import "a.diag"\n')
    assert err.message.startswith("import cycle: ")
    assert err.pos == Pos(str(tmp_path / "b.diag"), 1, 8)
    assert err.render().splitlines()[1] == '    import "a.diag"'


def test_import_with_conflicting_dimension_kind(tmp_path):
    (tmp_path / "lib.diag").write_text("dim d : seq\nlearn F : [d] -> [d]\n")
    err = load_error(tmp_path, 'dim d : fixed\nimport "lib.diag"\n')
    assert (err.message, err.pos) == ('dimension \'d\' is fixed here but seq in "lib.diag"',
                                      Pos(str(tmp_path / "main.diag"), 2, 8))


def test_import_of_a_name_already_defined(tmp_path):
    (tmp_path / "lib.diag").write_text("dim d : fixed\nlearn F : [d] -> [d]\n")
    err = load_error(tmp_path, 'import "lib.diag"\nlearn F : [] -> []\n')
    assert (err.message, err.pos) == (
        f"'F' is already defined (first defined at {tmp_path / 'lib.diag'}:2:7)",
        Pos(str(tmp_path / "main.diag"), 2, 7))


def test_error_inside_an_imported_file_points_into_that_file(tmp_path):
    (tmp_path / "bad.diag").write_text("dim d : fixed\nlearn G : [d] -> [d]\n"
                                       "diagram B(x: [d]) -> [d] {\n  return G(y)\n}\n")
    err = load_error(tmp_path, 'import "bad.diag"\n')
    assert (err.message, err.pos) == ("undefined name 'y'", Pos(str(tmp_path / "bad.diag"), 4, 12))
    assert err.render().split("\n")[1:] == ["      return G(y)", "               ^"]


def test_import_of_a_directory(tmp_path):
    (tmp_path / "sub.diag").mkdir()
    err = load_error(tmp_path, 'import "sub.diag"\n')
    assert (err.message, err.pos) == (f'cannot import "sub.diag": {tmp_path / "sub.diag"} is a directory',
                                      Pos(str(tmp_path / "main.diag"), 1, 8))


def test_diamond_import_is_not_a_redefinition(tmp_path):
    (tmp_path / "lib.diag").write_text("dim d : fixed\nlearn F : [d] -> [d]\n")
    (tmp_path / "p.diag").write_text('import "lib.diag"\ndiagram P(x: [d]) -> [d] {\n  return F(x)\n}\n')
    (tmp_path / "r.diag").write_text('import "lib.diag"\ndiagram R(x: [d]) -> [d] {\n  return F(x)\n}\n')
    p = stringdiag.loads('import "p.diag"\nimport "r.diag"\n', file=str(tmp_path / "main.diag"))
    assert "P" in p and "R" in p


# -- an expression too deep to check ---------------------------------------------------------

def test_too_deep_expression_is_reported_at_the_expression():
    src = H("diagram A(x: [d]) -> [d] {\n  return x" + " + x" * 60_000 + "\n}\n")
    try:
        stringdiag.loads(src, file=FILE)
    except DiagError as err:
        assert (err.message, err.pos) == (
            "expressions are nested too deeply to check; split them into named wires", Pos(FILE, 6, 10))
    else:  # accepting it is fine too
        pass
