"""The kinds of source file the tool reads, told apart by extension and, failing that, by
content, so that a file given to the wrong command gets one line naming the right one
instead of a parse error at its first word."""
from __future__ import annotations

import argparse
import os
import re
import stat
from enum import Enum

from ..resources import argument
from .options import UsageError, short

SNIFF_BYTES = 64 * 1024  # enough to find a file's first word and its rules


class FileKind(Enum):
    """A kind of source: its extension, what it is called, the command that reads it."""

    DIAGRAM = (".diag", "a diagram file", "check")
    RULES = (".rules", "a rule file", "check")
    DERIVATION = (".deriv", "a derivation", "derive")
    TAXONOMY = (".tax", "a taxonomy", "taxonomy")

    def __init__(self, ext: str, noun: str, reader: str):
        self.ext, self.noun, self.reader = ext, noun, reader

    @property
    def named(self) -> str:
        return f"{self.noun} ({self.ext})"


BY_EXTENSION = {k.ext: k for k in FileKind}
# the first word of each kind's items (grammars/*.lark); `dim` is both a .diag declaration and a
# .deriv step, told apart by what follows its names (`:` or `:=`)
FIRST_WORDS = {
    **dict.fromkeys(("import", "learn", "abstract", "fixed", "random", "diagram"), FileKind.DIAGRAM),
    **dict.fromkeys(("start", "target", "use", "specialise", "unfold", "fold", "copy", "prune", "apply",
                     "rewire", "absorb", "plug"), FileKind.DERIVATION),
    **dict.fromkeys(("root", "node", "edge"), FileKind.TAXONOMY),
}
_WORD = re.compile(r"^[ \t]*([A-Za-z_]+)\b(.*)$", re.M)
_RULE = re.compile(r"^[ \t]*rule[ \t]+[A-Za-z_]", re.M)
_DIM_STEP = re.compile(r"^[\w ,]*:=")


def sniff(text: str) -> FileKind | None:
    """The kind a source's text reads as, from its first word (after comments); None when it
    says nothing clear (empty, or not a source at all)."""
    if _RULE.search(text):
        return FileKind.RULES
    for m in _WORD.finditer(re.sub(r"(#|//)[^\n]*", "", text)):
        word, rest = m.groups()
        if word == "dim":
            return FileKind.DERIVATION if _DIM_STEP.match(rest) else FileKind.DIAGRAM
        return FIRST_WORDS.get(word)
    return None


def _head(path: str) -> str | None:
    """The start of a regular file's text; None for anything the reader will refuse itself
    (missing, a directory, a FIFO, not UTF-8), so that its own message is the one shown."""
    try:
        if not stat.S_ISREG(os.stat(path).st_mode):
            return None
        with open(path, "rb") as f:
            return f.read(SNIFF_BYTES).decode("utf-8", errors="strict")
    except (OSError, ValueError):
        return None


def kind_of(path: str) -> tuple[FileKind | None, FileKind | None]:
    """(by extension, by content) for a readable file; (None, None) for anything else, whose
    reader then says why it cannot read it (missing, a directory, a FIFO, not UTF-8). A shipped
    name (``stringdiag:rules/algebra.rules``) is the installed file's kind."""
    path = str(argument(path))
    text = _head(path)
    if text is None:
        return None, None
    return BY_EXTENSION.get(os.path.splitext(path)[1].lower()), sniff(text)


def _accepted(kinds: tuple[FileKind, ...]) -> str:
    names = [k.named for k in kinds]
    return names[0] if len(names) == 1 else ", ".join(names[:-1]) + " or " + names[-1]


def expect(path: str, kinds: tuple[FileKind, ...], command: str) -> None:
    """Refuse, as a usage error, a file that is not of a kind ``command`` reads: by its
    extension when it has a known one, else by its content. A known extension whose text
    clearly reads as another kind is refused too (a rule file is a diagram file with rules, so
    a ``.rules`` file without any is still one)."""
    by_ext, by_text = kind_of(path)
    kind = by_ext or by_text
    if kind is None:
        return  # unknown: the parser says what it finds
    wants = f"{command} expects {_accepted(kinds)}"
    if by_ext and by_text and by_text != by_ext and not (by_ext is FileKind.RULES and by_text is FileKind.DIAGRAM):
        raise UsageError(f"{short(path)} is named as {by_ext.named} but reads as {by_text.named}; "
                         f"rename it, then {by_text.reader} reads it")
    if kind not in kinds:
        how = "" if by_ext else ", by its content"
        raise UsageError(f"{short(path)} is {kind.named}{how}; {wants} — try 'stringdiag {kind.reader} {short(path)}'")


def rules_file(text: str) -> str:
    """An argparse type for ``--rules``: a ``.rules`` file (or a directory of them), never a
    rule's name, which is ``--rule NAME``."""
    if os.path.isdir(text) or text.lower().endswith(FileKind.RULES.ext):
        return text
    if re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*(:reversed)?", text) and not os.path.exists(text):
        raise argparse.ArgumentTypeError(f"--rules takes rule files ({FileKind.RULES.ext}); "
                                         f"for the rule named {text!r} write --rule {text}")
    raise argparse.ArgumentTypeError(f"expected a rule file ({FileKind.RULES.ext}) or a directory of them, "
                                     f"got {short(text)!r}")


rules_file.__name__ = "rule file"
