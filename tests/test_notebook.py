"""Notebooks: a small notebook, run headlessly in one kernel (nbclient), shows a program as a
table of its diagrams with their pictures, a diagram, a derivation (its step table and chain),
a taxonomy and an ``info`` summary, and a DiagError as the command line prints it; and the
Python API says where an error is (``str(DiagError)``)."""
from __future__ import annotations

import html
import importlib
from pathlib import Path

import nbformat
import pytest
from nbclient import NotebookClient

import stringdiag
from stringdiag.errors import DiagWarning, Pos
from stringdiag.render.draw import to_svg
from stringdiag.render.notebook import inline

ROOT = Path(stringdiag.__file__).resolve().parents[1]  # the package under test, whichever checkout
GALLERY = Path(__file__).resolve().parents[1] / "gallery"
BAD = "dim s : seq\ndiagram A(x: [s, q]) -> [s] { return x }\n"
SMALL_TAX = f"""\
root primordial = {GALLERY}/taxonomy.diag:PrimordialAttention "primordial attention"
node sliding = {GALLERY}/taxonomy.diag:SlidingWindowAttention "sliding window" family "sparse"
edge primordial -> sliding by "{GALLERY}/taxonomy_sliding.deriv"
"""


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    """The notebook's cells, executed; returns each cell's outputs."""
    tmp = tmp_path_factory.mktemp("notebook")
    (tmp / "small.tax").write_text(SMALL_TAX)
    cells = [
        f"import sys\nsys.path.insert(0, {str(ROOT)!r})\nimport stringdiag",
        f"prog = stringdiag.load({str(GALLERY / 'anatomy.diag')!r})\nprog",
        'prog["M1"]',
        f"stringdiag.load_derivation({str(GALLERY / 'linearize.deriv')!r})",
        f"stringdiag.load_taxonomy({str(tmp / 'small.tax')!r})",
        'stringdiag.info(prog["M1"])',
        f"stringdiag.loads({BAD!r}, 'bad.diag')",
    ]
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(c) for c in cells])
    nb.cells[-1].metadata["tags"] = ["raises-exception"]
    NotebookClient(nb, timeout=300, kernel_name="python3", resources={"metadata": {"path": str(tmp)}}).execute()
    return [c.outputs for c in nb.cells]


def result(outputs) -> dict:
    (out,) = [o for o in outputs if o["output_type"] == "execute_result"]
    return out["data"]


def test_a_program_is_a_table_of_its_diagrams_with_their_types_and_pictures(run):
    data = result(run[1])
    prog = stringdiag.load(GALLERY / "anatomy.diag")
    assert data["text/plain"] == f"<Program {GALLERY / 'anatomy.diag'}: {', '.join(prog.own)}>"
    page = data["text/html"]
    assert page.count("<svg") >= len(prog.own) and "<?xml" not in page
    for name, d in prog.diagrams.items():
        row = f"<td {page.split('<td ', 1)[1].split('>', 1)[0]}>{name}</td>"
        assert row in page and html.escape(d.signature().split(" : ", 1)[1]) in page, name
    assert inline(to_svg(prog["M1"])).html in page  # M1's own picture


def test_a_diagram_draws_itself(run):
    svg = result(run[2])["image/svg+xml"]
    assert svg.lstrip().startswith(("<?xml", "<svg")) and "</svg>" in svg


def test_a_derivation_shows_its_step_table_and_chain(run):
    data = result(run[3])
    deriv = stringdiag.load_derivation(GALLERY / "linearize.deriv")
    assert data["text/plain"] == f"<{'Derivation'} {deriv.heading()}>"
    page = data["text/html"]
    for row in deriv.text_rows()[1:]:
        assert all(html.escape(cell) in page for cell in row), row
    assert page.count('class="sd-pane"') == len(deriv.steps) and 'class="sd-slider"' in page  # render/html.py


def test_a_taxonomy_draws_its_tree(run):
    data = result(run[4])
    assert data["text/plain"].startswith("<Taxonomy ") and "2 members rooted at primordial, 1 edges" in data["text/plain"]
    assert "<svg" in data["image/svg+xml"] and "sliding window" in data["image/svg+xml"]


def test_an_info_summary_is_text_and_tables(run):
    data = result(run[5])
    summary = stringdiag.info(stringdiag.load(GALLERY / "anatomy.diag")["M1"])
    assert data["text/plain"] == summary.text()
    page = data["text/html"]
    assert html.escape(summary["signature"]) in page
    for p in summary["learnable"]:
        assert html.escape(p["name"]) in page and html.escape(p["signature"]) in page
    assert f"O({summary['complexity']['seq_time']})" in page


def test_a_diag_error_in_a_notebook_reads_as_the_command_line_prints_it(run):
    (err,) = [o for o in run[6] if o["output_type"] == "error"]
    assert err["ename"] == "DiagError" and err["evalue"] == "bad.diag:2:18: error: undefined dimension 'q'"
    assert err["traceback"] == ["bad.diag:2:18: error: undefined dimension 'q'",
                                "    diagram A(x: [s, q]) -> [s] { return x }", "                     ^"]


# -- the Python API ---------------------------------------------------------------------------
def test_str_of_an_error_carries_its_position():
    with pytest.raises(stringdiag.DiagError) as e:
        stringdiag.loads(BAD, "bad.diag")
    assert str(e.value) == "bad.diag:2:18: error: undefined dimension 'q'"
    assert e.value.message == "undefined dimension 'q'" and e.value.render().splitlines()[0] == str(e.value)
    assert str(stringdiag.DiagError("no position")) == "no position"
    assert str(DiagWarning("unused", Pos("a.diag", 3, 4))) == "a.diag:3:4: warning: unused"


def test_derive_runs_a_derivation_from_its_text():
    path = GALLERY / "linearize.deriv"
    d = stringdiag.derive(path.read_text(), file=str(path))
    assert d.table() == stringdiag.load_derivation(path).table()
    assert d.result.isomorphic(stringdiag.load(GALLERY / "similarity.diag")["LinearAttention"])
    with pytest.raises(stringdiag.DiagError, match=r"^<string>:1:7: error: "):
        stringdiag.derive("start nowhere.diag:X\n")


def test_the_public_names():
    for name in ["derive", "load_derivation", "load_taxonomy", "info", "compile", "export", "load", "loads"]:
        assert name in stringdiag.__all__ and callable(getattr(stringdiag, name)), name
    importlib.import_module("stringdiag.derive.family_tree")  # the subpackage's modules, imported...
    assert callable(stringdiag.derive) and stringdiag.derive.__module__ == "stringdiag"  # ...leave the function
