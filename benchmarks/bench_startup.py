"""Benchmark: start-up of commands that evaluate nothing, as a ratio to a bare ``python -c pass``.

Each command is a fresh process (the interpreter that runs this file, ``-m stringdiag.cli.main``),
timed by its CPU time (user + system, from ``os.wait4``: wall time on a shared machine measures
the neighbours; ``render``'s includes Graphviz's ``dot``, which it runs and waits for). The reference ``python -c pass`` runs in the same rounds, interleaved with the
commands; each figure is the median over the rounds, and each ratio the median of the per-round
ratios. The caches (the prelude's and the rule library's syntax trees) are warmed first: one round with
``--cold`` empties a private cache directory before every command instead. ``--old TREE`` runs every
command from another checkout too (a ``git archive`` copy, with its own cache), the two alternating
in each round, and adds the median of the per-round ratios new / old (under 1: this checkout is faster).

``--floors`` (with ``--wheel``) splits each of the four commands' CPU time into what no command can
avoid and what it does: a bare interpreter; the same with ``re`` imported (the console script pip
writes imports it before any of the package's code); a process that only imports every module the
command imports (each recorded from a run of the command); and the command. The command less its
imports is its work; the ratio it would have if importing its modules cost nothing more than ``re``
is (``re`` + work) / bare.

``--wheel`` measures what a user who installs the package gets instead: this checkout built into a
wheel and installed in a fresh virtual environment (the dependencies reached through the running
environment's site-packages, added as a path: none of its ``.pth`` files runs), every command run
there as the ``stringdiag`` console script its installation wrote (what a user types), on the shipped
files (``stringdiag:gallery/...``) from an empty folder, against that environment's own ``python -c pass``. A development environment's bare
interpreter is slower (its ``.pth`` files, the editable install's among them, import ``pathlib``,
``typing``, ``re`` and more at every start), so the same milliseconds are a smaller ratio there.

    .venv/bin/python benchmarks/bench_startup.py [--rounds 9] [--cold] [--old ../base] [--wheel [--floors]]
"""
from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
COMMANDS = {
    "python -c pass": ["-c", "pass"],
    "stringdiag --version": ["-m", "stringdiag.cli.main", "--version"],
    "stringdiag check --frob (usage error)": ["-m", "stringdiag.cli.main", "check", "--frob", "x.diag"],
    "stringdiag derive attention.diag (kind)": ["-m", "stringdiag.cli.main", "derive", "gallery/attention.diag"],
    "stringdiag check gallery/attention.diag": ["-m", "stringdiag.cli.main", "check", "gallery/attention.diag"],
    "stringdiag info -d SelfAttention": ["-m", "stringdiag.cli.main", "info", "gallery/attention.diag",
                                         "-d", "SelfAttention"],
    "stringdiag derive gallery/linearize.deriv": ["-m", "stringdiag.cli.main", "derive", "gallery/linearize.deriv"],
    "stringdiag render -d SelfAttention -o X.svg": ["-m", "stringdiag.cli.main", "render", "gallery/attention.diag",
                                                   "-d", "SelfAttention", "-o", "{scratch}/attention.svg"],
}


PYTHON = {"python": sys.executable}  # the interpreter the commands run with (--wheel: the fresh environment's)


def cpu_seconds(args: list[str], env: dict, root: Path = ROOT) -> float:
    """User + system CPU time of one run of the interpreter with ``args``, in checkout ``root``."""
    proc = subprocess.Popen([PYTHON["python"], *args], cwd=root, env=env, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    _, _, usage = os.wait4(proc.pid, 0)
    proc.returncode = 0  # reaped above
    return usage.ru_utime + usage.ru_stime


def environment(root: Path | None, cache: Path) -> dict:
    """The environment a checkout's commands run in: its own package and cache; bytecode written by
    the warm-up round, as an installed wheel has it compiled (a PYTHONDONTWRITEBYTECODE shell would
    otherwise charge recently edited modules their compilation)."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    return env | {"XDG_CACHE_HOME": str(cache)} | ({"PYTHONPATH": str(root)} if root else {})


def wheel_environment(scratch: Path) -> tuple[Path, dict[str, list[str]]]:
    """A fresh virtual environment with this checkout's wheel installed, an empty folder to run
    in, and the commands on the shipped files, each run by the console script the installation wrote."""
    import site
    import venv

    subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q",
                    "-w", str(scratch / "wheel"), str(ROOT)], check=True, stdout=subprocess.DEVNULL)
    venv.create(scratch / "venv", with_pip=True)
    py = scratch / "venv" / "bin" / "python"
    subprocess.run([str(py), "-m", "pip", "install", "-q", "--no-deps", *map(str, (scratch / "wheel").glob("*.whl"))],
                   check=True, stdout=subprocess.DEVNULL)
    purelib = subprocess.run([str(py), "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"],
                             capture_output=True, text=True, check=True).stdout.strip()
    Path(purelib, "zz_dependencies.pth").write_text("".join(f"{p}\n" for p in site.getsitepackages()))
    PYTHON["python"] = str(py)
    empty = scratch / "empty"
    empty.mkdir()
    script = str(py.with_name("stringdiag"))
    shipped = {name: [script, *(a.replace("gallery/", "stringdiag:gallery/") for a in args[2:])]
               if args[:2] == ["-m", "stringdiag.cli.main"] else args for name, args in COMMANDS.items()}
    return empty, shipped


# --floors: one interpreter run either records the modules a command imports (running it in-process)
# or imports the recorded ones and stops as the commands do (the cyclic collector paused, no
# interpreter teardown: see cli/main.py)
FLOOR_DRIVER = """
import gc, os, re, sys
mode, listing = sys.argv[1], sys.argv[2]
if mode == "record":
    import contextlib, io
    before = set(sys.modules)
    from stringdiag.cli.main import main
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
        main(sys.argv[3:])
    with open(listing, "w") as f:
        f.write("\\n".join(m for m in sys.modules if m not in before))
else:
    gc.disable()
    for name in open(listing).read().split():
        __import__(name)
    os._exit(0)
"""
FLOORED = ("stringdiag check gallery/attention.diag", "stringdiag info -d SelfAttention",
           "stringdiag derive gallery/linearize.deriv", "stringdiag render -d SelfAttention -o X.svg")


def floors(rounds: int) -> dict[str, dict[str, list[float]]]:
    """CPU seconds of a bare interpreter, of one importing ``re``, of one importing a command's
    modules only, and of the command, by command (the wheel's, in a fresh environment), interleaved."""
    scratch = Path(tempfile.mkdtemp(prefix="stringdiag-floors-"))
    empty, runs = wheel_environment(scratch)
    env = environment(None, scratch / "cache")
    driver = scratch / "driver.py"
    driver.write_text(FLOOR_DRIVER)
    parts = {}
    for name in FLOORED:
        args = [a.replace("{scratch}", str(scratch)) for a in runs[name]]
        listing = scratch / f"modules-{len(parts)}.txt"
        subprocess.run([PYTHON["python"], str(driver), "record", str(listing), *args[1:]], cwd=empty, env=env,
                       check=True)
        parts[name] = {"bare": ["-c", "pass"], "re": ["-c", "import re"],
                       "imports": [str(driver), "imports", str(listing)], "command": args}
    for part in (*parts.values(), *parts.values()):  # warm-up: caches, bytecode, the OS's file cache
        for args in part.values():
            cpu_seconds(args, env, empty)
    times = {name: {what: [] for what in part} for name, part in parts.items()}
    for _ in range(rounds):
        for name, part in parts.items():
            for what, args in part.items():
                times[name][what].append(cpu_seconds(args, env, empty))
    shutil.rmtree(scratch, ignore_errors=True)
    return times


def print_floors(times: dict[str, dict[str, list[float]]], rounds: int) -> None:
    med = statistics.median
    print(f"{'command (installed wheel)':<44}{'bare':>7}{'+re':>7}{'imports':>9}{'command':>9}{'work':>7}"
          f"{'x bare':>8}{'floor x':>9}")
    for name, t in times.items():
        work = [c - i for c, i in zip(t["command"], t["imports"])]
        floor = med((r + w) / b for r, w, b in zip(t["re"], work, t["bare"]))
        ratio = med(c / b for c, b in zip(t["command"], t["bare"]))
        print(f"{name:<44}" + "".join(f"{med(t[k]) * 1e3:>{w}.1f}" for k, w in
                                        (("bare", 7), ("re", 7), ("imports", 9), ("command", 9)))
              + f"{med(work) * 1e3:>7.1f}{ratio:>8.2f}{floor:>9.2f}")
    print(f"(ms of CPU, medians of {rounds} rounds; work = command - imports; floor x = (re + work) / bare: "
          f"the ratio if the command's modules cost no more to import than re, which pip's console script "
          f"imports anyway; {PYTHON['python']})")


def measure(trees: dict[str, Path], rounds: int, cold: bool, wheel: bool = False) -> dict:
    """CPU seconds and ratios to ``python -c pass`` of every command, by tree and command: each round
    runs every command, the trees alternating (the first tree first in even rounds)."""
    scratch = Path(tempfile.mkdtemp(prefix="stringdiag-bench-"))
    runs = COMMANDS
    if wheel:
        empty, runs = wheel_environment(scratch)
        trees = {"new": empty}
    caches = {tree: scratch / f"cache-{i}" for i, tree in enumerate(trees)}
    envs = {tree: environment(None if wheel else root, caches[tree]) for tree, root in trees.items()}
    commands = {name: [a.replace("{scratch}", str(scratch)) for a in args] for name, args in runs.items()}
    for tree, root in trees.items():  # warm the caches (and the OS's file cache)
        for args in commands.values():
            cpu_seconds(args, envs[tree], root)
    times = {tree: {name: [] for name in COMMANDS} for tree in trees}
    ratios = {tree: {name: [] for name in COMMANDS} for tree in trees}
    for r in range(rounds):
        order = list(trees) if r % 2 == 0 else list(trees)[::-1]
        for name, args in commands.items():  # interleaved: the reference in every round
            for tree in order:
                if cold:
                    shutil.rmtree(caches[tree] / "stringdiag", ignore_errors=True)
                times[tree][name].append(cpu_seconds(args, envs[tree], trees[tree]))
        for tree in trees:
            base = times[tree]["python -c pass"][-1]
            for name in COMMANDS:
                ratios[tree][name].append(times[tree][name][-1] / base)
    shutil.rmtree(scratch, ignore_errors=True)
    return {"times": times, "ratios": ratios}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=9)
    ap.add_argument("--cold", action="store_true", help="empty the cache before every command")
    ap.add_argument("--old", type=Path, help="another checkout to run alternately (e.g. a git archive copy)")
    ap.add_argument("--wheel", action="store_true", help="this checkout's wheel in a fresh environment, "
                    "from an empty folder (not with --old)")
    ap.add_argument("--floors", action="store_true", help="with --wheel: each command's CPU split into "
                    "the interpreter, re, its imports and its work")
    opts = ap.parse_args()
    if opts.floors:
        if not opts.wheel or opts.old or opts.cold:
            ap.error("--floors goes with --wheel alone")
        print_floors(floors(opts.rounds), opts.rounds)
        return
    if opts.wheel and opts.old:
        ap.error("--wheel measures one installed copy: not with --old")
    trees = {"new": ROOT} | ({"old": opts.old.resolve()} if opts.old else {})
    got = measure(trees, opts.rounds, opts.cold, opts.wheel)
    med = statistics.median
    if not opts.old:
        print(f"{'command':<44}{'cpu ms (median)':>16}{'x python -c pass':>18}")
        for name in COMMANDS:
            print(f"{name:<44}{med(got['times']['new'][name]) * 1e3:>16.0f}{med(got['ratios']['new'][name]):>18.1f}")
    else:
        print(f"{'command':<44}{'old ms':>8}{'x pass':>8}{'new ms':>8}{'x pass':>8}{'new/old':>9}")
        for name in COMMANDS:
            old, new = got["times"]["old"][name], got["times"]["new"][name]
            print(f"{name:<44}{med(old) * 1e3:>8.1f}{med(got['ratios']['old'][name]):>8.2f}{med(new) * 1e3:>8.1f}"
                  f"{med(got['ratios']['new'][name]):>8.2f}{med(b / a for a, b in zip(old, new)):>9.3f}")
    print(f"({opts.rounds} rounds, {'cold' if opts.cold else 'warm'} caches, {PYTHON['python']}"
          f"{f'; old: {opts.old}' if opts.old else ''})")


if __name__ == "__main__":
    main()
