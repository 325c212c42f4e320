"""The syntax nodes' records behave as the frozen slotted dataclasses they replace (the
reference here is ``dataclasses`` itself, one class made each way)."""
import copy
import dataclasses
import pickle

import pytest

from stringdiag.syntax.records import Mutable, Record, field, fields, replace


class Rec(Record):
    text: str
    pos: int
    of: "str | None" = None


@dataclasses.dataclass(frozen=True, slots=True)
class Ref:
    text: str
    pos: int
    of: "str | None" = None


CASES = [(("a", 1), {}), (("a",), {"pos": 2}), ((), {"text": "b", "pos": 3, "of": "v"}), (("a", 1, "w"), {})]


@pytest.mark.parametrize("args, kwargs", CASES)
def test_a_record_is_made_read_compared_and_shown_as_the_dataclass_is(args, kwargs):
    r, d = Rec(*args, **kwargs), Ref(*args, **kwargs)
    assert fields(r) == tuple(f.name for f in dataclasses.fields(d)) == Rec.__match_args__ == Ref.__match_args__
    assert [getattr(r, f) for f in fields(r)] == [getattr(d, f) for f in fields(r)]
    assert repr(r).replace("Rec(", "Ref(") == repr(d)
    assert r == Rec(*args, **kwargs) and hash(r) == hash(Rec(*args, **kwargs))
    assert r != Rec("zz", -1) and r != d and not hasattr(r, "__dict__")
    assert copy.deepcopy(r) == r == pickle.loads(pickle.dumps(r))
    assert replace(r, pos=9) == Rec(r.text, 9, r.of) and dataclasses.replace(d, pos=9) == Ref(d.text, 9, d.of)
    match r:
        case Rec(text, pos, of):
            assert (text, pos, of) == (d.text, d.pos, d.of)


@pytest.mark.parametrize("args, kwargs", [((), {}), (("a",), {}), (("a", 1, "x", 2), {}), (("a", 1), {"size": 3})])
def test_a_record_refuses_the_calls_the_dataclass_refuses(args, kwargs):
    with pytest.raises(TypeError):
        Ref(*args, **kwargs)
    with pytest.raises(TypeError):
        Rec(*args, **kwargs)


def test_a_record_is_frozen_as_the_dataclass_is():
    r = Rec("a", 1)
    for attempt in (lambda: setattr(r, "text", "b"), lambda: delattr(r, "pos"), lambda: setattr(r, "new", 1)):
        with pytest.raises(dataclasses.FrozenInstanceError):
            attempt()
    assert r == Rec("a", 1)


class Mut(Mutable, frozen=False):
    text: str
    seen: list = field(default_factory=list)
    pos: int = 0


@dataclasses.dataclass
class MutRef:
    text: str
    seen: list = dataclasses.field(default_factory=list)
    pos: int = 0


@pytest.mark.parametrize("args, kwargs", [(("a",), {}), (("a", [1], 2), {}), ((), {"text": "b", "pos": 3})])
def test_a_mutable_record_behaves_as_a_plain_dataclass(args, kwargs):
    import weakref

    m, d = Mut(*args, **kwargs), MutRef(*args, **kwargs)
    assert repr(m).replace("Mut(", "MutRef(") == repr(d) and fields(m) == Mut.__match_args__
    assert Mut("a").seen == [] and Mut("a").seen is not Mut("a").seen  # a fresh default for each record
    m.pos, d.pos = 7, 7                                                 # assignable,
    m.note = "x"                                                        # other attributes too
    assert m == Mut(m.text, m.seen, 7) and m != Mut(m.text, m.seen, 8) and m != d
    with pytest.raises(TypeError):
        hash(m)                                                         # unhashable, as the dataclass
    with pytest.raises(TypeError):
        hash(d)
    assert weakref.ref(m)() is m
    for other in (copy.copy(m), copy.deepcopy(m), pickle.loads(pickle.dumps(m))):
        assert other == m and other.note == "x"
    assert copy.copy(m).seen is m.seen and copy.deepcopy(m).seen is not m.seen
    with pytest.raises(TypeError):
        Mut(*args, nope=1, **kwargs)
