"""Graphviz run once for a picture and its placed layout.

A step of a derivation's chain is laid out by ``dot`` and, where dot turns untouched boxes round,
stacked by ``stacked.py`` from dot's placed layout (``-Tdot``) of the same source: one run with
``-Tsvg -Tdot`` writes both from one layout, kept for the next ask (``_MEMO``). Only those steps
ask for both: Graphviz 2.43 orders frames by where their names lie in memory, so asking for a
second format can reorder a large picture's frames in its SVG (the taxonomy's did; no step of
the gallery's derivations), and for the same reason each graph gets a process of its own (one
``dot`` reading graph after graph would save its start, 1.5 ms of CPU, but lays a graph out
differently after others). Layouts run with Graphviz's layout plugins only (``gvplugins.py``):
labels measured by Graphviz's own metrics, not the machine's fonts.
"""
from __future__ import annotations

import os
import select
import sys

import _signal  # type: ignore[import-not-found]  # signal's C half: signal.py builds enums (0.8 ms)

from ..errors import DiagError
from . import gvplugins

PROGRAMS = {"dot": ["dot", "-Tsvg"], "placed": ["dot", "-Tsvg", "-Tdot"],
            "neato": ["neato", "-n2", "-Gsplines=true", "-Tsvg"]}
LAYOUT_FORMATS = frozenset({"svg", "dot", "gv", "xdot", "plain", "json"})  # the core plugin's: no fonts needed
PLUGIN_TROUBLE = (b"Could not load", b"not recognized", b"no layout engine")
_MEMO: dict[tuple[str, str], tuple[str, ...]] = {}  # (program, source) -> its documents: the last few
MEMO_SIZE = 4


class DotNotFound(DiagError):
    """Graphviz's programs are not installed (no ``dot`` on the PATH): the tool's error, saying
    how to install them, whichever picture (SVG, PNG, TikZ, a page) needed them."""

    def __init__(self, program: str):
        super().__init__(f"Graphviz's '{program}' is not installed: apt-get install -y graphviz "
                         "(or your platform's graphviz package)")


class GraphvizFailed(Exception):
    """A Graphviz program exited with an error: its exit status (negative: the signal that ended
    it), the command, what it wrote to stdout and to stderr (``subprocess.CalledProcessError``'s
    fields, without importing ``subprocess``: 4 ms of every picture's start-up)."""

    def __init__(self, returncode: int, cmd: list[str], output: bytes = b"", stderr: bytes = b""):
        super().__init__(returncode, cmd)
        self.returncode, self.cmd, self.output, self.stderr = returncode, cmd, output, stderr

    def __str__(self) -> str:
        return f"Command '{self.cmd}' returned non-zero exit status {self.returncode}."


class Done:
    """A finished run: its exit status and what it wrote to stdout and stderr."""

    __slots__ = ("returncode", "stdout", "stderr")

    def __init__(self, returncode: int, stdout: bytes, stderr: bytes):
        self.returncode, self.stdout, self.stderr = returncode, stdout, stderr


def spawn(cmd: list[str], source: str, env=None) -> Done:
    """``cmd`` (a Graphviz program) with ``source`` on its stdin, in ``env`` (the process's own by
    default); DotNotFound where it is not installed. Started by ``os.posix_spawnp`` with three
    pipes, fed and drained by ``select.poll``."""
    pipes = [os.pipe() for _ in range(3)]  # stdin, stdout, stderr (each close-on-exec)
    child = [pipes[0][0], pipes[1][1], pipes[2][1]]
    actions = [(os.POSIX_SPAWN_DUP2, fd, k) for k, fd in enumerate(child)]
    try:
        pid = os.posix_spawnp(cmd[0], cmd, os.environ if env is None else env, file_actions=actions,  # as subprocess restores them:
                              setsigdef=(_signal.SIGPIPE, _signal.SIGXFSZ))
    except FileNotFoundError:
        raise DotNotFound(cmd[0]) from None
    finally:
        for fd in child:
            os.close(fd)
    out, err = _exchange(pipes[0][1], pipes[1][0], pipes[2][0], source.encode())
    return Done(os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]), out, err)


def _laid(cmd: list[str], source: str) -> Done:
    """A layout run (SVG, placed DOT) with the layout plugins only. Where it fails (a signal, or
    Graphviz's words for a missing plugin) and the folder cannot lay out an empty graph either,
    the folder is given up and the run made again with Graphviz as installed; a failure of the
    graph's own (killed for memory, say) is left to the caller."""
    env = gvplugins.layout_environ(spawn)
    done = spawn(cmd, source, env)
    trouble = done.returncode < 0 or (done.returncode and any(w in done.stderr for w in PLUGIN_TROUBLE))
    if trouble and env is not os.environ and not gvplugins.works(spawn):
        gvplugins.give_up()
        done = spawn(cmd, source)
    return done


def _exchange(stdin: int, stdout: int, stderr: int, data: bytes) -> tuple[bytes, bytes]:
    """``data`` written to ``stdin`` while ``stdout`` and ``stderr`` are read to their ends (no
    pipe left full while another waits: a write of at most PIPE_BUF bytes to a pipe that polls
    writable does not block); every descriptor closed."""
    poll = select.poll()
    got: dict[int, list[bytes]] = {stdout: [], stderr: []}
    for fd in got:
        poll.register(fd, select.POLLIN)
    sent, left = 0, len(got) + 1
    if data:
        poll.register(stdin, select.POLLOUT)
    else:
        os.close(stdin)
        left -= 1
    while left:
        for fd, _ in poll.poll():
            if fd == stdin:
                try:
                    sent += os.write(stdin, data[sent:sent + select.PIPE_BUF])  # never blocks: POLLOUT
                except BrokenPipeError:  # the program stopped reading: its exit status tells why
                    sent = len(data)
                if sent < len(data):
                    continue
            else:
                chunk = os.read(fd, 65536)
                if chunk:
                    got[fd].append(chunk)
                    continue
            poll.unregister(fd)
            os.close(fd)
            left -= 1
    return b"".join(got[stdout]), b"".join(got[stderr])


def piped(source: str, fmt: str, quiet: bool = False) -> bytes:
    """``dot -T{fmt}``'s output for ``source``; its warnings go to stderr unless ``quiet``. Raises
    ``GraphvizFailed`` (with Graphviz's stderr) where it exits with an error."""
    cmd = ["dot", "-Kdot", f"-T{fmt}"]
    return _checked(cmd, _laid(cmd, source) if fmt in LAYOUT_FORMATS else spawn(cmd, source), quiet)


def laid_out(source: str, program: str = "dot", quiet: bool = True) -> tuple[str, ...]:
    """``program``'s documents for ``source``: (SVG,) for ``dot``; (SVG, placed DOT) for ``placed``
    (dot with ``-Tdot`` too); (SVG,) for ``neato`` (``-n2``: places and curves as given). Raises
    ``GraphvizFailed`` where Graphviz exits with an error; its warnings go to stderr unless ``quiet``."""
    key = (program, source)
    if key not in _MEMO:
        cmd = PROGRAMS[program]
        out = _checked(cmd, _laid(cmd, source), quiet).decode()
        if program == "placed":  # the SVG, then the placed DOT
            cut = out.index("</svg>") + len("</svg>\n")
            _MEMO[key] = (out[:cut], out[cut:])
        else:
            _MEMO[key] = (out,)
        while len(_MEMO) > MEMO_SIZE:
            del _MEMO[next(iter(_MEMO))]
    return _MEMO[key]


def _checked(cmd: list[str], done: Done, quiet: bool) -> bytes:
    """A run's stdout; its warnings echoed to stderr unless ``quiet``; ``GraphvizFailed`` (stderr
    as bytes) where it exited with an error."""
    if done.stderr and not quiet:
        sys.stderr.write(done.stderr.decode(getattr(sys.stderr, "encoding", None) or "utf-8", errors="replace"))
        sys.stderr.flush()
    if done.returncode:
        raise GraphvizFailed(done.returncode, cmd, done.stdout, done.stderr)
    return done.stdout
