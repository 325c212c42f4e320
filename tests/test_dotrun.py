"""render/dotrun.py runs Graphviz without subprocess: what it reads back is what subprocess.run
reads, a failure is GraphvizFailed with dot's exit status and stderr, a missing program DotNotFound."""
from __future__ import annotations

import shutil
import subprocess

import pytest

from stringdiag.render import dotrun, gvplugins

pytestmark = pytest.mark.skipif(shutil.which("dot") is None, reason="Graphviz is not installed")


def big(n: int) -> str:
    """A graph whose source (and SVG) are several times a pipe's 64 KiB buffer."""
    return "digraph G {\n" + "".join(f'  n{k} [label="{"x" * 40} {k}"];\n' for k in range(n)) + "}\n"


@pytest.mark.parametrize("source", ["digraph G { a -> b }", big(3000)])
def test_the_documents_are_subprocess_runs(source):
    assert len(source) < 1000 or len(source) > 2 * 65536
    done = dotrun.spawn(["dot", "-Tsvg"], source)
    ref = subprocess.run(["dot", "-Tsvg"], input=source.encode(), capture_output=True)
    assert (done.returncode, done.stdout, done.stderr) == (ref.returncode, ref.stdout, ref.stderr)
    layout = gvplugins.layout_environ(dotrun.spawn)  # (a layout runs with the layout plugins only: test_gvplugins.py)
    assert dotrun.piped(source, "dot", quiet=True) == subprocess.run(["dot", "-Kdot", "-Tdot"], input=source.encode(),
                                                                     capture_output=True, env=layout).stdout


def test_a_failure_is_graphviz_failed_with_its_status_and_stderr():
    with pytest.raises(dotrun.GraphvizFailed) as e:
        dotrun.piped("digraph { a -> }", "svg", quiet=True)
    assert e.value.returncode == 1 and b"syntax error" in e.value.stderr
    assert e.value.cmd == ["dot", "-Kdot", "-Tsvg"]


def test_a_program_not_installed_is_dot_not_found(monkeypatch):
    monkeypatch.setenv("PATH", "/nonexistent")
    with pytest.raises(dotrun.DotNotFound, match="Graphviz's 'dot' is not installed"):
        dotrun.spawn(["dot", "-Tsvg"], "digraph {}")
