"""Equality up to isomorphism: invariant under renaming and reordering, and not fooled."""
from __future__ import annotations

import re

from hypothesis import given, settings
from hypothesis import strategies as st

import stringdiag

HEAD = """\
dim s : seq
dim d, k : fixed
learn Q, K : [d] -> [k]
learn V : [d] -> [d]
learn F : [d] -> [d]
"""

# (target wire, index variables on the left, right-hand side) of a two-output diagram
STATEMENTS = [
    ("q", "i", "Q(x[i])"),
    ("kk", "j", "K(x[j])"),
    ("v", "j", "V(x[j])"),
    ("e", "i, j", "sum_f q[i, f] * kk[j, f]"),
    ("a", "i", "softmax(e[i] / sqrt(k))"),
    ("y", "i", "sum_j a[i, j] * v[j]"),
    ("g", "", "F(x)"),
    ("r", "", "x + g"),
]
OUTPUTS = ["y", "r"]
WIRES = [s[0] for s in STATEMENTS]
INDEX = {"i", "j", "f"}


def deps(rhs: str) -> set[str]:
    return set(re.findall(r"[A-Za-z_]\w*", rhs)) & set(WIRES)


def source(order: list[int], wire_names: dict[str, str], index_names: dict[str, str]) -> str:
    def rename(text: str) -> str:
        def sub(m):
            w = m.group(0)
            return wire_names.get(w) or index_names.get(w) or w
        text = re.sub(r"(?<![A-Za-z0-9_])[A-Za-z_]\w*", sub, text)
        return re.sub(r"sum_(\w+)", lambda m: "sum_" + index_names.get(m.group(1), m.group(1)), text)

    lines = []
    for k in order:
        tgt, idx, rhs = STATEMENTS[k]
        left = rename(tgt) + (f"[{rename(idx)}]" if idx else "")
        lines.append(f"  {left} = {rename(rhs)}")
    outs = ", ".join(rename(o) for o in OUTPUTS)
    return HEAD + "diagram D(x: [s, d]) -> [s, d], [s, d] {\n" + "\n".join(lines) + f"\n  return {outs}\n}}\n"


def topological(priorities: list[float]) -> list[int]:
    """A dependency-respecting order, chosen by the drawn priorities."""
    done: set[str] = set()
    order: list[int] = []
    left = set(range(len(STATEMENTS)))
    while left:
        ready = [k for k in left if deps(STATEMENTS[k][2]) <= done]
        k = min(ready, key=lambda r: (priorities[r], r))
        order.append(k)
        done.add(STATEMENTS[k][0])
        left.remove(k)
    return order


BASE = stringdiag.loads(source(list(range(len(STATEMENTS))), {}, {}), "base.diag")["D"]
fresh = st.from_regex(r"[a-z][a-z0-9]{0,5}", fullmatch=True).filter(
    lambda n: n not in {"x", "s", "d", "k", "sqrt", "softmax", "sum"} and not n.startswith("sum"))


@settings(max_examples=60, deadline=None, derandomize=True)
@given(
    priorities=st.lists(st.floats(0, 1), min_size=len(STATEMENTS), max_size=len(STATEMENTS)),
    wires=st.lists(fresh, min_size=len(WIRES), max_size=len(WIRES), unique=True),
    indices=st.lists(fresh, min_size=3, max_size=3, unique=True),
)
def test_renaming_and_reordering_give_an_equal_diagram(priorities, wires, indices):
    if set(wires) & set(indices):
        indices = [i + "0" for i in indices]
    src = source(topological(priorities), dict(zip(WIRES, wires)), dict(zip(sorted(INDEX), indices)))
    other = stringdiag.loads(src, "variant.diag")["D"]
    assert other.canonical_hash() == BASE.canonical_hash()
    assert other.isomorphic(BASE)


def variant(old: str, new: str) -> stringdiag.Diagram:
    src = source(list(range(len(STATEMENTS))), {}, {})
    assert old in src
    return stringdiag.loads(src.replace(old, new, 1), "variant.diag")["D"]


def test_different_diagrams_are_not_equal():
    changes = [
        ("Q(x[i])", "K(x[i])"),                     # a different learnable box
        ("q[i, f] * kk[j, f]", "kk[i, f] * q[j, f]"),  # queries and keys swapped
        ("x + g", "g + x"),                          # arguments of a box in the other order
        ("softmax(e[i] / sqrt(k))", "softmax(e[i])"),  # no scaling
        ("sum_j a[i, j] * v[j]", "sum_j a[j, i] * v[j]"),  # the attention matrix transposed
    ]
    for old, new in changes:
        d = variant(old, new)
        assert not d.isomorphic(BASE), (old, new)
        assert d.canonical_hash() != BASE.canonical_hash(), (old, new)


def test_output_order_matters():
    src = source(list(range(len(STATEMENTS))), {}, {}).replace("return y, r", "return r, y")
    assert not stringdiag.loads(src, "swapped.diag")["D"].isomorphic(BASE)


def test_expansion_is_deterministic_up_to_isomorphism():
    a, b = BASE.expand(), BASE.expand()
    assert a.isomorphic(b) and len(a) == len(b) > len(BASE)
