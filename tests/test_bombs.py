"""Sources whose expansion is huge answer at once: ``repeat 1000000000 B(x)`` and 21 definitions
each using the next twice (2^20 boxes expanded). ``check``, ``info`` and ``info --json`` answer in
full; ``compile`` and ``render --expand`` refuse with the figure; ``enumerate`` on a space too
large refuses with its estimate. Each command runs as a real process whose CPU time and peak
memory are read from the kernel (``os.wait4``): within 10 s and 1 GB, exit 0 or 1, no traceback.

In-process, the per-definition results are held to references computed another way: the
compilability report to the same questions asked of the expanded diagram, the listing of a long
stack's weights and the box counts to the unrolled expansion."""
from __future__ import annotations

import os
import functools
import json
import subprocess
import sys
import threading
from pathlib import Path

import pytest

import stringdiag
from stringdiag import DiagError
from stringdiag.analysis.combine import learnables, parameter_count
from stringdiag.analysis.compilable import obstacles
from stringdiag.cli.main import main
from stringdiag.graph.box import Kind
from stringdiag.graph.budget import MAX_EXPANDED, Build, boxes
from stringdiag.graph.constants import dims_in
from stringdiag.graph.dimuse import fixed_dims_used
from stringdiag.graph.expand import expand
from stringdiag.elaborate.loader import prelude

ROOT = Path(__file__).resolve().parents[1]
GALLERY = ROOT / "gallery"
IMPLEMENTED = frozenset(n for n, b in prelude().boxes.items() if b.box == Kind.FIXED)
CPU_SECONDS, PEAK_BYTES = 10.0, 2 ** 30

BLOCK = """\
dim s : seq
dim d : fixed

diagram B(x: [s, d]) -> [s, d] {
  learn F : [d] -> [d]
  return x + F(relu(x))
}
"""
STACK = BLOCK + """
diagram Bomb(x: [s, d]) -> [s, d] {
  y = repeat 1000000000 B(x)
  return y
}
"""


def doubling(depth: int) -> str:
    """``D1`` uses ``D2`` twice, ... down to ``Dn``, which holds one local learnable box."""
    lines = ["dim d : fixed", f"diagram D{depth}(x: [d]) -> [d] {{", "  learn F : [d] -> [d]", "  return F(x)", "}"]
    lines += [f"diagram D{k}(x: [d]) -> [d] {{ return D{k + 1}(x) + D{k + 1}(x) }}" for k in range(depth - 1, 0, -1)]
    return "\n".join(lines) + "\n"


@pytest.fixture(scope="module")
def bombs(tmp_path_factory) -> dict[str, Path]:
    folder = tmp_path_factory.mktemp("bombs")
    (folder / "stack.diag").write_text(STACK)
    (folder / "deep.diag").write_text(doubling(21))
    return {"stack": folder / "stack.diag", "deep": folder / "deep.diag"}


# The command runs in a fresh interpreter that writes its own peak resident size (VmHWM, which
# exec resets) when it exits: the kernel's ru_maxrss would include this process's size at the fork.
WRAPPER = """\
import atexit, os, runpy, sys
def peak():
    with open('/proc/self/status') as f, open(os.environ['BOMB_PEAK'], 'w') as out:
        out.write(next(line for line in f if line.startswith('VmHWM:')).split()[1])
atexit.register(peak)
sys.argv[0] = 'stringdiag'
runpy.run_module('stringdiag.cli.main', run_name='__main__', alter_sys=True)
"""


def measured(args: list, tmp: Path) -> tuple[int, str, str, float, int]:
    """Run the CLI as a process: exit status, stdout, stderr, CPU seconds (the child's own, from
    ``os.wait4``) and peak resident bytes; a watchdog kills it after 120 s of wall clock."""
    peak_path, out_path, err_path = tmp / "peak.txt", tmp / "out.txt", tmp / "err.txt"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]),
           "BOMB_PEAK": str(peak_path)}
    peak_path.unlink(missing_ok=True)
    with open(out_path, "w") as out, open(err_path, "w") as err:
        p = subprocess.Popen([sys.executable, "-c", WRAPPER, *map(str, args)], stdout=out, stderr=err, env=env,
                             cwd=ROOT)
    watchdog = threading.Timer(120, p.kill)
    watchdog.start()
    try:
        _, status, usage = os.wait4(p.pid, 0)
    finally:
        watchdog.cancel()
    p.returncode = os.waitstatus_to_exitcode(status)  # reaped here: Popen must not wait for it again
    return (p.returncode, out_path.read_text(), err_path.read_text(), usage.ru_utime + usage.ru_stime,
            int(peak_path.read_text()) * 1024)


def bounded(args: list, tmp: Path) -> tuple[int, str, str]:
    """The command's exit status and output, once it is seen to stay within the bounds."""
    code, out, err, cpu, peak = measured(args, tmp)
    assert "Traceback" not in err and "internal error" not in err, err
    assert code in (0, 1), (code, err)
    assert cpu < CPU_SECONDS, f"{args}: {cpu:.1f} s of CPU"
    assert 2 ** 20 < peak < PEAK_BYTES, f"{args}: {peak / 2 ** 20:.0f} MiB at peak"  # a real figure, under 1 GiB
    return code, out, err


# -- the commands on the bombs -----------------------------------------------------------------

@pytest.mark.parametrize("bomb", ["stack", "deep"])
def test_check_answers(bombs, bomb, tmp_path):
    code, out, _ = bounded(["check", bombs[bomb]], tmp_path)
    assert code == 0 and ": ok (" in out


def test_info_names_a_stack_s_weights_once(bombs, tmp_path):
    code, out, _ = bounded(["info", bombs["stack"], "-d", "Bomb"], tmp_path)
    assert code == 0
    (line,) = [line for line in out.splitlines() if "B#1/" in line]
    assert line.split() == ["B#1/k<1000000000/F", "[d]", "->", "[d]", "x1000000000", "(1,000,000,000", "weight",
                            "sets)"]


def test_info_json_of_a_stack(bombs, tmp_path):
    code, out, _ = bounded(["info", bombs["stack"], "-d", "Bomb", "--json"], tmp_path)
    assert code == 0
    (entry,) = json.loads(out)["learnable"]
    assert (entry["name"], entry["uses"], entry["weight_sets"]) == ("B#1/k<1000000000/F", 10 ** 9, 10 ** 9)


def test_info_on_the_doubling_chain(bombs, tmp_path):
    code, out, _ = bounded(["info", bombs["deep"], "-d", "D1", "--json"], tmp_path)
    s = json.loads(out)
    assert code == 0 and s["boxes"]["expanded"] == {"learn": 2 ** 20, "fixed": 2 ** 20 - 1}
    (entry,) = s["learnable"]
    assert (entry["uses"], entry["weight_sets"]) == (2 ** 20, 2 ** 20)


@pytest.mark.parametrize("bomb,name,figure", [("stack", "Bomb", "4,000,000,000"), ("deep", "D1", "2,097,151")])
def test_compile_refuses_with_the_figure(bombs, bomb, name, figure, tmp_path):
    code, _, err = bounded(["compile", bombs[bomb], "-d", name, "--dims", "d=4"], tmp_path)
    assert code == 1
    assert f"error: refusing to compile '{name}': it would make about {figure} boxes, about " in err
    assert "GB of memory, over 200,000 (compile --max-boxes)" in err


@pytest.mark.parametrize("bomb,name,figure", [("stack", "Bomb", "3,000,000,000"), ("deep", "D1", "2,097,151")])
def test_render_expand_refuses_with_the_figure(bombs, bomb, name, figure, tmp_path):
    code, _, err = bounded(["render", bombs[bomb], "-d", name, "--expand", "-o", tmp_path / "x.svg"], tmp_path)
    assert code == 1 and not (tmp_path / "x.svg").exists()
    assert f"error: refusing to expand '{name}': it would make about {figure} boxes, over {MAX_EXPANDED:,}" in err


ANATOMY = ["enumerate", GALLERY / "anatomy.diag", "--generators", "AttPrep,AttApply,LinAttPrep,LinAttApply,ConcatFF",
           "--symmetric", "ConcatFF", "--interchangeable", "LinAttPrep", "--require", "AttApply,LinAttApply",
           "--rules", ROOT / "rules/absorb.rules", ROOT / "rules/merge.rules"]


@pytest.mark.parametrize("extra", [["--max", "7"], ["--max", "9"], ["--max", "6", "--copy-outputs"]])
def test_enumerate_refuses_a_space_too_large_with_its_estimate(extra, tmp_path):
    code, out, err = bounded(ANATOMY + extra + ["--time-budget", "5"], tmp_path)
    assert code == 1
    assert f"estimate: about " in out + err and f"wirings with ordered ports at --max {extra[1]}" in out + err
    assert f"error: enumerating --max {extra[1]} would take about " in err


# -- the same answers, computed another way --------------------------------------------------------

def test_the_python_api_refuses_too():
    d = stringdiag.loads(STACK)["Bomb"]
    with pytest.raises(DiagError, match="it would make about 3,000,000,000 boxes"):
        d.expand(unroll={})
    with pytest.raises(DiagError, match="it would make about 4,000,000,000 boxes"):
        stringdiag.compile(d, dims={"d": 4})
    assert parameter_count(d, {"d": 4}, "linear") == 10 ** 9 * (4 * 4 + 4)  # counted, not built


def _stacks(outer: int, inner: int) -> str:
    return BLOCK + f"""
diagram A(x: [s, d]) -> [s, d] {{
  y = repeat {inner} B(x)
  return y
}}

diagram Top(x: [s, d]) -> [s, d] {{
  y = repeat {outer} A(x)
  return y
}}
"""


@pytest.mark.parametrize("outer,inner,listed", [(3, 4, 12), (1, 1000, 1000), (1, 1001, 1), (40, 40, 40),
                                                (30, 1, 30), (2, 600, 600)])
def test_a_long_stack_is_listed_once_with_the_weight_sets_of_its_copies(outer, inner, listed):
    """Against the unrolled expansion: the listed weight sets add up to its local weight sets, the
    uses to its learnable boxes; a stack is listed once when its copies would take more than
    1000 lines (the outermost such stack: 2 x 600 copies are 600 lines of 2 weight sets each)."""
    d = stringdiag.loads(_stacks(outer, inner))["Top"]
    entries = learnables(d)
    flat = expand(d, unroll={}, limit=10 ** 5)
    learn = [flat.record(b) for b in flat.boxes() if flat.record(b).kind is Kind.LEARN]
    assert len(entries) == listed
    assert sum(e.get("weight_sets", 1) for e in entries) == len({n.param for n in learn}) == outer * inner
    assert sum(e["uses"] for e in entries) == len(learn)
    stacked = [e for e in entries if "k<" in e["name"]]
    for e in stacked:  # the stack's path names its count
        count = int(e["name"].split("k<")[1].split("/")[0])
        assert e["weight_sets"] % count == 0
    if listed == outer * inner:  # listed one by one: the expansion's own names
        assert [e["name"] for e in entries] == sorted({n.param for n in learn}, key=[n.param for n in learn].index)


@functools.cache
def gallery(file: str):
    return stringdiag.load(GALLERY / file)


PROGRAMS = [(f.name, name) for f in sorted(GALLERY.glob("*.diag")) for name in gallery(f.name).own]


def _ref_boxes(d) -> tuple[int, int]:
    """The boxes of the unrolled expansion: all, and those that are not ``reindex`` boxes (which
    expansion adds where an output skips a SIMD index: the estimate counts only those written)."""
    flat = expand(d, unroll={}, limit=10 ** 6)
    return len(flat), sum(1 for b in flat.boxes() if flat.record(b).op != "reindex")


def test_box_counts_are_those_of_the_expansion_on_the_gallery():
    for file, name in PROGRAMS:
        d = gallery(file)[name]
        every, not_reindex = _ref_boxes(d)
        assert not_reindex <= boxes(d, Build.EXPANDED) <= every, (file, name)


@pytest.mark.parametrize("outer,inner", [(3, 4), (2, 1)])
def test_box_counts_of_stacks(outer, inner):
    d = stringdiag.loads(_stacks(outer, inner))["Top"]
    assert (boxes(d, Build.EXPANDED),) * 2 == _ref_boxes(d) == (3 * outer * inner,) * 2
    # compiled: one body per copy, and a loop over them at each level
    assert boxes(d, Build.LOWERED) == outer + outer * (inner + 3 * inner)
    assert boxes(stringdiag.loads(doubling(30))["D1"], Build.EXPANDED) == 2 ** 29 + (2 ** 29 - 1)  # learnable boxes and additions


# -- the compilability report, against the expanded diagram ---------------------------------------

def _ref_obstacles(d) -> set[tuple]:
    """What stops ``d`` compiling, found on its expansion (every stack opened once): no
    definition is left to combine, every box is read where it lands."""
    flat = expand(d, unroll={n: 1 for n in _count_names(d)}, limit=10 ** 6)
    return _key(obstacles(flat, IMPLEMENTED))


def _count_names(d) -> set[str]:
    names: set[str] = set()
    todo, seen = [d], set()
    while todo:
        x = todo.pop()
        if id(x.graph) in seen:
            continue
        seen.add(id(x.graph))
        for b in x.boxes():
            node = x.record(b)
            if node.repeat is not None:
                names |= node.repeat.count.names()
            if node.kind is Kind.DIAGRAM and node.ref is not None:
                todo.append(node.ref)
    return names


GENERIC = """\
dim s : seq
dim d : fixed
fixed mystery : [d] -> [d]
abstract f : [d] -> [d]

diagram G<n>(x: [n, d]) -> [n, d] {
  learn W : [n, d] -> [n, d]
  return W(x)
}

diagram OverSeq(x: [s, d]) -> [s, d] { return G<s>(x) }
diagram OverFixed(x: [d, d]) -> [d, d] { return G<d>(x) }
diagram Twice(x: [s, d]) -> [s, d] { return OverSeq(x) + OverSeq(x) }

diagram R(x: [s, d]) -> [s, d] {
  y[i] = f(x[i])
  return y
}

diagram Stacked(x: [s, d]) -> [s, d] {
  y = repeat 2 R(x)
  return y
}

diagram Broken(x: [d]) -> [d] { return mystery(x) }
diagram UsesBroken(x: [d]) -> [d] { return Broken(Broken(x)) }
"""


@pytest.mark.parametrize("name,expected", [
    ("OverSeq", ["learnable box 'W' has a sequence dimension"]), ("OverFixed", []),
    ("Twice", ["learnable box 'W' has a sequence dimension"]), ("Stacked", ["'f' is an abstract family"]),
    ("UsesBroken", ["fixed process 'mystery' has no implementation"])])
def test_obstacles_through_generics_and_stacks(name, expected):
    d = stringdiag.loads(GENERIC, "generic.diag")[name]
    found = obstacles(d, IMPLEMENTED)
    assert [o.message.split(":")[0][:len(e)] for o, e in zip(found, expected)] == expected and \
        len(found) == len(expected)
    assert _key(found) == _ref_obstacles(d)


def _key(found) -> set:
    return {(o.message, o.pos, o.defect) for o in found}


def test_obstacles_per_definition_are_those_of_the_expansion_on_the_gallery():
    memo: dict = {}
    for file, name in PROGRAMS:
        d = gallery(file)[name]
        assert _key(obstacles(d, IMPLEMENTED, memo)) == _ref_obstacles(d), (file, name)


def test_obstacles_of_the_doubling_chain_without_expanding():
    d = stringdiag.loads(doubling(40).replace("return F(x)", "return f(F(x))").replace(
        "dim d : fixed", "dim d : fixed\nabstract f : [d] -> [d]"))["D1"]
    (o,) = obstacles(d, IMPLEMENTED)  # 2^39 uses of one abstract box: said once
    assert o.message.startswith("'f' is an abstract family") and not o.defect


# -- the fixed dimensions a diagram uses (--dims), per definition ----------------------------------

def _ref_dims_used(d) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """The fixed dimensions ``d`` uses, read off its expansion (as ``fixed_dims_used`` did before):
    the names on its wires (widths), and those only in generics, constants and repeat counts."""
    prog, flat = d.program, d.expand()
    wires = {n for w in flat.wires() for dim in flat.wire_type(w) for n in dim.names()}
    others: set[str] = set()
    for b in flat.boxes():
        node = flat.record(b)
        others |= {n for _, dim in node.generics for n in dim.names()}
        if node.kind is Kind.CONST:
            others |= {n for dim in dims_in(node.value) for n in dim.names()}
        if node.repeat is not None:
            others |= node.repeat.count.names()
    order = list(prog.dims) + list(prog.prelude.dims)

    def fixed(names):
        return tuple(sorted((n for n in names if (x := prog.lookup_dim(n)) is not None and x.kind == "fixed"),
                            key=lambda n: (order.index(n) if n in order else len(order), n)))

    return fixed(wires), fixed(others - wires)


COUNTS = """\
dim s : seq
dim d : fixed
dim w : fixed
dim k : fixed
dim t : fixed = 2

diagram Win<m>(x: [s, d]) -> [s, d] {
  learn F : [d] -> [d]
  y = F(x)
  return y * (1 / m)
}

diagram Wide<e>(x: [s, d]) -> [s, d] {
  learn U : [d] -> [e]
  learn V : [e] -> [d]
  return V(U(x))
}

diagram Blk(x: [s, d]) -> [s, d] { return Win<w>(x) + Wide<k>(x) }
diagram Top(x: [s, d]) -> [s, d] {
  y = repeat t Blk(x)
  return Blk(y)
}
diagram OnlyCount(x: [s, d]) -> [s, d] { return Win<w>(Win<w>(x)) }
"""


@pytest.mark.parametrize("name,widths,counts", [("Top", ("d", "k"), ("w", "t")), ("OnlyCount", ("d",), ("w",))])
def test_dims_used_through_generics_constants_and_counts(name, widths, counts):
    d = stringdiag.loads(COUNTS, "counts.diag")[name]
    use = fixed_dims_used(d)
    assert (use.widths, use.counts) == (widths, counts) == _ref_dims_used(d)


def test_dims_used_per_definition_are_those_of_the_expansion_on_the_gallery():
    for file, name in PROGRAMS:
        d = gallery(file)[name]
        use = fixed_dims_used(d)
        assert (use.widths, use.counts) == _ref_dims_used(d), (file, name)


def test_dims_used_of_the_doubling_chain_without_expanding():
    d = stringdiag.loads(doubling(60))["D1"]  # 2^59 learnable boxes expanded
    use = fixed_dims_used(d)
    assert (use.widths, use.counts) == (("d",), ())


@pytest.mark.parametrize("bomb,name,max_boxes", [("stack", "Bomb", 10 ** 10), ("deep", "D1", 3 * 10 ** 6)])
def test_compile_checks_dims_names_without_expanding(bombs, bomb, name, max_boxes, tmp_path):
    """Under ``--max-boxes``, ``compile`` checks the names ``--dims`` gives against the fixed
    dimensions the diagram uses (an unknown one refused before anything is built)."""
    code, _, err = bounded(["compile", bombs[bomb], "-d", name, "--dims", "e=4", "--max-boxes", max_boxes], tmp_path)
    assert code == 1
    assert f"error: --dims: 'e' is not a dimension of '{name}' or of its file (it takes d" in err


# -- an HTML page of a bomb: the diagram as written, the expanded pane left out with a note ---------

@pytest.mark.parametrize("bomb,name,figure", [("stack", "Bomb", "3,000,000,000"), ("deep", "D1", "2,097,151")])
def test_html_page_of_a_bomb_leaves_the_expanded_pane_out(bombs, bomb, name, figure, tmp_path):
    page = tmp_path / "x.html"
    code, _, err = bounded(["render", bombs[bomb], "-d", name, "-o", page], tmp_path)
    assert code == 0, err
    text = page.read_text()
    assert f"no expanded view: it would make about {figure} boxes, over 1,000 (the most a picture" in text
    assert 'data-key="collapsed"' in text and 'data-key="expanded"' not in text
    assert 'data-opens="expanded"' not in text  # no button opens a pane that is not there


def test_html_page_under_the_limit_keeps_its_expanded_pane(tmp_path):
    (tmp_path / "small.diag").write_text(_stacks(2, 3))
    page = tmp_path / "x.html"
    assert main(["render", str(tmp_path / "small.diag"), "-d", "Top", "-o", str(page)]) == 0
    text = page.read_text()
    assert 'data-key="collapsed"' in text and 'data-key="expanded"' in text and "no expanded view" not in text
    # the boxes drawn: the one stack as written, and 2 x 3 copies of B's three boxes expanded
    assert text.count('data-box="') == 1 + boxes(stringdiag.loads(_stacks(2, 3))["Top"], Build.EXPANDED) == 1 + 18


# -- a shared stack: one body, applied t times by one loop ------------------------------------------

SHARED = BLOCK + """
diagram Shared(x: [s, d]) -> [s, d] {
  y = repeat COUNT shared B(x)
  return y
}
"""


def _shared(count) -> "stringdiag.Diagram":
    return stringdiag.loads(SHARED.replace("COUNT", str(count)), "shared.diag")["Shared"]


def test_a_shared_stack_computes_a_hand_written_loop_in_float64():
    """``repeat 5 shared B``: ``x <- x + F(relu(x))`` five times with one F (its weights read off
    the compiled module: the default approximator, Linear, ReLU, Linear)."""
    import torch

    torch.manual_seed(0)
    m = stringdiag.compile(_shared(5), dims={"d": 3}, dtype=torch.float64)
    attr = m.weight_sets[("learn", True, "B#1/F")]  # the one set of every copy
    w1, b1, w2, b2 = (p.detach() for p in m.get_submodule(attr).parameters())
    x = torch.randn(2, 7, 3, dtype=torch.float64)
    want = x
    for _ in range(5):
        want = want + torch.relu(torch.relu(want) @ w1.T + b1) @ w2.T + b2
    assert torch.allclose(m(x), want, rtol=1e-12, atol=1e-12)
    assert not torch.allclose(m(x), x + torch.relu(torch.relu(x) @ w1.T + b1) @ w2.T + b2)  # not one copy


def test_a_shared_stack_is_built_once_whatever_its_count():
    """What is built does not grow with the count: the same graph and modules at t = 3 and
    t = 1000 (not run), the count one argument of one loop; the estimate counts one body."""
    import torch

    built = []
    for t in (3, 1000):
        m = stringdiag.compile(_shared(t), dims={"d": 3}, dtype=torch.float64)
        loops = [n for n in m.graph.nodes if n.op == "call_function" and t in n.args]
        assert len(loops) == 1
        per_copy = [a for n in m.graph.nodes for a in n.args if isinstance(a, (list, tuple)) and len(a) >= t]
        assert not per_copy  # no entry per copy
        built.append((len(m.graph.nodes), len(list(m.modules())), sum(p.numel() for p in m.parameters())))
    assert built[0] == built[1]
    assert boxes(_shared(10 ** 9), Build.LOWERED) == boxes(_shared(3), Build.LOWERED) == 1 + 3  # a loop, B's 3 boxes


def test_a_huge_shared_stack_compiles_at_once(tmp_path):
    """``repeat 1000000000 shared B``: compiled (not run), within the bounds; ``info`` names its
    one weight set, used 10^9 times, and a count that is a dimension stays a factor of the time."""
    (tmp_path / "shared.diag").write_text(SHARED.replace("COUNT", "1000000000"))
    code, out, err = bounded(["compile", tmp_path / "shared.diag", "-d", "Shared", "--dims", "d=4"], tmp_path)
    assert code == 0, err
    assert out.startswith("Shared : [s, d] -> [s, d]: 40 parameters") and ", 1000000000, " in out
    code, out, _ = bounded(["info", tmp_path / "shared.diag", "-d", "Shared"], tmp_path)
    (line,) = [line for line in out.splitlines() if "B#1/F" in line]
    assert code == 0 and line.split()[-1] == "x1000000000"
    counted = SHARED.replace("COUNT", "t").replace("dim d : fixed", "dim d : fixed\ndim t : fixed")
    (tmp_path / "t.diag").write_text(counted)
    code, out, _ = bounded(["info", tmp_path / "t.diag", "-d", "Shared"], tmp_path)
    assert code == 0 and "time:   O(s·d^2·t)" in out


def test_the_api_unrolls_past_the_pictures_limit_and_refuses_past_its_own():
    """``Diagram.expand(unroll=...)`` is bounded like ``compile`` (``limit=``, 200,000 by default);
    the picture's smaller limit is render's, not the API's (a 48-layer encoder unrolls to 6,773)."""
    d = stringdiag.loads(BLOCK + "diagram Tall(x: [s, d]) -> [s, d] {\n  y = repeat 1700 B(x)\n  return y\n}\n")["Tall"]
    assert boxes(d, Build.EXPANDED, {}) > MAX_EXPANDED  # render --expand refuses it
    flat = d.expand(unroll={})
    assert sum(flat.record(b).kind is Kind.LEARN for b in flat.boxes()) == 1700
    with pytest.raises(DiagError, match="over 1,000"):
        d.expand(unroll={}, limit=1000)


# -- derive, normalize, render and import: refused with the figure, before the work ----------------

IDEMPOTENT = """\
rule idem(x: []) -> [] {
  return relu(x)
} == {
  return relu(relu(x))
}
"""


@pytest.fixture
def doubling_steps(tmp_path) -> Path:
    """40 steps, each doubling the diagram (relu is idempotent: every relu becomes two)."""
    (tmp_path / "idem.rules").write_text(IDEMPOTENT)
    (tmp_path / "m.diag").write_text("dim d : fixed\ndiagram M(x: [d]) -> [d] {\n  y[i] = relu(x[i])\n  return y\n}\n")
    d = tmp_path / "d.deriv"
    d.write_text('use "idem.rules"\nstart m.diag:M\n' + "apply idem everywhere\n" * 40)
    return d


def test_derive_refuses_the_step_that_would_pass_its_box_limit(doubling_steps, tmp_path):
    code, out, err = bounded(["derive", doubling_steps], tmp_path)
    assert code == 1 and out == ""
    assert err.startswith(f"{doubling_steps}:16:1: error: step 14 (apply idem everywhere) fails: refusing to apply "
                          "'idem' at its 8,192 matches: it would make about 16,384 boxes (from 8,192), over 10,000 "
                          "(derive --max-boxes)"), err
    assert len(err) < 1000
    code, _, err = bounded(["derive", doubling_steps, "--max-boxes", "100"], tmp_path)
    assert code == 1 and "step 7 (apply idem everywhere) fails: refusing to apply 'idem' at its 64 matches" in err


def test_derive_refuses_an_unfold_past_its_box_limit(bombs, tmp_path):
    """D1 of the doubling chain is 3 boxes, two uses of D2 and their sum; unfolding D2, D3, ...
    in turn makes 2^(k+1) - 1 boxes after Dk: D13's would make 16,383."""
    d = tmp_path / "u.deriv"
    d.write_text(f'start {bombs["deep"]}:D1\n' + "".join(f"unfold D{k}\n" for k in range(2, 22)))
    code, _, err = bounded(["derive", d], tmp_path)
    assert code == 1
    assert ("step 12 (unfold D13) fails: refusing to unfold 'D13': it would make about 16,383 boxes (from 8,191), "
            "over 10,000 (derive --max-boxes)") in err, err


def test_normalize_stops_before_the_round_that_would_pass_its_box_limit(doubling_steps, tmp_path):
    folder = doubling_steps.parent
    code, out, _ = bounded(["normalize", folder / "m.diag", "-d", "M", "--rules", folder / "idem.rules",
                            "--rule", "idem", "--max-rounds", "100"], tmp_path)
    assert code == 0
    assert ("M: 1 -> 8192 boxes in 14 round(s), 8191 rewrite(s); stopped at the size bound: round 14 would apply "
            "'idem' at 8,192 matches, making about 16,384 boxes, over 10,000 (--max-boxes)") in out, out


def flat(n: int) -> str:
    return "diagram F(x: []) -> [] {\n  y0 = relu(x)\n" + "".join(f"  y{i} = relu(y{i - 1})\n" for i in range(1, n)) \
        + f"  return y{n - 1}\n}}\n"


@pytest.mark.parametrize("suffix", ["svg", "png", "html", "tex"])
def test_render_refuses_a_picture_over_its_limit_before_graphviz(tmp_path, suffix):
    src = tmp_path / "flat.diag"
    src.write_text(flat(4900))
    out = tmp_path / f"flat.{suffix}"
    code, _, err = bounded(["render", src, "-o", out], tmp_path)
    assert code == 1 and not out.exists()
    assert "error: refusing to draw 'F': it has 4,900 boxes, over 1,000 (the most a picture is laid out with)" in err
    code, _, _ = bounded(["render", src, "-o", tmp_path / "flat.dot"], tmp_path)  # Graphviz's source: no layout
    assert code == 0 and (tmp_path / "flat.dot").stat().st_size > 4900 * 20


def test_a_graphviz_failure_is_one_line(tmp_path, capsys, monkeypatch):
    import stringdiag.render.output as output
    from stringdiag.render.dotrun import GraphvizFailed

    def fails(*args, **kwargs):
        raise GraphvizFailed(-9, ["dot", "-Tsvg"], stderr=b"\nout of memory in gvLayout\nmore\n")

    monkeypatch.setattr(output, "render", fails)
    src = tmp_path / "f.diag"
    src.write_text(flat(3))
    assert main(["render", str(src), "-o", str(tmp_path / "f.svg")]) == 1
    err = capsys.readouterr().err
    assert err == "error: Graphviz's dot failed drawing 'F' (exit status -9): out of memory in gvLayout\n", err


def test_a_graphviz_failure_drawing_a_taxonomy_is_one_line(tmp_path, capsys, monkeypatch):
    import stringdiag.render.tree as tree
    from stringdiag.render.dotrun import GraphvizFailed

    def fails(*args, **kwargs):
        raise GraphvizFailed(-9, ["dot", "-Tsvg"], stderr=b"\nout of memory in gvLayout\nmore\n")

    monkeypatch.setattr(tree, "tree_svg", fails)
    out = tmp_path / "t.svg"
    assert main(["taxonomy", str(GALLERY / "taxonomy.tax"), "-o", str(out)]) == 1
    err = capsys.readouterr().err
    assert err.startswith("error: Graphviz's dot failed drawing ") and err.count("\n") == 1, err
    assert err.endswith("(exit status -9): out of memory in gvLayout\n") and not out.exists(), err


def test_an_import_over_the_size_cap_is_refused_without_reading_it(tmp_path):
    (tmp_path / "big.diag").write_text("dim d : fixed\n# " + "x" * (20 * 2 ** 20) + "\n")
    (tmp_path / "a.diag").write_text('import "big.diag"\ndim d : fixed\n')
    code, _, err = bounded(["check", tmp_path / "a.diag"], tmp_path)
    assert code == 1 and len(err) < 1000
    assert 'a.diag:1:8: error: cannot import "big.diag": ' in err and "more than the 16 MiB" in err


def test_an_import_of_a_file_that_is_not_a_diag_source_never_quotes_it(tmp_path):
    secret = tmp_path / "notes.txt"
    secret.write_text("the first line of someone's notes\n")
    (tmp_path / "a.diag").write_text(f'import "{secret}"\n')
    code, _, err = bounded(["check", tmp_path / "a.diag"], tmp_path)
    assert code == 1 and "is not a .diag file" in err and "someone's notes" not in err


def test_an_error_on_a_huge_line_quotes_at_most_200_characters_of_it(tmp_path):
    src = tmp_path / "long.diag"
    src.write_text("dim d : fixed\ndiagram F(x: [d]) -> [d] { return relu(" + " " * 4_000_000 + "x q) }\n")
    code, _, err = bounded(["check", src], tmp_path)
    assert code == 1 and len(err) < 1000, len(err)
    head, quoted, caret = err.splitlines()[:3]
    assert head.startswith(f"{src}:2:") and "error: unexpected 'q'" in head
    assert len(quoted) <= 4 + 200 + 6 and quoted.rstrip().endswith("x q) }")
    assert caret.index("^") == quoted.index("q)")  # the caret under what it names


PLAIN_ANATOMY = ANATOMY[:4]  # the generators alone: no rules, no declarations


def test_enumerate_refuses_up_front_what_its_budget_cannot_hold(tmp_path):
    """--max 7 of the generators alone took about a minute of CPU (12,000 ordered wirings,
    each built): with --time-budget 20 it is refused before the work, with the estimate."""
    code, _, err = bounded(PLAIN_ANATOMY + ["--max", "7", "--time-budget", "20"], tmp_path)
    assert code == 1
    assert "estimate: about " in err and "error: enumerating --max 7 would take about " in err


def test_enumerate_counts_exactly_to_bound_4():
    """Whatever the machine's load, bounds 1 to 4 are counted, not extrapolated: each the
    length of the listing itself."""
    from stringdiag.elaborate.loader import load
    from stringdiag.enumerate.estimate import estimate
    from stringdiag.enumerate.reading import Copy, Reading
    from stringdiag.enumerate.space import generators, wirings

    prog = load(GALLERY / "anatomy.diag")
    defns = [prog[n] for n in ANATOMY[3].split(",")]
    e = estimate(defns, Reading(9, Copy.INPUT))
    gens, stream = generators(defns)
    assert e.counted >= 4 and e.per_wiring > 0
    assert [e.ordered(k) for k in range(1, 5)] == [len(list(wirings(gens, stream, k))) for k in range(1, 5)] \
        == [1, 6, 23, 108]


@pytest.mark.parametrize("rules", [False, True])
def test_enumerate_honours_its_deadline_in_every_stage(rules):
    """A deadline already past stops the work in the first stage it reaches (listing the
    wirings), whether or not there are rules to reduce by."""
    import time

    from stringdiag.elaborate.loader import load
    from stringdiag.enumerate.stages import OutOfTime, Work, enumerate_space
    from stringdiag.rewrite.rule import load_rules

    prog = load(GALLERY / "anatomy.diag")
    defns = [prog[n] for n in ANATOMY[3].split(",")]
    work = Work(deadline=time.monotonic() - 1, budget=5.0)
    with pytest.raises(OutOfTime, match=r"ran past --time-budget 5 s listing the wirings; use a smaller --max"):
        enumerate_space(defns, 3, load_rules(ROOT / "rules/absorb.rules") if rules else (), work=work)
