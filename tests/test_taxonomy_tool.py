"""``stringdiag taxonomy FILE.tax`` (issue 9, item 2): a family tree of architectures, every edge
a checked derivation, drawn in one picture with what each child changes highlighted.

Errors point into the .tax file (syntax, unknown members, files and diagrams, a graph that
is not a tree, an edge whose derivation starts or ends elsewhere); the changed boxes are
those a hand check of two diagrams gives; the picture holds every member and draws exactly
the changed boxes dashed red.
"""
from __future__ import annotations

import html
import re
import shutil
from pathlib import Path

import pytest

import stringdiag
from stringdiag.cli.main import main
from stringdiag.derive.family_tree import load_taxonomy
from stringdiag.errors import DiagError
from stringdiag.graph.diff import changed_boxes
from stringdiag.render.tree import CHANGED

GALLERY = Path(__file__).resolve().parent.parent / "gallery"
ROOT_LINE = 'root p = taxonomy.diag:PrimordialAttention "primordial"\n'
SLIDING = 'node s = taxonomy.diag:SlidingWindowAttention\n'
GAUSS = 'node g = taxonomy.diag:GaussianWindowAttention\n'


@pytest.fixture()
def folder(tmp_path):
    for name in ("taxonomy.diag", "taxonomy_sliding.deriv", "taxonomy_gaussian.deriv"):
        shutil.copy(GALLERY / name, tmp_path / name)
    return tmp_path


def error(folder: Path, text: str) -> DiagError:
    path = folder / "t.tax"
    path.write_text(text)
    with pytest.raises(DiagError) as e:
        load_taxonomy(path)
    return e.value


def at(e: DiagError) -> tuple[int, int]:
    return e.pos.line, e.pos.col


# -- errors, with their positions ------------------------------------------------------------
def test_a_syntax_error_is_positioned_and_the_cli_says_file_line_col(folder, capsys):
    e = error(folder, ROOT_LINE + "node s taxonomy.diag:SlidingWindowAttention\n")
    assert at(e) == (2, 8)
    assert main(["taxonomy", str(folder / "t.tax")]) == 1
    assert re.search(r"t\.tax:2:8: error: ", capsys.readouterr().err)


@pytest.mark.parametrize("text, where, message", [
    (ROOT_LINE + SLIDING + 'edge p -> x by "taxonomy_sliding.deriv"\n', (3, 11), "no member named 'x'"),
    (ROOT_LINE + 'node s = nowhere.diag:SlidingWindowAttention\n', (2, 10), "no such file nowhere.diag"),
    (ROOT_LINE + 'node s = taxonomy.diag:Sliding\n', (2, 10), "Sliding"),
    (ROOT_LINE + SLIDING + 'edge p -> s by "missing.deriv"\n', (3, 16), "no such file missing.deriv"),
    (ROOT_LINE + SLIDING + 'edge p -> s by "taxonomy_sliding.deriv"\nnode s = taxonomy.diag:PrimordialAttention\n',
     (4, 6), "declared twice"),
])
def test_unknown_names_and_files_are_reported_where_written(folder, text, where, message):
    e = error(folder, text)
    assert at(e) == where and message in e.message


def test_an_edge_whose_derivation_ends_elsewhere_is_rejected(folder):
    e = error(folder, ROOT_LINE + GAUSS + 'edge p -> g by "taxonomy_sliding.deriv"\n')
    assert at(e) == (3, 16) and "does not end at the child 'GaussianWindowAttention'" in e.message


def test_an_edge_whose_derivation_starts_elsewhere_is_rejected(folder):
    e = error(folder, ROOT_LINE + SLIDING + GAUSS + 'edge p -> s by "taxonomy_sliding.deriv"\n'
              'edge s -> g by "taxonomy_gaussian.deriv"\n')
    assert at(e) == (5, 16) and "not at the parent 'SlidingWindowAttention'" in e.message


def test_a_failing_step_names_its_edge_and_points_into_the_derivation(folder):
    (folder / "bad.deriv").write_text("start taxonomy.diag:PrimordialAttention\napply no_such_rule\n")
    e = error(folder, ROOT_LINE + SLIDING + 'edge p -> s by "bad.deriv"\n')
    assert e.message.startswith("edge p -> s: ") and e.pos.file.endswith("bad.deriv") and e.pos.line == 2


@pytest.mark.parametrize("text, where, message", [
    # two parents
    (ROOT_LINE + SLIDING + GAUSS + 'edge p -> s by "taxonomy_sliding.deriv"\n'
     'edge g -> s by "taxonomy_sliding.deriv"\nedge p -> g by "taxonomy_gaussian.deriv"\n', (5, 11), "two parents"),
    # a cycle away from the root: s and g are each other's parent
    (ROOT_LINE + SLIDING + GAUSS + 'edge s -> g by "taxonomy_gaussian.deriv"\n'
     'edge g -> s by "taxonomy_sliding.deriv"\n', (2, 6), "cycle"),
    # an edge into the root
    (ROOT_LINE + SLIDING + 'edge p -> s by "taxonomy_sliding.deriv"\nedge s -> p by "taxonomy_sliding.deriv"\n',
     (4, 11), "the root has no parent"),
    # a member no edge reaches
    (ROOT_LINE + SLIDING + GAUSS + 'edge p -> s by "taxonomy_sliding.deriv"\n', (3, 6), "no edge leads to it"),
    # two roots
    (ROOT_LINE + 'root q = taxonomy.diag:SlidingWindowAttention\n', (2, 1), "exactly one 'root"),
])
def test_a_graph_that_is_not_a_tree_is_rejected(folder, text, where, message):
    e = error(folder, text)
    assert at(e) == where and message in e.message, (at(e), e.message)


# -- what a child changes -----------------------------------------------------------------------
PAIR = stringdiag.loads("""\
dim s : seq
dim d : fixed
learn A, B, C, D : [d] -> [d]
diagram Parent(x: [s, d]) -> [s, d] { return C(B(A(x))) }
# relu inserted between A and B, and C's input added to a new learnable D of the input
diagram Child(x: [s, d]) -> [s, d] {
  h = B(relu(A(x)))
  return C(h + D(x))
}
""", "pair.diag")


def ops(d, boxes) -> list[str]:
    return sorted(d.record(b).op for b in boxes)


def test_the_diff_highlights_exactly_the_boxes_that_differ_on_a_hand_made_pair():
    child = PAIR["Child"]
    # A, B and C are the parent's (same names, same wiring from the input or to the output)
    assert ops(child, changed_boxes(PAIR["Parent"], child)) == ["D", "add", "relu"]
    assert changed_boxes(PAIR["Parent"], PAIR["Parent"]) == frozenset()


def test_the_diff_of_the_sparse_member_is_the_mask_and_its_softmax():
    p = stringdiag.load(GALLERY / "taxonomy.diag")
    child = p["SlidingWindowAttention"]
    got = changed_boxes(p["PrimordialAttention"], child)
    # the dot product replacing sim, the mask, where and the scaled softmax replacing N;
    # Q, K, V and the weighted sum over keys are the parent's
    assert ops(child, got) == ["contract", "ssoftmax", "where", "window"]
    assert len(list(child.boxes())) - len(got) == 4


# -- the command and its picture ----------------------------------------------------------------
def test_the_command_checks_the_gallery_tree_and_draws_every_member(tmp_path, capsys):
    out = tmp_path / "tree.svg"
    assert main(["taxonomy", str(GALLERY / "taxonomy.tax"), "--verify", "-o", str(out)]) == 0
    text = capsys.readouterr().out
    assert "a tree of 16 members rooted at primordial, 15 edges, each checked and verified" in text
    assert "masked -> sliding: tax_sliding_window.deriv, 1 steps (1 ⇒), verified" in text
    tax = load_taxonomy(GALLERY / "taxonomy.tax")
    svg = html.unescape(out.read_text())  # Graphviz writes Star-Transformer as Star&#45;Transformer
    for m in tax.members.values():
        assert f">{m.title}" in svg
    # the boxes drawn red are exactly the changed ones of each child (m0 is the root)
    names = list(tax.members)
    want = {f"m{names.index(e.decl.child.text)}_{b}" for e in tax.edges for b in e.changed}
    groups = {re.search(r"<title>([^<]*)</title>", g).group(1): g.split("</g>")[0] for g in svg.split('<g id="node')[1:]}
    red = {t for t, g in groups.items() if f'stroke="{CHANGED}"' in g}
    outlined = {t for t, g in groups.items() if re.search(r"<(polygon|ellipse|path)", g)}  # a constant is text only
    assert red == want & outlined and len(want) == sum(len(e.changed) for e in tax.edges) > 0


def test_checking_a_taxonomy_imports_no_torch(tmp_path):
    """Without --verify nothing is evaluated, so torch is never loaded."""
    import subprocess
    import sys

    code = ("import sys; from stringdiag.cli.main import main; "
            f"rc = main(['taxonomy', {str(GALLERY / 'taxonomy.tax')!r}, '-o', {str(tmp_path / 't.svg')!r}]); "
            "print(rc, 'torch' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         cwd=Path(__file__).resolve().parent.parent, check=True).stdout.split()
    assert out[-2:] == ["0", "False"]
