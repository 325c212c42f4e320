"""A time budget's verdict says when the budget, not the model, decided it: the steps reached of
those planned, whether the machine was busy (CPU seconds against wall-clock seconds), and what
to give instead (--max-steps, or --clock cpu); a run of fixed steps prints how long it took."""
from __future__ import annotations

import re

import torch

from stringdiag.cli.main import main
from stringdiag.cli.train import cut_short
from stringdiag.train.loop import History

TINY = ["--data", "synthetic", "--layers", "1", "--d-model", "16", "--heads", "2", "--context", "8",
        "--batch-size", "4", "--dims", "k=8", "--eval-every", "1000"]


def _history(step: int, planned: int, wall: float, cpu: float, stopped: bool = True) -> History:
    return History(rows=[{"step": step}], planned=planned, budget_stopped=stopped, wall_seconds=wall, cpu_seconds=cpu)


def test_a_busy_machine_is_named_by_its_cpu_share(monkeypatch):
    monkeypatch.setattr(torch, "get_num_threads", lambda: 2)
    busy = cut_short(_history(46, 1249, wall=149.0, cpu=18.0))  # 18 s of CPU in 149 s on 2 threads: 6 %
    assert busy == (" (--time-budget stopped training after 46 of 1,249 steps; the machine was busy (18.0 s of CPU "
                    "in 149.0 s on 2 threads); for a verdict that does not depend on the machine, give --max-steps "
                    "or --clock cpu)")
    idle = cut_short(_history(442, 1249, wall=96.0, cpu=180.0))  # 94 % of two threads: not busy
    assert "busy" not in idle and "after 442 of 1,249 steps" in idle
    assert cut_short(_history(1249, 1249, 96.0, 1.0, stopped=False)) == ""
    assert "busy" not in cut_short(_history(1, 10, wall=0.3, cpu=0.0))  # too short to judge
    assert cut_short(_history(3, 10, 60.0, 100.0), clock="cpu").endswith("give --max-steps)")


def test_a_cpu_budget_stops_training_and_the_verdict_says_so(tmp_path, capsys):
    # a CPU budget smaller than what start-up already spent: one step, then the verdict explains
    rc = main(["train", "stringdiag:gallery/anatomy.diag", "-d", "M1", *TINY, "--time-budget", "0.01",
               "--clock", "cpu", "--test-tokens", "50", "-o", str(tmp_path / "run")])
    out = capsys.readouterr().out
    assert rc == 0
    (timing,) = [line for line in out.splitlines() if line.startswith("trained ")]
    assert re.fullmatch(r"trained 1 step in [0-9.]+ s \([0-9.]+ s of CPU\)", timing), timing
    last = out.strip().splitlines()[-1]
    assert last.startswith("test perplexity ") and "(--time-budget stopped training after 1 of " in last
    assert last.endswith("give --max-steps)")


def test_fixed_steps_print_how_long_they_took_and_no_budget_note(tmp_path, capsys):
    rc = main(["train", "stringdiag:gallery/anatomy.diag", "-d", "M1", *TINY, "--max-steps", "3",
               "--test-tokens", "50", "-o", str(tmp_path / "run")])
    out = capsys.readouterr().out
    assert rc == 0 and re.search(r"^trained 3 steps in [0-9.]+ s \([0-9.]+ s of CPU\)$", out, re.M), out
    assert "--time-budget" not in out.strip().splitlines()[-1]
