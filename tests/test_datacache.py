"""The caches a command reads at start (syntax/datacache.py): the parser's tables and the shipped
sources' syntax trees as marshalled plain data, checked by key and digest. Each reads back to what
it was made from (the shipped JSON, a fresh parse); a damaged, stale or foreign file is ignored and
the data made again; nothing in a cache file is ever run."""
import json
import marshal
import os
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from stringdiag.errors import Pos
from stringdiag.syntax import ast as A
from stringdiag.syntax import astcache, datacache, lalr
from stringdiag.syntax import rules_ast as RA

ROOT = Path(__file__).resolve().parents[1]
SOURCES = sorted(ROOT.glob("gallery/*.diag")) + sorted(ROOT.glob("rules/*.rules")) + [
    ROOT / "stringdiag" / "prelude" / "prelude.diag"]


def _read(path: Path) -> tuple:
    reader = RA.read_rules if path.suffix == ".rules" else A.read
    return reader(path.read_text(), str(path))


def _through_marshal(items: tuple, file: str, lazy: bool = False) -> tuple:
    return astcache.decode(marshal.loads(marshal.dumps(astcache.to_data(items, file))), file, lazy)


@pytest.mark.parametrize("path", SOURCES, ids=lambda p: p.name)
def test_every_shipped_source_reads_back_as_its_parse(path):
    items = _read(path)
    assert _through_marshal(items, str(path)) == items
    lazy = _through_marshal(items, str(path), lazy=True)
    bodies = [i for i in lazy if isinstance(i, A.DiagramDecl)]
    assert all(isinstance(i.body, astcache.Later) for i in bodies)
    assert [i.body.read() for i in bodies] == [i.body for i in items if isinstance(i, A.DiagramDecl)]


FILE = "here.diag"
names = st.text(min_size=0, max_size=5)
numbers = st.integers(1, 9) | st.sampled_from([0, 2**20 - 1, 2**20, 2**40])  # (a column past 2^20: a Pos record)
places = st.builds(Pos, st.sampled_from([FILE, "elsewhere.diag"]), numbers, numbers)
leaves = st.one_of(st.none(), st.booleans(), st.integers(-2**70, 2**70), st.floats(allow_nan=False), names, places)
trees = st.recursive(leaves, lambda inner: st.one_of(st.tuples(inner, inner).map(tuple),
                                                     st.lists(inner, max_size=4).map(tuple),
                                                     st.builds(A.Name, names, inner),
                                                     st.builds(A.Str, names, places)), max_leaves=30)


@settings(max_examples=200, deadline=None)
@given(st.lists(trees, max_size=4).map(tuple))
def test_any_tree_of_records_tuples_and_plain_values_reads_back_equal(items):
    back = _through_marshal(items, FILE)
    assert back == items and repr(back) == repr(items)  # (True stays True, 1.0 stays a float)


def test_a_position_met_twice_is_one_object():
    p = Pos(FILE, 3, 4)
    a, b = _through_marshal((A.Name("x", p), A.Name("y", Pos(FILE, 3, 4))), FILE)
    assert a.pos is b.pos


def test_what_the_format_does_not_hold_is_not_kept(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    with pytest.raises(astcache.Unkept):
        astcache.to_data(([1, 2],), FILE)                    # a list is no syntax node
    assert astcache.read_cached("x", FILE, lambda t, f: ([1],)) == ([1],)
    assert not list(tmp_path.glob("*/*"))                    # parsed each time, nothing written


@pytest.mark.parametrize("data", [
    ((bytes([astcache.VALUE]), (compile("print('ran')", "x", "exec"),)), ()),  # a code object among the values
    ((bytes([astcache.RECORD + len(astcache.CLASSES)]), ()), ()),            # a record of no known class
    ((bytes([astcache.VALUE, astcache.VALUE]), (1, 2)), ()),                   # two objects, not one
    ((bytes([astcache.BODY]), (0,)), ((bytes([astcache.BODY]), (0,)),)),      # a body within a body
    ((b"", ()), ()),
    ((bytes([astcache.VALUE, astcache.RECORD + astcache.CLASSES.index(A.Name), astcache.TUPLE]), ("x", 1)), ()),  # a field short
    ((bytes([astcache.VALUE, astcache.TUPLE]), (1, 5)), ()),                  # a tuple of more than was made
    ((bytes([astcache.VALUE, astcache.VALUE]), (1,)), ()),                     # an op with no value left
    ((bytes([astcache.BODY, astcache.TUPLE]), (3, 1)), ()),                   # a body that was not stored
    ((bytes([astcache.VALUE]), (1,)), ((b"", ()), 7)),                          # bodies that are not programs
])
@pytest.mark.parametrize("lazy", [False, True])
def test_data_it_could_not_have_made_is_refused(data, lazy):
    with pytest.raises(ValueError):
        astcache.decode(data, FILE, lazy)


def test_a_cache_file_holding_code_is_ignored_and_the_code_never_runs(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    text, flag = "dim s : seq\n", tmp_path / "ran"
    code = compile(f"open({str(flag)!r}, 'w')", "x", "exec")
    path, key = astcache._path(FILE), astcache.key(text, FILE)
    datacache.store(path, key, ((bytes([astcache.VALUE, astcache.TUPLE]), (code, 1)), ()), astcache.KEPT)
    assert datacache.load(path, key) is not None             # the file is checked, well formed
    assert astcache.read_cached(text, FILE) == A.read(text, FILE) and not flag.exists()


def test_a_damaged_stale_or_foreign_file_is_no_data(tmp_path):
    path = tmp_path / "c" / "x-1.marshal"
    datacache.store(path, "k1", {"a": (1, "b")}, 4)
    good = path.read_bytes()
    assert datacache.load(path, "k1") == {"a": (1, "b")}
    assert datacache.load(path, "k2") is None                                    # another key
    head, _, payload = good.partition(b"\n")
    for bad in (good[:-3], head + b"\n" + payload[:-1] + b"\x00", b"", b"k1", b"k1 " + b"0" * 32 + b"\n"):
        path.write_bytes(bad)
        assert datacache.load(path, "k1") is None, bad
    path.write_bytes(head.split()[0] + b" " + datacache.digest(b"\xff").encode() + b"\n\xff")
    assert datacache.load(path, "k1") is None                                    # a checked payload marshal refuses
    assert datacache.load(tmp_path / "absent", "k1") is None


def test_only_the_newest_files_of_a_kind_are_kept(tmp_path):
    import os

    for n in range(5):
        datacache.store(tmp_path / f"x-{n}.marshal", "k", n, 3)
        os.utime(tmp_path / f"x-{n}.marshal", (1000 + n, 1000 + n))
    datacache.store(tmp_path / "y-0.marshal", "k", 0, 3)  # another kind
    datacache.store(tmp_path / "x-5.marshal", "k", 5, 3)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["x-3.marshal", "x-4.marshal", "x-5.marshal", "y-0.marshal"]


def test_the_key_names_the_interpreter(monkeypatch):
    before = astcache.key("t", FILE)
    monkeypatch.setattr(datacache, "INTERPRETER", "another-interpreter")
    assert astcache.key("t", FILE) != before


@pytest.mark.parametrize("grammar", ["diag.lark", "deriv.lark", "rules.lark", "tax.lark"])
def test_the_tables_read_from_the_cache_are_the_shipped_json(grammar, tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    shipped = json.loads((ROOT / "grammars" / lalr.table_name(grammar)).read_bytes())

    def fields(t: lalr.Tables) -> tuple:
        return (t.grammar, t.start, t.end, t.ignore, t.newline, t.terminals, t.rules, t.states, t.state_lexer,
                t.root_lexer, t._lexers)

    first = lalr.tables.__wrapped__(grammar)                  # the JSON read, the cache written
    (cached,) = (tmp_path / "stringdiag").glob(f"tables-{grammar.removesuffix('.lark')}-*.marshal")
    monkeypatch.setattr(json, "loads", lambda *a, **k: pytest.fail("the JSON read again"))
    again = lalr.tables.__wrapped__(grammar)
    assert fields(again) == fields(first) == fields(lalr.Tables(shipped))
    monkeypatch.undo()
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    for bad in ([1, 2], {"grammar": "x"}):                   # checked, but not tables: the JSON read
        key = cached.read_bytes().split()[0].decode()
        datacache.store(cached, key, bad, lalr.KEPT)
        assert fields(lalr.tables.__wrapped__(grammar)) == fields(first)


def test_the_cache_follows_the_environment_and_a_user_with_no_home_gets_one(tmp_path, monkeypatch):
    monkeypatch.setenv("STRINGDIAG_CACHE", str(tmp_path / "mine"))
    assert datacache.cache_dir() == tmp_path / "mine"
    monkeypatch.delenv("STRINGDIAG_CACHE")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert datacache.cache_dir() == tmp_path / "xdg" / "stringdiag"
    monkeypatch.delenv("XDG_CACHE_HOME")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert datacache.cache_dir() == tmp_path / "home" / ".cache" / "stringdiag"


def test_a_command_runs_for_a_user_with_no_home(tmp_path):
    """No $HOME and no password entry (a container run as an unnamed user): the caches go to the
    temporary directory, and the command says what it always says."""
    code = ("import os, pathlib, sys\n"
            "def no_home(): raise RuntimeError('Could not determine home directory.')\n"
            "pathlib.Path.home = staticmethod(no_home)\n"
            "from stringdiag.cli.main import main\n"
            "sys.exit(main(['check', 'gallery/attention.diag']))\n")
    env = {k: v for k, v in os.environ.items() if k not in ("HOME", "XDG_CACHE_HOME", "STRINGDIAG_CACHE")}
    r = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env | {"TMPDIR": str(tmp_path)},
                       capture_output=True, text=True)
    assert r.returncode == 0 and "ok (4 diagrams" in r.stdout, r.stderr
    assert list(tmp_path.glob("stringdiag-*/ast-*"))  # the cache went there
