"""Mutation fuzzing of every command's input (issue 24, item 6): each gallery ``.diag``,
``.deriv``, ``.rules`` and ``.tax`` file and a ``construct`` JSON instance, mutated (spans deleted,
duplicated or moved, nasty text inserted: NUL bytes, huge numbers, deep nesting, invalid UTF-8),
is given to the command that reads it, through ``main()`` in-process. Each case must end in exit 0,
or exit 1/2 with exactly one ``error:`` line — never exit 3, a traceback, a leaked warning or a
hang (a per-case time limit). Fixed seed; the case count is printed.
"""
from __future__ import annotations

import contextlib
import io
import json
import os
import random
import re
import shutil
import signal
import time
import warnings
from pathlib import Path

import pytest

from stringdiag.cli.main import main

ROOT = Path(__file__).resolve().parents[1]
CASES = int(os.environ.get("FUZZ_CASES", 2000))
SEED = 24
LIMIT_S = 10  # a case that runs longer is a hang
ERROR = re.compile(r"^(?:\S.*?:\d+:\d+: )?error: \S")

INSTANCE = {"sequences": [{"label": "a", "tokens": [[0.0, 0.0], [2.0, 0.0]]},
                          {"label": "b", "tokens": [[0.0, 0.0], [2.0, 0.0], [1.0, 0.0]]},
                          {"label": "c", "tokens": [[1.0, 1.0]]}]}

NASTY = ["\x00", "1e308", "-1e308", "1e-320", "99999999999999999999999", "0", "-", "((((((((((((((((", "[[[[[[[[",
         "}", "{", "]", ")", ",", ":", "::", "\"", "'", "\n", "\t", "é", "\ufeff", "\u202e", "#", "//", "*", "/",
         "repeat 1000000000 ", "repeat 0 ", "sum_", "scan ", "\\", "..", "@", "NaN", "inf", "x" * 300,
         '"\x00.diag"', "stringdiag:", "../", "/", "\r"]


class Hang(BaseException):
    """Raised by the alarm in a case that ran past LIMIT_S (not an Exception: main cannot catch it)."""


def _alarm(signum, frame):
    raise Hang()


def mutate(text: str, rng: random.Random) -> str | bytes:
    """Three to five random edits of ``text``; sometimes raw bytes (invalid UTF-8)."""
    for _ in range(rng.randint(3, 5)):
        n = len(text)
        i, j = sorted(rng.randrange(n + 1) for _ in range(2)) if n else (0, 0)
        j = min(j, i + rng.randint(1, 40))
        op = rng.randrange(6)
        if op == 0:
            text = text[:i] + text[j:]                              # delete a span
        elif op == 1:
            text = text[:i] + rng.choice(NASTY) + text[i:]          # insert something nasty
        elif op == 2:
            text = text[:j] + text[i:j] + text[j:]                  # duplicate a span
        elif op == 3:
            k = rng.randrange(n + 1) if n else 0                    # move a span
            span, rest = text[i:j], text[:i] + text[j:]
            k = min(k, len(rest))
            text = rest[:k] + span + rest[k:]
        elif op == 4:
            text = re.sub(r"\d+(\.\d+)?", lambda m: rng.choice(["0", "1e308", "-7", "123456789012345678901234567890",
                                                               m.group(0)]), text)
        else:
            text = text[:i]                                         # truncated
    if rng.random() < 0.05:
        raw = bytearray(text.encode())
        if raw:
            raw[rng.randrange(len(raw))] = rng.choice([0xff, 0xc3, 0x80, 0x00])
        return bytes(raw)
    return text


@pytest.fixture(scope="module")
def tree(tmp_path_factory) -> Path:
    """A copy of the gallery and the rules, mutated one file at a time (their references hold)."""
    top = tmp_path_factory.mktemp("fuzz")
    shutil.copytree(ROOT / "gallery", top / "gallery", ignore=shutil.ignore_patterns("*.svg", "*.png", "study"))
    shutil.copytree(ROOT / "rules", top / "rules")
    (top / "in.json").write_text(json.dumps(INSTANCE, indent=1))
    return top


def targets(top: Path) -> list[tuple[Path, list[str]]]:
    """Each file and the command line that reads it."""
    out: list[tuple[Path, list[str]]] = []
    for ext, cmd in ((".diag", ["check"]), (".rules", ["check"]), (".deriv", ["derive"]), (".tax", ["taxonomy"])):
        for p in sorted(top.rglob(f"*{ext}")):
            out.append((p, [*cmd, str(p)]))
    construct = ["construct", "hardmax-classifier", "--sequences", str(top / "in.json"), "-o", str(top / "built")]
    return out + [(top / "in.json", construct)]


# each command's share of the cases: by what a case costs here (a taxonomy runs every edge's
# derivation, a derivation its steps; a parse error in any of them is as cheap as check's)
SHARES = {"check": 0.62, "derive": 0.20, "construct": 0.17, "taxonomy": 0.01}


def schedule(todo: list[tuple[Path, list[str]]], cases: int, rng: random.Random) -> list[tuple[Path, list[str]]]:
    """Which target each case mutates: a command by its share, then one of its files in turn."""
    by_cmd: dict[str, list] = {}
    for t in todo:
        by_cmd.setdefault(t[1][0], []).append(t)
    cmds = sorted(by_cmd)
    picks = rng.choices(cmds, weights=[SHARES[c] for c in cmds], k=cases)
    seen = {c: 0 for c in cmds}
    out = []
    for c in picks:
        out.append(by_cmd[c][seen[c] % len(by_cmd[c])])
        seen[c] += 1
    return out


def run_case(argv: list[str]) -> tuple[int, str, float]:
    out, err = io.StringIO(), io.StringIO()
    t0 = time.perf_counter()
    signal.signal(signal.SIGALRM, _alarm)
    signal.setitimer(signal.ITIMER_REAL, LIMIT_S)
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err), warnings.catch_warnings():
            warnings.simplefilter("error")  # a warning that would leak is an error here
            rc = main(argv)
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
    return rc, err.getvalue(), time.perf_counter() - t0


def check_case(rc: int, err: str, argv_kind: str = "") -> str:
    """'' when the case ended as it should, else what went wrong."""
    if "Traceback" in err or "internal error" in err or rc == 3:
        return "internal error"
    if rc == 0:
        return ""
    if rc not in (1, 2):
        return f"exit {rc}"
    errors = [ln for ln in err.splitlines() if ERROR.match(ln)]
    if not errors:
        return "no positioned error line"
    # one error, except where a command reports every problem it finds (check: each failing rule)
    return "" if len(errors) == 1 or argv_kind == "check" else f"{len(errors)} error lines"


@pytest.mark.slow
def test_mutated_inputs_never_crash_or_hang(tree, capsys):
    rng = random.Random(SEED)
    todo = targets(tree)
    plan = schedule(todo, CASES, rng)
    failures: list[str] = []
    exits = {0: 0, 1: 0, 2: 0}
    spent: dict[str, float] = {}
    t0 = time.perf_counter()
    for case in range(CASES):
        path, argv = plan[case]
        original = path.read_bytes()
        mutant = mutate(original.decode(), rng)
        (path.write_bytes if isinstance(mutant, bytes) else path.write_text)(mutant)
        try:
            rc, err, took = run_case(argv)
            spent[argv[0]] = spent.get(argv[0], 0.0) + took
        except Hang:
            rc, err = -1, f"no answer within {LIMIT_S} s"
        finally:
            path.write_bytes(original)
        why = check_case(rc, err, argv[0]) if rc != -1 else err
        exits[rc] = exits.get(rc, 0) + 1
        if why:
            failures.append(f"case {case} ({' '.join(argv[:1])} {path.name}): {why}\n{mutant!r}\n{err[-600:]}")
    with capsys.disabled():
        print(f"\nfuzzing: {CASES} cases of {len({p for p, _ in todo})} files in {time.perf_counter() - t0:.1f} s "
              f"(exit 0: {exits[0]}, exit 1: {exits[1]}, exit 2: {exits[2]}; seconds by command: "
              f"{', '.join(f'{k} {v:.1f}' for k, v in sorted(spent.items()))})")
    assert not failures, f"{len(failures)} failing case(s):\n\n" + "\n\n".join(failures[:5])


# -- the reproducers of issue 24, item 7: each one positioned or named error line, exit 1 --------
def _one(capsys, argv: list[str]) -> str:
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        rc = main(argv)
    err = capsys.readouterr().err
    assert rc == 1 and check_case(rc, err) == "" and "Warning" not in err, err
    return next(ln for ln in err.splitlines() if ERROR.match(ln))


@pytest.mark.parametrize("text, where", [("start \x00.diag:M\n", ":1:7: "), ('use "attention.\x00"\nstart x.diag:M\n', ":1:5: "),
                                         ('use "' + "a" * 300 + '.rules"\nstart x.diag:M\n', ":1:5: "),
                                         ('use "attention.txt"\nstart x.diag:M\n', ":1:5: ")])
def test_file_names_no_file_could_have_are_refused_where_written(tmp_path, capsys, text, where):
    p = tmp_path / "d.deriv"
    p.write_text(text)
    assert _one(capsys, ["derive", str(p)]).startswith(f"{p}{where}error: ")


def test_construct_json_too_deep_overflowing_or_too_fine(tmp_path, capsys):
    f = tmp_path / "in.json"
    f.write_text("[" * 100000 + "]" * 100000)
    argv = ["construct", "hardmax-classifier", "--sequences", str(f), "-o", str(tmp_path / "o")]
    assert _one(capsys, argv).startswith(f"{f}:1:33: error: JSON nested deeper than 32 levels")
    big = {"sequences": [{"label": "a", "tokens": [[1e308, 1e308]]}, {"label": "b", "tokens": [[-1e308, 1e308]]}]}
    f.write_text(json.dumps(big))
    assert "numeric overflow in the construction" in _one(capsys, argv)
    fine = {**INSTANCE, "targets": {"a": {"center": [0, 3], "radius": 1e-15}, "b": {"center": [0, -3], "radius": 1},
                                    "c": {"center": [3, 0], "radius": 1}}}
    f.write_text(json.dumps(fine))
    assert "below what float64 arithmetic resolves" in _one(capsys, argv)
