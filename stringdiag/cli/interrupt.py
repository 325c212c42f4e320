"""Ctrl-C ends the ``stringdiag`` program with ``interrupted`` on stderr and status 130, every time.

Python turns SIGINT into a KeyboardInterrupt at whatever line is running, and where that line
is a weakref callback or a ``__del__`` (run when an object dies), Python cannot raise it: it
prints "Exception ignored in ... KeyboardInterrupt" and carries on, so the command finished and
exited 0. The program's own handler (:func:`install`) therefore records every interrupt and

- while a command runs, raises KeyboardInterrupt, so that files being written are removed on
  the way out and the command's ``except KeyboardInterrupt`` reports it;
- where Python swallows that exception (``sys.unraisablehook``), ends the process there;
- once the command is over, or on a second Ctrl-C, ends the process at once;
- while a module is being imported, waits until the import is over (:func:`_later`): an
  exception raised inside ``import torch`` can land in C++ that cannot pass it on (the process
  aborts: "terminate called after throwing an instance of 'pybind11::error_already_set'"), or
  leave an extension half loaded that refuses a second load ("cannot load module more than once
  per process");

and :func:`happened` lets the program turn a command that returned after an interrupt (one
caught and dropped by some library's ``except BaseException``) into status 130 too.

Only the program installs it (``cli.main.entry``); ``main()`` called from Python leaves the
caller's handlers alone. Before the program's code runs (Python's own start-up, ~30 ms), Ctrl-C
is Python's to handle.
"""
from __future__ import annotations

import os
import sys

import _signal  # type: ignore[import-not-found]  # signal's C half: signal.py builds enums (0.8 ms)

STATUS = 130  # 128 + SIGINT, as a shell reports a program that SIGINT ended


class _State:
    installed = False  # the program's own process (not main() called from Python)
    armed = False  # a command is running: raise, so that it unwinds
    interrupted = False
    said = False  # "interrupted" printed


def install() -> None:
    """Take SIGINT and the hook for exceptions Python cannot raise; arm the handler."""
    _signal.signal(_signal.SIGINT, _on_sigint)
    sys.unraisablehook = _unraisable
    _State.installed = _State.armed = True


def disarm() -> None:
    """The command is over: from now on Ctrl-C ends the process at once."""
    _State.armed = False


def happened() -> bool:
    return _State.interrupted


def say() -> None:
    """Print ``interrupted`` on stderr, after what the command printed before it: once in the
    program's process; each time ``main()`` called from Python is interrupted."""
    if _State.said:
        return
    _State.said = _State.installed
    try:
        sys.stdout.flush()  # what the command printed comes first
    except (OSError, ValueError, AttributeError):
        pass
    try:
        print("interrupted", file=sys.stderr, flush=True)
    except (OSError, ValueError):
        pass


def leave() -> None:
    """End the process now: ``interrupted``, status 130."""
    say()
    os._exit(STATUS)


RECHECK_S = 0.01  # how often a deferred interrupt looks again whether the import is over
IMPORTING = frozenset({"<frozen importlib._bootstrap>", "<frozen importlib._bootstrap_external>"})


def _on_sigint(signum, frame) -> None:
    if _State.interrupted or not _State.armed:
        _State.interrupted = True
        leave()
    _State.interrupted = True
    _raise_when_safe(frame)


def _raise_when_safe(frame) -> None:
    """Raise KeyboardInterrupt here, unless an import is running (``frame`` or a caller is the
    import machinery's): then again in :data:`RECHECK_S`, by SIGALRM, which like SIGINT is
    handled between two steps of Python in the main thread."""
    if not _importing(frame):
        raise KeyboardInterrupt
    if not hasattr(_signal, "setitimer"):  # (no interval timers: Windows) as Python would
        raise KeyboardInterrupt
    _signal.signal(_signal.SIGALRM, _later)
    _signal.setitimer(_signal.ITIMER_REAL, RECHECK_S)


def _later(signum, frame) -> None:
    if not _State.armed:  # the command is over: it ended while the import finished
        leave()
    _raise_when_safe(frame)


def _importing(frame) -> bool:
    while frame is not None:
        if frame.f_code.co_filename in IMPORTING:
            return True
        frame = frame.f_back
    return False


def _unraisable(unraisable) -> None:
    """A KeyboardInterrupt Python could not raise (in a weakref callback, a ``__del__``): the
    command would carry on as if Ctrl-C had not been pressed, so the process ends here."""
    if isinstance(unraisable.exc_value, KeyboardInterrupt) or unraisable.exc_type is KeyboardInterrupt:
        _State.interrupted = True
        leave()
    sys.__unraisablehook__(unraisable)
