"""A derivation being written: steps given as text, run by the same checker as ``derive``.

The search never edits a diagram itself: each candidate step is a line of a ``.deriv`` file,
parsed and run by :class:`~stringdiag.derive.derivation.Runner`, so that what the search
finds is exactly what ``derive`` will check when the file is read back.
"""
from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from ..derive.derivation import MAX_DERIVED, Runner
from ..derive.steps import EQ
from ..elaborate.loader import loads
from ..errors import PREFIX, DiagError, shown
from ..resources import argument
from ..graph.diagram import Diagram
from ..graph.expand import expand
from ..syntax import deriv_ast as D


def malformed(text: str) -> str | None:
    """Why a command-line argument is not ``FILE.diag:NAME`` (whatever the files hold), or None."""
    file, sep, name = text.rpartition(":")
    if not sep or not file.endswith(".diag") or not name.isidentifier():
        return f"'{text}' is not FILE.diag:NAME"
    return None


@dataclass(frozen=True)
class DiagramRef:
    """``FILE.diag:NAME`` as given on the command line: the file found, and as the user named it."""

    file: Path
    name: str
    given: str = ""  # the file as named (a shipped one by its package name); '' when made in code

    @staticmethod
    def parse(text: str) -> "DiagramRef":
        if (why := malformed(text)) is not None:
            raise DiagError(why)
        file, _, name = text.rpartition(":")
        path = Path(argument(file))
        if not path.is_file():
            raise DiagError(f"no such file {file}")
        return DiagramRef(path.resolve(), name, file)

    def written_file(self, base: Path) -> str:
        """The file as a ``.deriv`` in ``base`` names it: a shipped one by its package name (which
        resolves from anywhere), an absolute one as given, another relative to ``base``."""
        return _written(self.file, base, self.given)

    def written(self, base: Path) -> str:
        """The reference as a ``.deriv`` in ``base`` writes it."""
        return f"{self.written_file(base)}:{self.name}"

    def __str__(self) -> str:
        return f"{self.given or self.file}:{self.name}"


def _written(file: Path, base: Path, given: str = "") -> str:
    """A file named in a ``.deriv`` written in ``base``: see :meth:`DiagramRef.written_file`."""
    if given.startswith(PREFIX) or os.path.isabs(given):
        return given
    if shown(file).startswith(PREFIX):  # (a shipped file reached by its path)
        return shown(file)
    return Path(os.path.relpath(file, base.resolve())).as_posix()


@dataclass
class Applied:
    """One step run: its text, its relation (≡, ⇒) and the diagram it made."""

    text: str
    relation: str
    diagram: Diagram


class Session:
    """The start, the target and the files in use, ready to run steps written as text."""

    def __init__(self, start: DiagramRef, target: DiagramRef | None, out: Path, max_boxes: int = MAX_DERIVED,
                 rules: tuple[Path, ...] = ()):
        self.out, self.base = out, out.parent
        self.start_ref, self.target_ref = start, target
        lines = [f"start {start.written(self.base)}"]
        lines += [f'use "{_written(r.resolve(), self.base, str(r))}"' for r in rules]
        together = target is None or target.file == start.file or _together(start.file, target.file)
        if target is not None and target.file != start.file and together:
            lines.append(f'use "{target.written_file(self.base)}"')
        self.header = "\n".join(lines) + "\n"
        self.runner = Runner(self.header, str(out), False, None, max_boxes)
        with _blamed(start, out):
            deriv = self.runner.run()
        self.start = deriv.steps[0].diagram
        if target is None:
            self.target = None
            return
        with _blamed(target, out):
            self.target = self.diagram(target, self.runner if together else None)

    @property
    def goal(self) -> Diagram:
        """The target (a search towards one is made with one)."""
        if self.target is None:
            raise DiagError("this search has no target diagram")
        return self.target

    def diagram(self, ref: DiagramRef, runner: Runner | None = None) -> Diagram:
        """The diagram ``ref`` read by ``runner`` (its files then in scope of the bodies it
        reads), or apart from the steps (by a runner of its own)."""
        (decl,) = [i for i in D.read_deriv(f"start {ref.written(self.base)}\n", str(self.out))
                   if isinstance(i, D.StartDecl)]
        if runner is None:
            runner = Runner(f"start {ref.written(self.base)}\n", str(self.out), False, None)
        return runner.diagram(decl.ref)

    def run(self, cur: Diagram, text: str, number: int = 1) -> Applied:
        """The step ``text`` on ``cur``; a :class:`DiagError` where the checker refuses it."""
        last = D.read_deriv(f"start x.diag:X\n{text}\n", str(self.out))[-1]
        if isinstance(last, (D.StartDecl, D.TargetDecl, D.UseDecl)):
            raise DiagError(f"'{text}' is not a step")
        step = self.runner.step(last, cur, number)
        return Applied(last.text, step.relation, step.diagram)

    def text(self, steps: list[str], comment: str = "") -> str:
        """The ``.deriv`` file of these steps (with the target line when there is one)."""
        head = "".join(f"# {line}\n" for line in comment.splitlines())
        tail = f"target {self.target_ref.written(self.base)}\n" if self.target_ref is not None else ""
        return head + self.header + "".join(s + "\n" for s in steps) + tail


@contextmanager
def _blamed(ref: DiagramRef, out: Path) -> Iterator[None]:
    """An error in a line the session wrote for ``ref`` (its file has no such diagram), said of
    the argument the user gave: the ``.deriv`` it points into is not written yet."""
    try:
        yield
    except DiagError as e:
        if e.pos is None or e.pos.file != str(out):
            raise  # (in a file of the user's: positioned there)
        raise DiagError(f"{ref}: {e.message}") from None


def _together(a: Path, b: Path) -> bool:
    """Whether two files can be read into one scope: the target's file is used (its maps are
    named by the bodies the search writes) unless its names clash with the start's, when it is
    read by its qualified reference alone, as a hand-written ``.deriv`` would."""
    try:
        loads(f'import "{a.as_posix()}"\nimport "{b.as_posix()}"\n', str(a.parent / "__probe.diag"))
    except DiagError:
        return False
    return True


def flat(d: Diagram) -> Diagram:
    """The diagram with every definition opened: what a target is compared with."""
    return expand(d)


__all__ = ["DiagramRef", "Session", "Applied", "flat", "EQ"]
