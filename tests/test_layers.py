"""The shape of the code: imports run one way, and no import (at the top of a module or
inside a function) closes a cycle.

The stages data flows through are layers: text → graph → (rewrite, analysis) → (lower,
render) → verify → (derive, train, enumerate) → study → cli. A module may import from its
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
    "rewrite": 3, "analysis": 3,
    "lower": 4, "render": 4,
    "verify": 5,
    "derive": 6, "train": 6, "enumerate": 6, "construct": 6,
    "trace": 6,  # writes .diag text from a torch module, checks it (graph) and compiles it (lower)
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
