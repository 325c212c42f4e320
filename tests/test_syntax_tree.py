"""The typed syntax trees: each grammar is read into frozen nodes that carry their positions."""
import dataclasses

import pytest

from stringdiag.errors import DiagError, Pos
from stringdiag.syntax import ast as A
from stringdiag.syntax import deriv_ast as D
from stringdiag.syntax import rules_ast as R

F = "t.diag"


def at(line: int, col: int, file: str = F) -> Pos:
    return Pos(file, line, col)


def test_diag_items_and_positions():
    src = ('import "lib.diag"\n'
           "dim s : seq\n"
           "dim d, k : fixed = 64\n"
           "learn Q<n> : [n * 2 + d] -> [k]\n"
           "diagram D(x: [s, d]) -> [s, k] {\n"
           "  y[i] = Q<d>(x[i, :])\n"
           "  return y\n"
           "}\n")
    imp, s, dk, q, diag = A.read(src, F)
    assert isinstance(imp, A.Import) and imp.path.value == "lib.diag" and imp.path.pos == at(1, 8)
    assert s == A.DimDecl((A.Name("s", at(2, 5)),), "seq", None, at(2, 1))
    assert [n.text for n in dk.names] == ["d", "k"] and dk.default == A.Int("64", at(3, 20))
    assert isinstance(q, A.BoxDecl) and q.kind == A.Name("learn", at(4, 1))
    (dn,) = q.names
    assert dn.name == A.Name("Q", at(4, 7)) and dn.generics.names == (A.Name("n", at(4, 9)),)
    (ty,) = q.ins
    (dim,) = ty.dims
    assert [type(f) for p in dim.terms for f in p.factors] == [A.Name, A.Int, A.Name]
    assert isinstance(diag, A.DiagramDecl) and diag.name.pos == at(5, 9)
    assert [p.name.text for p in diag.params] == ["x"] and len(diag.outs) == 1
    assign, ret = diag.body
    assert isinstance(assign, A.Assign) and isinstance(ret, A.Return) and ret.pos == at(7, 3)
    (target,) = assign.targets
    assert target.name.text == "y" and target.indices == (A.Name("i", at(6, 5)),)
    call = assign.value
    assert isinstance(call, A.Call) and call.box.text == "Q" and call.pos == at(6, 10)
    assert len(call.dim_args) == 1
    (arg,) = call.args
    assert isinstance(arg, A.Indexed) and isinstance(arg.base, A.Var)
    assert arg.indices == (A.Name("i", at(6, 17)), None)  # ':' keeps the axis


def test_expressions_are_typed_nodes():
    src = ("diagram E(x: [d]) -> [] {\n"
           "  return sum_{j, f} -x[j] * 2.5 / 3 - 1 + 0\n"
           "}\n")
    (diag,) = A.read(src, F)
    (ret,) = diag.body
    (e,) = ret.values
    assert isinstance(e, A.BinOp) and e.op == "add"  # a sum extends as far right as a product does
    assert isinstance(e.left, A.BinOp) and e.left.op == "sub"
    s = e.left.left
    assert isinstance(s, A.Sum) and [n.text for n in s.indices] == ["j", "f"]
    assert all(n.pos == at(2, 10) for n in s.indices)  # the indices are where the sum_ token is
    div = s.body
    assert div.op == "div" and isinstance(div.right, A.Number) and div.right.value == 3.0
    mul = div.left
    assert mul.op == "mul" and isinstance(mul.left, A.Neg) and mul.right.text == "2.5"


def test_scan_and_local_box():
    src = ("diagram S(h0: [d], x: [t, d]) -> [d] {\n"
           "  learn C : [d], [d] -> [d], [d]\n"
           "  h, y[i] = scan C(h0, x[i])\n"
           "  return h\n"
           "}\n")
    (diag,) = A.read(src, F)
    decl, scan, _ = diag.body
    assert isinstance(decl, A.BoxDecl) and len(decl.outs) == 2
    assert isinstance(scan, A.Scan) and isinstance(scan.call, A.Call) and len(scan.targets) == 2


def test_nodes_are_frozen():
    (d,) = A.read("dim d : fixed\n", F)
    with pytest.raises(dataclasses.FrozenInstanceError):
        d.kind = "seq"


def test_a_very_deep_expression_is_read_without_recursion():
    (diag,) = A.read("diagram A(x: [d]) -> [d] {\n  return x" + " + x" * 20_000 + "\n}\n", F)
    e = diag.body[0].values[0]
    depth = 0
    while isinstance(e, A.BinOp):
        e, depth = e.left, depth + 1
    assert depth == 20_000 and isinstance(e, A.Var)


def test_rules_read_their_own_nodes_and_the_diag_statements():
    src = ("dim d : fixed\n"
           "rule r<n>(a: [n]) -> [n] given f : [n] -> [n] {\n"
           "  return f(a)\n"
           "} => {\n"
           "  return a\n"
           '} by "p.deriv"\n')
    decl, rule = R.read_rules(src, "t.rules")
    assert isinstance(decl, A.DimDecl) and isinstance(rule, R.RuleDecl)
    assert rule.name == A.Name("r", at(2, 6, "t.rules")) and rule.relation == "=>"
    assert [n.text for n in rule.generics.names] == ["n"] and len(rule.params) == 1 and len(rule.outs) == 1
    (given,) = rule.given
    assert isinstance(given, R.Given) and given.names[0].name.text == "f"
    assert isinstance(rule.left, R.Side) and rule.left.pos == at(2, 47, "t.rules")
    assert isinstance(rule.left.body[0].values[0], A.Call)  # a diag.lark statement, read as in a .diag
    assert rule.proof.value == "p.deriv" and rule.proof.pos == at(6, 6, "t.rules")


def test_rules_syntax_errors_name_the_relation():
    with pytest.raises(DiagError) as e:
        R.read_rules("rule r(a: []) -> [] { return a } { return a }\n", "t.rules")
    assert "'==' (≡) or '=>' (⇒)" in e.value.message


def test_deriv_steps():
    src = ("start a.diag:A\n"
           'use "more.rules"\n'
           "apply assoc reversed at kv, y\n"
           "specialise f(x) := { return x }\n"
           "specialise g := B at h\n"
           "unfold H\n"
           "fold H at z\n"
           "copy a\n"
           'rewire := b.diag:C "why"\n'
           "target A2\n")
    items = D.read_deriv(src, "t.deriv")
    start, use, app, sp1, sp2, unfold, fold, copy, rewire, target = items
    assert start.ref == D.Ref("a.diag", "A", at(1, 7, "t.deriv"))
    assert isinstance(use, D.UseDecl) and use.path.value == "more.rules"
    assert isinstance(app, D.Apply) and app.reversed and not app.everywhere
    assert app.at.text.strip() == "kv, y" and app.text == "apply assoc reversed at kv, y"
    assert isinstance(sp1.value, D.Body) and [n.text for n in sp1.params.names] == ["x"]
    assert sp1.value.pos == at(4, 20, "t.deriv")
    assert sp2.value == D.Ref(None, "B", at(5, 17, "t.deriv")) and sp2.params is None
    assert isinstance(unfold, D.Unfold) and isinstance(fold, D.Fold) and isinstance(copy, D.Copy)
    assert isinstance(rewire, D.Rewire) and rewire.why.value == "why" and rewire.ref.file == "b.diag"
    assert isinstance(target, D.TargetDecl) and target.ref.name == "A2"
