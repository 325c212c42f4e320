"""Why a rule does not match, and why a result is not its target: the explanation names the box or
condition that stopped it, with its source line, over a corpus of near misses."""
from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest

import stringdiag
from stringdiag.cli.main import main
from stringdiag.graph.difference import first_difference
from stringdiag.rewrite.match import find_matches
from stringdiag.rewrite.rule import library, loads_rules
from stringdiag.rewrite.closest import explain

ROOT = Path(__file__).resolve().parents[1]
NEAR_SRC = """dim s : seq
dim d, w : fixed
learn F : [d] -> [d]
diagram Res(x: [s, d]) -> [s, d] {
  y[i] = F(x[i]) + x[i]
  return y
}
diagram NoRes(x: [s, d]) -> [s, d] {
  y[i] = F(x[i])
  return y
}
diagram Swap(x: [s, d], z: [s, d]) -> [s, d] {
  y[i] = F(z[i]) + x[i]
  return y
}
diagram Plain(x: [s, d], z: [s, d]) -> [s, d] {
  y[i] = F(x[i]) + z[i]
  return y
}
diagram T(x: [d, d]) -> [d, d] {
  y[i, j] = x[i, j] * 2
  return y
}
diagram U(x: [d, d]) -> [d, d] {
  y[i, j] = x[j, i] * 2
  return y
}
diagram Causal(e: [s, s]) -> [s, s] {
  return softmax(where(e, causal<s>()))
}
diagram Window(e: [s, s]) -> [s, s] {
  return softmax(where(e, window<s, w>()))
}
diagram Twice(x: [s, d]) -> [s, d] {
  y[i] = NoRes(x)[i] + NoRes(x)[i]
  return y
}
diagram Fresh(x: [s, d]) -> [s, d] {
  learn G : [d] -> [d]
  y[i] = G(x[i])
  return y
}
diagram TwiceFresh(x: [s, d]) -> [s, d] {
  y[i] = Fresh(x)[i] + Fresh(x)[i]
  return y
}
diagram Shared(x: [s, d]) -> [s, d] {
  learn G : [d] -> [d]
  y[i] = G(x[i]) + G(x[i])
  return y
}
diagram Sq(x: [d, d]) -> [d, d] {
  y[i, j] = x[i, j] * x[i, j]
  return y
}
diagram LocalF(x: [s, d]) -> [s, d] {
  learn F : [d] -> [d]
  y[i] = F(x[i]) + x[i]
  return y
}
"""
NEAR = stringdiag.loads(NEAR_SRC, "near.diag")


@pytest.mark.parametrize("a, b, words", [
    ("Res", "NoRes", ["their boxes differ", "fixed 'add'"]),                      # a missing residual
    ("Swap", "Plain", ["their wiring differs", "input 1", "'F' (near.diag:13)"]),  # inputs exchanged
    ("T", "U", ["indices in another order"]),                                        # an index order
    ("Causal", "Window", ["their boxes differ", "'causal'", "'window'"]),             # another mask
    ("TwiceFresh", "Shared", ["their weights differ", "'G'", "[1, 1]", "[2]"]),      # another weight set
    ("Res", "Causal", ["their types differ"]),
])
def test_the_first_difference_names_what_differs(a, b, words):
    x, y = NEAR[a].expand(), NEAR[b].expand()
    assert not x.isomorphic(y)
    text = first_difference(x, y)
    for w in words:
        assert w in text, text


def test_isomorphic_diagrams_have_no_difference_to_name():
    x = NEAR["Twice"].expand()
    assert x.isomorphic(NEAR["Twice"].expand())


RULES_SRC = """dim s : seq
dim d : fixed
learn F : [d] -> [d]
rule drop_residual(x: [s, d]) -> [s, d] {
  y[i] = F(x[i]) + x[i]
  return y
} == {
  y[i] = x[i] + F(x[i])
  return y
}
rule swap_then(x: [d, d]) -> [d, d] {
  y[i, j] = x[j, i] * 2
  return y
} == {
  y[i, j] = x[j, i] + x[j, i]
  return y
}
rule symmetrise(x: [d, d]) -> [d, d] {
  y[i, j] = x[i, j] * x[j, i]
  return y
} == {
  y[i, j] = x[j, i] * x[i, j]
  return y
}
rule causal_soft(e: [s, s]) -> [s, s] {
  return softmax(where(e, causal<s>()))
} == {
  return softmax(where(e, causal<s>()))
}
"""
RULES = loads_rules(RULES_SRC, "near.rules")


def test_a_rule_missing_its_residual_is_explained_at_the_box_that_failed():
    rule = next(r for r in RULES if r.name == "drop_residual")
    target = NEAR["NoRes"]
    assert not find_matches(target, rule, ties=True)
    why = explain(target, rule)
    assert why.failed is not None and len(why.placed) < why.total
    text = why.summary(rule.sides(False)[0], target)
    assert "closest match:" in text and "near.rules:5" in text, text  # the pattern's add, by its line


def test_a_matching_rule_has_a_complete_placement():
    rule = next(r for r in RULES if r.name == "drop_residual")
    assert find_matches(NEAR["Res"], rule, ties=True)
    why = explain(NEAR["Res"], rule)
    assert len(why.placed) == why.total and why.failed is None


def test_a_rule_that_finds_no_box_of_its_kind_says_so():
    rule = library()["div_out"]
    why = explain(NEAR["T"], rule)
    text = why.summary(rule.sides(False)[0], NEAR["T"])
    assert why.placed == {} and "anywhere in the diagram" in text, text


def test_every_candidate_is_listed_with_explain():
    rule = next(r for r in RULES if r.name == "drop_residual")
    target = NEAR["Twice"].expand()
    why = explain(target, rule)
    short = why.summary(rule.sides(False)[0], target)
    full = why.summary(rule.sides(False)[0], target, explain=True)
    assert len(full.splitlines()) >= len(short.splitlines())
    assert "closest match:" in full


def _derive(tmp_path, capsys, script: str, *flags: str) -> tuple[int, str, str]:
    gallery = ROOT / "gallery"
    for name in ("similarity.diag", "recurrent.diag"):
        shutil.copy(gallery / name, tmp_path / name)
    (tmp_path / "d.deriv").write_text(script)
    rc = main(["derive", str(tmp_path / "d.deriv"), *flags])
    out = capsys.readouterr()
    return rc, out.out, out.err


def test_derive_says_why_a_rule_does_not_match_and_where_a_target_differs(tmp_path, capsys):
    script = ("start similarity.diag:GenericSimilarityAttention\n"
              "specialise sim(p, r) := { return sum_f elu1(p)[f] * elu1(r)[f] }\n"
              "apply assoc_mv\n")
    rc, _, err = _derive(tmp_path, capsys, script)
    assert rc == 1 and "rule 'assoc_mv' does not match here" in err
    assert "closest match: 2 of 2 pattern boxes placed" in err and "contraction.rules:32" in err
    assert "a wire inside the pattern is also read outside the match" in err and "Traceback" not in err
    script = (ROOT / "gallery" / "linearize.deriv").read_text()
    rc, _, err = _derive(tmp_path, capsys, script.replace("similarity.diag:LinearAttention",
                                                          "similarity.diag:CausalLinearAttention"))
    assert rc == 1 and "are not isomorphic\ntheir boxes differ:" in err and "fixed 'causal'" in err


def test_derive_table_says_in_which_order_a_cell_was_matched(tmp_path, capsys):
    diag = (tmp_path / "gla.diag")
    src = (ROOT / "gallery" / "recurrent.diag").read_text()
    src = src.replace("diagram GLAStep(S: [k, d], qt: [k], kt: [k], vt: [d], lt: [k])",
                      "diagram GLAStep(S: [k, d], lt: [k], qt: [k], kt: [k], vt: [d])")
    src = src.replace("scan GLAStep(S0, q[t], kk[t], v[t], l[t])", "scan GLAStep(S0, l[t], q[t], kk[t], v[t])")
    diag.write_text(src)
    rc, out, err = _derive(tmp_path, capsys, "start gla.diag:GLARecurrent\napply scan_log_gate_channels\n"
                                             "target gla.diag:GLAParallel\n", "--verify")
    assert rc == 0, err
    assert "≡ ✓" in out and "the rule's cell matched with its inputs in the order (" in out


def test_normalize_traces_the_rules_that_do_not_fire(capsys):
    assert main(["normalize", str(ROOT / "gallery" / "recurrent.diag"), "-d", "GLARecurrent", "--trace-rules"]) == 0
    out = capsys.readouterr().out
    assert "round 1: simd_scan does not fire" in out and "closest match: 0 of 1 pattern boxes placed" in out
    # the scan, the closest candidate for the rule's scanned cell, comes first, with what keeps it out
    first = out.split("was looked for anywhere in the diagram\n")[1].splitlines()[0]
    assert "'GLAStep'" in first and "5 inputs and 2 outputs, where the pattern's box has 2 and 2" in first


def test_a_missed_target_is_drawn_with_where_it_differs_highlighted(tmp_path, capsys):
    """``derive -o`` still draws a chain whose result is not its target: the target last (after ≇),
    the result's box that differs marked as the next step's, the target's as put in."""
    script = (ROOT / "gallery" / "linearize.deriv").read_text().replace("similarity.diag:LinearAttention",
                                                                         "similarity.diag:CausalLinearAttention")
    svg = tmp_path / "miss.svg"
    rc, out, err = _derive(tmp_path, capsys, script, "-o", str(svg))
    assert rc == 1 and "fixed 'causal'" in err and f"wrote {svg}" in out
    before, after = svg.read_text().rsplit("≇", 1)
    result = before.rsplit("<svg x=", 1)[1]  # the last step's picture
    node = r'class="node {}">\s*<title>\d+</title>\s*(?:<[^t][^>]*>\s*)+<text[^>]*>{}'
    assert re.search(node.format("matched", "ones"), result), "the result's extra box is not marked"
    assert re.search(node.format("added", "causal"), after), "the target's extra box is not marked"
    assert "target CausalLinearAttention: not isomorphic; their boxes differ" in after
    page = tmp_path / "miss.html"
    rc, out, _ = _derive(tmp_path, capsys, script, "-o", str(page))
    assert rc == 1 and "≇ target CausalLinearAttention" in page.read_text()


@pytest.mark.parametrize("a, b, marked", [("Res", "NoRes", ("add", None)), ("Causal", "Window", ("causal", "window")),
                                          ("T", "U", ("mul", "mul")), ("TwiceFresh", "Shared", ("G", "G"))])
def test_the_difference_names_the_box_it_is_about(a, b, marked):
    from stringdiag.graph.difference import difference

    x, y = NEAR[a].expand(), NEAR[b].expand()
    diff = difference(x, y)
    got = (x.record(diff.result_box).op if diff.result_box is not None else None,
           y.record(diff.target_box).op if diff.target_box is not None else None)
    assert got == marked, diff


def test_enumerate_traces_the_rules_that_relate_no_member(capsys):
    """``enumerate --rules ... --trace-rules``: each rule's count of members, and for one that fires on
    none the box that stopped its closest match, with the rule file's line."""
    rc = main(["enumerate", str(ROOT / "gallery" / "anatomy.diag"), "--generators",
               "AttPrep,AttApply,LinAttPrep,LinAttApply,ConcatFF", "--symmetric", "ConcatFF", "--interchangeable",
               "LinAttPrep", "--require", "AttApply,LinAttApply", "--max", "3",
               "--rules", str(ROOT / "rules" / "absorb.rules"), "--trace-rules"])
    out = capsys.readouterr().out
    assert rc == 0
    traced = out.split("Rules traced (--trace-rules):\n")[1]
    assert "absorb_prep (right to left): fires on 1 of the 8 members looked at" in traced
    none = traced.split("absorb_ff_left (right to left): fires on none of the 8 members looked at; closest on ")[1]
    head = none.split("\n")[:4]
    assert "closest match: 1 of 2 pattern boxes placed" in head[1], head
    assert re.search(r"the pattern's 'ConcatFF' \(\S*absorb\.rules:\d+\) was looked for among the boxes", head[2]), head
    assert main(["enumerate", str(ROOT / "gallery" / "anatomy.diag"), "--generators", "AttPrep,AttApply",
                 "--max", "2", "--trace-rules"]) == 2  # nothing to trace: a usage error


@pytest.mark.parametrize("start, rule, words", [
    ("NoRes", "drop_residual", ["the pattern's 'add' (near.rules:5) was looked for anywhere", "no box"]),  # no residual
    ("Sq", "symmetrise", ["'mul' (near.diag:53): its wires' indices cannot be sent to the pattern's"]),  # index order
    ("LocalF", "drop_residual", ["'F' (near.diag:58): its weights are local to a definition where the pattern's "
                                 "are global"]),                                                    # a weight set
    ("Window", "causal_soft", ["the pattern's 'causal' (near.rules:26)", "it has 'window' (near.diag:32)"]),  # mask
])
def test_each_near_miss_of_a_rule_is_explained_on_one_screen(tmp_path, capsys, monkeypatch, start, rule, words):
    """A corpus of near misses, each a failed ``apply``: the explanation names the box or condition
    that stopped the match with its source line, in a screenful."""
    monkeypatch.chdir(tmp_path)  # files under the current folder are named relative to it
    (tmp_path / "near.diag").write_text(NEAR_SRC)
    (tmp_path / "near.rules").write_text(RULES_SRC)
    (tmp_path / "m.deriv").write_text(f'use "near.rules"\nstart near.diag:{start}\napply {rule}\n')
    rc = main(["derive", str(tmp_path / "m.deriv")])
    err = capsys.readouterr().err
    assert rc == 1 and f"rule '{rule}' does not match here\nclosest match:" in err, err
    for w in words:
        assert w in err, err
    assert len(err.splitlines()) <= 24 and max(map(len, err.splitlines())) <= 200, err
