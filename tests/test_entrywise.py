"""The oracle's entry-by-entry comparison (``oracle.entrywise``) at its edges, each case worked
out by hand: ``|p - q| <= tol·|q| + ATOL·scale`` passes exactly at equality, different shapes
never pass, an entry finite on one side only fails unless ``strict`` is off, entries not finite
on both sides agree, empty tensors agree with error 0, and a one-entry tensor is compared like
any other. The worst entry is the one named."""
from __future__ import annotations

import math

import torch

from stringdiag.verify.oracle import ATOL, RTOL, entrywise


def t(*xs: float) -> torch.Tensor:
    return torch.tensor(xs, dtype=torch.float64)


def test_the_bound_holds_at_equality_and_fails_just_past_it():
    # scale 0: no absolute floor, the error is |p - q| / |q|; 1.5 against 1 is 0.5 exactly
    assert entrywise(t(1.5), t(1.0), scale=0.0, tol=0.5).same
    assert entrywise(t(1.5), t(1.0), scale=0.0, tol=0.5).error == 0.5
    assert not entrywise(t(1.5), t(1.0), scale=0.0, tol=0.25).same
    assert entrywise(t(1.0 + 1e-10), t(1.0)).same and not entrywise(t(1.0 + 1e-8), t(1.0)).same


def test_the_absolute_floor_is_atol_times_the_scale():
    # q = 0: the error is |p| / (ATOL·scale / RTOL), at most RTOL when |p| <= ATOL·scale
    assert entrywise(t(0.5 * ATOL), t(0.0), scale=1.0).same
    assert not entrywise(t(2 * ATOL), t(0.0), scale=1.0).same
    assert entrywise(t(2 * ATOL), t(0.0), scale=4.0).same
    assert math.isclose(entrywise(t(2 * ATOL), t(0.0), scale=1.0).error, 2 * RTOL)


def test_different_shapes_never_agree():
    v = entrywise(t(1.0, 2.0), t(1.0, 2.0, 3.0))
    assert not v.same and v.error == math.inf
    assert not entrywise(torch.zeros(2, 3, dtype=torch.float64), torch.zeros(3, 2, dtype=torch.float64)).same


def test_an_entry_finite_on_one_side_only_fails_unless_not_strict():
    p, q = t(1.0, 2.0), t(1.0, math.inf)
    assert not entrywise(p, q).same and entrywise(p, q).error == math.inf
    assert entrywise(p, q, strict=False).same
    assert not entrywise(t(math.nan), t(0.0)).same


def test_entries_not_finite_on_both_sides_agree():
    assert entrywise(t(math.nan, math.inf, 1.0), t(math.inf, math.nan, 1.0)).same


def test_empty_tensors_agree_with_error_zero_and_one_entry_is_compared():
    v = entrywise(torch.zeros(0, 3, dtype=torch.float64), torch.zeros(0, 3, dtype=torch.float64))
    assert v.same and v.error == 0.0
    assert not entrywise(t(1.0), t(2.0)).same
    assert not entrywise(torch.tensor(1.0, dtype=torch.float64), torch.tensor(2.0, dtype=torch.float64)).same


def test_the_worst_entry_is_named():
    v = entrywise(t(1.0, 5.0, 3.0, 4.0).reshape(2, 2), t(1.0, 2.0, 3.0, 4.0).reshape(2, 2))
    assert not v.same and v.entry == (0, 1) and v.values == (5.0, 2.0)
    assert math.isclose(v.error, 3 / (2 + ATOL / RTOL), rel_tol=1e-12)  # the floor ATOL·scale/RTOL below |q|
