"""The space of mechanisms against a brute-force count written separately.

The brute force knows nothing of the enumerator: for every multiset of generator
occurrences it tries every assignment of a source to every input port (and to the
diagram's output), keeps the acyclic ones where every output is read as the reading asks,
and counts them up to isomorphism with networkx's VF2 on labelled graphs.
"""
from __future__ import annotations

import itertools
import math
import json
from pathlib import Path

import networkx as nx
import pytest

import stringdiag
from stringdiag.cli.main import main
from stringdiag.enumerate.space import generators, is_composite, wirings
from stringdiag.enumerate.stages import enumerate_space
from stringdiag.rewrite.rule import load_rules

ROOT = Path(__file__).resolve().parents[1]
ANATOMY = stringdiag.load(ROOT / "gallery" / "anatomy.diag")
ALL = ["AttPrep", "AttApply", "LinAttPrep", "LinAttApply", "ConcatFF"]


def brute(names: list[str], bound: int, copy_outputs: bool = False) -> tuple[int, int]:
    """(raw, not-composite) counted by exhaustion."""
    sig = {n: ([tuple(t) for t in ANATOMY[n].input_types], [tuple(t) for t in ANATOMY[n].output_types])
           for n in names}
    stream = sig[names[0]][0][0]
    found: list[nx.DiGraph] = []
    comp = 0
    for size in range(1, bound + 1):
        for multiset in itertools.combinations_with_replacement(names, size):
            outs = [(k, p, t) for k, n in enumerate(multiset) for p, t in enumerate(sig[n][1])]
            ports = [(k, q, t) for k, n in enumerate(multiset) for q, t in enumerate(sig[n][0])]
            choices = [[("x",)] * (t == stream) + [(k2, p2) for k2, p2, t2 in outs if t2 == t]
                       for _, _, t in ports]
            roots = [(k, p) for k, p, t in outs if t == stream]
            for root in roots:
                for pick in itertools.product(*choices):
                    reads = [s for s in pick if s != ("x",)] + [root]
                    counts = {(k, p): reads.count((k, p)) for k, p, _ in outs}
                    if any(c == 0 or (c > 1 and not copy_outputs) for c in counts.values()):
                        continue
                    g = graph(multiset, ports, pick, root)
                    if not nx.is_directed_acyclic_graph(g):
                        continue
                    if any(nx.is_isomorphic(g, h, node_match=same, edge_match=same) for h in found):
                        continue
                    found.append(g)
                    comp += composite(g, stream, sig)
    return len(found), len(found) - comp


def same(a, b) -> bool:
    return a["label"] == b["label"]


def graph(multiset, ports, pick, root) -> nx.DiGraph:
    g = nx.DiGraph()
    g.add_node("x", label="x")
    g.add_node("out", label="out")
    for k, n in enumerate(multiset):
        g.add_node(k, label=n)
    for (k, q, _), s in zip(ports, pick):
        src = "x" if s == ("x",) else s[0]
        lab = f"{'x' if s == ('x',) else s[1]}>{q}"
        if g.has_edge(src, k):
            g[src][k]["label"] = ";".join(sorted(g[src][k]["label"].split(";") + [lab]))
        else:
            g.add_edge(src, k, label=lab)
    g.add_edge(root[0], "out", label=f"{root[1]}>out")
    return g


def composite(g: nx.DiGraph, stream, sig) -> bool:
    """Some occurrence's stream output is the only thing its ancestors give the rest, and the
    rest never reads the input: the member is f ; g."""
    for v in [n for n in g if n not in ("x", "out")]:
        f = nx.ancestors(g, v) - {"x"} | {v}
        rest = set(g) - f - {"x", "out"}
        if not rest or any(g.has_edge("x", r) for r in rest):
            continue
        crossing = [(a, b, d["label"]) for a, b, d in g.edges(data=True) if a in f and b not in f]
        sources = {(a, part.split(">")[0]) for a, _, lab in crossing for part in lab.split(";")}
        if any(b == "out" for _, b, _ in crossing) or len(sources) != 1:
            continue  # f must hand g one value (g may read it several times), and not be the output
        ((a, port),) = sources
        if a == v and sig[g.nodes[v]["label"]][1][int(port)] == stream:
            return True
    return False


def counts(names, bound, copy_outputs=False) -> tuple[int, int]:
    gens, stream = generators([ANATOMY[n] for n in names])
    ws = list(wirings(gens, stream, bound, copy_outputs))
    return len(ws), sum(not is_composite(w, gens, stream) for w in ws)


@pytest.mark.parametrize("names, bound", [
    (["AttPrep", "AttApply", "ConcatFF"], 3),
    (["LinAttPrep", "LinAttApply", "ConcatFF"], 3),
    (["ConcatFF", "AttPrep", "AttApply"], 3),
    (ALL, 2),
])
def test_raw_and_not_composite_match_the_brute_force(names, bound):
    assert counts(names, bound) == brute(names, bound)


@pytest.mark.parametrize("names, bound", [(["ConcatFF", "AttPrep", "AttApply"], 3), (ALL, 2)])
def test_copied_outputs_reading_matches_the_brute_force(names, bound):
    raw, nc = counts(names, bound, copy_outputs=True)
    assert (raw, nc) == brute(names, bound, copy_outputs=True)
    assert nc < raw  # composites exist once outputs may be copied


def test_members_are_distinct_diagrams_that_check_compile_and_are_causal():
    rules = load_rules(ROOT / "rules" / "absorb.rules") + load_rules(ROOT / "rules" / "merge.rules")
    space = enumerate_space([ANATOMY[n] for n in ALL], 3, rules)
    assert [s.name for s in space.stages] == ["raw", "not-composite", "reduced"]
    from stringdiag.enumerate.build import build

    gens = generators([ANATOMY[n] for n in ALL])[0]  # diagrams are built for the survivors; build the rest
    hashes = {build(m.wiring, gens, m.name).canonical_hash() for m in space.stages[1].members}
    assert len(hashes) == space.stages[1].count
    # the smallest dot-product and linear members are the paper's M1 and M0
    assert any(m.diagram.isomorphic(ANATOMY["M1"]) for m in space.result)
    assert any(m.diagram.isomorphic(ANATOMY["M0"]) for m in space.result)
    import torch
    for m in space.result:
        mod = stringdiag.compile(m.diagram, dims={"d": 4, "k": 3}, dtype=torch.float64)
        x = torch.randn(1, 6, 4, dtype=torch.float64)
        y = mod(x)
        x2 = x.clone()
        x2[:, 4:] += 1.0  # changing later tokens leaves earlier outputs alone
        assert torch.allclose(mod(x2)[:, :4], y[:, :4], atol=1e-12), m.name


def test_reduction_keeps_the_smaller_member_of_a_related_pair():
    rules = load_rules(ROOT / "rules" / "absorb.rules")
    space = enumerate_space([ANATOMY[n] for n in ["AttPrep", "AttApply", "ConcatFF"]], 3, rules)
    survivors = {m.name for m in space.result}
    p = stringdiag.loads(f'import "{ROOT / "gallery" / "anatomy.diag"}"\n'
                         "diagram Big(x: [s, d]) -> [s, d] { return AttApply(AttPrep(ConcatFF(x, x)), x) }",
                         str(ROOT / "x.diag"))
    from stringdiag.enumerate.build import wiring_of

    gens = generators([ANATOMY[n] for n in ["AttPrep", "AttApply", "ConcatFF"]])[0]
    big = [m for m in space.stages[1].members if m.wiring == wiring_of(p["Big"], gens)]
    assert big and big[0].name not in survivors  # AttPrep absorbs the ConcatFF: M1 stands for it
    (m1,) = [m for m in space.result if m.diagram.isomorphic(ANATOMY["M1"])]
    assert big[0].name in space.classes[m1.name]


def test_cli_json_and_output_file(tmp_path, capsys):
    out = tmp_path / "mech.diag"
    # the output file imports anatomy.diag; it lives beside a copy so the import resolves
    (tmp_path / "anatomy.diag").write_text((ROOT / "gallery" / "anatomy.diag").read_text())
    rc = main([
        "enumerate", str(tmp_path / "anatomy.diag"), "--generators", ",".join(ALL), "--max", "3",
        "--rules", str(ROOT / "rules" / "absorb.rules"), str(ROOT / "rules" / "merge.rules"),
        "-o", str(out), "--json",
    ])
    assert rc == 0
    data = json.loads(capsys.readouterr().out)
    assert [s["name"] for s in data["stages"]] == ["raw", "not-composite", "reduced"]
    assert data["stages"][0]["count"] == counts(ALL, 3)[0]
    names = [m["name"] for m in data["mechanisms"]]
    assert names[:2] == ["M0", "M1"] and len(names) == data["stages"][-1]["count"]
    prog = stringdiag.load(out)
    assert all(n in prog.defs for n in names)


def test_cli_errors_are_one_line(tmp_path, capsys):
    rc = main(["enumerate", str(ROOT / "gallery" / "anatomy.diag"), "--generators", "AttPrep,Nope"])
    err = capsys.readouterr().err.strip()
    assert rc == 1 and err.startswith("error:") and "Nope" in err and "\n" not in err


@pytest.mark.parametrize("extra, says", [
    (["-o", "mech.svg"], "must end with .diag"),
    (["-o", "out/"], "must end with .diag"),
    (["--grid", "grid.jpg"], "a grid is drawn as .svg or .html"),
    (["--rules", "absorb_prep"], "--rule absorb_prep"),
    (["--paired", "ConcatFF", "--symmetric", "ConcatFF"], "not also --symmetric"),
    (["--copy", "input", "--copy-outputs"], "contradicts"),
])
def test_usage_errors_exit_2_before_any_work(tmp_path, capsys, monkeypatch, extra, says):
    import stringdiag.enumerate.stages as stages

    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(stages, "enumerate_space", lambda *a, **k: pytest.fail("worked before refusing"))
    rc = main(["enumerate", str(ROOT / "gallery" / "anatomy.diag"), "--generators", ",".join(ALL), *extra])
    err = capsys.readouterr().err.strip()
    assert rc == 2 and err.startswith("error:") and says in err and "\n" not in err
    assert not any(tmp_path.iterdir())


def test_help_ends_with_its_own_examples(capsys):
    from stringdiag.cli import enumerate as cli_enumerate
    from stringdiag.cli import main as cli_main

    assert "enumerate" not in cli_main.EXAMPLES
    with pytest.raises(SystemExit):
        main(["enumerate", "--help"])
    out = capsys.readouterr().out
    assert out.split("examples:")[1].split() == cli_enumerate.EXAMPLES.split()


def test_sensitivity_rows_reproduce_alone(capsys):
    """Every computed row of the table is the count its reading gives when run alone (here the
    copy policy and the bound rows at --max 3, fast); a row over its budget gives the command."""
    base = ["enumerate", str(ROOT / "gallery" / "anatomy.diag"), "--generators", ",".join(ALL), "--max", "3",
            "--symmetric", "ConcatFF", "--interchangeable", "LinAttPrep", "--require", "AttApply,LinAttApply",
            "--rules", str(ROOT / "rules" / "absorb.rules"), str(ROOT / "rules" / "merge.rules"), "--json"]
    assert main(base + ["--sensitivity"]) == 0
    rows = {r["reading"]: r for r in json.loads(capsys.readouterr().out)["sensitivity"]}
    for label, extra in (("copy streams", ["--copy", "streams"]), ("max 2", ["--max", "2"]),
                         ("without ConcatFF", None), ("each generator at most once", ["--once"])):
        row = rows[label]
        if extra is None:
            continue
        assert "not computed" not in row
        assert main(base + extra) == 0
        alone = json.loads(capsys.readouterr().out)
        assert row["reduced"] == alone["stages"][-1]["count"]
        assert row["raw"] == alone["stages"][0]["count"]
        assert row["families"] == dict(__import__("collections").Counter(m["family"] for m in alone["mechanisms"]))
    assert rows["without ConcatFF"]["breaks"] == "the five generators" and rows["stated"]["breaks"] == ""


MECHANISMS = stringdiag.load(ROOT / "gallery" / "mechanisms.diag")
MECH_NAMES = sorted({*MECHANISMS.own, "M0", "M1"}, key=lambda n: int(n[1:]))


def test_the_committed_mechanisms_are_the_enumeration():
    """gallery/mechanisms.diag is what `stringdiag enumerate` writes today (regenerate it if not)."""
    from stringdiag.enumerate.reading import Reading

    rules = load_rules(ROOT / "rules" / "absorb.rules") + load_rules(ROOT / "rules" / "merge.rules")
    reading = Reading(5, symmetric=frozenset({"ConcatFF"}), interchangeable=frozenset({"LinAttPrep"}),
                      require=("AttApply", "LinAttApply"))  # the reading gallery/PICTURES writes it under
    space = enumerate_space([ANATOMY[n] for n in ALL], reading, rules)
    assert len(MECH_NAMES) == space.stages[-1].count
    hashes = {m.diagram.canonical_hash() for m in space.result}
    assert {MECHANISMS[n].canonical_hash() for n in MECH_NAMES} == hashes


@pytest.mark.parametrize("name", MECH_NAMES)
def test_every_mechanism_is_causal_and_trains_a_few_steps(name):
    import torch

    from stringdiag.train.model import LanguageModel

    torch.manual_seed(0)
    head = MECHANISMS[name]
    model = LanguageModel(head, vocab=11, d_model=8, n_layers=1, n_heads=2, dims={"k": 3})  # checks causality
    opt = torch.optim.Adam(model.parameters(), lr=1e-2)
    tokens = torch.randint(0, 11, (4, 7))
    losses = []
    for _ in range(3):
        logits = model(tokens[:, :-1])
        loss = torch.nn.functional.cross_entropy(logits.reshape(-1, 11), tokens[:, 1:].reshape(-1))
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    assert all(math.isfinite(x) for x in losses) and losses[-1] < losses[0]
