"""``--config FILE``: a command's options from a TOML or JSON file, as nanoGPT's and Hugging
Face's ``TrainingArguments`` users keep them. Every option is a key (``max-steps`` or
``max_steps``), its value what the command line would take (``dims = "k=32"``, ``no-test = true``);
the command line wins over the file. Each value goes through the option's own check, so a bad
one is refused as it would be on the command line, naming the key. Nothing in the file is run.

The run's options, resolved (defaults included), are written beside its checkpoint
(:data:`RESOLVED`), which ``--config`` reads back to repeat the run.
"""
from __future__ import annotations

import argparse
from contextlib import contextmanager
from pathlib import Path

from ..errors import DiagError
from ..syntax.source import read_source
from .options import UsageError, parse_dims, short

RESOLVED = "run-config.json"  # beside a run's checkpoint
NOT_KEYS = {"help", "config", "command", "completion", "version", "file"}  # no option key sets these
FILE = "file"  # the key of the command's FILE argument (a resolved config records it)
ORIGIN = "config_origin"  # on the parsed arguments: dest -> (the file's key, shown, and the value it set)


def given(argv: list[str]) -> str | None:
    """The ``--config`` file named on a command line, found before parsing (the file can fill in
    a required option, which argparse would otherwise refuse first)."""
    for i, arg in enumerate(argv):
        if arg == "--config" and i + 1 < len(argv):
            return argv[i + 1]
        if arg.startswith("--config="):
            return arg.split("=", 1)[1]
    return None


def _actions(parser: argparse.ArgumentParser) -> dict[str, argparse.Action]:
    """Each option by every name a key may give it: its long spellings (``max-steps``,
    ``max_steps``, ``output``) and its destination (``out``)."""
    found = {}
    for a in parser._actions:
        if not a.option_strings or a.dest in NOT_KEYS:
            continue
        for name in [a.dest] + [s[2:] for s in a.option_strings if s.startswith("--")]:
            found[name.replace("-", "_")] = a
    return found


def keys(parser: argparse.ArgumentParser) -> dict[str, str]:
    """Each option's destination -> the key a resolved config writes it under (its long name)."""
    return {a.dest: max((s[2:] for s in a.option_strings if s.startswith("--")), key=len, default=a.dest)
            for a in parser._actions if a.option_strings and a.dest not in NOT_KEYS}


def read(path: str, parser: argparse.ArgumentParser) -> tuple[dict, dict[str, str]]:
    """The file's options as argparse destinations and checked values, and each one's key as an
    error names it (``--config run.toml: 'max-steps'``). ``file`` is the command's FILE."""
    import json  # here: every command asks for keys(), few read a file
    import tomllib

    text = read_source(path)
    try:
        data = json.loads(text) if path.lower().endswith(".json") else tomllib.loads(text)
    except ValueError as e:  # tomllib.TOMLDecodeError is one
        raise DiagError(f"{short(path)}: not {'JSON' if path.lower().endswith('.json') else 'TOML'}: {e}") from None
    if not isinstance(data, dict):
        raise DiagError(f"{short(path)}: expected a table of options, got {type(data).__name__}")
    actions, values, where = _actions(parser), {}, {}
    for key, value in data.items():
        here = f"--config {short(path)}: '{key}'"
        if key == FILE and _positional(parser, FILE) is not None:
            if not isinstance(value, str) or not value.strip():
                raise UsageError(f"{here}: expected the path of the command's FILE, not {json.dumps(value)}")
            values[FILE], where[FILE] = value, here
            continue
        action = actions.get(str(key).replace("-", "_"))
        if action is None:
            known = ", ".join(sorted(keys(parser).values()))
            raise UsageError(f"--config {short(path)}: no option '{key}' (the options: {known})")
        values[action.dest], where[action.dest] = _value(action, here, value), here
    return values, where


def _positional(parser: argparse.ArgumentParser, dest: str) -> argparse.Action | None:
    return next((a for a in parser._actions if not a.option_strings and a.dest == dest), None)


def _value(action: argparse.Action, where: str, value):
    """One key's value, checked as the command line checks it; an error names the key (``where``)
    and shows the value as the file wrote it."""
    import json

    if action.nargs == 0:  # a switch
        if not isinstance(value, bool):
            raise UsageError(f"{where} is a switch: true or false, not {value!r}")
        return value if action.const is not False else not value
    if isinstance(value, dict) and action.dest == "dims":  # dims = {k = 32, m = 16}: the table --dims writes k=32,m=16
        value = ",".join(f"{name}={size}" for name, size in value.items())
    single = action.nargs in (None, "?")
    if value is None or isinstance(value, (dict, bool)) or isinstance(value, list) and single:
        raise UsageError(f"{where}: expected {'one value' if single else 'a value'} as the command line takes it, "
                         f"not {json.dumps(value)}")
    items = value if isinstance(value, list) and action.nargs not in (None, "?") else [value]
    try:
        checked = [action.type(str(v)) if callable(action.type) else str(v) for v in items]
    except (argparse.ArgumentTypeError, ValueError, TypeError) as e:
        raise UsageError(f"{where}: {e}") from None
    if action.choices is not None and any(c not in action.choices for c in checked):
        raise UsageError(f"{where}: expected one of {', '.join(map(str, action.choices))}, got {value!r}")
    if action.dest == "dims":  # its syntax now, so that an error names the key (the names: once the file is read)
        parse_dims(str(value), label=where)
    return checked if items is value else checked[0]


def apply(parser: argparse.ArgumentParser, argv: list[str]) -> None:
    """Make the ``--config`` file's values the command's defaults (so the command line wins), an
    option it gives no longer required on the command line, and FILE optional when it gives one."""
    path = given(argv)
    if path is None:
        return
    values, where = read(path, parser)
    for dest in values:
        action = _positional(parser, dest) if dest == FILE else _actions(parser)[dest]
        if action is not None:
            action.required = False
            if dest == FILE:
                action.nargs = "?"
    parser.set_defaults(**values, **{ORIGIN: {dest: (where[dest], values[dest]) for dest in values}})


@contextmanager
def attributed(args: argparse.Namespace):
    """An error about an option whose value the ``--config`` file set names the file's key instead
    of the option (``--config run.toml: 'dims': ...`` for ``--dims: ...``)."""
    try:
        yield
    except DiagError as e:
        if e.pos is None:
            e.message = _attributed(e.message, args)
            e.args = (e.message,)
        raise


def _attributed(message: str, args: argparse.Namespace) -> str:
    names = getattr(args, "option_keys", {})
    for dest, (where, value) in getattr(args, ORIGIN, {}).items():
        flag = "--" + names.get(dest, dest.replace("_", "-"))
        if getattr(args, dest, None) == value and message.startswith(flag) and \
                message[len(flag):len(flag) + 1] in ("", " ", ":"):
            return where + message[len(flag):]
    return message


def resolved(args: argparse.Namespace, names: dict[str, str]) -> dict:
    """The run's options by their keys (``names``: :func:`keys`), what ``--config`` reads back."""
    out = {"file": getattr(args, "file", None)}
    for dest, key in sorted(names.items(), key=lambda kv: kv[1]):
        value = getattr(args, dest, None)
        if value is not None and dest != "resume":
            out[key] = list(value) if isinstance(value, tuple) else value
    return out


def save(args: argparse.Namespace, folder: Path) -> Path:
    """Write the run's resolved options beside its checkpoint (``args.option_keys``: set by the
    command line's parser, :func:`keys`)."""
    import json

    from ..syntax.source import write_atomic

    text = json.dumps(resolved(args, getattr(args, "option_keys", {})), indent=2) + "\n"
    return write_atomic(Path(folder) / RESOLVED, text)
