"""The shape of the code: imports run one way, and no import (at the top of a module or
inside a function) closes a cycle.

The stages data flows through are layers: text → graph → elaborate → (rewrite, analysis) →
(lower, render) → verify → (derive, train, enumerate) → search → study → cli. A module may import from its
own subpackage or from a lower layer, never from a higher one nor from a sibling on the same
layer. Function-level imports count too (they exist to keep start-up fast, never to break a
cycle), so the whole import graph between modules must be acyclic.
"""
from __future__ import annotations

import ast
from pathlib import Path

import networkx as nx
import pytest

ROOT = Path(__file__).resolve().parent.parent / "stringdiag"

LAYERS = {
    "errors": 0, "version": 0,
    "resources": 0.5,  # where shipped data files are: above the errors it raises, below all that reads data
    "syntax": 1,
    "graph": 2, "data": 2,
    "elaborate": 2.5,  # syntax trees to graphs: builds with the graph algebra, which never imports it
    "rewrite": 3, "analysis": 3,
    "lower": 4, "render": 4,
    "verify": 5,
    "derive": 6, "train": 6, "enumerate": 6, "construct": 6,
    "trace": 6,  # writes .diag text from a torch module, checks it (graph) and compiles it (lower)
    "search": 6.5,  # finds derivations: runs the derive floor's checker on the steps it proposes
    "study": 7,
    "cli": 8,
    "__init__": 9, "__main__": 9,  # the package facade sits above every layer
}


def module_name(path: Path) -> str:
    parts = path.relative_to(ROOT.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def modules() -> dict[str, Path]:
    return {module_name(p): p for p in ROOT.rglob("*.py")}


def _resolve(mod: str, path: Path, node: ast.ImportFrom, known: dict[str, Path]) -> list[str]:
    """The stringdiag modules an ``import from`` statement loads."""
    if node.level:
        package = mod.split(".") if path.name == "__init__.py" else mod.split(".")[:-1]
        base = ".".join(package[:len(package) - node.level + 1] + ([node.module] if node.module else []))
    else:
        base = node.module or ""
    if not base.startswith("stringdiag"):
        return []
    subs = [f"{base}.{a.name}" for a in node.names if f"{base}.{a.name}" in known]
    return subs if len(subs) == len(node.names) else [base, *subs]


def import_graph() -> nx.DiGraph:
    known = modules()
    g = nx.DiGraph()
    for mod, path in known.items():
        g.add_node(mod)
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom):
                targets = _resolve(mod, path, node, known)
            elif isinstance(node, ast.Import):
                targets = [a.name for a in node.names if a.name.startswith("stringdiag")]
            else:
                continue
            for t in targets:
                if t != mod and t in known:
                    g.add_edge(mod, t, line=node.lineno)
    return g


def layer(mod: str) -> str:
    parts = mod.split(".")
    return parts[1] if len(parts) > 1 else "__init__"


def test_every_subpackage_has_a_layer():
    assert {layer(m) for m in modules()} <= set(LAYERS)


def test_the_architecture_page_shows_these_floors():
    """docs/architecture.md's table of floors is generated from ``LAYERS`` (docs/generate.py)."""
    import sys
    sys.path.insert(0, str(ROOT.parent / "docs"))
    try:
        import generate
    finally:
        sys.path.pop(0)
    page = (ROOT.parent / "docs" / "architecture.md").read_text(encoding="utf-8")
    assert page == generate.architecture_page(), "docs/architecture.md's floors are stale: run python docs/generate.py"
    table = generate.floor_table()
    assert all(f"`{room}" in table for room in LAYERS) and table.count("\n") == len(set(LAYERS.values())) + 1


def test_imports_run_one_way():
    wrong = []
    for a, b, data in import_graph().edges(data=True):
        la, lb = layer(a), layer(b)
        if la != lb and LAYERS[lb] >= LAYERS[la]:
            wrong.append(f"{a}:{data['line']} imports {b} ({la} is not above {lb})")
    assert not wrong, "\n".join(wrong)


def test_no_import_cycle_even_through_function_level_imports():
    cycles = list(nx.simple_cycles(import_graph()))
    assert not cycles, "\n".join(" -> ".join(c + c[:1]) for c in cycles[:10])


def test_the_graph_algebra_does_not_import_elaboration():
    """``graph/`` holds the algebra and the records a graph refers to; reading them from
    syntax trees is ``elaborate/``'s, which imports the algebra, never the other way."""
    g = import_graph()
    up = [f"{a} imports {b}" for a, b in g.edges if layer(a) == "graph" and layer(b) == "elaborate"]
    assert not up, "\n".join(up)
    assert any(layer(a) == "elaborate" and layer(b) == "graph" for a, b in g.edges)


@pytest.mark.parametrize("text, cyclic", [
    ("a -> b, b -> a", True),
    ("a -> b, b -> c", False),
])
def test_the_cycle_check_can_fail(text, cyclic):
    g = nx.DiGraph([tuple(e.split(" -> ")) for e in text.split(", ")])
    assert bool(list(nx.simple_cycles(g))) == cyclic


def test_the_resolver_sees_relative_and_function_level_imports():
    g = import_graph()
    assert g.has_edge("stringdiag.graph.diagram", "stringdiag.graph.algebra")  # from . import algebra
    assert g.has_edge("stringdiag", "stringdiag.render.draw")  # inside _repr_svg_
    assert g.has_edge("stringdiag.cli.info", "stringdiag.cli.summary")


def test_no_two_modules_share_a_name():
    """A module's file name says what it is, once: ``verify/measured_degree.py`` beside
    ``analysis/degree.py``, not two ``degree.py``."""
    by_name: dict[str, list[str]] = {}
    for path in ROOT.rglob("*.py"):
        if path.name != "__init__.py":
            by_name.setdefault(path.name, []).append(str(path.relative_to(ROOT)))
    twice = {name: paths for name, paths in by_name.items() if len(paths) > 1}
    assert not twice, twice


# Public class names still defined in two modules or more, to be renamed one by one: the list
# only shrinks (a name that comes off it must be taken off, a new pair fails). Most are a syntax
# tree's node beside the record it elaborates to (syntax.ast.BoxDecl, graph.decls.BoxDecl).
TWICE_STILL = frozenset({
    "BoxDecl", "Copy", "DimDecl", "Member", "Repeat", "Scan", "Shape"})


def public_classes() -> dict[str, list[str]]:
    """Each public top-level class name of the package -> the modules that define it."""
    found: dict[str, list[str]] = {}
    for mod, path in modules().items():
        for node in ast.parse(path.read_text()).body:
            if isinstance(node, ast.ClassDef) and not node.name.startswith("_"):
                found.setdefault(node.name, []).append(mod)
    return found


def test_no_two_public_classes_share_a_name():
    """One thing per name, as for modules: a reader (and ``mkdocstrings``) meeting ``Pass``
    should not have to ask which of two. The names of TWICE_STILL are the ones left."""
    twice = {name: mods for name, mods in public_classes().items() if len(mods) > 1}
    assert set(twice) <= TWICE_STILL, {n: m for n, m in twice.items() if n not in TWICE_STILL}
    assert TWICE_STILL <= set(twice), f"now defined once: take {sorted(TWICE_STILL - set(twice))} off TWICE_STILL"


FUNCTION_LINES, CLASS_LINES = 60, 300


def test_no_function_or_class_is_too_long():
    """Small pieces, named for what they do: no function over 60 lines, no class over 300."""
    long = []
    for mod, path in modules().items():
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                limit = CLASS_LINES if isinstance(node, ast.ClassDef) else FUNCTION_LINES
                lines = node.end_lineno - node.lineno + 1
                if lines > limit:
                    long.append(f"{path.relative_to(ROOT.parent)}:{node.lineno}: {node.name} has {lines} lines")
    assert not long, "\n".join(long)


# -- the graph's typing: one record of a box, one editing API (graph/box.py, graph/hypergraph.py) --
BOX_KEYS = {"box", "op", "simd", "summed", "generics", "ref", "scan", "repeat", "shared", "local", "param",
            "instance", "value", "seed", "display", "clusters", "var", "cell"}
BOX_KINDS = {"learn", "abstract", "fixed", "diagram", "contract", "reindex", "const", "random"}
DIM_KINDS = {"fixed", "seq", "generic"}  # a dimension declaration's kind (``DimKind``)
GRAPH_OWNERS = {"graph/box.py", "graph/hypergraph.py"}  # the two modules that know a box's attributes
NX_EDITS = {"add_node", "add_edge", "add_nodes_from", "add_edges_from", "remove_node", "remove_edge",
            "remove_nodes_from", "remove_edges_from", "clear", "update"}


def _reads_graph(node: ast.AST) -> bool:
    """``x.graph``, ``x.graph.nodes[n]``, ``x.box(b)``: an expression that is a diagram's
    networkx graph or one of its node dicts."""
    s = ast.unparse(node)
    return s.endswith(".graph") or ".graph.nodes[" in s or s.endswith("graph.nodes") or \
        (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "box")


def _graph_names(tree: ast.AST) -> set[str]:
    """Names a module binds to such an expression (``g = d.graph``, ``node = d.box(b)``, the
    attribute dicts of ``for n, a in g.nodes(data=True)``)."""
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Assign) and _reads_graph(node.value):
            names |= {t.id for t in node.targets if isinstance(t, ast.Name)}
        elif isinstance(node, ast.For) and ".nodes(data=True)" in ast.unparse(node.iter):
            names |= {t.id for t in ast.walk(node.target) if isinstance(t, ast.Name)}
    return names


def _of_graph(node: ast.AST, names: set[str]) -> bool:
    return _reads_graph(node) or (isinstance(node, ast.Name) and node.id in names)


def graph_edits(tree: ast.AST) -> list[tuple[int, str]]:
    """Edits of a diagram's networkx graph (a method call, or a store into a node's dict)."""
    names, found = _graph_names(tree), []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and _of_graph(node.func.value, names) \
                and node.func.attr in NX_EDITS:
            found.append((node.lineno, f"edits the graph: {ast.unparse(node)[:60]}"))
        elif isinstance(node, ast.Subscript) and isinstance(node.ctx, ast.Store) and _of_graph(node.value, names):
            found.append((node.lineno, f"edits a node's dict: {ast.unparse(node)[:60]}"))
    return found


def box_strings(tree: ast.AST) -> list[tuple[int, str]]:
    """Reads of a box's attributes by their string names (``node["op"]``, ``d.box(b).get("scan")``)."""
    names, found = _graph_names(tree) | {"node"}, []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and _of_graph(node.func.value, names) \
                and node.func.attr in ("get", "pop") and node.args and isinstance(node.args[0], ast.Constant) \
                and node.args[0].value in BOX_KEYS:
            found.append((node.lineno, ast.unparse(node)[:60]))
        elif isinstance(node, ast.Subscript) and isinstance(node.ctx, ast.Load) and isinstance(node.slice, ast.Constant) \
                and node.slice.value in BOX_KEYS and _of_graph(node.value, names):
            found.append((node.lineno, ast.unparse(node)[:60]))
    return found


def kind_strings(tree: ast.AST) -> list[tuple[int, str]]:
    """Comparisons of a box's kind (``.kind``, ``.box``, ``["box"]``) or a dimension's
    (``decl.kind``: seq, fixed, generic) with a string literal naming a kind: ``Kind`` and
    ``DimKind`` are the enums."""
    found = []
    words = BOX_KINDS | DIM_KINDS
    for node in ast.walk(tree):
        if not isinstance(node, ast.Compare):
            continue
        sides = [node.left, *node.comparators]
        literal = any(isinstance(s, ast.Constant) and s.value in words or isinstance(s, (ast.Tuple, ast.Set, ast.List))
                      and any(isinstance(e, ast.Constant) and e.value in words for e in s.elts) for s in sides)
        kind = any(isinstance(s, ast.Attribute) and s.attr in ("kind", "box")
                   or isinstance(s, ast.Subscript) and isinstance(s.slice, ast.Constant) and s.slice.value == "box"
                   for s in sides)
        if literal and kind:
            found.append((node.lineno, ast.unparse(node)[:60]))
    return found


def _outside(owners, check) -> list[str]:
    out = []
    for path in modules().values():
        rel = str(path.relative_to(ROOT))
        if not owners(rel):
            out += [f"{rel}:{line}: {what}" for line, what in check(ast.parse(path.read_text()))]
    return out


def test_nothing_outside_graph_edits_the_networkx_graph():
    """Every edit goes through ``Hypergraph``'s methods, so that every edit versions the graph
    (``per_graph_cache``) and forgets what it memoised (``Hypergraph.record``)."""
    wrong = _outside(lambda rel: rel.startswith("graph/"), graph_edits)
    assert not wrong, "\n".join(wrong)


def test_only_the_graph_owners_read_a_box_by_string():
    """A box is read as a record (``Hypergraph.record``), so that a new kind of box is one change."""
    wrong = _outside(GRAPH_OWNERS.__contains__, box_strings)
    assert not wrong, "\n".join(wrong)


def test_no_box_kind_is_compared_with_a_string():
    wrong = _outside(GRAPH_OWNERS.__contains__, kind_strings)
    assert not wrong, "\n".join(wrong)


def node_dicts(tree: ast.AST) -> list[tuple[int, str]]:
    """Reads of a diagram's networkx node dicts (``d.graph.nodes[n]``, ``g.nodes(data=True)``
    for ``g = d.graph``): where a node's record is stored is ``hypergraph.py``'s business."""
    graphs = {t.id for node in ast.walk(tree) if isinstance(node, ast.Assign) and ast.unparse(node.value).endswith(".graph")
              for t in node.targets if isinstance(t, ast.Name)}
    found = []
    for node in ast.walk(tree):
        nodes = node.value if isinstance(node, ast.Subscript) else node.func if isinstance(node, ast.Call) else None
        if isinstance(nodes, ast.Attribute) and nodes.attr == "nodes" and (  # (torch.fx's graph.nodes is a list)
                ast.unparse(nodes.value).endswith(".graph") or isinstance(nodes.value, ast.Name) and nodes.value.id in graphs):
            found.append((node.lineno, ast.unparse(node)[:60]))
    return found


OLD_EDITS = {"add_box", "place", "replace"}  # the string dialect: keyword attributes, node dicts


def keyword_edits(tree: ast.AST) -> list[tuple[int, str]]:
    """Edits in the old string dialect: ``d.add_box(kind, op, ...)``, ``d.place({...})``,
    ``d.replace(b, key=...)`` (``dataclasses.replace`` and ``str.replace`` are other things)."""
    found = []
    for node in ast.walk(tree):
        if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in OLD_EDITS):
            continue
        receiver = ast.unparse(node.func.value)
        dict_arg = bool(node.args) and (isinstance(node.args[0], ast.Dict) or ast.unparse(node.args[0]).startswith("dict("))
        if node.func.attr == "add_box" or node.func.attr == "place" and dict_arg or \
                node.func.attr == "replace" and node.keywords and receiver != "dataclasses":
            found.append((node.lineno, ast.unparse(node)[:60]))
    return found


def test_no_node_dict_is_read_outside_the_storage():
    """A node is read as its record (``record``, ``wire``, ``records``), never as a dict."""
    wrong = _outside({"graph/hypergraph.py"}.__contains__, node_dicts)
    assert not wrong, "\n".join(wrong)


def test_one_editing_dialect():
    """Boxes are added as records (``emit``, ``add``) and changed field by field (``update``,
    typo-safe), nowhere by keyword attributes or dicts."""
    wrong = _outside(lambda rel: False, keyword_edits)
    assert not wrong, "\n".join(wrong)


SET_TAGS = {"learn", "diagram", "cell"}  # a weight set's kinds (``graph.weights.SetKind``)
FRAME_TAGS = {"simd", "def"}  # a picture's frames (``graph/clusters.py``)
LAYOUT_TAGS = {"p", "s", "l", "i"}  # a splice's layout entries (``rewrite/layouts.py``)
CONST_TAGS = {"num", "dim"}  # a constant's leaves (``graph/constants.py``)
RECORD_OWNERS = {"graph/weights.py", "rewrite/layouts.py", "graph/clusters.py", "graph/constants.py"}  # the records' tuples made here
# other encodings that use the layout's letters, for other things: a wire's axis order in the
# shape fold, a box's numbered labels in the reduction check's signature
LAYOUT_LETTERS_STILL = {"analysis/shape.py", "rewrite/reduction.py"}


def tagged_tuples(tree: ast.AST, tags: set[str] = SET_TAGS | FRAME_TAGS | CONST_TAGS) -> list[tuple[int, str]]:
    """A record built by hand as a tuple led by its tag (``("learn", local, name)``), not a
    tuple of words (``("i", "j")``)."""
    return [(node.lineno, ast.unparse(node)[:60]) for node in ast.walk(tree)
            if isinstance(node, ast.Tuple) and len(node.elts) > 1 and isinstance(node.elts[0], ast.Constant)
            and node.elts[0].value in tags
            and not all(isinstance(e, ast.Constant) and isinstance(e.value, str) for e in node.elts)]


def test_no_record_is_a_tagged_tuple():
    """A weight set is a ``WeightSet`` (made by ``weight_key``, ``learner_key`` or its
    constructor), a picture's frame a ``SimdFrame`` or ``DefFrame``, a splice's layout entry a
    ``RuleAxis``, ``ContextSlot``, ``BoxLabel`` or ``OwnAxis``, a constant a ``ConstNum``,
    ``ConstDim`` or ``ConstOp``: read by their fields, never spelled as the tuples underneath."""
    wrong = _outside(RECORD_OWNERS.__contains__, tagged_tuples)
    wrong += _outside((RECORD_OWNERS | LAYOUT_LETTERS_STILL).__contains__,
                      lambda tree: tagged_tuples(tree, LAYOUT_TAGS))
    assert not wrong, "\n".join(wrong)


@pytest.mark.parametrize("source, offences", [
    ("key = ('learn', True, name)", 1),
    ("m.register(('diagram', inst), make)", 1),
    ("cell = ('cell', key)", 1),
    ("key = WeightSet(SetKind.CELL, key)", 0),
    ("words = ('import', 'learn', 'diagram')", 0),
    ("lay[q] = ('s', s)", 1),
    ("frame = ('simd', ('box', b), label, dim, False)", 1),
    ("frame = scope.outer + (('def', here, node.op),)", 1),
    ("frame = SimdFrame(('box', b), label, dim, False)", 0),
    ("lay[q] = CONTEXT_SLOT[s]", 0),
    ("names = ('i', 'j')", 0),
    ("const = ('num', e.value)", 1),
    ("c = ('div', ('num', 1.0), ('sqrt', ('dim', k)))", 2),
    ("c = ConstOp('sqrt', ConstDim(k))", 0),
])
def test_the_tagged_tuple_check_can_fail(source, offences):
    tree = ast.parse(source)
    assert len(tagged_tuples(tree)) + len(tagged_tuples(tree, LAYOUT_TAGS)) == offences


@pytest.mark.parametrize("source, offences", [
    ("a = d.graph.nodes[w]", 1),
    ("g = d.graph\nfor n, a in g.nodes(data=True):\n    pass", 1),
    ("h = nx.DiGraph()\nlab = h.nodes[x]['label']", 0),
    ("for n in cap.graph.nodes:\n    pass", 0),
    ("d.add_box('reindex', 'reindex', [], [()])", 1),
    ("d.place(dict(box='reindex'), [])", 1),
    ("d.replace(b, instance='G#2')", 1),
    ("d.update(b, weights=w)\nx = dataclasses.replace(c, a=1)\ny = s.replace('a', 'b')", 0),
])
def test_the_storage_checks_can_fail(source, offences):
    tree = ast.parse(source)
    assert len(node_dicts(tree)) + len(keyword_edits(tree)) == offences


def test_no_module_function_takes_self():
    """A function that needs an object's state is its method, or takes the object under its
    own name (``lower/loops.py``): a module function called ``f(self, ...)`` is a method
    moved out of a class to keep the class short."""
    wrong = [f"{path.relative_to(ROOT.parent)}:{node.lineno}: {node.name}"
             for path in modules().values() for node in ast.parse(path.read_text()).body
             if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.args.args
             and node.args.args[0].arg == "self"]
    assert not wrong, "\n".join(wrong)


@pytest.mark.parametrize("source, offences", [
    ("g = d.graph\ng.add_edge(1, 2)", 1),
    ("d.graph.remove_node(3)", 1),
    ("node = d.box(b)\nop = node['op']", 1),
    ("x = d.box(b).get('scan')", 1),
    ("for n, a in d.graph.nodes(data=True):\n    a['clusters'] = ()", 1),
    ("d.graph.nodes[w]['name'] = 'y'", 1),
    ("box = d.record(b)\nop = box.op\nd.update(b, op='y')", 0),
    ("result = {'seed': 1}\nseed = result['seed']", 0),
    ("h = nx.DiGraph()\nh.add_edge(1, 2)", 0),
])
def test_the_graph_checks_can_fail(source, offences):
    tree = ast.parse(source)
    assert len(graph_edits(tree)) + len(box_strings(tree)) == offences


@pytest.mark.parametrize("source, offences", [
    ("node['box'] == 'learn'", 1),
    ("box.kind in ('learn', 'abstract')", 1),
    ("decl.box != 'fixed'", 1),
    ("box.kind is Kind.LEARN", 0),
    ("decl.kind == 'fixed'", 1),
    ("decl.kind != 'seq'", 1),
    ("decl.kind is DimKind.SEQ", 0),
    ("what != 'learn'", 0),
])
def test_the_kind_check_can_fail(source, offences):
    assert len(kind_strings(ast.parse(source))) == offences
