"""``info``'s counts, costs and learnable boxes, computed per definition (``analysis/combine.py``).

The reference is the expansion itself: for small programs every number must be what
``d.expand()`` gives. For the doubling file (each definition uses the previous one twice)
the expansion has ``2^n`` boxes, and the answers must follow the formulas.
"""
from __future__ import annotations

import random
from collections import Counter

import pytest

import stringdiag
from stringdiag.analysis.combine import (expanded_box_count, expanded_counts, learnables, parameter_count,
                                         weights)
from stringdiag.analysis.complexity import Complexity, analyse, seq_names as _seq_names
from stringdiag.analysis.monomials import dominant as _dominant, monomials as _monomials, only as _only, show as _show
from stringdiag.graph.box import Instance
from stringdiag.graph.diagram import Diagram
from stringdiag.cli.summary import summarize
from stringdiag.graph.types import show_type


def doubling(n: int, local: bool = False) -> str:
    lines = ["dim d : fixed", "learn G : [d] -> [d]"]
    if local:
        lines.append("diagram L0(x: [d]) -> [d] {\n  learn F : [d] -> [d]\n  return G(F(x))\n}")
    else:
        lines.append("learn F : [d] -> [d]\ndiagram L0(x: [d]) -> [d] { return G(F(x)) }")
    lines += [f"diagram L{k}(x: [d]) -> [d] {{ return L{k - 1}(L{k - 1}(x)) }}" for k in range(1, n + 1)]
    return "\n".join(lines) + "\n"


# -- the reference: what d.expand() holds ---------------------------------------------------

def ref_counts(flat: Diagram) -> Counter:
    return Counter(flat.record(b).kind for b in flat.boxes())


def ref_learnables(flat: Diagram, params: dict | None = None) -> list[dict]:
    """The learnable boxes of the expansion and, where a box is a scan, of its body expanded
    at the scan's instance path (as the compiler lowers it), in order of first use."""
    params = {} if params is None else params
    for b in flat.boxes():
        node = flat.record(b)
        if node.kind == "diagram" and node.scan:
            ref_learnables(node.ref.expand(path=node.instance + "/"), params)
        if node.kind != "learn":
            continue
        ins = ", ".join(show_type(flat.local_in_type(b, k)) for k in range(len(flat.box_inputs(b))))
        outs = ", ".join(show_type(flat.local_out_type(b, k)) for k in range(len(flat.box_outputs(b))))
        entry = params.setdefault(node.param, {"name": node.param, "box": node.op,
                                                  "signature": f"{ins} -> {outs}".strip(), "uses": 0,
                                                  "shared": not node.local})
        entry["uses"] += 1
    return list(params.values())


def _times(a: set, b: set) -> set:
    return {tuple(sorted((Counter(dict(x)) + Counter(dict(y))).items())) for x in a for y in b}


def ref_costs(flat: Diagram) -> tuple[set, set]:
    """Time and memory monomials of every box and wire of an expansion, one by one; a scan
    adds its body's, expanded, times its SIMD dimensions (one run of the body per step)."""
    time, memory = set(), set()
    for b in flat.boxes():
        node = flat.record(b)
        simd = [dim for _, dim in node.simd]
        if node.kind == "contract":
            per = [dim for _, dim in node.summed] + list(flat.local_out_type(b, 0))
        elif node.kind == "learn":
            per = [x for p in range(len(flat.box_inputs(b))) for x in flat.local_in_type(b, p)]
            per += [x for p in range(len(flat.box_outputs(b))) for x in flat.local_out_type(b, p)]
        else:
            for t in [flat.local_in_type(b, p) for p in range(len(flat.box_inputs(b)))] + \
                     [flat.local_out_type(b, p) for p in range(len(flat.box_outputs(b)))]:
                time |= _monomials(simd + list(t))
            if node.kind == "diagram" and node.scan:
                body_time, body_memory = ref_costs(node.ref.expand())
                time |= _times(body_time, _monomials(simd))
                memory |= _times(body_memory, _monomials(simd))
            continue
        time |= _monomials(simd + per)
    for w in flat.wires():
        memory |= _monomials(flat.wire_type(w))
    return time, memory


def ref_analyse(d: Diagram) -> Complexity:
    """analyse() as it was: every box of the expansion, one by one (scanned bodies opened)."""
    time, memory = ref_costs(d.expand())
    seq = _seq_names(d)
    return Complexity(_show(_dominant(time), seq), _show(_dominant(memory), seq),
                      _show(_dominant({_only(m, seq) for m in time}), seq),
                      _show(_dominant({_only(m, seq) for m in memory}), seq))


def assert_like_expansion(d: Diagram) -> None:
    flat = d.expand()
    assert expanded_counts(d) == ref_counts(flat), d.name
    assert expanded_box_count(d) == len(flat), d.name
    assert learnables(d) == ref_learnables(flat), d.name
    assert analyse(d) == ref_analyse(d), d.name


# -- the doubling file ------------------------------------------------------------------------

def test_doubling_30_levels_by_formula():
    n = 30
    p = stringdiag.loads(doubling(n))
    s = summarize(p[f"L{n}"])
    assert s["boxes"]["total"] == 2
    assert s["boxes"]["expanded_total"] == 2 * 2 ** n
    assert s["boxes"]["expanded"] == {"learn": 2 * 2 ** n}
    assert [(e["name"], e["uses"], e["shared"]) for e in s["learnable"]] == [("F", 2 ** n, True),
                                                                              ("G", 2 ** n, True)]
    assert s["complexity"] == {"time": "d^2", "memory": "d", "seq_time": "1", "seq_memory": "1"}
    assert expanded_box_count(p[f"L{n}"]) == 2 ** (n + 1)
    # two global weight sets, each [d] -> [d]; linear: d*d + d, mlp: 2 * (d*d + d)
    assert parameter_count(p[f"L{n}"], {"d": 8}, "linear") == 2 * (8 * 8 + 8)
    assert parameter_count(p[f"L{n}"], {"d": 8}, "mlp") == 2 * 2 * (8 * 8 + 8)


def test_doubling_with_local_weights_30_levels():
    n = 30
    p = stringdiag.loads(doubling(n, local=True))
    d = p[f"L{n}"]
    s = summarize(d)
    assert s["boxes"]["expanded"] == {"learn": 2 * 2 ** n}
    # 2^n instances of L0, each with its own F; G is one set used 2^n times
    assert s["learnable"] == [
        {"name": "F (local to L0)", "box": "F", "signature": "[d] -> [d]", "uses": 2 ** n, "shared": False,
         "weight_sets": 2 ** n, "local_to": "L0"},
        {"name": "G", "box": "G", "signature": "[d] -> [d]", "uses": 2 ** n, "shared": True}]
    assert parameter_count(d, {"d": 8}, "linear") == (2 ** n + 1) * (8 * 8 + 8)
    # few weight sets: listed one by one, as the expansion names them
    assert [e["name"] for e in summarize(p["L2"])["learnable"]] == [
        "L1#1/L0#1/F", "G", "L1#1/L0#2/F", "L1#2/L0#1/F", "L1#2/L0#2/F"]


@pytest.mark.parametrize("local", [False, True])
@pytest.mark.parametrize("n", [0, 1, 2, 3, 5])
def test_doubling_small_like_expansion(n, local):
    p = stringdiag.loads(doubling(n, local))
    for name in p.diagrams:
        assert_like_expansion(p[name])


def test_copies_of_an_instance_share_their_weights():
    p = stringdiag.loads(doubling(3, local=True))
    d = p["L3"]
    for b in d.boxes():  # as a rewrite that copies a box leaves it: both boxes one instance
        d.update(b, weights=Instance("L2#1"))
    flat = d.expand()
    assert learnables(d) == ref_learnables(flat)
    assert [(e["name"], e["uses"]) for e in learnables(d)][:2] == [("L2#1/L1#1/L0#1/F", 2), ("G", 8)]
    ws, _ = weights(d)
    assert sum(ws[id(d.graph)].loc_sets.values()) == 4
    assert parameter_count(d, {"d": 2}, "linear") == (4 + 1) * 6


def test_copies_all_the_way_down_are_one_weight_set():
    n = 30
    p = stringdiag.loads(doubling(n, local=True))
    for k in range(1, n + 1):  # both uses of L(k-1) in Lk are copies of one instance
        for b in p[f"L{k}"].boxes():
            p[f"L{k}"].update(b, weights=Instance(f"L{k - 1}#1"))
    path = "".join(f"L{k}#1/" for k in range(n - 1, -1, -1))
    assert [(e["name"], e["uses"]) for e in learnables(p[f"L{n}"])] == [(f"{path}F", 2 ** n), ("G", 2 ** n)]
    assert parameter_count(p[f"L{n}"], {"d": 2}, "linear") == 2 * (2 * 2 + 2)
    assert learnables(p["L4"]) == ref_learnables(p["L4"].expand())


# -- random nestings against the expansion -----------------------------------------------------

def random_program(rng: random.Random, n_rows: int = 3, n_seqs: int = 3) -> str:
    """Definitions over rows ([d]) and sequences ([s, d]) using earlier ones: inside SIMD
    boxes, with copied (not iterated) inputs, transposed inputs, generics, local and global
    learnable boxes and tensors, scans, and definitions that pass an input straight through."""
    out = ["dim s : seq", "dim d, k : fixed", "learn G : [d] -> [d]", "learn E : -> [d]",
           "learn P : [d], [d] -> [d]", "learn Gk<n> : [n] -> [n]", "learn Wk : [k] -> [d]",
           "learn Ek : -> [k]", "learn Cst : -> []",
           "diagram Sc0(x: []) -> [] { return x }",
           "diagram Sc1(x: []) -> [] {\n  learn c : -> []\n  return c()\n}",
           "diagram Sc2(x: []) -> [] { return x * Cst() }",
           "diagram Pass2(x: [d], y: [d]) -> [d] { return y }"]
    out.append("diagram Cell(h: [d], x: [d]) -> [d], [d] {\n  learn W : [d], [d] -> [d]\n"
               "  h2 = W(h, x)\n  return h2, h2 + x\n}")
    out.append("diagram Gen<n>(x: [n]) -> [n] {\n  learn T : -> [n]\n  return x + T()\n}")
    rows: list[str] = []
    for r in range(n_rows):
        vals, body = ["x"], []
        for k in range(rng.randint(0, 4)):
            u = rng.choice(vals)
            v = f"v{k}"
            choice = rng.randrange(12)
            if choice == 0:
                body.append(f"  {v} = G({u})")
            elif choice == 8:  # a box that depends on no input: in no SIMD box of the caller
                body.append(f"  {v} = {u} + Wk(Ek())")
            elif choice == 9:  # ... and an output that depends on no input: broadcast
                body.append(f"  {v} = Wk(Ek())")
            elif choice == 10:
                body.append(f"  {v}[f] = Sc{rng.randrange(3)}({u}[f])")
            elif choice == 11:
                body.append(f"  {v} = Pass2({u}, {rng.choice(vals)})")
            elif choice == 1:
                body.append(f"  learn L{k} : [d] -> [d]\n  {v} = L{k}({u})")
            elif choice == 2:
                body.append(f"  learn T{k} : -> [d]\n  {v} = {u} + T{k}()")
            elif choice == 3 and rows:
                body.append(f"  {v} = {rng.choice(rows)}({u})")
            elif choice == 4:
                body.append(f"  {v} = Gen({u})")
            elif choice == 5:
                body.append(f"  {v} = P({u}, {rng.choice(vals)})")
            elif choice == 6:
                body.append(f"  {v} = {u} + E()")
            else:
                body.append(f"  {v} = Gk({u}) * {rng.choice(vals)}")
            vals.append(v)
        name = f"R{r}"
        ret = rng.choice(vals) if rng.random() < 0.7 else "x"
        out.append(f"diagram {name}(x: [d]) -> [d] {{\n" + "\n".join(body) + f"\n  return {ret}\n}}")
        rows.append(name)
    seqs: list[str] = []
    for q in range(n_seqs):
        vals, zs, body = ["x"], ["z"], []
        for k in range(rng.randint(1, 5)):
            a = rng.choice(vals)
            v = f"v{k}"
            choice = rng.randrange(13)
            if choice == 0:
                body.append(f"  {v}[i] = {rng.choice(rows)}({a}[i])")
            elif choice == 1:  # copy-SIMD: the row is not indexed by i
                body.append(f"  {v}[i] = {rng.choice(rows)}({rng.choice(zs)}) + {a}[i]")
            elif choice == 2 and seqs:
                body.append(f"  {v} = {rng.choice(seqs)}({a}, {rng.choice(zs)})")
            elif choice == 3:
                body.append(f"  t{k}[f, i] = {a}[i, f]\n  {v}[i] = {rng.choice(rows)}(t{k}[:, i])")
            elif choice == 4:
                body.append(f"  learn L{k} : [d] -> [d]\n  {v}[i] = L{k}({a}[i])")
            elif choice == 5:
                b = rng.choice(vals)
                body.append(f"  e{k}[i, j] = sum_f {a}[i, f] * {b}[j, f]\n  c{k}[i] = softmax(e{k}[i])\n"
                            f"  {v}[i] = sum_j c{k}[i, j] * {b}[j]")
            elif choice == 6:
                z = f"z{k}"
                body.append(f"  {z} = {rng.choice(rows)}({rng.choice(zs)})\n  {v}[i] = {a}[i] + {z}")
                zs.append(z)
            elif choice == 7:
                body.append(f"  hN{k}, {v}[i] = scan Cell({rng.choice(zs)}, {a}[i])")
            elif choice == 8:
                body.append(f"  {v}[i] = layernorm({a}[i])")
            elif choice == 9:
                body.append(f"  g{k}[f] = Gen({a}[:, f])\n  {v}[i, f] = g{k}[f, i]")
            elif choice == 10:
                body.append(f"  {v}[i] = Gen({rng.choice(zs)}) * {a}[i]")
            elif choice == 11:  # the pass-through of an input copied into every iteration
                body.append(f"  {v}[i] = Pass2({a}[i], {rng.choice(zs)})")
            else:
                body.append(f"  {v}[i] = Pass2({rng.choice(zs)}, {a}[i])")
            vals.append(v)
        name = f"S{q}"
        ret = rng.choice(vals) if rng.random() < 0.8 else "x"
        out.append(f"diagram {name}(x: [s, d], z: [d]) -> [s, d] {{\n" + "\n".join(body) +
                   f"\n  return {ret}\n}}")
        seqs.append(name)
    # a top diagram that may return a transposed pass-through: expand() reorders it
    top = rng.choice(rows)
    out.append(f"diagram Top(x: [d, s]) -> [s, d] {{\n  y[i] = {top}(x[:, i])\n  return y\n}}")
    return "\n".join(out) + "\n"


@pytest.mark.parametrize("seed", range(40))
def test_random_nestings_like_expansion(seed):
    rng = random.Random(seed)
    src = random_program(rng)
    p = stringdiag.loads(src)
    for name in p.own:
        assert_like_expansion(p[name])


def test_parameter_count_like_compile():
    torch = pytest.importorskip("torch")  # noqa: F841
    from stringdiag.lower import compile

    for seed in range(6):
        p = stringdiag.loads(random_program(random.Random(seed), 2, 2))
        for name in ("R0", "R1", "S0", "S1"):
            gm = compile(p[name], dims={"d": 3, "k": 2, "s": 5}, approximator="linear")
            assert parameter_count(p[name], {"d": 3, "k": 2, "s": 5}, "linear") == sum(x.numel() for x in gm.parameters())


def test_the_parameter_formulas_cover_every_approximator_policy():
    # analysis counts parameters by formula, without torch; lower builds the modules
    from stringdiag.analysis.combine import FORMULAS
    from stringdiag.lower.approximators import POLICIES

    assert set(FORMULAS) == set(POLICIES)
    for name, formula in FORMULAS.items():
        for n_in, n_out in ((3, 5), (7, 2)):
            assert formula(n_in, n_out) == sum(p.numel() for p in POLICIES[name](n_in, n_out).parameters())
