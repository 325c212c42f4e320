"""The ``stringdiag`` command: check, render and describe ``.diag`` files.

Bad input is reported as ``FILE:LINE:COL: error: MESSAGE`` with the line and a caret, and
the exit status is 1; a bad command line (an option's value, a file of the wrong kind, an
output that cannot be written as named) is one ``error:`` line and exit status 2, as
argparse has it. No traceback is ever shown for the tool's own errors.

The conventions every command shares live here, so that a command module need only declare
its options: the kinds of file each command reads (``TAKES``), an example in every
``--help`` (a module's ``EXAMPLES``, or ``EXAMPLES`` below), defaults shown in the help,
``-o/--output`` as the one spelling of an output (``--out`` still read), and shell
completion (``stringdiag --completion bash``).
"""
from __future__ import annotations

import io
import os
import re
import sys
from importlib import import_module
from types import ModuleType
from typing import NoReturn


class _Untranslated(ModuleType):
    """What argparse takes from gettext, as gettext's NullTranslations has it: messages as written."""

    @staticmethod
    def gettext(message: str) -> str:
        return message

    @staticmethod
    def ngettext(singular: str, plural: str, n: int) -> str:
        return singular if n == 1 else plural


if "argparse" not in sys.modules and "gettext" not in sys.modules:
    # argparse takes gettext's two functions when it is imported; gettext imports locale and compiles
    # a pattern, and then every message looks on disk for a 'messages' catalogue in the user's
    # language (Python ships none): ~1.5 ms of every start, for messages that stay as written. So
    # argparse gets them as written; gettext stays importable, unchanged, for everything else.
    sys.modules["gettext"] = _Untranslated("gettext")
    try:
        import argparse
    finally:
        del sys.modules["gettext"]
else:
    import argparse

from ..errors import DiagError
from ..graph.gcpause import gc_paused
from ..syntax import import_lark_without_regex
from .kinds import FileKind, expect
from .options import UsageError, short

# each command is the module stringdiag.cli.NAME (HELP, add_arguments, run), imported only when
# it runs or when the whole list is shown: drawing or compiling costs nothing to `derive`
COMMANDS = ("check", "render", "info", "derive", "normalize", "compile", "train", "sample", "enumerate", "study",
            "construct", "taxonomy", "trace", "lsp", "serve", "optimize", "discover", "examples")

# the files each command reads, by argument: a file of another kind is refused before any work
TAKES: dict[str, dict[str, tuple[FileKind, ...]]] = {
    "check": {"files": (FileKind.DIAGRAM, FileKind.RULES)},
    "render": {"file": (FileKind.DIAGRAM,)},
    "info": {"file": (FileKind.DIAGRAM,)},
    "derive": {"files": (FileKind.DERIVATION,)},
    "normalize": {"file": (FileKind.DIAGRAM,), "rules": (FileKind.RULES,)},
    "compile": {"file": (FileKind.DIAGRAM,)},
    "train": {"file": (FileKind.DIAGRAM,)},
    "enumerate": {"file": (FileKind.DIAGRAM,), "rules": (FileKind.RULES,)},
    "study": {"file": (FileKind.DIAGRAM,)},
    "taxonomy": {"file": (FileKind.TAXONOMY,)},
    "serve": {"file": (FileKind.DIAGRAM, FileKind.DERIVATION)},
}

# examples for the commands whose modules do not (yet) carry their own ``EXAMPLES``
EXAMPLES = {
    "compile": "stringdiag compile stringdiag:gallery/attention.diag -d SelfAttention --dims d=64,k=16\n"
               "stringdiag compile stringdiag:gallery/anatomy.diag -d M1 --dims d=32,k=8 --approximator linear",
}

# commands that run lark itself (construct reads grammars/maxdef.lark with it); the others parse with
# syntax/lalr.py, over tables lark made at build time, and never import lark
USES_LARK = frozenset({"construct"})

COMPLETION_SHELLS = ("bash", "zsh", "tcsh")
DEPRECATED = {"--out": "--output"}  # old spelling -> the one spelling; the old one still parses
# commands that evaluate nothing: Python's cyclic collector is paused while they run. It rescans
# every object made so far each time allocations pile up, and a short command's start makes tens
# of thousands (modules, functions, syntax trees) that live to its end: about 6 ms of check's and
# derive's 70-100 ms of CPU (25 interleaved runs). Memory: the gallery's derivations peak the same,
# drawing bahdanau_to_vaswani's chain 56 MB instead of 52. --verify and --find evaluate or search.
COLLECTOR_PAUSED = frozenset({"check", "info", "render", "derive"})


def command(name: str) -> ModuleType:
    return import_module(f"{__package__}.{name}")


class Version(argparse.Action):
    """``--version`` (``version.py``'s constant, read only when asked for)."""

    def __init__(self, option_strings, dest, **kwargs):
        super().__init__(option_strings, dest, nargs=0, help="show the version and exit")

    def __call__(self, parser, namespace, values, option_string=None):
        from ..version import __version__

        print(f"{parser.prog} {__version__}")  # on stdout, as argparse's own version action
        parser.exit()


class Parser(argparse.ArgumentParser):
    """argparse, but a bad command line is one ``error:`` line (exit status 2), never a usage dump."""

    def error(self, message: str):  # type: ignore[override]
        raise UsageError(f"{message}{did_you_mean(message)} (see '{self.prog} --help')")

    def _get_formatter(self) -> argparse.HelpFormatter:
        # the width given: argparse would ask shutil, whose import (zlib, bz2, lzma) is 2-3 ms of
        # every start, for the same number; argparse makes a formatter for every add_argument
        return self.formatter_class(prog=self.prog, width=terminal_columns() - 2)


def terminal_columns() -> int:
    """The terminal's width as ``shutil.get_terminal_size`` finds it: ``$COLUMNS``, else the
    width of the terminal on stdout, else 80."""
    try:
        columns = int(os.environ.get("COLUMNS", "0"))
    except ValueError:
        columns = 0
    if columns <= 0:
        try:
            columns = os.get_terminal_size(sys.__stdout__.fileno()).columns  # type: ignore[union-attr]
        except (AttributeError, ValueError, OSError):
            columns = 0
    return columns if columns > 0 else 80


def did_you_mean(message: str) -> str:
    """For argparse's ``invalid choice: 'chek' (choose from ...)``: the nearest choice, if one is near."""
    import difflib

    m = re.search(r"invalid choice: '([^']*)' \(choose from (.*)\)$", message)
    if m is None:
        return ""
    near = difflib.get_close_matches(m.group(1), re.findall(r"'([^']*)'", m.group(2)), n=1, cutoff=0.75)
    return f"; did you mean '{near[0]}'?" if near else ""


def shown(action: argparse.Action) -> str:
    """A default as one would type it: a list of values comma-separated; a tuple that is one
    value (``--shard``'s (1, 1)) in its metavar's own punctuation (K/N: ``1/1``); whichever
    form the option's own type reads back as the default."""
    default = action.default
    forms = []
    if isinstance(default, tuple) and isinstance(action.metavar, str):
        seps = re.findall(r"[^A-Za-z0-9_]+", action.metavar)
        if len(seps) == len(default) - 1:
            forms.append("".join(f"{v}{s}" for v, s in zip(default, seps + [""])))
    if isinstance(default, (list, tuple)):
        forms.append(",".join(map(str, default)))
    forms.append(str(default))
    for text in forms:
        try:
            if not callable(action.type) or action.type(text) == default:
                return text
        except (argparse.ArgumentTypeError, TypeError, ValueError, DiagError):
            continue
    return forms[-1]


def show_defaults(p: argparse.ArgumentParser) -> None:
    """Every option's ``--help`` line ends with its default, unless it has none (None, off,
    empty) or its help already names it."""
    for action in p._actions:
        default, text = action.default, action.help or ""
        empty = default is None or default is False or default == argparse.SUPPRESS or default in ("", [], ())
        if not action.option_strings or empty or "default" in text:
            continue
        action.help = f"{text} (default: {shown(action)})".strip()


def one_spelling(p: argparse.ArgumentParser) -> None:
    """``-o/--output`` everywhere: an option spelt the old way (``--out``) is shown with the one
    spelling, and the old one still parses (hidden, with a warning)."""
    for old, new in DEPRECATED.items():
        action = p._option_string_actions.get(old)
        if action is None or new in p._option_string_actions:
            continue
        action.option_strings = [s for s in action.option_strings if s != old] + [new]
        p._option_string_actions[new] = action


def add_examples(p: argparse.ArgumentParser, name: str, mod: ModuleType) -> None:
    """An EXAMPLES section at the end of the command's ``--help``."""
    examples = getattr(mod, "EXAMPLES", None) or EXAMPLES.get(name)
    if not examples:
        return
    p.formatter_class = argparse.RawDescriptionHelpFormatter
    block = "examples:\n" + "\n".join(f"  {line}" for line in examples.strip().splitlines())
    p.epilog = f"{p.epilog}\n\n{block}" if p.epilog else block


def build_parser(argv: list[str] | None = None) -> argparse.ArgumentParser:
    """The whole parser, or, when ``argv`` names a command, one with only that command (each
    subparser argparse makes is a millisecond of start-up); when it names none, the others are
    names only, so a misspelt one is still suggested."""
    wanted = next((a for a in argv if not a.startswith("-")), None) if argv is not None else None
    wanted = wanted if wanted in COMMANDS else None
    if argv is not None and wanted is None and not {"-h", "--help"} & set(argv):
        wanted = ""  # --version, --completion, a bad command: no command's module is needed
    p = Parser(prog="stringdiag", description=__doc__.splitlines()[0].replace("``", ""),
               formatter_class=argparse.RawDescriptionHelpFormatter,
               epilog="examples:\n  stringdiag check stringdiag:gallery/attention.diag\n"
                      "  stringdiag render stringdiag:gallery/attention.diag -d SelfAttention -o attention.svg\n"
                      "  stringdiag COMMAND --help\n"
                      "  source <(stringdiag --completion bash)")
    p.add_argument("--version", action=Version)
    p.add_argument("--completion", choices=COMPLETION_SHELLS, metavar="SHELL",
                   help=f"print a completion script for SHELL ({', '.join(COMPLETION_SHELLS)}) and exit")
    sub = p.add_subparsers(dest="command", metavar="COMMAND")
    for name in COMMANDS:
        if wanted not in (None, name):
            if wanted == "":
                sub.add_parser(name)
            continue
        mod = command(name)
        parser = sub.add_parser(name, help=mod.HELP, description=mod.HELP)
        mod.add_arguments(parser)
        one_spelling(parser)
        show_defaults(parser)
        add_examples(parser, name, mod)
    return p


def _command_parser(parser: argparse.ArgumentParser, argv: list[str]) -> argparse.ArgumentParser | None:
    """The subparser of the command ``argv`` names, if it names one."""
    name = next((a for a in argv if not a.startswith("-")), None)
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction) and name in action.choices:
            return action.choices[name]
    return None


def completion(shell: str) -> str:
    """The completion script (shtab, imported only here): every command and option."""
    import shtab

    return shtab.complete(build_parser(), shell=shell)


def check_inputs(args: argparse.Namespace) -> None:
    """Every input file named on the command line is of a kind its command reads."""
    for dest, kinds in TAKES.get(args.command, {}).items():
        value = getattr(args, dest, None)
        for path in [value] if isinstance(value, str) else value or ():
            expect(path, kinds, args.command)


def warn_deprecated(argv: list[str]) -> None:
    for arg in argv:
        old = arg.split("=", 1)[0]
        if old in DEPRECATED:
            print(f"warning: {old} is deprecated; write -o/{DEPRECATED[old]}", file=sys.stderr)


def parse(argv: list[str], asked: Asked | None = None) -> argparse.Namespace:
    parser = build_parser(argv)
    command_parser = _command_parser(parser, argv)
    if asked is not None:
        asked.read(command_parser, argv)
    if command_parser is not None and "config" in {a.dest for a in command_parser._actions}:
        from . import config

        config.apply(command_parser, argv)  # the file's options become defaults: the command line wins
    args = parser.parse_args(argv)
    if asked is not None:
        asked.json = bool(getattr(args, "json", False))  # as argparse read it (a config file's too)
    if command_parser is not None and args.command is not None:
        from .config import keys

        args.option_keys = keys(command_parser)
    if args.completion is None and args.command is None:
        parser.error("the following arguments are required: COMMAND")
    if args.command is not None:
        check_inputs(args)
        warn_deprecated(argv)
    return args


def _report(e: DiagError, as_json: bool) -> None:
    """An error on stderr as a compiler prints it; under ``--json``, as JSON on stdout instead
    (``{"error": {file, line, col, severity, message}}``), so a script reads one document either way."""
    if as_json:
        from .common import diagnostic, print_json

        print_json({"error": diagnostic(e, "error", None)})
    else:
        try:  # what the command printed before it failed comes first, as it happened (a pipe buffers stdout)
            sys.stdout.flush()
        except (OSError, ValueError):
            pass
        print(e.render(), file=sys.stderr)


def main(argv: list[str] | None = None) -> int:
    """Run the command line ``argv`` (``sys.argv[1:]`` when None); its exit status."""
    return _main(argv)[0]


def entry() -> NoReturn:
    """The ``stringdiag`` program (the console script, ``python -m stringdiag``): :func:`main`, and,
    after a command that evaluated nothing, the end of the process without the interpreter's
    teardown (:func:`quick_exit`)."""
    from . import interrupt

    interrupt.install()  # Ctrl-C: "interrupted", status 130, every time
    code, light = _main(None)
    interrupt.disarm()
    if interrupt.happened():  # an interrupt some code caught and dropped
        interrupt.say()
        code, light = interrupt.STATUS, False
    if light:
        quick_exit(code)
    sys.exit(code)


def quick_exit(code: int) -> None:
    """End the process now, its output flushed: tearing the interpreter down collects and frees
    every object a command made (modules, syntax trees, graphs), 10-15 ms of derive's CPU for
    nothing the user sees. Only when nothing is left to run at exit (no ``atexit`` handler, no
    other thread); otherwise, or when a flush fails, nothing happens and the caller exits as usual."""
    import atexit

    threading = sys.modules.get("threading")
    if getattr(atexit, "_ncallbacks", lambda: 1)() or (threading is not None and threading.active_count() > 1):
        return
    try:
        sys.stdout.flush()
        sys.stderr.flush()
    except (OSError, ValueError):
        return
    os._exit(code)


class Asked:
    """What the command line asked of the output, as far as it was read: ``--json`` as argparse
    reads it (spelt out or abbreviated, ``--js``), so that an error is JSON on stdout whenever
    the command's results would be."""

    def __init__(self) -> None:
        self.json = False

    def read(self, parser: argparse.ArgumentParser | None, argv: list[str]) -> None:
        """Before argparse: an option that is ``--json`` or a prefix of no other of the command's."""
        if parser is None or "--json" not in parser._option_string_actions:
            return
        for arg in argv:
            if arg == "--":
                break
            name = arg.split("=", 1)[0]
            if name.startswith("--") and len(name) > 2 and "--json".startswith(name):
                if name == "--json" or [o for o in parser._option_string_actions if o.startswith(name)] == ["--json"]:
                    self.json = True


def _main(argv: list[str] | None) -> tuple[int, bool]:
    """The exit status, and whether the command evaluated nothing (its process may end quickly)."""
    argv = sys.argv[1:] if argv is None else argv
    if isinstance(sys.stdout, io.TextIOWrapper):  # lines and warnings (stderr) in the order they happen, piped too
        sys.stdout.reconfigure(line_buffering=True)
    try:
        return _run(argv, Asked())
    except KeyboardInterrupt:  # (here, too, when it comes while another error is reported)
        from .interrupt import STATUS, say

        say()
        return STATUS, False


def _run(argv: list[str], asked: Asked) -> tuple[int, bool]:
    light = False
    try:
        with gc_paused():  # (the command's modules are imported)
            args = parse(argv, asked)
        if args.completion is not None:
            print(completion(args.completion))
            return 0, False
        if args.command in USES_LARK:
            import_lark_without_regex()  # before lark makes a parser: see its docstring
        if args.command in COLLECTOR_PAUSED and not getattr(args, "verify", False) and not getattr(args, "find", None):
            light = True
            with gc_paused():
                return command(args.command).run(args) or 0, light
        return command(args.command).run(args) or 0, light
    except UsageError as e:
        _report(e, asked.json)
        return 2, light
    except DiagError as e:
        _report(e, asked.json)
        return 1, light
    except BrokenPipeError:  # the reader went away (`| head`): nothing more to say, and no error
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())  # so the exit flush cannot fail
        return 141, False
    except OSError as e:  # the machine said no (a path we cannot write, a full disk)
        where = f": {short(e.filename)}" if e.filename else ""
        print(f"error: {e.strerror or e}{where}", file=sys.stderr)
        return 1, light
    except MemoryError:
        print("error: out of memory (choose smaller sizes)", file=sys.stderr)
        return 1, False
    except Exception as e:  # a bug in stringdiag, not in the user's file
        if os.environ.get("STRINGDIAG_DEBUG"):
            raise
        from .interrupt import STATUS, happened, say

        if happened():  # Ctrl-C, which some library turned into an error of its own
            say()
            return STATUS, False
        print(f"stringdiag: internal error: {type(e).__name__}: {e}\n"
              "(this is a bug in stringdiag; rerun with STRINGDIAG_DEBUG=1 for details)", file=sys.stderr)
        return 3, False


if __name__ == "__main__":  # pragma: no cover
    entry()
