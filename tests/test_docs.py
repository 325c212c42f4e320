"""Every code block of README.md and docs/*.md runs here, so that what the documentation shows
cannot drift from what stringdiag does; and the site builds with no warning.

A block's kind is its info string (docs/contributing.md says the same, for writers):

- ``console``: each ``$ COMMAND`` line is run by bash in a scratch copy of ``gallery/`` and
  ``rules/`` (``stringdiag`` is this checkout's, ``python`` the interpreter running the suite;
  tests/test_wheel.py runs the pages that use the install (Python blocks, shipped names) again
  against the installed wheel, the folder filled by ``stringdiag examples``), and the lines after
  it, up to the next ``$``, are its expected output, stdout and stderr together. Normalisations,
  the only ones: a line ``...`` stands for any number of lines; ``...`` inside a line for any
  text (timings, digits beyond those shown); trailing spaces are ignored. The exit status must
  be 0 unless the expected output shows an ``error:``, and then it must not be.
- ``python``: executed, in order, in one namespace per page, in the scratch folder.
- ``pycon``: run by doctest (``...`` as ellipsis, whitespace normalised), sharing that namespace.
- ``diag``, ``rules``, ``deriv``, ``tax``: a block whose first line is ``# PATH`` of a repository file is
  an excerpt of it, and must appear there line for line; any other is a whole file, written into the
  scratch ``gallery/`` and checked (``check``; ``derive`` for a derivation, ``taxonomy`` for a tree).
- ``lark``: an excerpt of one of ``grammars/*.lark``, line for line.

An HTML comment on the line before a block changes what happens to it: ``<!-- file: NAME -->``
writes it to ``NAME`` in the scratch folder for the commands after it (it is checked only by them);
``<!-- not run: REASON -->`` leaves it out, and such blocks are exactly ``NOT_RUN`` below, so that
they stay few and are seen; ``<!-- clone only: REASON -->`` (exactly ``CLONE_ONLY``) runs it here
but not against the installed wheel. Any other info string is an error.

Results quoted in prose: ``<!-- quoted from: PATH[, PATH] -->`` on the line before a Markdown
table or paragraph ties it to files the tools wrote (a study's ``tables.md``, ``verdict.txt``;
``PATH#HEADING``: the section under ``## HEADING``, which ``tools/quotes.py`` copies in): a
table's lines must be an excerpt of one of them, and in a paragraph every interval (``-21.1
[-23.8, -18.4]``) and every Holm-corrected p-value (``Holm-corrected p 0.039``) must appear in one
(``p_holm 0.039``), so that a number on a page is one the runs gave.
"""
from __future__ import annotations

import doctest
import os
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
SOURCE_KINDS = {"diag": "check", "rules": "check", "deriv": "derive", "tax": "taxonomy"}
KINDS = {"console", "python", "pycon", "lark", *SOURCE_KINDS}

# (page, the reason its marker gives): the blocks shown and not run
NOT_RUN = {
    ("studies.md", "a Slurm job script, submitted with sbatch on a cluster"),
    ("studies.md", "submitit submits jobs to a Slurm cluster"),
    ("README.md", "make demo is 3 minutes, make test the whole suite"),
    ("getting-started.md", "make demo is 3 minutes, make test the whole suite"),
    ("getting-started.md", "builds a wheel and installs it into a new environment"),
    ("tutorial.md", "trains a model for a few minutes"),
    ("compiling.md", "studies train models for hours"),
    ("reproductions.md", "a minute of enumeration, every reading varied"),
    ("reproductions.md", "a study of many hours on this CPU"),
    ("benchmarks.md", "a minute of timing, run here with its figures below"),
    ("benchmarks.md", "about ten minutes of timing, run here with its figures below"),
    ("pictures.md", "LaTeX, for a paper that inputs the picture"),
    ("gpu.md", "needs the GPU machine and the wheels in .whl/"),
}

# (page, reason): blocks that read the study results the repository holds and the wheel does not
# ship; run here, left out when this module runs against the installed wheel (tests/test_wheel.py)
CLONE_ONLY = {
    ("gpu.md", "reads the study's results, which the repository holds and the wheel does not ship"),
    ("reproductions.md", "reads the study's results, which the repository holds and the wheel does not ship"),
}

FENCE = re.compile(r"^```(\S*)[^\n]*\n(.*?)^```\s*$", re.MULTILINE | re.DOTALL)
MARKER = re.compile(r"<!--\s*(file|not run|clone only):\s*(.*?)\s*-->\s*$")


@dataclass
class Block:
    page: Path
    line: int  # of the opening fence, 1-based
    kind: str
    text: str
    marker: tuple[str, str] | None

    @property
    def where(self) -> str:
        return f"{self.page.relative_to(ROOT)}:{self.line}"

    @property
    def key(self) -> tuple[str, str]:
        return self.page.name, self.marker[1] if self.marker else ""


def blocks(page: Path) -> list[Block]:
    text = page.read_text(encoding="utf-8")
    found = []
    for m in FENCE.finditer(text):
        line = text.count("\n", 0, m.start()) + 1
        before = text[:m.start()].rstrip("\n").rsplit("\n", 1)[-1]
        marker = MARKER.search(before)
        found.append(Block(page, line, m.group(1), m.group(2), marker.groups() if marker else None))
    return found


# -- the scratch folder and the commands ------------------------------------------------------
# Set by tests/test_wheel.py, which runs this module in a fresh environment holding the wheel:
# the example files then come from the installed package (`stringdiag examples`, as a user of the
# wheel gets them), and nothing puts the checkout on the import path.
INSTALLED = os.environ.get("STRINGDIAG_DOCS_AGAINST") == "installed"


# pictures (the commands only write them) and what git ignores in a study's folder: a checkout
# where studies ran holds gigabytes of their checkpoints, which no documented command reads
UNREAD = shutil.ignore_patterns("*.svg", "checkpoint.safetensors", ".*.tmp", ".training.lock")


@pytest.fixture
def scratch(tmp_path: Path) -> Path:
    """A copy of what the documented commands read (pictures left out: they only write them),
    with a ``stringdiag`` on PATH that runs this checkout (or, ``INSTALLED``, the installed
    wheel), and a ``python`` that is this interpreter (the one with stringdiag's dependencies)."""
    if INSTALLED:
        import stringdiag
        assert not Path(stringdiag.__file__).is_relative_to(ROOT), stringdiag.__file__
        subprocess.run([sys.executable, "-m", "stringdiag", "examples", str(tmp_path)], check=True,
                       capture_output=True)
    for folder in () if INSTALLED else ("gallery", "rules"):
        shutil.copytree(ROOT / folder, tmp_path / folder, ignore=UNREAD)
    bin_dir = tmp_path / ".bin"
    bin_dir.mkdir()
    for name, args in (("stringdiag", ' -m stringdiag.cli.main'), ("python", "")):
        exe = bin_dir / name
        exe.write_text(f'#!/bin/sh\nexec "{sys.executable}"{args} "$@"\n')
        exe.chmod(0o755)
    return tmp_path


def environment(scratch: Path) -> dict[str, str]:
    env = dict(os.environ, OMP_NUM_THREADS="1", COLUMNS="200")
    if not INSTALLED:
        env["PYTHONPATH"] = str(ROOT)
    env["PATH"] = f"{scratch / '.bin'}{os.pathsep}{env['PATH']}"
    return env


def run(command: str, scratch: Path) -> subprocess.CompletedProcess:
    return subprocess.run(["bash", "-c", command], cwd=scratch, env=environment(scratch),
                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=120)


def commands(text: str) -> list[tuple[str, list[str]]]:
    """``$`` lines (a trailing ``\\`` continues one) with the output lines shown after each."""
    out: list[tuple[str, list[str]]] = []
    lines = text.splitlines()
    k = 0
    while k < len(lines):
        if not lines[k].startswith("$ "):
            raise AssertionError(f"console block: expected a '$ ' command, found {lines[k]!r}")
        command = lines[k][2:]
        while command.endswith("\\"):
            k += 1
            command = command[:-1] + " " + lines[k].strip()
        k += 1
        shown = []
        while k < len(lines) and not lines[k].startswith("$ "):
            shown.append(lines[k])
            k += 1
        out.append((command, shown))
    return out


def line_pattern(shown: str) -> str:
    return ".*".join(re.escape(part) for part in shown.rstrip().split("...")) + r"\s*"


def matches(shown: list[str], actual: list[str]) -> bool:
    """Lines against lines: ``...`` alone matches any lines, within a line any text."""
    pattern = "".join(r"(?:[^\n]*\n)*?" if s.strip() == "..." else line_pattern(s) + r"\n" for s in shown)
    return re.fullmatch(pattern, "".join(a + "\n" for a in actual)) is not None


def run_console(block: Block, scratch: Path) -> None:
    for command, shown in commands(block.text):
        result = run(command, scratch)
        actual = result.stdout.splitlines()
        failed = result.returncode != 0
        expects_error = any("error:" in s for s in shown)
        assert failed == expects_error, (f"{block.where}: `{command}` exited {result.returncode}:\n"
                                         f"{result.stdout}")
        assert matches(shown, actual), (f"{block.where}: `{command}` printed\n{result.stdout}\n"
                                        "which the block does not show:\n" + "\n".join(shown))


# -- sources and grammars -------------------------------------------------------------------
def is_excerpt(text: str, of: str) -> bool:
    """Every line of ``text``, in order and contiguous, in ``of`` (trailing spaces ignored)."""
    want = [line.rstrip() for line in text.strip("\n").splitlines()]
    have = [line.rstrip() for line in of.splitlines()]
    return any(have[k:k + len(want)] == want for k in range(len(have) - len(want) + 1))


def run_source(block: Block, scratch: Path) -> None:
    first = block.text.splitlines()[0]
    named = re.fullmatch(r"#\s*(\S+\.(?:diag|rules|deriv|tax))\b.*", first)
    if named and (ROOT / named.group(1)).is_file():
        body = block.text.split("\n", 1)[1]
        assert is_excerpt(body, (ROOT / named.group(1)).read_text(encoding="utf-8")), \
            f"{block.where}: not an excerpt of {named.group(1)} (copy it again from the file)"
        return
    path = scratch / "gallery" / f"_doc_{block.line}.{block.kind}"
    path.write_text(block.text, encoding="utf-8")
    command = SOURCE_KINDS[block.kind]
    result = run(f"stringdiag {command} gallery/{path.name}", scratch)
    assert result.returncode == 0, f"{block.where}: `stringdiag {command}` refuses the block:\n{result.stdout}"


def run_lark(block: Block) -> None:
    grammars = [p.read_text(encoding="utf-8") for p in sorted((ROOT / "grammars").glob("*.lark"))]
    assert any(is_excerpt(block.text, g) for g in grammars), \
        f"{block.where}: not an excerpt of any grammars/*.lark"


# -- python ---------------------------------------------------------------------------------
def run_python(block: Block, namespace: dict, scratch: Path) -> None:
    cwd = os.getcwd()
    os.chdir(scratch)
    try:
        if block.kind == "python":
            exec(compile(block.text, block.where, "exec"), namespace)
            return
        test = doctest.DocTestParser().get_doctest(block.text, namespace, block.where, str(block.page), block.line)
        runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
        output: list[str] = []
        runner.run(test, out=output.append, clear_globs=False)
        assert runner.failures == 0, "".join(output)
    finally:
        os.chdir(cwd)


def run_block(block: Block, namespace: dict, scratch: Path) -> None:
    assert block.kind in KINDS, f"{block.where}: unknown info string {block.kind!r} (one of {sorted(KINDS)})"
    if block.kind == "console":
        run_console(block, scratch)
    elif block.kind in ("python", "pycon"):
        run_python(block, namespace, scratch)
    elif block.kind == "lark":
        run_lark(block)
    else:
        run_source(block, scratch)


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.name)
@pytest.mark.slow
def test_every_block_runs(page: Path, scratch: Path, monkeypatch):
    if not INSTALLED:
        monkeypatch.setenv("PYTHONPATH", str(ROOT))
    namespace: dict = {"__name__": "__docs__"}
    for block in blocks(page):
        if block.marker and block.marker[0] == "not run":
            assert block.key in NOT_RUN, f"{block.where}: a block not run that NOT_RUN does not list: {block.key}"
        elif block.marker and block.marker[0] == "clone only" and INSTALLED:
            assert block.key in CLONE_ONLY, f"{block.where}: a clone-only block CLONE_ONLY does not list"
        elif block.marker and block.marker[0] == "file":
            (scratch / block.marker[1]).write_text(block.text, encoding="utf-8")
        else:
            run_block(block, namespace, scratch)


def test_blocks_not_run_are_the_listed_ones():
    marked = {b.key for page in PAGES for b in blocks(page) if b.marker and b.marker[0] == "not run"}
    assert marked == NOT_RUN
    clone_only = {b.key for page in PAGES for b in blocks(page) if b.marker and b.marker[0] == "clone only"}
    assert clone_only == CLONE_ONLY


# -- results quoted from the files the tools wrote ---------------------------------------------
QUOTED = re.compile(r"^<!--\s*quoted from:\s*(.*?)\s*-->\s*$")
INTERVAL = re.compile(r"[+-]?\d+\.\d+ \[[+-]?\d+\.\d+, [+-]?\d+\.\d+\]")
HOLM = re.compile(r"Holm-corrected p ([\d.e-]+\d)")


def quotations(page: Path) -> list[tuple[int, list[str], list[str]]]:
    """(line, the files named, the lines of the table or paragraph after the marker)."""
    lines = page.read_text(encoding="utf-8").splitlines()
    found = []
    for k, line in enumerate(lines):
        m = QUOTED.match(line)
        if m:
            end = next((j for j in range(k + 1, len(lines)) if not lines[j].strip()), len(lines))
            found.append((k + 1, [p.strip() for p in m.group(1).split(",")], lines[k + 1:end]))
    return found


def quoted_source(path: str) -> str:
    """A file's text, or with ``#HEADING`` the section of a Markdown file under ``## HEADING``."""
    name, _, heading = path.partition("#")
    text = (ROOT / name).read_text(encoding="utf-8")
    if not heading:
        return text
    parts = re.split(r"^## ", text, flags=re.MULTILINE)
    found = [p.split("\n", 1)[1] for p in parts[1:] if p.split("\n", 1)[0].strip() == heading]
    assert found, f"{name} has no section '## {heading}'"
    return found[0]


def quoted_misses(text: list[str], sources: list[str]) -> list[str]:
    """What a quotation shows that none of its sources holds (nothing: it is faithful)."""
    if text and text[0].startswith("|"):
        return [] if any(is_excerpt("\n".join(text), s) for s in sources) else ["the table"]
    para = " ".join(text)
    wanted = INTERVAL.findall(para) + [f"p_holm {p}" for p in HOLM.findall(para)]
    return [w for w in wanted if not any(w in s for s in sources)]


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.name)
def test_quoted_results_are_the_files(page: Path):
    for line, paths, text in quotations(page):
        missing = [p for p in paths if not (ROOT / p.split("#")[0]).is_file()]
        assert not missing, f"{page.name}:{line}: quoted from files that do not exist: {missing}"
        assert text, f"{page.name}:{line}: a quotation marker with nothing after it"
        sources = [quoted_source(p) for p in paths]
        misses = quoted_misses(text, sources)
        assert not misses, f"{page.name}:{line}: not in {', '.join(paths)} (rerun the report, then copy): {misses}"


def test_quotations_are_checked():
    table = ["| a | b |", "|---|---|", "| M1 | -1.0 [-2.0, +0.1] |"]
    assert quoted_misses(table, ["x\n" + "\n".join(table) + "\ny"]) == []
    assert quoted_misses(table[:2] + ["| M1 | -1.0 [-2.0, +0.2] |"], ["\n".join(table)]) == ["the table"]
    para = ["ShortConv -21.1 [-23.8, -18.4] (3 seeds, Holm-corrected p 0.039) and M0 -0.7 [-2.8, +1.3]"]
    assert quoted_misses(para, ["-21.1 [-23.8, -18.4] p_holm 0.039", "-0.7 [-2.8, +1.3]"]) == []
    assert quoted_misses(para, ["-21.1 [-23.8, -18.4] p_holm 0.04 -0.7 [-2.8, +1.3]"]) == ["p_holm 0.039"]


def test_pages_speak_of_the_tool_not_of_how_it_was_built():
    """Pages speak to users about the tool and the papers: no issue numbers, PR numbers or tickets."""
    pattern = re.compile(r"\b(?:issue|PR|pull request|ticket)s?\s+#?\d+|\bthe issue's\b", re.IGNORECASE)
    found = [f"{page.relative_to(ROOT)}:{text.count(chr(10), 0, m.start()) + 1}: {m.group(0)}"
             for page in PAGES for text in [page.read_text(encoding="utf-8")] for m in pattern.finditer(text)]
    assert not found, "pages that cite how the work was organised:\n" + "\n".join(found)


# -- the runner itself, on small cases --------------------------------------------------------
def test_output_matching_normalises_only_what_it_says():
    assert matches(["a", "...", "z"], ["a", "b", "c", "z"])
    assert matches(["a", "...", "z"], ["a", "z"])
    assert matches(["took ... s"], ["took 0.31 s"])
    assert matches(["error 3.4e-1..."], ["error 3.4e-16"])
    assert not matches(["error 3.4e-1..."], ["error 2.4e-16"])
    assert not matches(["a", "z"], ["a", "b", "z"])
    assert not matches(["a"], ["a", "b"])  # output shown whole unless elided
    assert matches(["a  "], ["a"])


def test_excerpts_are_line_for_line():
    assert is_excerpt("b\nc\n", "a\nb\nc\nd")
    assert not is_excerpt("b\nd\n", "a\nb\nc\nd")


def test_commands_continue_lines():
    assert commands("$ a \\\n   b\nout\n$ c\n") == [("a  b", ["out"]), ("c", [])]


# -- the generated pages ------------------------------------------------------------------------
def _generate():
    sys.path.insert(0, str(ROOT / "docs"))
    try:
        import generate
    finally:
        sys.path.remove(str(ROOT / "docs"))
    return generate


IMAGE = re.compile(r"!\[[^\]]*\]\(([^)\s]+)\)")


def test_generated_pages_are_built_and_whole(tmp_path: Path):
    """docs/rule-library.md and the gallery's listing are written from rules/ and gallery/ by
    docs/generate.py as the site is built (its mkdocs hook), never committed: here into a scratch
    folder, where each page lists every rule and gallery file, every source shown is an excerpt of
    its file, and every picture it shows exists."""
    from stringdiag.rewrite.rule import load_rules

    generate = _generate()
    assert not (ROOT / "docs" / "rule-library.md").exists(), "a committed copy of a generated page"
    assert (ROOT / "docs" / "gallery.md").read_text(encoding="utf-8").rstrip("\n").endswith(generate.MARKER), \
        "docs/gallery.md holds a generated listing: keep only what precedes the marker"
    written = generate.write_pages(tmp_path)
    assert [p.name for p in written] == sorted(p.name for p in tmp_path.iterdir()) == ["gallery.md", "rule-library.md"]
    rules_page = (tmp_path / "rule-library.md").read_text(encoding="utf-8")
    assert {r.name for r in load_rules(ROOT / "rules")} == set(re.findall(r"^### (\S+)$", rules_page, re.M))
    gallery_page = (tmp_path / "gallery.md").read_text(encoding="utf-8")
    listed = set(re.findall(r"^### (\S+)$", gallery_page.split(generate.MARKER)[1], re.M))
    assert listed == {p.relative_to(ROOT / "gallery").as_posix() for pattern in ("*.diag", "*.deriv", "*.tax", "modern/*.diag")
                      for p in (ROOT / "gallery").glob(pattern)}
    for page in written:
        shown = [b for b in blocks(page) if b.kind in SOURCE_KINDS]
        assert shown
        for block in shown:
            block.page = ROOT / "docs" / page.name
            run_source(block, tmp_path)  # each names its file: an excerpt check, nothing run
        missing = [m for m in IMAGE.findall(page.read_text(encoding="utf-8")) if not (ROOT / "docs" / m).is_file()]
        assert not missing, f"{page.name} shows pictures that do not exist: {missing[:5]}"


def test_every_rule_has_its_picture():
    from stringdiag.rewrite.rule import load_rules

    names = {r.name for r in load_rules(ROOT / "rules")}
    pictures = {p.stem for p in (ROOT / "docs" / "rules").glob("*.svg")}
    assert names == pictures, "run python docs/generate.py --pictures"


# -- the site -------------------------------------------------------------------------------
def test_readme_is_short():
    assert len((ROOT / "README.md").read_text(encoding="utf-8").splitlines()) < 250


@pytest.mark.slow
def test_site_builds_strictly(tmp_path: Path):
    """``make docs`` without make: any warning (a broken link, a missing docstring target) fails."""
    result = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "-q", "-d", str(tmp_path / "site")],
                            cwd=ROOT, env=dict(os.environ, PYTHONPATH=str(ROOT)),
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=300)
    assert result.returncode == 0, result.stdout
    assert (tmp_path / "site" / "index.html").is_file()
