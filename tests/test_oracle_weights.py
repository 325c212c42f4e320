"""How the oracle gives both sides of a step the same weights (weight sharing is semantics):
``translate`` finds the set of the first side that a set of the second stands for, and
``share_sets`` copies each set's weights across. Expectations written out by hand."""
from __future__ import annotations

import torch

from stringdiag.verify.oracle import share_sets, translate

FOLD = {("diagram", "G#1/H#1"): ("diagram", "H#1")}  # a fold put H#1 inside the new G#1


def test_a_set_in_a_renamed_instance_is_the_set_it_was():
    assert translate(("learn", True, "G#1/H#1/L"), FOLD) == ("learn", True, "H#1/L")
    assert translate(("learn", True, "G#1/H#1/K#2/L"), FOLD) == ("learn", True, "H#1/K#2/L")
    assert translate(("diagram", "G#1/H#1/K#2"), FOLD) == ("diagram", "H#1/K#2")


def test_a_set_named_in_the_correspondence_is_its_partner():
    renamed = {("learn", True, "B"): ("learn", True, "A")}
    assert translate(("learn", True, "B"), renamed) == ("learn", True, "A")


def test_other_sets_stand_for_themselves():
    for key in [("learn", True, "G#1/H#10/L"),  # another instance whose name begins alike
                ("learn", True, "H#1/L"), ("learn", False, "G#1/H#1"),  # a global learnable of that name
                ("learn", True, "G#1/H#1")]:  # the instance's own name is not a set inside it
        assert translate(key, FOLD) == key
    assert translate(("learn", True, "A/L"), {("learn", True, "A"): ("learn", True, "B")}) == ("learn", True, "A/L")
    assert translate(("learn", True, "L"), {}) == ("learn", True, "L")


class _Sets(torch.nn.Module):
    """A compiled module's shape: modules by attribute, ``weight_sets`` key -> attribute."""

    def __init__(self, sizes: dict[str, int], sets: dict[tuple, str], seed: int):
        super().__init__()
        torch.manual_seed(seed)
        for attr, n in sizes.items():
            *path, last = attr.split(".")
            owner = self
            for part in path:
                if not hasattr(owner, part):
                    owner.add_module(part, torch.nn.Module())
                owner = getattr(owner, part)
            owner.add_module(last, torch.nn.Linear(n, 2))
        self.weight_sets = sets


def _same(a: torch.nn.Module, b: torch.nn.Module) -> bool:
    return all(torch.equal(x, y) for x, y in zip(a.state_dict().values(), b.state_dict().values(), strict=True))


def test_share_sets_copies_each_set_from_the_set_it_stands_for_and_nothing_else():
    k1, k2, k3 = ("learn", False, "Q"), ("learn", True, "H#1/L"), ("learn", True, "H#2/L")
    src = _Sets({"a": 3, "b": 3, "c": 4}, {k1: "a", k2: "b", k3: "c"}, seed=0)
    moved = ("learn", True, "G#1/H#1/L")  # H#1's set, now inside G#1
    dst = _Sets({"x": 3, "y": 3, "z": 5, "w": 3, "cell.h": 3},
                {k1: "x", moved: "y", k3: "z", ("learn", True, "new"): "w", ("learn", True, "H#1/L"): "h"}, seed=1)
    before = {k: v.clone() for k, v in dst.state_dict().items()}
    n = share_sets(src, dst, FOLD)
    assert n == 3  # Q, the moved set, and the cell's set; not the mis-shaped one, nor the new one
    assert _same(dst.x, src.a) and _same(dst.y, src.b) and _same(dst.cell.h, src.b)
    assert not _same(dst.x, src.b)
    for attr in ("z", "w"):  # left as they were
        assert all(torch.equal(v, before[f"{attr}.{p}"]) for p, v in getattr(dst, attr).state_dict().items())


def test_share_sets_passes_over_a_set_without_its_module_or_of_other_parameters():
    k1, k2 = ("learn", False, "Q"), ("learn", False, "R")
    src = _Sets({"a": 3, "b": 3}, {k1: "a", k2: "b", ("learn", False, "S"): "gone"}, seed=0)
    dst = _Sets({"x": 3}, {k1: "x", k2: "nowhere", ("learn", False, "S"): "x"}, seed=1)
    assert share_sets(src, dst, {}) == 1 and _same(dst.x, src.a)
    dst.x = torch.nn.Linear(3, 2, bias=False)  # the same weight's shape, but no bias
    kept = dst.x.weight.clone()
    assert share_sets(src, dst, {}) == 0 and torch.equal(dst.x.weight, kept)


def test_share_sets_without_weight_sets_copies_nothing():
    src = _Sets({"a": 3}, {("learn", False, "Q"): "a"}, seed=0)
    plain = torch.nn.Linear(3, 2)
    assert share_sets(src, plain, {}) == 0 and share_sets(plain, src, {}) == 0
