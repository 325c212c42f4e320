"""The ``stringdiag`` program ends a command that evaluated nothing without the interpreter's
teardown (cli/main.py's ``entry``): its output, exit status and errors are those of ``main``
called in-process, and an ``atexit`` handler or a running thread gets the usual exit."""
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from stringdiag.cli.main import main

ROOT = Path(__file__).resolve().parents[1]

# an object whose finaliser writes to stderr when the interpreter is torn down
PROBE = """
import sys
import stringdiag.cli.main as cli

class Torn:
    def __del__(self):
        sys.stderr.write("torn down\\n")

cli._torn = Torn()
{before}
sys.argv = ["stringdiag", *{argv!r}]
cli.entry()
"""


def _run(argv: list[str], before: str = "", tmp_path: Path | None = None, path: str = "") -> subprocess.CompletedProcess:
    env = {"XDG_CACHE_HOME": str(tmp_path), "PATH": path}
    return subprocess.run([sys.executable, "-c", PROBE.format(argv=argv, before=before)], cwd=ROOT,
                          capture_output=True, text=True, env=env)


@pytest.mark.parametrize("argv", [
    ["derive", "gallery/linearize.deriv", "gallery/bahdanau_to_vaswani.deriv"],
    ["derive", "gallery/linearize.deriv", "--json"],
    ["check", "gallery/attention.diag", "rules/algebra.rules"],
    ["info", "gallery/attention.diag", "--json"],
])
def test_a_command_that_evaluates_nothing_ends_without_teardown_and_says_all_it_said(argv, tmp_path, capsys):
    r = _run(argv, tmp_path=tmp_path)
    assert main(argv) == r.returncode == 0
    assert r.stdout == capsys.readouterr().out and r.stdout.endswith("\n")
    assert "torn down" not in r.stderr, r.stderr[-2000:]


@pytest.mark.skipif(shutil.which("dot") is None, reason="Graphviz is not installed")
def test_a_picture_is_written_whole_before_the_quick_exit(tmp_path, capsys):
    """render writes by another path than stdout (the file, after a Graphviz run): all of it."""
    quick, here = tmp_path / "quick.svg", tmp_path / "here.svg"
    r = _run(["render", "gallery/attention.diag", "-d", "SelfAttention", "-o", str(quick)], tmp_path=tmp_path,
             path=os.environ["PATH"])
    assert r.returncode == 0 and "torn down" not in r.stderr, r.stderr[-2000:]
    assert main(["render", "gallery/attention.diag", "-d", "SelfAttention", "-o", str(here)]) == 0
    assert quick.read_bytes() == here.read_bytes() and here.read_bytes().rstrip().endswith(b"</svg>")


def test_errors_keep_their_message_and_exit_status(tmp_path, capsys):
    bad = tmp_path / "bad.diag"
    bad.write_text("dim s : seq\ndiagram D(x: [s]) -> [s] {\n  return nosuchbox(x)\n}\n")
    for argv, code in ([["check", str(bad)], 1], [["check", "--frob", str(bad)], 2],
                       [["derive", "gallery/attention.diag"], 2]):
        r = _run(argv, tmp_path=tmp_path)
        assert main(argv) == r.returncode == code
        assert r.stderr.replace("torn down\n", "") == capsys.readouterr().err and "error:" in r.stderr
        assert ("torn down" in r.stderr) == (code == 2), r.stderr  # a usage error exits as usual


@pytest.mark.parametrize("before", [
    "import atexit\natexit.register(lambda: sys.stderr.write('at exit\\n'))",
    "import threading, time\nthreading.Thread(target=lambda: (time.sleep(0.5), sys.stderr.write('at exit\\n'))).start()",
])
def test_a_handler_at_exit_or_a_thread_gets_the_usual_exit(before, tmp_path):
    r = _run(["check", "gallery/attention.diag"], before, tmp_path)
    assert r.returncode == 0 and "at exit" in r.stderr and "torn down" in r.stderr, r.stderr[-2000:]


def test_a_command_that_evaluates_gets_the_usual_exit(tmp_path):
    r = _run(["derive", "gallery/linearize.deriv", "--verify"], tmp_path=tmp_path)
    assert r.returncode == 0 and "verified numerically" in r.stdout and "torn down" in r.stderr, r.stderr[-2000:]
