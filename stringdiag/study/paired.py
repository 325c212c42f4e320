"""Seed-paired comparisons of a study's runs: every mechanism against each reference (M1 and every
control) at the same depth, as the mean of the differences between runs of the same seed.

Runs of one seed see the same initialisation seed and the same order of batches, so much of what
varies from seed to seed cancels in their difference; a comparison of a 3-seed mean with a single
run does not. Each comparison gives the mean difference with a 95 % Student-t interval over its
pairs, the two-sided p-value of the paired t-test, and Holm's step-down correction of the p-values
across every comparison the study makes (the family-wise error stays below 5 % however many
mechanisms and controls are compared). Its verdict: ``beats`` or ``loses`` where the Holm-corrected
p-value is below 0.05 (better or worse than the reference), ``ties`` where it is not, and ``one
pair`` where only one seed is shared (no interval can be formed). ``beats (95 %)`` and its kin read
the same from the uncorrected interval, for one comparison looked at alone.

The t-distribution is computed here for integer degrees of freedom from its closed form
(Abramowitz and Stegun 26.7.3-4), so no statistics package is needed.

>>> round(t_quantile(0.975, 2), 3), round(t_quantile(0.975, 9), 3)
(4.303, 2.262)
>>> [round(p, 4) for p in holm([0.01, 0.04, 0.03])]
[0.03, 0.06, 0.06]
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Iterable, Sequence

ALPHA = 0.05
BEATS, TIES, LOSES, ONE = "beats", "ties", "loses", "one pair"


def t_cdf_abs(t: float, df: int) -> float:
    """P(|T| <= t) for Student's t with ``df`` (a positive integer) degrees of freedom."""
    if df < 1 or df != int(df):
        raise ValueError(f"degrees of freedom must be a positive integer, not {df}")
    t = abs(t)
    if math.isinf(t):
        return 1.0
    theta = math.atan(t / math.sqrt(df))
    c2, s = math.cos(theta) ** 2, math.sin(theta)
    if df % 2:  # odd: 2/pi (theta + sin cos (1 + 2/3 cos^2 + ... + (2.4...(df-3))/(1.3...(df-2)) cos^(df-3)))
        term, total = 1.0, 1.0 if df > 1 else 0.0
        for k in range(1, (df - 1) // 2):
            term *= c2 * (2 * k) / (2 * k + 1)
            total += term
        return min(1.0, 2 / math.pi * (theta + s * math.cos(theta) * total))
    term, total = 1.0, 1.0  # even: sin (1 + 1/2 cos^2 + 1.3/(2.4) cos^4 + ... )
    for k in range(1, df // 2):
        term *= c2 * (2 * k - 1) / (2 * k)
        total += term
    return min(1.0, s * total)


def t_quantile(p: float, df: int) -> float:
    """The ``p`` quantile (0.5 < p < 1) of Student's t: solved by bisection on the closed form."""
    if not 0.5 < p < 1:
        raise ValueError(f"expected 0.5 < p < 1, got {p}")
    target = 2 * p - 1  # P(|T| <= q)
    lo, hi = 0.0, 1.0
    while t_cdf_abs(hi, df) < target:
        hi *= 2
    for _ in range(200):
        mid = (lo + hi) / 2
        if t_cdf_abs(mid, df) < target:
            lo = mid
        else:
            hi = mid
        if hi - lo <= 1e-12 * hi:
            break
    return (lo + hi) / 2


def holm(pvalues: Sequence[float]) -> list[float]:
    """Holm's step-down adjusted p-values, in the input's order: the i-th smallest of m is
    multiplied by m - i, running maxima keep the order, capped at 1."""
    m = len(pvalues)
    order = sorted(range(m), key=lambda i: pvalues[i])
    out, running = [0.0] * m, 0.0
    for rank, i in enumerate(order):
        running = max(running, min(1.0, (m - rank) * pvalues[i]))
        out[i] = running
    return out


@dataclass(frozen=True)
class Comparison:
    """One mechanism against one reference at one depth, paired by seed."""

    mechanism: str
    layers: int
    reference: str
    metric: str                 # test_ppl (lower is better) or test_acc (higher is better)
    pairs: int                  # seeds both have
    mean: float                 # mean of (mechanism - reference) over the pairs
    relative: float             # that mean over the reference's mean on the same seeds
    low: float | None           # the 95 % interval of the mean difference (None: one pair)
    high: float | None
    p: float | None             # two-sided paired t-test
    p_holm: float | None = None  # Holm-corrected across the study's comparisons
    verdict: str = ONE          # from p_holm: beats / ties / loses / one pair
    verdict_95: str = ONE       # from the uncorrected 95 % interval alone

    @property
    def better(self) -> bool:
        """The mechanism's mean is on the good side of the reference's."""
        return self.mean > 0 if self.metric == "test_acc" else self.mean < 0


def pair(mech: dict[int, float], ref: dict[int, float]) -> list[tuple[float, float]]:
    """(mechanism, reference) values of the seeds both have, by seed."""
    return [(mech[s], ref[s]) for s in sorted(mech) if s in ref]


def compare_one(mechanism: str, layers: int, reference: str, metric: str,
                pairs: list[tuple[float, float]]) -> Comparison:
    diffs = [a - b for a, b in pairs]
    n = len(diffs)
    mean = sum(diffs) / n
    base = sum(b for _, b in pairs) / n
    rel = mean / base if base else math.nan
    if n < 2:
        return Comparison(mechanism, layers, reference, metric, n, mean, rel, None, None, None)
    sd = math.sqrt(sum((d - mean) ** 2 for d in diffs) / (n - 1))
    se = sd / math.sqrt(n)
    half = t_quantile(1 - ALPHA / 2, n - 1) * se
    if se == 0:
        p = 0.0 if mean != 0 else 1.0
    else:
        p = 1 - t_cdf_abs(mean / se, n - 1)
    c = Comparison(mechanism, layers, reference, metric, n, mean, rel, mean - half, mean + half, p)
    return _decided(c, p_holm=None)


def _decided(c: Comparison, p_holm: float | None) -> Comparison:
    def read(significant: bool) -> str:
        return (BEATS if c.better else LOSES) if significant else TIES

    v95 = read(not (c.low <= 0 <= c.high)) if c.low is not None and c.high is not None else ONE
    v = read(p_holm < ALPHA) if p_holm is not None else ONE
    return Comparison(**{**c.__dict__, "p_holm": p_holm, "verdict": v, "verdict_95": v95})


def comparisons(rows: Iterable[dict], references: Sequence[str], metric: str) -> list[Comparison]:
    """Every (mechanism, depth) against each reference at that depth that shares a seed with it,
    Holm-corrected across all the comparisons with two pairs or more."""
    values: dict[tuple[str, int], dict[int, float]] = {}
    for r in rows:
        v = r.get(metric)
        if v is not None and math.isfinite(v):
            values.setdefault((r["mechanism"], r["layers"]), {})[r.get("seed") or 0] = v
    out = []
    for (mech, layers), mine in values.items():
        for ref in references:
            theirs = values.get((ref, layers))
            if ref == mech or theirs is None:
                continue
            pairs = pair(mine, theirs)
            if pairs:
                out.append(compare_one(mech, layers, ref, metric, pairs))
    tested = [(i, c.p) for i, c in enumerate(out) if c.p is not None]
    adjusted = holm([p for _, p in tested])
    for (i, _), p in zip(tested, adjusted):
        out[i] = _decided(out[i], p)
    return out
