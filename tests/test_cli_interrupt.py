"""Ctrl-C ends the program with ``interrupted`` on stderr and status 130, every time: wherever
SIGINT lands in a real command, and in the three places Python would otherwise lose it (a weakref
callback, code that catches and drops BaseException, the moment after the command returned)."""
from __future__ import annotations

import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
ATTENTION = str(ROOT / "gallery" / "attention.diag")

# a real `check` whose run first meets SIGINT in one of the places Python loses it
DRIVER = """
import os, signal, sys, types, weakref
from stringdiag.cli import main

def spin():
    for _ in range(10000):  # (the handler runs at one of these steps)
        pass

def in_callback():
    class Box:
        pass
    box = Box()
    def died(_):
        os.kill(os.getpid(), signal.SIGINT)
        spin()
    ref = weakref.ref(box, died)
    del box

def dropped():
    try:
        os.kill(os.getpid(), signal.SIGINT)
        spin()
    except BaseException:
        pass

real = main.command
def command(name):
    mod = real(name)
    if name != "check":
        return mod
    def run(args):
        if {where!r} in TRIGGERS:
            TRIGGERS[{where!r}]()
        print("finished", flush=True)
        return mod.run(args)
    return types.SimpleNamespace(**{{**vars(mod), "run": run}})

def after(code, quick=main.quick_exit):
    os.kill(os.getpid(), signal.SIGINT)
    spin()
    quick(code)

def wrapped():
    try:
        os.kill(os.getpid(), signal.SIGINT)
        spin()
    except BaseException as e:
        raise RuntimeError("a library's own error") from e

def importing():
    import tempfile, time
    where = tempfile.mkdtemp()
    with open(os.path.join(where, "halfway.py"), "w") as f:
        f.write("import os, signal\\nos.kill(os.getpid(), signal.SIGINT)\\nfor _ in range(100000):\\n    pass\\n"
                "print('imported', flush=True)\\n")
    sys.path.insert(0, where)
    import halfway
    time.sleep(10)  # (the interrupt, deferred until the import is over, comes here)

TRIGGERS = {{"callback": in_callback, "dropped": dropped, "wrapped": wrapped, "importing": importing}}
main.command = command
if {where!r} == "after":
    main.quick_exit = after
sys.argv = ["stringdiag", "check", {file!r}]
main.entry()
"""


def interrupted(r: subprocess.CompletedProcess) -> None:
    assert r.returncode == 130, (r.returncode, r.stdout, r.stderr)
    assert "Traceback" not in r.stderr and "Exception ignored" not in r.stderr, r.stderr
    assert r.stderr.splitlines().count("interrupted") == 1, r.stderr


@pytest.mark.parametrize("where", ["callback", "dropped", "wrapped", "importing", "after"])
def test_an_interrupt_python_would_lose_still_ends_the_command(where):
    """Also where raising it would break more than the command: inside an import (``import torch``
    interrupted there aborted the process from C++, or left an extension that cannot load twice),
    and where a library turns it into an error of its own (not a bug in stringdiag)."""
    r = subprocess.run([sys.executable, "-c", DRIVER.format(where=where, file=ATTENTION)], capture_output=True,
                       text=True, timeout=60)
    interrupted(r)
    assert "internal error" not in r.stderr
    if where in ("callback", "wrapped", "importing"):  # it ends there: the command does not go on
        assert "finished" not in r.stdout
    if where == "importing":  # the import was let finish
        assert "imported" in r.stdout
    if where == "after":  # the command had done its work
        assert "ok (4 diagrams" in r.stdout


def test_the_control_runs_without_an_interrupt():
    """(The driver itself is sound: with no trigger the command finishes with status 0.)"""
    r = subprocess.run([sys.executable, "-c", DRIVER.format(where="none", file=ATTENTION)], capture_output=True,
                       text=True, timeout=60)
    assert r.returncode == 0 and "finished" in r.stdout and r.stderr == "", r


def _wall(argv: list[str]) -> float:
    start = time.perf_counter()
    subprocess.run(argv, capture_output=True, timeout=60)
    return time.perf_counter() - start


def test_sigint_anywhere_in_a_command_gives_130_and_no_traceback():
    """SIGINT at ten points spread over a checked derivation's run (``--verify``: torch imported,
    the steps evaluated, about a second; a bare derivation ends in under 0.1 s, as soon as the
    program's own start), from just after the program's own code starts (measured: the time a
    process takes to import it, times 2: before that, Ctrl-C is Python's own) to near its end
    (the run, times 0.85)."""
    command = [sys.executable, "-m", "stringdiag", "derive", str(ROOT / "gallery" / "linearize.deriv"), "--verify"]
    start = 2 * min(_wall([sys.executable, "-c", "import stringdiag.cli.main"]) for _ in range(2))
    end = 0.85 * _wall(command)
    if end <= start:
        pytest.skip(f"the command ({end / 0.85:.2f} s) is not longer than its start ({start / 2:.2f} s) here")
    delivered = 0
    for k in range(10):
        proc = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        time.sleep(start + (end - start) * k / 9)
        if proc.poll() is not None:  # it ended before its signal was due (a loaded machine's runs vary)
            proc.communicate()
            continue
        proc.send_signal(signal.SIGINT)
        delivered += 1
        out, err = proc.communicate(timeout=60)
        if proc.returncode == -signal.SIGINT:  # ended by the signal itself (a shell says 130): only while
            # Python tears itself down once the command is done, its handlers put back as they were
            assert "verified numerically" in out and err == "", (out, err)
            continue
        interrupted(subprocess.CompletedProcess(command, proc.returncode, out, err))
    assert delivered >= 5, f"only {delivered} of 10 runs were still running when their signal was due"


def test_main_called_from_python_says_interrupted_each_time(capsys, monkeypatch):
    """In-process (no handler of ours installed), every interrupted command reports itself."""
    from stringdiag.cli import check, main as M

    def interrupted_run(args):
        raise KeyboardInterrupt

    monkeypatch.setattr(check, "run", interrupted_run)
    before = signal.getsignal(signal.SIGINT)  # (Python's default; a test runner's worker may ignore SIGINT)
    for _ in range(2):
        assert M.main(["check", ATTENTION]) == 130
        assert capsys.readouterr().err == "interrupted\n"
    assert signal.getsignal(signal.SIGINT) is before  # the caller's handler is left alone
