"""The oracle's own false-accept rate, measured on a corpus (tests/data/oracle/): false rules of
each kind an oracle can be fooled by (true only at one size of a dimension, off on a narrow
interval, true below a magnitude only, finite on one side only) are each refused by ``check
--verify`` and ``derive --verify`` with a counterexample; true rules that stress the same sizes
and magnitudes are each accepted. The counterexamples printed are recomputed by hand."""
from __future__ import annotations

import math
import re
from pathlib import Path

import pytest

from stringdiag.cli.main import main
from stringdiag.derive.derivation import Runner
from stringdiag.verify.oracle import PRIMES, size_rounds

DATA = Path(__file__).resolve().parent / "data" / "oracle"
RULE = re.compile(r"^rule (\w+)[^\n]*\n.*?^\} == \{\n.*?^\}$", re.S | re.M)
FALSE = {m.group(1): m.group(0) for m in RULE.finditer((DATA / "false.rules").read_text())}
TRUE = {m.group(1): m.group(0) for m in RULE.finditer((DATA / "true.rules").read_text())}
FAILED = re.compile(r"^  (\w+) +≡  FAILED: its sides differ numerically \(relative error (\S+) (.*)\)$", re.M)


def test_the_corpus_has_every_kind_several_times():
    assert len(FALSE) == 12 and len(TRUE) >= 6


def refusals(capsys) -> dict[str, str]:
    out = capsys.readouterr().out
    assert "Traceback" not in out
    return {m.group(1): m.group(3) for m in FAILED.finditer(out)}


def test_check_refuses_every_false_rule_with_a_counterexample(capsys):
    assert main(["check", str(DATA / "false.rules"), "--verify"]) == 1
    found = refusals(capsys)
    assert set(found) == set(FALSE)
    for name, where in found.items():
        assert re.search(r"on .+ inputs, output 1 at \[[\d, ]+\]: \S+ against \S+", where), (name, where)
    assert found["times_three"].startswith("at n=") and found["times_five"].startswith("at a=")
    assert "on huge (1e8" in found["clamp_wide"] and "on extreme (1e150" in found["clamp_huge"]
    assert "nan against 1 (inputs 0)" in found["self_divide"]


def test_a_counterexample_is_one_by_hand(capsys):
    """times_three's line: at the size n printed, the entry printed is x * n on the left and
    x * 3 on the right, x read from the example's inputs."""
    main(["check", str(DATA / "false.rules"), "--verify"])
    where = refusals(capsys)["times_three"]
    m = re.match(r"at n=(\d+), on .+ inputs, output 1 at \[(\d+), (\d+)\]: (\S+) against (\S+) \(inputs (.+)\)$",
                 where)
    assert m, where
    n, i, left, right = int(m.group(1)), int(m.group(3)), float(m.group(4)), float(m.group(5))
    xs = [float(v) for v in m.group(6).split(", ")]
    assert n != 3 and len(xs) == n
    assert math.isclose(left, xs[i] * n, rel_tol=1e-5) and math.isclose(right, xs[i] * 3, rel_tol=1e-5)


@pytest.mark.parametrize("name", sorted(FALSE))
def test_derive_refuses_each_false_rule_as_it_loads_it(tmp_path, capsys, name):
    (tmp_path / "one.rules").write_text(FALSE[name] + "\n")
    (tmp_path / "m.diag").write_text("diagram M(x: []) -> [] {\n  return relu(x)\n}\n")
    d = tmp_path / "d.deriv"
    d.write_text('use "one.rules"\nstart m.diag:M\nunfold M\n')
    assert main(["derive", str(d), "--verify"]) == 1
    err = capsys.readouterr().err
    lines = [ln for ln in err.splitlines() if ": error: " in ln]
    assert len(lines) == 1 and "Traceback" not in err, err
    assert f"error: rule '{name}' is not an equation: its sides differ numerically" in lines[0]
    assert " against " in lines[0]


SIZED = """\
dim n : fixed
diagram L(x: [n]) -> [] {
  return sum_i x[i]
}
diagram R(x: [n]) -> [] {
  return x[0] + x[1] + x[2]
}
"""


def test_derive_refuses_a_step_true_at_one_size_only(tmp_path, capsys, monkeypatch):
    """At the step itself (the rule not checked first): the whole diagram before and after."""
    monkeypatch.setattr(Runner, "checked", lambda self, r: None)
    (tmp_path / "one.rules").write_text(FALSE["sum_first_three"] + "\n")
    (tmp_path / "m.diag").write_text(SIZED)
    d = tmp_path / "d.deriv"
    d.write_text('use "one.rules"\nstart m.diag:L\napply sum_first_three\n')
    assert main(["derive", str(d), "--verify"]) == 1
    err = capsys.readouterr().err
    assert "step 1 (apply sum_first_three) fails: the two sides differ numerically (relative error" in err
    assert re.search(r"at n=\d+, on ", err) and "Traceback" not in err


def test_check_and_derive_accept_every_true_rule(tmp_path, capsys):
    assert main(["check", str(DATA / "true.rules"), "--verify"]) == 0
    out = capsys.readouterr().out
    for name in TRUE:
        assert re.search(rf"^  {name} +≡  verified", out, re.M), out
    (tmp_path / "m.diag").write_text("diagram M(x: []) -> [] {\n  return relu(x) - relu(-x)\n}\n")
    d = tmp_path / "d.deriv"
    d.write_text(f'use "{DATA / "true.rules"}"\nstart m.diag:M\napply relu_parts\n')
    assert main(["derive", str(d), "--verify"]) == 0
    assert re.search(r"^1\. apply relu_parts +≡ ✓", capsys.readouterr().out, re.M)


def test_every_dimension_takes_1_2_4_and_a_non_prime_independently():
    names = {"a", "b", "c", "n"}
    rounds = size_rounds(names, {"c": 7})
    first = rounds[0]
    assert all(first[n] in PRIMES for n in names) and len({first[n] for n in names}) == len(names)
    for n in names - {"c"}:
        seen = {r[n] for r in rounds}
        assert {1, 2, 4} <= seen and any(v > 4 and any(v % p == 0 for p in (2, 3)) for v in seen), (n, seen)
    assert all(r["c"] == 7 for r in rounds)  # a size given stays
    orders = {tuple(r[n] for r in rounds[1:4]) for n in names - {"c"}}
    assert len(orders) > 1  # each its own order, not one shared by all
