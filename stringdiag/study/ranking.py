"""Does the early ranking hold? A study trained longer set beside a shorter one of the same
mechanisms (``study --report LONG --earlier SHORT`` writes ``ranking.md``): each mechanism's rank
at both budgets, Kendall's τ between the two orders with its exact p-value, and the longer runs'
validation perplexity at each evaluation, each evaluation's order against the last.

Runs are compared at one seed (seed 0) and one depth: the longer study has one seed, so the
question is one of order, not of intervals. τ counts the pairs of mechanisms that keep their
order (concordant) against those that swap (discordant); its p-value is exact — the number of
discordant pairs under independence is the number of inversions of a random permutation, whose
distribution (Mahonian numbers) is counted here, not approximated.

>>> kendall([1, 2, 3, 4], [10, 20, 40, 30])
(0.6666666666666666, 5, 1)
>>> round(exact_p(4, 1), 4)  # 4 of the 24 orders of four items have at most one swap; two-sided
0.3333
"""
from __future__ import annotations

import csv
from pathlib import Path
from typing import Mapping, Sequence


def _sign(v: float) -> int:
    return (v > 0) - (v < 0)


def kendall(xs: Sequence[float], ys: Sequence[float]) -> tuple[float, int, int]:
    """τ-a of two paired sequences, with the counts of concordant and discordant pairs (a pair tied
    in either sequence is neither)."""
    concordant = discordant = 0
    for i in range(len(xs)):
        for j in range(i + 1, len(xs)):
            s = _sign(xs[i] - xs[j]) * _sign(ys[i] - ys[j])  # signs: a product of tiny gaps underflows
            concordant += s > 0
            discordant += s < 0
    pairs = len(xs) * (len(xs) - 1) // 2
    return (concordant - discordant) / pairs if pairs else float("nan"), concordant, discordant


def inversions(n: int) -> list[int]:
    """How many permutations of ``n`` items have k inversions, for k = 0 … n(n−1)/2."""
    counts = [1]
    for m in range(1, n + 1):  # inserting the m-th item adds 0 … m−1 inversions
        grown = [0] * (len(counts) + m - 1)
        for k, c in enumerate(counts):
            for extra in range(m):
                grown[k + extra] += c
        counts = grown
    return counts


def exact_p(n: int, discordant: int) -> float:
    """Two-sided p-value of ``discordant`` swapped pairs among ``n`` items under independence."""
    counts = inversions(n)
    total = sum(counts)
    low = sum(counts[: discordant + 1]) / total
    high = sum(counts[discordant:]) / total
    return min(1.0, 2 * min(low, high))


def _seed0(rows: Sequence[Mapping], layers: int) -> dict[str, Mapping]:
    return {r["mechanism"]: r for r in rows if r["layers"] == layers and r["seed"] == 0
            and r.get("test_ppl") is not None}


def ranks(values: Mapping[str, float]) -> dict[str, int]:
    """1 for the lowest perplexity."""
    return {m: k + 1 for k, m in enumerate(sorted(values, key=lambda m: values[m]))}


def valid_curves(folder: Path, names: Sequence[str], layers: int) -> dict[str, dict[int, float]]:
    """Each seed-0 run's validation perplexity by step, from its ``log.csv``."""
    curves = {}
    for m in names:
        log = Path(folder) / f"{m}-L{layers}" / "log.csv"
        if log.is_file():
            with log.open(encoding="utf-8", newline="") as fh:
                curves[m] = {int(r["step"]): float(r["valid_ppl"]) for r in csv.DictReader(fh)}
    return curves


def _tau_line(early: Mapping[str, float], late: Mapping[str, float]) -> str:
    names = sorted(early)
    tau, keep, swap = kendall([early[m] for m in names], [late[m] for m in names])
    return (f"Kendall's τ {tau:.2f} (exact two-sided p {exact_p(len(names), swap):.2g}, {len(names)} "
            f"mechanisms): {keep} of {keep + swap} pairs keep their order, {swap} swap.")


def budget_table(early: Mapping[str, Mapping], late: Mapping[str, Mapping], groups: Mapping[str, str]) -> list[str]:
    """Both budgets' test perplexity and ranks, rows in the longer study's order."""
    names = [m for m in late if m in early]
    e = {m: early[m]["test_ppl"] for m in names}
    lt = {m: late[m]["test_ppl"] for m in names}
    re_, rl = ranks(e), ranks(lt)
    steps = (early[names[0]]["steps"], late[names[0]]["steps"]) if names else (0, 0)
    out = [f"| mechanism | group | {steps[0]:,} steps | rank | {steps[1]:,} steps | rank | change |",
           "|---|---|---:|---:|---:|---:|---:|"]
    for m in sorted(names, key=lambda m: rl[m]):
        out.append(f"| {m} | {groups.get(m, '')} | {e[m]:.1f} | {re_[m]} | {lt[m]:.1f} | {rl[m]} | "
                   f"{re_[m] - rl[m]:+d} |")
    return out + ["", _tau_line(e, lt) if len(names) > 1 else "Fewer than two mechanisms at both budgets."]


def curve_table(curves: Mapping[str, Mapping[int, float]]) -> list[str]:
    """Validation perplexity at each evaluation step, with each step's order against the last's."""
    steps = sorted(set.intersection(*(set(c) for c in curves.values()))) if curves else []
    if not steps:
        return ["No evaluation step common to every run."]
    out = ["| mechanism | " + " | ".join(f"step {s:,}" for s in steps) + " |",
           "|---|" + "---:|" * len(steps)]
    last = {m: c[steps[-1]] for m, c in curves.items()}
    for m in sorted(curves, key=lambda m: last[m]):
        out.append(f"| {m} | " + " | ".join(f"{curves[m][s]:.1f}" for s in steps) + " |")
    taus = [kendall([curves[m][s] for m in sorted(curves)], [last[m] for m in sorted(curves)])[0] for s in steps]
    out.append("| τ against the last | " + " | ".join("–" if len(curves) < 2 else f"{t:.2f}" for t in taus) + " |")
    return out


def markdown(early_rows: Sequence[Mapping], late_rows: Sequence[Mapping], late_dir: Path,
             groups: Mapping[str, str], layers: int = 1) -> str:
    """``ranking.md``: the test ranks at both budgets, then the longer runs' validation curves."""
    early, late = _seed0(early_rows, layers), _seed0(late_rows, layers)
    names = [m for m in late if m in early]
    return "\n".join([
        "<!-- written by `stringdiag study --report DIR --earlier DIR` from the runs: do not edit -->", "",
        f"## Test perplexity at both budgets at seed 0 ({layers} layer{'s' if layers != 1 else ''})", "",
        *budget_table(early, late, groups), "",
        "## Validation perplexity of the longer runs at each evaluation", "",
        *curve_table(valid_curves(late_dir, names, layers)), ""])
