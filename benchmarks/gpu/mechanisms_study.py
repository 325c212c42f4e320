"""Every member of the mechanism space and every control at App. C's width, depth 1, on one GPU, sized to
the time a lend leaves (Khatri et al. (2024), App. C; Figs. 2 and 4).

    python benchmarks/gpu/mechanisms_study.py --budget 480 -o /tmp/w3         # on the device machine
    python benchmarks/gpu/mechanisms_study.py --device cpu --tiny --budget 60 -o /tmp/w3   # anywhere

1. A timing shard: ``--processes`` copies of one ``stringdiag study`` command start together and train for
   ``--pilot`` seconds (each takes the next run no other process holds), so the steps they finish measure
   the throughput of the GPU shared that way, start-up included.
2. Sizing: the steps left for the time left decide how many runs can finish, taken in priority order (M0,
   M1, the controls, two members of each structural group, then the others); the rest are named as cut.
3. The chosen runs trained by the same number of processes, each with the time left as its budget (a run
   still going then is checkpointed: the same command continues it on the next lend).
4. Timing alone on the device (Fig. 4: one process, nothing else on the GPU), then ``study --report``.

Writes everything under ``-o`` (runs without checkpoints tarred as ``study.tgz`` when ``--tar``), and prints
each phase's seconds. Nothing here needs a GPU: ``--device cpu --tiny`` runs the same phases in a minute.
"""
from __future__ import annotations

import argparse
import json
import math
import os
import subprocess
import sys
import tarfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
FILE = "stringdiag:gallery/mechanisms.diag"
CONTROLS = ["control", "RunningMean", "ShortConv", "CausalMixer"]
FIRST = ["M0", "M1", *CONTROLS, "M4", "M22", "M7", "M9", "M23", "M13", "M3", "M20"]
APPC = ["--d-model", "512", "--heads", "4", "--d-ff", "2048", "--context", "35", "--batch-size", "32",
        "--epochs", "2", "--warmup", "1500", "--eval-every", "1380", "--test-tokens", "10000",
        "--timing-steps", "20", "--timing-repeats", "3", "--timing-device", "cuda"]
TINY = ["--data", "synthetic", "--d-model", "8", "--heads", "2", "--context", "8", "--batch-size", "8",
        "--max-steps", "6", "--warmup", "2", "--eval-every", "6", "--approximator", "linear",
        "--test-tokens", "200", "--timing-steps", "1", "--timing-repeats", "3", "--timing-device", "cpu"]


def control_spec(names: list[str]) -> str:
    spec = {"control": "control=stringdiag:gallery/control.diag:TokenFF"}
    return ",".join(spec.get(n, f"stringdiag:gallery/control.diag:{n}") for n in names) or "none"


def members() -> list[str]:
    """Every diagram of the mechanisms file, by name (M0 ... M30)."""
    sys.path.insert(0, str(ROOT))
    import stringdiag

    return [n for n in stringdiag.load(FILE).diagrams if n.startswith("M")]


def command(args, mechanisms: list[str], controls: list[str], extra: list[str]) -> list[str]:
    recipe = TINY if args.tiny else APPC
    return [sys.executable, "-m", "stringdiag", "study", FILE, "-d", ",".join(mechanisms), "--control",
            control_spec(controls), "--layers", "1", *recipe, "--device", args.device, "--threads",
            str(args.threads), "--seeds", str(args.seeds), "-o", str(args.out / "study"), *extra]


def runs_of(args, m: str) -> list[str]:
    """The study's run names for one mechanism or control at depth 1: one per seed."""
    return [f"{m}-L1"] + [f"{m}-L1-s{k}" for k in range(1, args.seeds)]


def run_processes(cmd: list[str], n: int, budget: float, logs: Path, tag: str) -> None:
    """``n`` copies of ``cmd``, each with ``--time-budget budget``, together; their output in ``logs``."""
    logs.mkdir(parents=True, exist_ok=True)
    procs = []
    for k in range(n):
        out = open(logs / f"{tag}-{k + 1}.txt", "w")
        procs.append((subprocess.Popen([*cmd, "--time-budget", f"{max(budget, 1):.0f}"], stdout=out,
                                       stderr=subprocess.STDOUT, cwd=ROOT,
                                       env={**os.environ, "PYTHONUNBUFFERED": "1"}), out))
    for p, out in procs:
        p.wait()
        out.close()
        if p.returncode != 0:
            sys.exit(f"error: a study process failed (exit {p.returncode}); see {out.name}")


def steps_done(study: Path) -> dict[str, int]:
    """Run name -> steps trained, read from each run's checkpoint (or its trained.json)."""
    sys.path.insert(0, str(ROOT))
    from stringdiag.train import checkpoint

    out = {}
    for d in sorted(p for p in study.iterdir() if p.is_dir()):
        if (d / "trained.json").exists():
            out[d.name] = int(json.loads((d / "trained.json").read_text())["steps"])
        elif (d / "checkpoint.safetensors").exists():
            out[d.name] = int(checkpoint.read_meta(d / "checkpoint.safetensors").get("step", 0))
    return out


def total_steps(args, mechanisms: list[str]) -> int:
    got = subprocess.run([*command(args, mechanisms[:1], [], []), "--list-runs", "--json"], cwd=ROOT,
                         capture_output=True, text=True, check=True)
    return int(json.loads(got.stdout)["steps_per_run"])


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--device", default="cuda")
    p.add_argument("--budget", type=float, default=480, help="seconds for the whole script (default 480)")
    p.add_argument("--pilot", type=float, default=None, help="seconds of the timing shard (default budget / 8)")
    p.add_argument("--processes", type=int, default=6, help="study processes sharing the device (default 6)")
    p.add_argument("--threads", type=int, default=2, help="CPU threads per process (default 2)")
    p.add_argument("--reserve", type=float, default=None,
                   help="seconds kept for timing and the report (default budget / 8)")
    p.add_argument("--mechanisms", default=None, help="members to consider (default: all of the file)")
    p.add_argument("--controls", default=",".join(CONTROLS), help=f"controls (default {','.join(CONTROLS)})")
    p.add_argument("--seeds", type=int, default=1, help="seeds per run (default 1; 3 give each comparison an interval)")
    p.add_argument("--tiny", action="store_true", help="a recipe of seconds on the synthetic corpus")
    p.add_argument("--tar", action="store_true", help="write OUT/study.tgz (results and logs, no checkpoints)")
    p.add_argument("-o", "--out", type=Path, required=True)
    args = p.parse_args(argv)
    t0 = time.monotonic()
    left = lambda: args.budget - (time.monotonic() - t0)  # noqa: E731
    pilot = args.pilot or args.budget / 8
    reserve = args.reserve or args.budget / 8
    controls = [c for c in args.controls.split(",") if c]
    mech = args.mechanisms.split(",") if args.mechanisms else members()
    ranked = [m for m in FIRST if m in mech or m in controls] + [m for m in mech if m not in FIRST]
    per_run = total_steps(args, mech)

    # 1. the timing shard: every process on the whole list for `pilot` seconds
    study = args.out / "study"
    before = steps_done(study) if study.is_dir() else {}  # (a study continued from an earlier lend)
    started = time.monotonic()
    run_processes(command(args, [m for m in ranked if m not in controls], controls, []), args.processes, pilot,
                  args.out / "logs", "pilot")
    spent = time.monotonic() - started
    done = steps_done(study)
    new = sum(done.values()) - sum(before.values())
    rate = new / spent  # steps per second over all processes, start-up included
    print(f"pilot: {new:,} steps in {spent:.0f} s by {args.processes} processes: {rate:.1f} steps/s"
          + (f" ({sum(before.values()):,} trained before)" if before else ""))

    # 2. sizing: the runs that can finish in the time left, in priority order
    train_time = left() - reserve
    budget_steps = rate * max(train_time, 0)
    chosen, need = [], 0
    for m in ranked:
        cost = sum(per_run - min(done.get(name, 0), per_run) for name in runs_of(args, m))
        if need + cost <= budget_steps or cost == 0:
            chosen.append(m)
            need += cost
    cut = [m for m in ranked if m not in chosen]
    print(f"sizing: {train_time:.0f} s left for training, about {budget_steps:,.0f} steps: {len(chosen)} of "
          f"{len(ranked)} runs ({need:,} steps left in them); cut: {', '.join(cut) or 'none'}")

    # 3. the chosen runs, the same processes, the time left as their budget
    if chosen:
        chosen_mech = [m for m in chosen if m not in controls] or chosen[:0]
        chosen_ctl = [m for m in chosen if m in controls]
        if chosen_mech:
            run_processes(command(args, chosen_mech, chosen_ctl, []), args.processes, left() - reserve,
                          args.out / "logs", "train")
    # 4. timing alone, then the report
    trained = {m for m in chosen
               if all((study / name / "trained.json").exists() for name in runs_of(args, m))}
    timed_mech = [m for m in chosen if m in trained and m not in controls]
    if timed_mech:
        cmd = command(args, timed_mech, [m for m in chosen if m in trained and m in controls], [])
        try:  # bounded: up to 30 s past the budget, so that the report and the caller's packing (which
            # gpu_mechanisms.sh allows 60 s past it) still come back
            subprocess.run(cmd, cwd=ROOT, check=True, stdout=open(args.out / "logs" / "timing.txt", "w"),
                           stderr=subprocess.STDOUT, timeout=max(left(), 0) + 30)
        except subprocess.TimeoutExpired:
            print("timing: not finished in the time left; the report has the timings taken so far")
    subprocess.run([sys.executable, "-m", "stringdiag", "study", "--report", str(study)], cwd=ROOT,
                   check=True)
    if args.tar:
        with tarfile.open(args.out / "study.tgz", "w:gz") as tar:
            tar.add(args.out / "study", "study", filter=lambda t: None if t.name.endswith(
                ("checkpoint.safetensors", ".tmp", ".training.lock")) else t)
            tar.add(args.out / "logs", "logs")
    untrained = [m for m in chosen if m not in trained]
    print(f"done in {time.monotonic() - t0:.0f} s: {len(trained)} run(s) trained"
          + (f"; not finished (continue on the next lend): {', '.join(untrained)}" if untrained else ""))
    return 0


if __name__ == "__main__":
    sys.exit(main())
