"""Output paths checked when the command line is read, before any work: a picture's format
must be one the tool writes, and a directory is only ever made from a name that says it is
one (it exists as one, ends with ``/``, or has no extension), never from a file's name.

Each function here is an argparse ``type``, so a bad ``-o`` is a usage error (status 2)
naming the option, e.g. ``-o out.jpg`` on ``render``::

    error: argument -o/--output: cannot write out.jpg: .jpg is not a picture format (.dot, .gv,
    .html, .pdf, .png, .svg, .tex), nor a directory (end it with '/' to make one) (see 'stringdiag
    render --help')
"""
from __future__ import annotations

import argparse
import os
from typing import Callable

from ..render.formats import DOCUMENTS, FORMATS
from .options import UsageError, short

OUTPUTS = {**FORMATS, **DOCUMENTS}
PICTURES = ", ".join(sorted(OUTPUTS))


def names_directory(text: str) -> bool:
    """Whether an output name is a directory: one that exists, or ends with a separator, or
    has no extension at all."""
    return os.path.isdir(text) or text.endswith(("/", os.sep)) or not os.path.splitext(text.rstrip("/"))[1]


def _suffix(text: str) -> str:
    return os.path.splitext(text)[1].lower()


def _folder_exists(text: str) -> None:
    """A file goes into a folder that is there (none is made from a file's name: a typo in it
    would otherwise make a tree of folders), and one that takes a new file."""
    folder = os.path.dirname(text)
    if folder and not os.path.isdir(folder):
        raise argparse.ArgumentTypeError(f"cannot write {short(text)}: there is no folder {short(folder)} (make it "
                                         "first)")
    _takes_files(text, folder or ".")


def _takes_files(text: str, folder: str) -> None:
    """A new file can be made in ``folder`` (:func:`..syntax.source.refuses_files`: tried)."""
    from ..syntax.source import refuses_files

    if (why := refuses_files(folder)) is not None:
        raise argparse.ArgumentTypeError(f"cannot write {short(text)}: no file can be made in {short(folder)} "
                                         f"({why})")


def _folder_to_make(text: str) -> None:
    """A folder that is there, or one that can be made: not a file, and the nearest folder above
    it that is there takes new files."""
    if os.path.exists(text) and not os.path.isdir(text):
        raise argparse.ArgumentTypeError(f"cannot write {short(text)}: it is a file, not a folder")
    at = os.path.normpath(text)  # (walked up as written: a message shows the user's own path)
    while not os.path.isdir(at or "."):
        parent = os.path.dirname(at)
        if os.path.exists(at) or parent == at:
            raise argparse.ArgumentTypeError(f"cannot write {short(text)}: {short(at)} is a file, not a folder")
        at = parent
    _takes_files(text, at or ".")


def picture(text: str) -> str:
    """``-o`` for one picture: a file whose extension names its format, in a folder that exists."""
    if os.path.isdir(text):
        raise argparse.ArgumentTypeError(f"cannot write {short(text)}: it is a directory (give a picture file: "
                                         f"{PICTURES})")
    if _suffix(text) not in OUTPUTS:
        raise argparse.ArgumentTypeError(f"cannot write {short(text)}: the picture format is told by the extension, "
                                         f"one of {PICTURES}")
    _folder_exists(text)
    return text


picture.__name__ = "picture"


def picture_or_directory(text: str) -> str:
    """``-o`` for one picture (in a folder that exists) or a directory of them (see
    :func:`names_directory`)."""
    if names_directory(text):
        _folder_to_make(text)
        return text
    if _suffix(text) in OUTPUTS:
        _folder_exists(text)
        return text
    raise argparse.ArgumentTypeError(f"cannot write {short(text)}: {_suffix(text)} is not a picture format "
                                     f"({PICTURES}), nor a directory (end it with '/' to make one)")


picture_or_directory.__name__ = "picture or directory"


def grid(text: str) -> str:
    """``--grid``: a picture of many diagrams, SVG or an interactive page."""
    if _suffix(text) not in (".svg", ".html") or os.path.isdir(text):
        raise argparse.ArgumentTypeError(f"cannot write {short(text)}: a grid is drawn as .svg or .html")
    _folder_exists(text)
    return text


grid.__name__ = "grid"


def folder(text: str) -> str:
    """``-o DIR``: a folder that is there or can be made (see :func:`_folder_to_make`), named as
    one (:func:`names_directory`, or a number after the dot: ``lr0.001``): a file's name,
    ``run.txt``, would otherwise become a folder."""
    _folder_to_make(text)
    if not names_directory(text) and not _suffix(text)[1:].isdigit():  # (runs/lr0.001 is a folder's name)
        raise argparse.ArgumentTypeError(f"cannot write {short(text)}: a folder goes here, and {_suffix(text)} names "
                                         "a file (end the name with '/' to make a folder of it)")
    return text


folder.__name__ = "folder"


def file_of(what: str, *suffixes: str) -> Callable[[str], str]:
    """An argparse type for an output file that is ``what`` (``a derivation``), named with one of
    ``suffixes``, in a folder that is there and takes new files."""

    def check(text: str) -> str:
        if os.path.isdir(text):
            raise argparse.ArgumentTypeError(f"cannot write {short(text)}: it is a directory (give {what} file: "
                                             f"{', '.join(suffixes)})")
        if _suffix(text) not in suffixes:
            raise argparse.ArgumentTypeError(f"cannot write {short(text)}: the command writes {what} here, so the "
                                             f"name ends with {' or '.join(suffixes)}")
        _folder_exists(text)
        return text

    check.__name__ = what.split(" ", 1)[-1]
    return check


def checked(option: str, kind: Callable[[str], str], text: str) -> str:
    """``kind`` applied to an output the command names itself (a default made from its inputs),
    refused as argparse would refuse it on the command line."""
    try:
        return kind(text)
    except argparse.ArgumentTypeError as e:
        raise UsageError(f"argument {option}: {e}") from None


def need_directory(text: str, why: str) -> None:
    """Refuse (a usage error) an output that must be a directory but is named as a file."""
    if not names_directory(text):
        raise UsageError(f"-o {short(text)}: {why}, so -o names a directory; {short(text)} is named as a file "
                         "(end it with '/' to make a directory)")


def add_tikz_body(p: argparse.ArgumentParser) -> None:
    """``--tikz-body``: with ``-o X.tex``, the pictures alone (``\\input`` in a paper)."""
    p.add_argument("--tikz-body", action="store_true",
                   help="with -o X.tex: write the TikZ pictures alone, to \\input in a paper that loads "
                        "stringdiag.sty (written beside them), not a document of its own")
