"""TikZ (``render/tikz.py``): every gallery diagram and derivation (the ``render`` and ``derive``
lines of gallery/PICTURES) compiles with Debian's ``pdflatex``, one page per picture. The
pictures are compiled in four documents (four shards, which pytest-xdist spreads over its workers),
since each pdflatex run starts TikZ afresh. A paper that loads ``stringdiag.sty``, restyles it
and ``\\input``\\ s the pictures ``render``/``derive --tikz-body`` wrote compiles too."""
from __future__ import annotations

import re
import shlex
import subprocess
from pathlib import Path

import pytest

from stringdiag.cli.main import main
from stringdiag.derive.derivation import load_derivation
from stringdiag.elaborate.loader import load
from stringdiag.render import tikz

ROOT = Path(__file__).resolve().parents[1]
SHARDS = 4


def gallery_commands() -> list[list[str]]:
    lines = (ROOT / "gallery" / "PICTURES").read_text().splitlines()
    return [shlex.split(line) for line in lines if line.split(" ", 1)[0] in ("render", "derive")]


def pictures(argv: list[str]) -> list[tuple[str, str, object]]:
    """(name, TikZ, diagram or None) for what one gallery command draws."""
    if argv[0] == "derive":
        return [(argv[1], tikz.chain(load_derivation(ROOT / argv[1]).frames()), None)]
    prog = load(ROOT / argv[1])
    names = [argv[argv.index("-d") + 1]] if "-d" in argv else list(prog.own)
    expand = "--expand" in argv
    return [(f"{argv[1]}:{n}", tikz.diagram(prog[n], expand), None if expand else prog[n]) for n in names]


@pytest.fixture(scope="module")
def latex(system_programs):
    system_programs("texlive-latex-base texlive-pictures", "pdflatex", tex=("tikz.sty",))


def compile_tex(tex: Path) -> int:
    """pdflatex on ``tex`` (in its folder); the number of pages it wrote."""
    run = subprocess.run(["pdflatex", "-interaction=nonstopmode", "-halt-on-error", tex.name], cwd=tex.parent,
                         capture_output=True, text=True, timeout=600)
    errors = [line for line in run.stdout.splitlines() if line.startswith("!")]
    assert run.returncode == 0, (errors, run.stdout[-2000:])
    pdf = tex.with_suffix(".pdf")
    assert pdf.read_bytes()[:5] == b"%PDF-"
    return int(re.search(r"Output written on .*\((\d+) pages?", run.stdout.replace("\n", "")).group(1))


def test_the_gallery_shards_cover_it():
    commands = gallery_commands()
    assert sum(len(commands[k::SHARDS]) for k in range(SHARDS)) == len(commands) > 40


@pytest.mark.parametrize("shard", range(SHARDS))
@pytest.mark.slow
def test_every_gallery_picture_compiles(latex, tmp_path, shard):
    drawn = [p for argv in gallery_commands()[shard::SHARDS] for p in pictures(argv)]
    for name, pic, d in drawn:
        assert "\\sdchar" not in pic, name  # every character of the gallery has a glyph
        if d is not None:  # one TikZ node per box, in the box's style
            learn = sum(d.record(b).kind == "learn" for b in d.boxes())
            assert pic.count("\\node[sd learn,") == learn, name
            assert pic.count("\\node[sd sum,") == sum(d.record(b).kind == "contract" for b in d.boxes()), name
    tex = tmp_path / "gallery.tex"
    tex.write_text(tikz.document([pic for _, pic, _ in drawn]))
    assert compile_tex(tex) == len(drawn)


def test_a_paper_restyles_and_inputs_the_pictures(latex, tmp_path, capsys):
    gallery = ROOT / "gallery"
    assert main(["render", str(gallery / "attention.diag"), "-d", "SelfAttention", "-o", str(tmp_path / "att.tex"),
                 "--tikz-body"]) == 0
    assert main(["derive", str(gallery / "linearize.deriv"), "-o", str(tmp_path / "lin.tex"), "--tikz-body"]) == 0
    out = capsys.readouterr().out
    assert f"wrote {tmp_path / 'stringdiag.sty'}" in out and f"wrote {tmp_path / 'lin.tex'}" in out
    body = (tmp_path / "att.tex").read_text()
    assert "\\documentclass" not in body and body.count("\\begin{tikzpicture}") == 1
    paper = tmp_path / "paper.tex"
    paper.write_text("\\documentclass{article}\n\\usepackage{graphicx}\n\\usepackage{stringdiag}\n"
                     "\\tikzset{sd learn/.style={sd box, fill=black!20}}\n"  # a paper's restyling
                     "\\begin{document}\nFigure~1: \\resizebox{\\linewidth}{!}{\\input{att}}\n\\newpage\n"
                     "\\resizebox{!}{0.9\\textheight}{\\input{lin}}\n\\end{document}\n")
    assert compile_tex(paper) == 2
    # standalone: a document of its own, one page
    assert main(["render", str(gallery / "attention.diag"), "-d", "SelfAttention", "-o", str(tmp_path / "one.tex")]) == 0
    assert compile_tex(tmp_path / "one.tex") == 1


def test_labels_become_latex():
    """Graphviz's HTML-like labels (draw.type_label) and plain ones, as LaTeX, written out by hand."""
    wire = 'q <font point-size=\'10\'>&#91;<font color="#c0392b">s</font>, <font color="#1f5f9e">k</font>&#93;</font>'
    assert tikz.label(wire) == "q {\\scriptsize [\\textcolor{sdseq}{s}, \\textcolor{sdfixed}{k}]}"
    assert tikz.label("softmax<s>") == "softmax$<$s$>$"
    assert tikz.label("Σ<font point-size='9'>j</font>") == "$\\Sigma${\\scriptsize j}"
    assert tikz.latex("a_1 & 50% #x {y} ~ α ⇒ ★") == \
        "a\\_1 \\& 50\\% \\#x \\{y\\} \\textasciitilde{} $\\alpha$ $\\Rightarrow$ \\sdchar{U+2605}"
