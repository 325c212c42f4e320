"""The oracle against equations made to fool it (issue 24, item 1): false rules that hold on
N(0, 1), or whose error hides behind one large entry, are refused by ``check --verify`` and by
``derive --verify`` (when the rules file is loaded, and at the step); sound rules whose sides are
undefined at the same inputs are not. Each refusal names the distribution and the entry."""
from __future__ import annotations

import re

import pytest
import torch

from stringdiag.cli.main import main
from stringdiag.verify.oracle import DISTRIBUTIONS, RTOL, entrywise

RELU = """\
rule relu_id(x: []) -> [] {
  return relu(x)
} == {
  return x
}
"""
CLAMP = """\
rule clamp_id(x: []) -> [] {
  return clamp(x, -20, 20)
} == {
  return x
}
"""
# one output, its first half a million million times larger than its second
BIG = """\
dim s : seq
diagram M(x: [s]) -> [2*s] {
  y[i] = relu(x[i])
  c[i] = clamp(x[i], -20, 20)
  return cat(x * 1000000000000, y + c)
}
"""
SOUND = """\
rule log_twice(x: []) -> [] {
  return log(x) * 2
} == {
  return log(x) + log(x)
}
"""


def files(tmp_path, rules: str, rule: str):
    (tmp_path / "m.diag").write_text(BIG)
    (tmp_path / "my.rules").write_text(rules)
    d = tmp_path / "d.deriv"
    d.write_text(f'use "my.rules"\nstart m.diag:M\napply {rule} everywhere\n')
    return tmp_path / "my.rules", d


def one_error(capsys) -> str:
    err = capsys.readouterr().err
    lines = [ln for ln in err.splitlines() if ": error: " in ln]
    assert len(lines) == 1 and "Traceback" not in err and "internal error" not in err, err
    return lines[0]


@pytest.mark.parametrize("rules, rule, where", [(RELU, "relu_id", "N(0, 1)"), (CLAMP, "clamp_id", "large")])
def test_a_false_rule_is_refused_by_check_and_derive(tmp_path, capsys, rules, rule, where):
    path, deriv = files(tmp_path, rules, rule)
    assert main(["check", str(path), "--verify"]) == 1
    line = one_error(capsys)
    assert line.startswith(f"{path}:1:6: error: rule '{rule}' is not an equation: its sides differ numerically")
    assert f"on {where}" in line and re.search(r"output 1 at \[\d+\]: \S+ against \S+ \(inputs \S+\)\)$", line), line
    assert main(["derive", str(deriv), "--verify"]) == 1  # refused as the derivation loads it
    assert one_error(capsys).startswith(f"{path}:1:6: error: rule '{rule}' is not an equation")
    assert main(["derive", str(deriv)]) == 0  # without --verify: said to be unverified
    assert re.search(rf"^1\. apply {rule} everywhere +≡ \(unverified rule\) ", capsys.readouterr().out, re.M)


@pytest.mark.parametrize("rules, rule", [(RELU, "relu_id"), (CLAMP, "clamp_id")])
def test_the_step_itself_is_refused_when_the_rule_is_not_checked_first(tmp_path, capsys, monkeypatch, rules, rule):
    """An engine bug whose effect lands in the small entries of an output is caught at the step,
    the large entries of the same output notwithstanding."""
    from stringdiag.derive.derivation import Runner

    monkeypatch.setattr(Runner, "checked", lambda self, r: None)
    _, deriv = files(tmp_path, rules, rule)
    assert main(["derive", str(deriv), "--verify"]) == 1
    line = one_error(capsys)
    assert line.startswith(f"{deriv}:3:1: error: step 1 (apply {rule} everywhere) fails: the two sides differ "
                           "numerically"), line
    assert "this step is not an equality" in line


def test_a_sound_rule_undefined_at_the_same_inputs_on_both_sides_is_verified(tmp_path, capsys):
    p = tmp_path / "log.rules"
    p.write_text(SOUND)  # log of a negative: NaN on both sides, on most distributions
    assert main(["check", str(p), "--verify"]) == 0
    assert re.search(r"^  log_twice +≡  verified, relative error 0$", capsys.readouterr().out, re.M)


def test_one_large_entry_does_not_hide_an_error_in_the_small_ones():
    x = torch.randn(2, 7, dtype=torch.float64)
    q = torch.cat([x * 1e12, x], -1)
    p = torch.cat([x * 1e12, x.relu()], -1)
    whole = (p - q).abs().max() / q.abs().max()
    assert whole < 1e-9                          # the old measure: relative to the largest output
    v = entrywise(p, q)
    assert not v.same and v.error > 0.5          # entry by entry
    assert v.entry[1] >= 7 and v.values == (float(p[v.entry]), float(q[v.entry])) and v.values[0] == 0.0


def test_rounding_at_large_magnitudes_is_within_the_tolerance():
    """A sum reordered, at every distribution's scale: rounding, not a difference."""
    gen = torch.Generator().manual_seed(0)
    for dist in DISTRIBUTIONS:
        x = dist.sample((64, 73), gen)
        forward, backward = x.sum(-1), x.flip(-1).cumsum(-1)[..., -1]
        assert entrywise(forward, backward, dist.scale).error <= RTOL, dist.name


def test_distributions_have_the_shapes_they_are_named_for():
    gen = torch.Generator().manual_seed(1)
    by = {d.shape: d for d in DISTRIBUTIONS}
    assert (by["negative"].sample((50,), gen) <= 0).all()
    rows = by["constant rows"].sample((4, 9), gen)
    assert (rows == rows[:, :1]).all() and rows[:, 0].unique().numel() == 4
    ties = by["ties"].sample((200,), gen)
    assert set(ties.tolist()) == {-2.0, -1.0, 0.0, 1.0, 2.0}
    scales = sorted(d.scale for d in DISTRIBUTIONS)
    assert scales[0] <= 1e-3 and scales[-1] >= 1e3  # beyond clamp's 20, below exp's overflow of a product
