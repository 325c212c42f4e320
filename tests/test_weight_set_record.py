"""``WeightSet``: a record read by its fields, and the tuple the public keys have always been.

A compiled module's ``weight_sets`` is public (a user finds a set's module by
``m.weight_sets[("learn", False, "E")]``): the record must compare, hash, sort, print and
pickle as those tuples do, and a tuple handed in must read as the record.
"""
from __future__ import annotations

import copy
import pickle

import pytest
from hypothesis import given, strategies as st

import stringdiag
from stringdiag.graph.weights import SetKind, WeightSet, weight_sets
from stringdiag.graph.weightuse import uses

names = st.text(alphabet="ABFH#/12_", min_size=1, max_size=8)


def as_tuple(kind: SetKind, name: str, local: bool) -> tuple:
    """The key as a plain tuple, written out by hand."""
    return (kind.value, local, name) if kind is SetKind.LEARN else (kind.value, name)


@given(st.sampled_from(list(SetKind)), names, st.booleans())
def test_the_record_is_its_tuple(kind, name, local):
    key, plain = WeightSet(kind, name, local), as_tuple(kind, name, local)
    assert key == plain and plain == key and hash(key) == hash(plain) and repr(key) == repr(plain)
    assert {plain: 1}[key] == 1 and {key: 1}[plain] == 1
    assert (key.kind, key.name, key.local) == (kind, name, local and kind is SetKind.LEARN)
    assert WeightSet.of(plain) == key and type(WeightSet.of(plain)) is WeightSet and WeightSet.of(key) is key
    for back in (pickle.loads(pickle.dumps(key)), copy.deepcopy(key)):
        assert back == key and type(back) is WeightSet and back.name == name
    assert key.renamed("X#1/" + name).name == "X#1/" + name and key.renamed("Y").kind is kind


@given(st.lists(st.tuples(st.sampled_from([SetKind.LEARN, SetKind.DIAGRAM]), names, st.booleans()), max_size=6))
def test_records_sort_as_their_tuples(keys):
    """A tie keeps the first set in ``repr`` order: the record may not move it."""
    records = [WeightSet(*k) for k in keys]
    plains = [as_tuple(*k) for k in keys]
    assert [tuple(k) for k in sorted(records, key=repr)] == sorted(plains, key=repr)


def test_a_compiled_module_is_keyed_by_records_a_tuple_finds():
    torch = pytest.importorskip("torch")
    p = stringdiag.loads("dim d : fixed\nlearn E : [d] -> [d]\n"
                         "diagram H(x: [d]) -> [d] {\n  learn F : [d] -> [d]\n  return F(x)\n}\n"
                         "diagram D(x: [d]) -> [d] {\n  return E(H(x)) + H(x)\n}\n")
    m = stringdiag.compile(p["D"], dims={"d": 3}, dtype=torch.float64)
    assert set(m.weight_sets) == {("learn", False, "E"), ("learn", True, "H#1/F"), ("learn", True, "H#2/F")}
    assert all(type(k) is WeightSet for k in m.weight_sets)
    assert m.weight_sets[("learn", False, "E")] == m.weight_sets[WeightSet(SetKind.LEARN, "E")]
    assert weight_sets(p["D"]) == {("learn", False, "E"), ("diagram", "H#1"), ("diagram", "H#2")}
    assert [u.where() for u in uses(p["D"], ("learn", True, "H#2/F"))] == ["inside 'H' (a definition box)"]
