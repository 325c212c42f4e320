"""Commands that evaluate nothing start fast: they never import torch, networkx, lark or `regex` (a
diagram's graph is plain dicts; the parser is syntax/lalr.py over tables shipped as JSON), and the
rule library reads only the files a derivation names."""
import marshal
import os
import subprocess
import sys
from pathlib import Path

import pytest

from stringdiag.rewrite.rule import RULES_DIR, Library, library, load_rules
from stringdiag.syntax import astcache

ROOT = Path(__file__).resolve().parents[1]
HEAVY = ("torch", "networkx", "numpy", "matplotlib", "graphviz", "transformers", "regex", "lark")

PROBE = """
import sys
from stringdiag.cli.main import main
code = main({argv!r})
print("LOADED", sorted({{m.split('.')[0] for m in sys.modules}} & set({heavy!r})), code)
"""


@pytest.mark.parametrize("argv", [
    ["check", "gallery/attention.diag", "rules/algebra.rules"],
    ["info", "gallery/attention.diag", "-d", "SelfAttention"],
    ["derive", "gallery/linearize.deriv"],
    ["normalize", "gallery/attention.diag", "-d", "SelfAttention", "--rule", "assoc"],
])
def test_commands_that_evaluate_nothing_import_no_heavy_library(argv, tmp_path):
    r = subprocess.run([sys.executable, "-c", PROBE.format(argv=argv, heavy=HEAVY)], cwd=ROOT,
                       capture_output=True, text=True, env={"XDG_CACHE_HOME": str(tmp_path), "PATH": ""})
    line = next(l for l in r.stdout.splitlines() if l.startswith("LOADED"))
    assert line == "LOADED [] 0", (line, r.stderr[-2000:])


@pytest.mark.parametrize("argv", [["check", "gallery/attention.diag"], ["info", "gallery/attention.diag"],
                                  ["derive", "gallery/linearize.deriv"]])
def test_checking_a_diagram_imports_none_of_the_slow_standard_modules(argv, tmp_path):
    """dataclasses (with inspect, ast and dis) and shutil (with zlib, bz2, lzma, through argparse's
    terminal width) were a tenth of check's start-up; the records are syntax/records.py's. json
    (decoder, scanner, encoder and their patterns): the caches are syntax/datacache.py's."""
    slow = ("dataclasses", "inspect", "shutil", "difflib", "tempfile", "json")
    env = {"XDG_CACHE_HOME": str(tmp_path), "PATH": ""}
    subprocess.run([sys.executable, "-m", "stringdiag.cli.main", *argv], cwd=ROOT, capture_output=True, env=env)
    r = subprocess.run([sys.executable, "-c", PROBE.format(argv=argv, heavy=slow)], cwd=ROOT,
                       capture_output=True, text=True, env=env)  # (the first run wrote the prelude's cache)
    line = next(l for l in r.stdout.splitlines() if l.startswith("LOADED"))
    assert line == "LOADED [] 0", (line, r.stderr[-2000:])


def test_lark_is_imported_without_regex_and_regex_stays_importable():
    """The command line hides `regex` from lark's import only: transformers (trace) imports it after."""
    probe = ("import importlib.util, sys\nfrom stringdiag.syntax import import_lark_without_regex\n"
             "import_lark_without_regex()\nimport lark.utils\n"
             "print(lark.utils._has_regex, 'regex' in sys.modules, importlib.util.find_spec('regex') is not None)\n"
             "import regex\nprint(regex.compile('a+').match('aa') is not None)")
    r = subprocess.run([sys.executable, "-c", probe], cwd=ROOT, capture_output=True, text=True)
    assert r.stdout.split() == ["False", "False", "True", "True"], (r.stdout, r.stderr[-2000:])


def test_drawing_one_diagram_imports_no_heavy_library(tmp_path):
    """networkx and numpy come with a derivation's stacked pictures only (render/stacked.py); the
    DOT text is render/dotsource.py's, not the graphviz package's, and dot is run directly."""
    argv = ["render", "gallery/attention.diag", "-d", "SelfAttention", "-o", str(tmp_path / "a.svg")]
    r = subprocess.run([sys.executable, "-c", PROBE.format(argv=argv, heavy=HEAVY)], cwd=ROOT, capture_output=True,
                       text=True, env={"XDG_CACHE_HOME": str(tmp_path), "PATH": os.environ.get("PATH", "")})
    line = next(l for l in r.stdout.splitlines() if l.startswith("LOADED"))
    assert line == "LOADED [] 0", (line, r.stderr[-2000:])
    assert (tmp_path / "a.svg").read_text().lstrip().startswith("<")


def test_the_librarys_parse_is_cached_and_a_users_rules_file_never_is(tmp_path, monkeypatch):
    from stringdiag.rewrite.rule import RULES_DIR
    from stringdiag.syntax import rules_ast as RA

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    shipped = RULES_DIR / "contraction.rules"
    fresh = RA.read_rules(shipped.read_text(), str(shipped))
    first = load_rules(shipped)                                        # parsed, then written
    (cached,) = astcache.cache_dir().glob("ast-contraction.rules-*.marshal")
    assert astcache.decode(marshal.loads(cached.read_bytes().partition(b"\n")[2]), str(shipped)) == fresh
    calls = []
    monkeypatch.setattr(RA, "read_rules", lambda *a: calls.append(a) or fresh)
    again = load_rules(shipped)                                        # read back, not parsed
    assert not calls and [r.name for r in again] == [r.name for r in first]
    assert [str(r.lhs.graph._node) for r in again] == [str(r.lhs.graph._node) for r in first]
    mine = tmp_path / "mine" / "contraction.rules"                     # the same text, a user's file
    mine.parent.mkdir()
    mine.write_text(shipped.read_text())
    kept = {f: f.read_bytes() for f in astcache.cache_dir().glob("ast-*")}
    load_rules(mine)
    assert len(calls) == 1 and {f: f.read_bytes() for f in astcache.cache_dir().glob("ast-*")} == kept


def test_two_copies_of_a_source_keep_a_cache_file_each_and_the_cache_stays_bounded(tmp_path, monkeypatch):
    from stringdiag.syntax import rules_ast as RA

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    monkeypatch.setattr(astcache, "KEPT", 3)
    text = (RULES_DIR / "softmax.rules").read_text()
    copies = [str(tmp_path / f"copy{i}" / "softmax.rules") for i in range(5)]
    parsed = []
    read = lambda t, f: parsed.append(f) or RA.read_rules(t, f)  # noqa: E731
    for _ in range(2):                                       # two checkouts, alternately
        for copy in copies[:2]:
            astcache.read_cached(text, copy, read)
    assert parsed == copies[:2]                              # each parsed once: neither overwrote the other
    for n, copy in enumerate(copies):
        astcache.read_cached(text, copy, read)
        os.utime(astcache._path(copy), (1000 + n, 1000 + n))  # written in this order
    kept = sorted(astcache.cache_dir().glob("ast-*"))
    assert kept == sorted(astcache._path(c) for c in copies[2:])  # the three newest


def test_the_library_index_names_exactly_the_rules_a_full_parse_finds():
    full = {r.name: r for f in sorted(RULES_DIR.glob("*.rules")) for r in load_rules(f)}
    lib = library()
    assert sorted(lib) == sorted(full) and len(lib) == len(full)
    for name in ("assoc", "div_out"):
        assert lib[name].name == name and lib[name].kind == full[name].kind


def test_the_library_reads_only_the_files_asked_for(tmp_path):
    (tmp_path / "a.rules").write_text("rule one(x: []) -> [] {\n  return 1 * x\n} == {\n  return x\n}\n")
    (tmp_path / "b.rules").write_text("rule two(x: []) -> [] {\n  return x +\n")  # broken: never read
    lib = Library(sorted(tmp_path.glob("*.rules")))
    assert set(lib) == {"one", "two"}
    assert lib["one"].name == "one"
    with pytest.raises(Exception):
        lib["two"]


def test_the_prelude_elaborates_only_what_is_used_and_every_definition_elaborates(tmp_path):
    probe = ("from stringdiag import loads\nfrom stringdiag.elaborate.loader import prelude\n"
             "loads('dim s : seq\\ndim d : fixed\\ndiagram D(x: [s, d]) -> [s, d] {\\n  return softmax(x)\\n}')\n"
             "print(sorted(n for n, d in prelude().defs.items() if d._diagram is not None))")
    r = subprocess.run([sys.executable, "-c", probe], cwd=ROOT, capture_output=True, text=True,
                       env={"XDG_CACHE_HOME": str(tmp_path), "PATH": ""})
    assert r.stdout.strip() == "['softmax', 'sum']", r.stderr  # softmax's body uses sum[-2000:]
    from stringdiag.elaborate.loader import prelude
    for name in prelude().own:                                     # and every definition builds
        assert prelude()[name].name == name


def test_the_cached_syntax_tree_is_the_parsed_one_positions_and_all(tmp_path, monkeypatch):
    from stringdiag.syntax import rules_ast as RA
    from stringdiag.syntax.ast import read

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    for file, reader in [(str(ROOT / "stringdiag/prelude/prelude.diag"), read),
                         (str(RULES_DIR / "contraction.rules"), RA.read_rules)]:
        text = Path(file).read_text()
        fresh = reader(text, file)
        astcache.read_cached(text, file, reader)                       # parsed, then written
        again = astcache.read_cached(text, file, lambda *a: pytest.fail("parsed again"))
        assert again == fresh and {p.file for p in _positions(again)} == {file}


def _positions(x):
    if isinstance(x, tuple):
        for v in x:
            yield from _positions(v)
    elif type(x).__name__ == "Pos":
        yield x
    elif hasattr(x, "_fields"):
        for f in x._fields:
            yield from _positions(getattr(x, f))


def test_the_version_constant_is_the_projects_and_the_installed_distributions():
    """``--version`` reads a constant, not importlib.metadata: the three numbers agree."""
    import tomllib
    from importlib import metadata

    from stringdiag.version import __version__

    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"]
    assert __version__ == project == metadata.version("stringdiag")
    r = subprocess.run([sys.executable, "-X", "importtime", "-m", "stringdiag.cli.main", "--version"], cwd=ROOT,
                       capture_output=True, text=True)
    assert r.stdout.split() == ["stringdiag", __version__] and "importlib.metadata" not in r.stderr, r.stderr[-2000:]


def test_an_inline_body_takes_the_start_file_as_read_not_a_second_reading(monkeypatch):
    """``specialise f(x) := { ... }`` imports the files the derivation read: with one file read,
    its program is used as it is (its text parsed once), and the derivation ends as before."""
    from stringdiag.derive.derivation import load_derivation
    from stringdiag.elaborate.loader import load, loads_beside
    from stringdiag.syntax import parser

    parsed = []
    real = parser.lalr_parse
    monkeypatch.setattr(parser, "lalr_parse", lambda text, grammar: parsed.append(text) or real(text, grammar))
    deriv = load_derivation(str(ROOT / "gallery" / "linearize.deriv"))
    similarity = (ROOT / "gallery" / "similarity.diag").read_text()
    assert parsed.count(similarity) == 1 and deriv.target is not None
    start = load(ROOT / "gallery" / "similarity.diag")                      # and the program is the one given
    path = str((ROOT / "gallery" / "similarity.diag").resolve())
    body = loads_beside(f'import "{path}"\n', "<inline>", {path: start})
    assert body.defs["LinearAttention"] is start.defs["LinearAttention"]
    assert body.boxes["Q"] is start.boxes["Q"]


def test_the_prelude_from_the_cache_decodes_only_the_bodies_it_elaborates(tmp_path):
    """Each definition's body is a line of the cache file of its own, decoded (a ``Later``
    until then) when the definition is first elaborated, and then the parsed body."""
    probe = ("from stringdiag import loads\nfrom stringdiag.elaborate.loader import PRELUDE, prelude\n"
             "from stringdiag.syntax.ast import read\nfrom stringdiag.syntax.astcache import Later\n"
             "loads('dim s : seq\\ndim d : fixed\\ndiagram D(x: [s, d]) -> [s, d] {\\n  return softmax(x)\\n}')\n"
             "defs = prelude().defs\nprint(sorted(n for n, d in defs.items() if not isinstance(d.node.body, Later)))\n"
             "fresh = {i.name.text: i for i in read(PRELUDE.read_text(), str(PRELUDE)) if hasattr(i, 'body')}\n"
             "print(all(defs[n].node == fresh[n] for n in ('softmax', 'sum')), len(fresh) > 10)")
    env = {"XDG_CACHE_HOME": str(tmp_path), "PATH": ""}
    runs = [subprocess.run([sys.executable, "-c", probe], cwd=ROOT, capture_output=True, text=True, env=env)
            for _ in range(2)]                                          # the first parses and writes the cache
    assert runs[1].stdout.splitlines() == ["['softmax', 'sum']", "True True"], runs[1].stderr[-2000:]
    assert runs[0].stdout.splitlines()[1] == "True True"


def test_the_collector_is_paused_while_a_command_that_evaluates_nothing_runs(monkeypatch, capsys):
    """(and running again when it returns); a command that evaluates keeps it running."""
    import gc

    from stringdiag.cli import main as cli

    seen = []
    real = cli.command

    class Spy:
        def __init__(self, name):
            self.name, self.module = name, real(name)

        def run(self, args):
            seen.append((self.name, gc.isenabled()))
            return self.module.run(args)

        def __getattr__(self, attr):  # the rest of the command's module (its help, its options)
            return getattr(self.module, attr)

    monkeypatch.setattr(cli, "command", Spy)
    assert gc.isenabled()
    for argv in (["check", "gallery/attention.diag"], ["info", "gallery/attention.diag", "-d", "SelfAttention"]):
        assert cli.main([str(ROOT / a) if a.startswith("gallery") else a for a in argv]) == 0 and gc.isenabled()
    monkeypatch.setattr(cli, "COLLECTOR_PAUSED", frozenset())
    assert cli.main(["check", str(ROOT / "gallery/attention.diag")]) == 0
    assert seen == [("check", False), ("info", False), ("check", True)]


def test_drawing_one_diagram_runs_dot_without_subprocess_and_reads_its_svg_without_xml_etree(tmp_path):
    """dot is started by os.posix_spawnp and its pipes drained by select.poll (render/dotrun.py);
    the SVG it made is read by render/svgtree.py on expat: none of subprocess (with selectors,
    signal, threading) and xml.etree, about 6 ms of drawing one diagram's start-up."""
    slow = ("subprocess", "selectors", "signal", "threading", "xml")
    argv = ["render", "gallery/attention.diag", "-d", "SelfAttention", "-o", str(tmp_path / "a.svg")]
    r = subprocess.run([sys.executable, "-c", PROBE.format(argv=argv, heavy=slow)], cwd=ROOT, capture_output=True,
                       text=True, env={"XDG_CACHE_HOME": str(tmp_path), "PATH": os.environ.get("PATH", "")})
    line = next(l for l in r.stdout.splitlines() if l.startswith("LOADED"))
    assert line == "LOADED [] 0", (line, r.stderr[-2000:])


COMPILES = """
import builtins, sys
from stringdiag.cli.main import main
compiled, real = [], builtins.compile
builtins.compile = lambda source, *a, **k: (isinstance(source, str) and compiled.append(source)) or real(source, *a, **k)
code = main({argv!r})
print("COMPILED", compiled, code)
"""


@pytest.mark.parametrize("argv", [["check", "gallery/attention.diag"], ["info", "gallery/attention.diag", "-d", "SelfAttention"],
                                  ["derive", "gallery/linearize.deriv"]])
def test_commands_that_evaluate_nothing_compile_no_python_source(argv, tmp_path):
    """A process's first compile() sets up the interpreter's syntax-tree types (about 1 ms); typing
    compiles each string annotation of a NamedTuple's fields (and a TypeVar's bound named by a
    string), so the records on these paths are declared with their annotations evaluated."""
    r = subprocess.run([sys.executable, "-c", COMPILES.format(argv=argv)], cwd=ROOT, capture_output=True, text=True,
                       env={"XDG_CACHE_HOME": str(tmp_path), "PATH": ""})
    line = next((l for l in r.stdout.splitlines() if l.startswith("COMPILED")), r.stderr[-2000:])
    assert line == "COMPILED [] 0", line


GETTEXT = """
import sys
{first}
from stringdiag.cli.main import main
try:
    code = main({argv!r})
except SystemExit as e:
    code = e.code
print("IMPORTED", sorted({{'gettext', 'locale'}} & set(sys.modules)), code)
import gettext
print("GETTEXT", callable(gettext.translation), gettext.gettext("usage: "))
"""


@pytest.mark.parametrize("argv", [["check", "gallery/attention.diag"], ["check", "--frob", "x.diag"], ["--help"],
                                  ["derive", "--help"], ["render", "gallery/attention.diag", "-o", "x.jpg"],
                                  ["check"], ["chek", "x.diag"]])
def test_argparse_says_what_it_said_without_gettext(argv, tmp_path):
    """argparse is imported with gettext's functions as NullTranslations has them (cli/main.py):
    gettext and locale are then not imported, every message and help text is what argparse with
    gettext prints, and gettext itself stays the real module for whoever imports it later."""
    env = {"XDG_CACHE_HOME": str(tmp_path), "PATH": "", "COLUMNS": "100", "LANG": "C.UTF-8"}
    runs = [subprocess.run([sys.executable, "-c", GETTEXT.format(first=first, argv=argv)], cwd=ROOT,
                           capture_output=True, text=True, env=env) for first in ("", "import gettext")]
    (out, err), (real_out, real_err) = [(r.stdout.splitlines(), r.stderr) for r in runs]
    assert out[:-2] == real_out[:-2] and err == real_err and out[-2].split()[-1] == real_out[-2].split()[-1]
    assert "gettext" not in out[-2] and real_out[-2].startswith("IMPORTED ['gettext', 'locale'] ")
    assert out[-2].startswith("IMPORTED [] ") or argv == ["--help"]  # (every command's module: regex imports locale)
    assert out[-1] == real_out[-1] == "GETTEXT True usage: "
