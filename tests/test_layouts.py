"""A splice's layout entries (``rewrite/layouts.py``): two kinds never compare equal, whatever
their numbers, and each entry is made once."""
from __future__ import annotations

from hypothesis import given, strategies as st

from stringdiag.rewrite.layouts import (BOX_LABEL, CONTEXT_SLOT, OWN_AXIS, RULE_AXIS, BoxLabel, ContextSlot, OwnAxis,
                                        RuleAxis)


@given(st.integers(0, 40), st.integers(0, 40))
def test_kinds_never_meet(a, b):
    axis, slot, own = RuleAxis(a), ContextSlot(b), OwnAxis(a)
    assert axis != slot and axis != own and slot != OwnAxis(b) and BoxLabel("i") != RuleAxis(a)
    assert len({axis, slot, own, ContextSlot(a)}) == 3 + (a != b)
    assert (axis == RuleAxis(b)) == (a == b) and hash(axis) == hash(RuleAxis(a))
    assert (axis.pos, slot.slot, own.pos, BoxLabel("t").label) == (a, b, a, "t")
    assert slot.is_slot and not axis.is_slot and not own.is_slot and not BoxLabel("t").is_slot


@given(st.integers(0, 40))
def test_the_tables_hand_out_one_entry(k):
    assert RULE_AXIS[k] is RULE_AXIS[k] and RULE_AXIS[k] == RuleAxis(k)
    assert CONTEXT_SLOT[k] is CONTEXT_SLOT[k] and OWN_AXIS[k] == OwnAxis(k) and BOX_LABEL[str(k)] == BoxLabel(str(k))
    layout = (RULE_AXIS[0], CONTEXT_SLOT[k])
    assert layout == (RuleAxis(0), ContextSlot(k)) and layout != (RuleAxis(0), RuleAxis(k))
