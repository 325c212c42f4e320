"""Layouts run with Graphviz's layout plugins only (render/gvplugins.py): a picture measured by
Graphviz's own metrics is the same whatever fonts the machine has, the folder offering those plugins
is made once and kept, and a folder that no longer works gives way to Graphviz as installed."""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from stringdiag.render import dotrun, gvplugins

pytestmark = pytest.mark.skipif(shutil.which("dot") is None, reason="Graphviz is not installed")

SOURCE = 'digraph G { rankdir=LR; a [label="softmax<s>  Σ f"]; b [label="WWWW mmmm iiii"]; a -> b [label="kk [s, k]"] }'
NO_FONTS = '<?xml version="1.0"?>\n<fontconfig></fontconfig>\n'


@pytest.fixture
def cache(tmp_path, monkeypatch):
    """A cache directory of the test's own, and no folder made yet in this process."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    monkeypatch.delenv("GVBINDIR", raising=False)
    monkeypatch.setattr(gvplugins, "_made", {})
    monkeypatch.setattr(dotrun, "_MEMO", {})
    return tmp_path / "cache" / "stringdiag"


def folder_of(cache: Path) -> Path:
    (found,) = [p for p in cache.iterdir() if p.name.startswith("graphviz-")]
    return found


def test_a_layout_does_not_depend_on_the_machines_fonts(cache, tmp_path, monkeypatch):
    def installed() -> bytes:  # Graphviz as installed, in this environment
        return subprocess.run(["dot", "-Kdot", "-Tsvg"], input=SOURCE.encode(), capture_output=True).stdout

    svg, with_fonts = dotrun.piped(SOURCE, "svg", quiet=True), installed()
    (tmp_path / "fonts.conf").write_text(NO_FONTS)
    monkeypatch.setenv("FONTCONFIG_FILE", str(tmp_path / "fonts.conf"))  # a machine with no fonts at all
    assert dotrun.piped(SOURCE, "svg", quiet=True) == svg
    assert dotrun.laid_out(SOURCE)[0].encode() == svg
    textlayout = b"textlayout" in subprocess.run(["dot", "-v", "-Tdot"], input=b"digraph {}", capture_output=True).stderr
    if textlayout:  # the property is not for free: as installed, Graphviz measures with the fonts it finds
        assert installed() != with_fonts


def test_the_folder_offers_the_layout_plugins_only_and_is_made_once(cache, monkeypatch):
    env = gvplugins.layout_environ(dotrun.spawn)
    folder = folder_of(cache)
    assert env["GVBINDIR"] == str(folder)
    links = sorted(p.name for p in folder.iterdir() if p.is_symlink())
    assert links and all(n.startswith(tuple(f"libgvplugin_{k}." for k in gvplugins.PLUGINS)) for n in links)
    config = "".join(p.read_text() for p in folder.iterdir() if p.name.startswith("config"))
    assert "dot_layout" in config and "svg" in config and "textlayout" not in config and "pango" not in config
    stamp = (folder / gvplugins.STAMP).stat().st_mtime_ns
    monkeypatch.setattr(gvplugins, "_made", {})  # the next command
    assert gvplugins.layout_environ(dotrun.spawn)["GVBINDIR"] == str(folder)
    assert (folder / gvplugins.STAMP).stat().st_mtime_ns == stamp  # read, not made again


def test_a_changed_installation_makes_the_folder_again(cache, monkeypatch):
    folder = Path(gvplugins.layout_environ(dotrun.spawn)["GVBINDIR"])
    libdir, state, _ = (folder / gvplugins.STAMP).read_text().split("\n")[:3]
    (folder / gvplugins.STAMP).write_text(f"{libdir}\n{state}\nconfig6a:1:1\n")  # as after an upgrade
    monkeypatch.setattr(gvplugins, "_made", {})
    assert gvplugins.layout_environ(dotrun.spawn)["GVBINDIR"] == str(folder)
    assert (folder / gvplugins.STAMP).read_text().split("\n")[2] == gvplugins._signature(Path(libdir))


def test_a_broken_folder_gives_way_to_graphviz_as_installed_until_graphviz_changes(cache, monkeypatch):
    folder = Path(gvplugins.layout_environ(dotrun.spawn)["GVBINDIR"])
    for link in folder.iterdir():
        if link.is_symlink():  # the libraries gone (Graphviz removed under it, a half-copied cache)
            link.unlink()
            link.symlink_to("/nonexistent")
    installed = subprocess.run(["dot", "-Kdot", "-Tsvg"], input=SOURCE.encode(), capture_output=True).stdout
    assert dotrun.piped(SOURCE, "svg", quiet=True) == installed
    assert gvplugins.layout_environ(dotrun.spawn) is os.environ  # this process: as installed
    monkeypatch.setattr(gvplugins, "_made", {})
    assert gvplugins.layout_environ(dotrun.spawn) is os.environ  # the next command: recorded, not tried again
    libdir, state, _ = (folder / gvplugins.STAMP).read_text().split("\n")[:3]
    assert state == "unavailable"
    (folder / gvplugins.STAMP).write_text(f"{libdir}\n{state}\nconfig6a:1:1\n")  # Graphviz installed again
    monkeypatch.setattr(gvplugins, "_made", {})
    assert Path(gvplugins.layout_environ(dotrun.spawn)["GVBINDIR"]) == folder  # made again


def test_a_graphs_own_failure_leaves_the_folder_in_use(cache, monkeypatch):
    folder = Path(gvplugins.layout_environ(dotrun.spawn)["GVBINDIR"])
    with pytest.raises(dotrun.GraphvizFailed):  # a syntax error: Graphviz's words, not a plugin's
        dotrun.piped("digraph { a -> }", "svg", quiet=True)
    spawn = dotrun.spawn
    killed = dotrun.Done(-9, b"", b"")  # dot killed (out of memory): the folder still lays out an empty graph
    monkeypatch.setattr(dotrun, "spawn", lambda cmd, source, env=None: killed if source == SOURCE else spawn(cmd, source, env))
    with pytest.raises(dotrun.GraphvizFailed) as e:
        dotrun.piped(SOURCE, "svg", quiet=True)
    assert e.value.returncode == -9
    monkeypatch.setattr(gvplugins, "_made", {})
    assert gvplugins.layout_environ(spawn)["GVBINDIR"] == str(folder)
    assert (folder / gvplugins.STAMP).read_text().split("\n")[1] == "ok"


def test_a_gvbindir_of_the_users_own_is_kept(cache, monkeypatch, tmp_path):
    monkeypatch.setenv("GVBINDIR", str(tmp_path))
    assert gvplugins.layout_environ(dotrun.spawn) is os.environ
    assert not cache.exists()


def test_png_runs_graphviz_as_installed(cache, monkeypatch):
    seen = []
    spawn = dotrun.spawn
    monkeypatch.setattr(dotrun, "spawn", lambda cmd, source, env=None: seen.append(env) or spawn(cmd, source, env))
    assert dotrun.piped(SOURCE, "png", quiet=True).startswith(b"\x89PNG")
    assert dotrun.piped(SOURCE, "svg", quiet=True).startswith(b"<?xml")
    assert seen[0] is None and "GVBINDIR" in seen[-1]


def test_an_unwritable_cache_runs_graphviz_as_installed(cache, monkeypatch):
    cache.parent.mkdir(parents=True)
    cache.write_text("a file where the folder would be")
    assert gvplugins.layout_environ(dotrun.spawn) is os.environ
    assert dotrun.piped(SOURCE, "svg", quiet=True).startswith(b"<?xml")


def test_commands_starting_at_once_each_lay_out_with_the_layout_plugins(cache):
    """Several processes making the folder at the same moment (a suite's workers): none takes
    away a folder another is using, so every picture is the layout-plugin one."""
    code = f"import sys; from stringdiag.render import dotrun; sys.stdout.buffer.write(dotrun.piped({SOURCE!r}, 'svg'))"
    runs = [subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
            for _ in range(6)]
    outs = [r.communicate(timeout=60) for r in runs]
    assert all(r.returncode == 0 for r in runs), [err for _, err in outs]
    assert {out for out, _ in outs} == {dotrun.piped(SOURCE, "svg", quiet=True)}
    assert [p.name for p in cache.iterdir() if p.name.endswith(".tmp")] == []
