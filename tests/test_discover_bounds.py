"""``discover`` counts its candidate rules before checking any and refuses too many with the
figures; its fingerprints treat overflow quietly and a value that is not a number as no match."""
from __future__ import annotations

import warnings

import numpy as np
import pytest

from stringdiag.cli.main import main
from stringdiag.search import fingerprints
from stringdiag.search.fingerprints import proposals, terms

ALL8 = ["add", "sub", "mul", "neg", "relu", "max", "min", "exp"]


def _terms_by_recurrence(unary: int, binary: int, size: int) -> int:
    """Terms over x, y: a unary box on a term one smaller, a binary box on two whose sizes sum to n - 1."""
    by = [2]
    for n in range(1, size + 1):
        by.append(unary * by[n - 1] + binary * sum(by[k] * by[n - 1 - k] for k in range(n)))
    return sum(by)


def test_too_many_candidates_are_refused_before_any_is_checked(monkeypatch, capsys):
    def never(*a, **k):
        raise AssertionError("a candidate was checked")

    monkeypatch.setattr(fingerprints, "verified", never)
    assert main(["discover", "--primitives", ",".join(ALL8), "--size", "3"]) == 1
    err = capsys.readouterr().err
    n_terms = _terms_by_recurrence(3, 5, 3)  # neg, relu, exp; add, sub, mul, max, min
    assert n_terms == 2 + 26 + 598 + 17_134  # by hand: 3*2 + 5*4; 3*26 + 5*(2*26*2); 3*598 + 5*(2*2*598 + 26*26)
    n = len(list(proposals(terms(ALL8, 3, np.random.default_rng(0)))))
    assert n > 2_000
    assert f"error: refusing to discover over {', '.join(ALL8)} up to 3 boxes: its {n_terms:,} terms propose " \
           f"{n:,} candidate rules, over 2,000 (discover --max-candidates)" in err
    assert "Traceback" not in err


def test_within_the_bound_every_candidate_passes_the_progress_bar(monkeypatch):
    seen: list = []

    def bar(pairs):
        seen.append(len(pairs))
        return iter(pairs)

    kept, counts = fingerprints.discover(["add", "max"], 1, max_candidates=100, progress=bar)
    assert seen == [counts["proposed"]] and counts["proposed"] > 0
    with pytest.raises(fingerprints.DiagError, match=f"propose {counts['proposed']} candidate rules, over 1 "):
        fingerprints.discover(["add", "max"], 1, max_candidates=1)


def test_overflow_is_silent():
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a RuntimeWarning (overflow in exp) fails
        found = terms(["exp", "neg", "sub"], 3, np.random.default_rng(0))
    assert any(v == "inf" for t in found for v in t.value)  # exp(exp(exp(x))) does overflow


class _Points:
    """x huge (exp overflows, exp(x) - exp(x) is inf - inf), y ordinary."""

    def __init__(self):
        self.calls = 0

    def normal(self, size):
        self.calls += 1
        return np.full(size, 400.0) if self.calls == 1 else np.linspace(-1, 1, size)


def test_a_term_that_is_not_a_number_proposes_nothing():
    found = terms(["exp", "sub", "add"], 4, _Points())
    nan_terms = {t.text for t in found if "nan" in t.value}
    # both NaN at every point, though one is y and the other 0: they must not be proposed equal
    assert {"sub(exp(x), exp(x))", "add(y, sub(exp(x), exp(x)))"} <= nan_terms
    assert "sub(exp(x), exp(y))" not in nan_terms  # inf - e^y is inf
    pairs = list(proposals(found))
    assert pairs and not any(a in nan_terms or b in nan_terms for a, b in pairs)
    # an overflow is a value: exp(x) and exp(exp(x)) overflow alike at every point and are proposed equal
    # (the oracle then refuses them), while no two terms are matched by their NaNs
    by_text = {t.text: t.value for t in found}
    assert by_text["exp(x)"] == by_text["exp(exp(x))"] == ("inf",) * fingerprints.POINTS
