"""The speed table: each row where the compiled code or a command was measured against a
reference in the same run, its goal and today's figure, printed as each is measured.

Every row comes from a benchmark script of this folder run as its own process, within a time
limit (a row that overruns says so and the table goes on): CPU time, torch at one thread,
interleaved rounds, medians of at least 5 (``cpu_clock.py``). The enumeration at bound 7 takes
minutes; it runs with ``--all``.

    .venv/bin/python benchmarks/bench_table.py [--all] [--limit 600]
"""
from __future__ import annotations

import argparse
import subprocess
import sys
import threading
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import cpu_clock as C  # noqa: E402

ROWS = [  # (what, the script and its arguments)
    ("sliding window and Longformer", ["bench_window.py", "--no-header"]),
    ("sparse mixture of experts", ["bench_moe.py", "--row"]),
    ("enumeration", ["bench_enumerate.py", "--row"]),
    ("derive --verify and drawing", ["bench_verify.py", "--no-header", "--in-process",
                                     "gallery/sumformer_thm45_performer.deriv"]),
    ("torch.compile time of the batched M1 model", ["bench_compile.py", "--no-header"]),
]
LONG = [  # with --all
    ("enumeration at bound 7", ["bench_enumerate.py", "--bound", "7", "--cpu-limit", "300"]),
]


def run(what: str, args: list[str], limit: int) -> None:
    """One script, its table rows passed through as they come; an overrun or failure is a row."""
    cmd = [sys.executable, str(HERE / args[0]), *args[1:]]
    proc = subprocess.Popen(cmd, cwd=HERE.parent, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    killed: list[bool] = []
    timer = threading.Timer(limit, lambda: killed.append(True) or proc.kill())
    timer.start()
    assert proc.stdout is not None
    for line in proc.stdout:
        if line.startswith("|") and not line.startswith(("| figure", "|---")):
            print(line.rstrip(), flush=True)
    code = proc.wait()
    timer.cancel()
    if killed:
        C.row(what, "-", f"not measured: over {limit} s", "-", None)
    elif code:
        C.row(what, "-", f"not measured: `{' '.join(args)}` exited with {code}", "-", None)


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--all", action="store_true", help="also the rows that take minutes")
    ap.add_argument("--limit", type=int, default=900, help="seconds one script may run")
    a = ap.parse_args(argv)
    C.header()
    for what, args in ROWS + (LONG if a.all else []):
        run(what, args, a.limit)
    if not a.all:
        C.row("`enumerate` at bound 7", "-", "not run (minutes): --all", "<= 30 s CPU", None)


if __name__ == "__main__":
    main()
