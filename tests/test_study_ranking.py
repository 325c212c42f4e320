"""Whether a study's order of the mechanisms holds at a longer budget (``ranking.md``): Kendall's τ
against a count of swaps by bubble sort, its exact p-value against an enumeration of every
permutation, and the report end to end on two tiny studies."""
from __future__ import annotations

import itertools
import math
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from stringdiag.cli.main import main
from stringdiag.study.ranking import exact_p, inversions, kendall

ROOT = Path(__file__).resolve().parents[1]
ANATOMY = str(ROOT / "gallery" / "anatomy.diag")
TINY = ["--data", "synthetic", "--heads", "2", "--d-model", "8", "--context", "8", "--batch-size", "8",
        "--eval-every", "2", "--approximator", "linear", "--timing-steps", "1", "--test-tokens", "200",
        "--layers", "1", "--threads", "1"]


def _swaps(order: list[float]) -> int:
    """Adjacent swaps a bubble sort makes: the inversions of a sequence."""
    seq, swaps = list(order), 0
    for end in range(len(seq) - 1, 0, -1):
        for i in range(end):
            if seq[i] > seq[i + 1]:
                seq[i], seq[i + 1] = seq[i + 1], seq[i]
                swaps += 1
    return swaps


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.floats(-1e3, 1e3), st.floats(-1e3, 1e3)), min_size=2, max_size=12,
                unique_by=(lambda p: p[0], lambda p: p[1])))
def test_tau_counts_the_swaps_a_bubble_sort_makes(pairs):
    xs, ys = [p[0] for p in pairs], [p[1] for p in pairs]
    tau, keep, swap = kendall(xs, ys)
    ordered = [y for _, y in sorted(zip(xs, ys))]
    n = len(pairs) * (len(pairs) - 1) // 2
    assert swap == _swaps(ordered) and keep == n - swap
    assert math.isclose(tau, (n - 2 * swap) / n)


def test_inversion_counts_and_exact_p_against_every_permutation():
    for n in range(1, 7):
        counts = [0] * (n * (n - 1) // 2 + 1)
        for perm in itertools.permutations(range(n)):
            counts[_swaps(list(perm))] += 1
        assert inversions(n) == counts
        total = math.factorial(n)
        for d in range(len(counts)):
            low, high = sum(counts[: d + 1]) / total, sum(counts[d:]) / total
            assert math.isclose(exact_p(n, d), min(1.0, 2 * min(low, high)))
    assert exact_p(10, 0) == 2 / math.factorial(10)  # only the identity (or its reverse) is that extreme


@pytest.mark.slow
def test_report_with_earlier_ranks_both_budgets_from_the_runs(tmp_path, capsys):
    short, long_ = tmp_path / "short", tmp_path / "long"
    assert main(["study", ANATOMY, "-d", "M1", *TINY, "--max-steps", "2", "-o", str(short)]) == 0
    assert main(["study", ANATOMY, "-d", "M1", *TINY, "--max-steps", "4", "-o", str(long_)]) == 0
    capsys.readouterr()
    assert main(["study", "--report", str(long_), "--earlier", str(short)]) == 0
    text = (long_ / "ranking.md").read_text()
    lines = [line for line in text.splitlines() if line.startswith("| M") or line.startswith("| control")]
    assert len(lines) == 4  # M1 and the control in the test table, and in the validation table
    assert "| 2 steps | rank | 4 steps | rank |" in text and "| step 2 | step 4 |" in text
    assert "pairs keep their order" in text
    # a directory that is not a study is one line, not a traceback
    assert main(["study", "--report", str(long_), "--earlier", str(tmp_path)]) == 1
    assert "not a study's directory" in capsys.readouterr().err
