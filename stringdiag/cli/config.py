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
from pathlib import Path

from ..errors import DiagError
from ..syntax.source import read_source
from .options import UsageError, short

RESOLVED = "run-config.json"  # beside a run's checkpoint
NOT_KEYS = {"help", "config", "command", "completion", "version", "file"}  # no key sets these


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


def read(path: str, parser: argparse.ArgumentParser) -> dict:
    """The file's options as argparse destinations and checked values."""
    import json  # here: every command asks for keys(), few read a file
    import tomllib

    text = read_source(path)
    try:
        data = json.loads(text) if path.lower().endswith(".json") else tomllib.loads(text)
    except ValueError as e:  # tomllib.TOMLDecodeError is one
        raise DiagError(f"{short(path)}: not {'JSON' if path.lower().endswith('.json') else 'TOML'}: {e}") from None
    if not isinstance(data, dict):
        raise DiagError(f"{short(path)}: expected a table of options, got {type(data).__name__}")
    actions, values = _actions(parser), {}
    for key, value in data.items():
        if key == "file":
            continue  # recorded in a resolved config; FILE on the command line is what is read
        action = actions.get(str(key).replace("-", "_"))
        if action is None:
            known = ", ".join(sorted(keys(parser).values()))
            raise UsageError(f"--config {short(path)}: no option '{key}' (the options: {known})")
        values[action.dest] = _value(action, key, value, path)
    return values


def _value(action: argparse.Action, key: str, value, path: str):
    """One key's value, checked as the command line checks it."""
    where = f"--config {short(path)}: '{key}'"
    if action.nargs == 0:  # a switch
        if not isinstance(value, bool):
            raise UsageError(f"{where} is a switch: true or false, not {value!r}")
        return value if action.const is not False else not value
    if isinstance(value, dict) and action.dest == "dims":  # dims = {k = 32, m = 16}: the table --dims writes k=32,m=16
        value = ",".join(f"{name}={size}" for name, size in value.items())
    if value is None or isinstance(value, (dict, bool)):
        import json

        raise UsageError(f"{where}: expected a value as the command line takes it, not {json.dumps(value)}")
    items = value if isinstance(value, list) and action.nargs not in (None, "?") else [value]
    try:
        checked = [action.type(str(v)) if callable(action.type) else str(v) for v in items]
    except (argparse.ArgumentTypeError, ValueError, TypeError) as e:
        raise UsageError(f"{where}: {e}") from None
    if action.choices is not None and any(c not in action.choices for c in checked):
        raise UsageError(f"{where}: expected one of {', '.join(map(str, action.choices))}, got {value!r}")
    return checked if items is value else checked[0]


def apply(parser: argparse.ArgumentParser, argv: list[str]) -> None:
    """Make the ``--config`` file's values the command's defaults (so the command line wins), and
    an option it gives no longer required on the command line."""
    path = given(argv)
    if path is None:
        return
    values = read(path, parser)
    for dest in values:
        _actions(parser)[dest].required = False
    parser.set_defaults(**values)


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
