"""Seed-paired statistics of a study, against independent references: Student's t by numerical
integration of its density (mpmath), printed quantile tables, Holm's correction written out from its
definition, paired differences recomputed with the standard library; several controls in one study;
two processes working through one study."""
from __future__ import annotations

import json
import math
import os
import statistics
import subprocess
import sys
from pathlib import Path

import mpmath
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from stringdiag.cli.main import main
from stringdiag.study import paired
from stringdiag.study import results as R
from stringdiag.study.runner import LOCK, claim, plan, release

ROOT = Path(__file__).resolve().parents[1]
ANATOMY = str(ROOT / "gallery" / "anatomy.diag")
TINY = ["--data", "synthetic", "--heads", "2", "--d-model", "8", "--context", "8", "--batch-size", "8",
        "--max-steps", "2", "--eval-every", "2", "--approximator", "linear", "--timing-steps", "1",
        "--test-tokens", "200"]


def _density_mass(t: float, df: int) -> float:
    """P(|T| <= t) by integrating Student's density: no closed form shared with the code."""
    c = mpmath.gamma((df + 1) / 2) / (mpmath.sqrt(df * mpmath.pi) * mpmath.gamma(df / 2))
    return float(2 * mpmath.quad(lambda x: c * (1 + x * x / df) ** (-(df + 1) / 2), [0, t]))


@settings(max_examples=60, deadline=None)
@given(st.integers(1, 30), st.floats(0, 60))
def test_t_distribution_against_its_integrated_density(df, t):
    assert paired.t_cdf_abs(t, df) == pytest.approx(_density_mass(t, df), abs=1e-10)


@pytest.mark.parametrize("df, q975, q995", [(1, 12.706, 63.657), (2, 4.303, 9.925), (3, 3.182, 5.841),
                                            (4, 2.776, 4.604), (9, 2.262, 3.250), (29, 2.045, 2.756)])
def test_t_quantiles_match_the_printed_tables(df, q975, q995):
    assert paired.t_quantile(0.975, df) == pytest.approx(q975, abs=5e-4)
    assert paired.t_quantile(0.995, df) == pytest.approx(q995, abs=5e-4)


def _holm_by_definition(ps: list[float]) -> list[float]:
    """adjusted p_(i) = max over j <= i of min(1, (m - j + 1) p_(j)), ranks from 1."""
    m = len(ps)
    ranked = sorted(range(m), key=lambda i: ps[i])
    out = [0.0] * m
    for i, k in enumerate(ranked, start=1):
        out[k] = max(min(1.0, (m - j + 1) * ps[ranked[j - 1]]) for j in range(1, i + 1))
    return out


@settings(max_examples=100, deadline=None)
@given(st.lists(st.floats(0, 1), min_size=1, max_size=30))
def test_holm_against_its_definition(ps):
    assert paired.holm(ps) == pytest.approx(_holm_by_definition(ps))


def _rows(values: dict[tuple[str, int], dict[int, float]]) -> list[dict]:
    return [{"mechanism": m, "family": "control" if m.startswith("C") else "dot", "layers": n, "seed": s,
             "parameters": 1, "test_ppl": v} for (m, n), seeds in values.items() for s, v in seeds.items()]


@settings(max_examples=40, deadline=None)
@given(st.dictionaries(st.sampled_from([("M1", 1), ("M2", 1), ("C", 1), ("Cmix", 1), ("M2", 2), ("C", 2)]),
                       st.dictionaries(st.integers(0, 4), st.floats(50, 500), min_size=1, max_size=5),
                       min_size=2))
def test_comparisons_recomputed_by_hand(values):
    rows = _rows(values)
    refs = [m for m in ("M1", "C", "Cmix") if any(k[0] == m for k in values)]
    got = {(c.mechanism, c.layers, c.reference): c for c in paired.comparisons(rows, refs, "test_ppl")}
    want = {}
    for (mech, n), mine in values.items():
        for ref in refs:
            theirs = values.get((ref, n))
            if ref == mech or theirs is None or not set(mine) & set(theirs):
                continue
            seeds = sorted(set(mine) & set(theirs))
            want[mech, n, ref] = [mine[s] - theirs[s] for s in seeds]
    assert set(got) == set(want)
    tested = [k for k, d in want.items() if len(d) > 1]
    holm = dict(zip(tested, _holm_by_definition([got[k].p for k in tested])))
    for key, diffs in want.items():
        c = got[key]
        assert c.pairs == len(diffs) and c.mean == pytest.approx(statistics.mean(diffs))
        if len(diffs) == 1:
            assert c.low is None and c.verdict == c.verdict_95 == "one pair"
            continue
        se = statistics.stdev(diffs) / math.sqrt(len(diffs))
        if se == 0:
            continue
        t = statistics.mean(diffs) / se
        assert c.p == pytest.approx(1 - _density_mass(abs(t), len(diffs) - 1), abs=1e-8)
        assert c.p_holm == pytest.approx(holm[key], abs=1e-8)
        side = "beats" if c.mean < 0 else "loses"
        assert c.verdict == (side if holm[key] < 0.05 else "ties")
        assert c.verdict_95 == (side if c.low > 0 or c.high < 0 else "ties")
        assert c.high - c.mean == pytest.approx(paired.t_quantile(0.975, len(diffs) - 1) * se)


def test_accuracy_is_better_when_higher():
    rows = [{"mechanism": m, "family": "control" if m == "control" else "dot", "layers": 1, "seed": s,
             "parameters": 1, "test_ppl": 2.0, "test_acc": a}
            for m, accs in (("M1", [0.9, 0.91, 0.92]), ("control", [0.5, 0.52, 0.49])) for s, a in enumerate(accs)]
    (c,) = [c for c in paired.comparisons(rows, ["control"], "test_acc") if c.mechanism == "M1"]
    assert c.better and c.verdict == "beats"


@pytest.mark.slow
def test_a_study_with_several_controls_compares_every_mechanism_with_each(tmp_path):
    out = tmp_path / "s"
    assert main(["study", ANATOMY, "-d", "M1", *TINY, "--layers", "1", "--seeds", "2", "--control", "mixing",
                 "-o", str(out)]) == 0
    runs = sorted(p.name for p in out.iterdir() if p.is_dir())
    assert runs == sorted(f"{m}-L1{s}" for m in ("M1", "control", "RunningMean", "ShortConv", "CausalMixer")
                          for s in ("", "-s1"))
    mix = json.loads((out / "RunningMean-L1" / "result.json").read_text())
    assert mix["control"] is True and mix["uses"] == []
    table = [dict(zip(R.SUMMARY, line.split(","))) for line in (out / "summary.csv").read_text().splitlines()[1:]]
    refs = {t["reference"] for t in table if t["mechanism"] == "M1"}
    assert refs == {"control", "RunningMean", "ShortConv", "CausalMixer"}
    text = (out / "verdict.txt").read_text()
    assert "Against RunningMean" in text and "Against CausalMixer" in text
    assert not list(out.glob(f"*/{LOCK}"))  # every claim released


@pytest.mark.parametrize("spec, message", [
    ("a.diag", "expected [NAME=]FILE:DIAGRAM"),
    ("x=stringdiag:gallery/control.diag:TokenFF,x=stringdiag:gallery/control.diag:RunningMean",
     "two controls are named 'x'"),
    ("1x=stringdiag:gallery/control.diag:TokenFF", "expected [NAME=]FILE:DIAGRAM"),
    ("stringdiag:gallery/control.diag:Nope", "Nope"),
])
def test_bad_control_specs_are_one_line_errors(tmp_path, capsys, spec, message):
    assert main(["study", ANATOMY, "-d", "M1", *TINY, "--layers", "1", "--control", spec, "-o",
                 str(tmp_path / "s")]) == 1
    err = capsys.readouterr().err
    assert message in err and len(err.strip().splitlines()) == 1 and "Traceback" not in err


def test_a_run_held_by_a_live_process_is_not_taken_and_a_dead_ones_lock_is(tmp_path):
    d = tmp_path / "M1-L1"
    holder = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        d.mkdir()
        (d / LOCK).write_text(str(holder.pid))
        assert not claim(d)
    finally:
        holder.kill()
        holder.wait()
    assert claim(d) and (d / LOCK).read_text() == str(os.getpid())  # its holder is gone: taken over
    release(d)
    assert not (d / LOCK).exists()


@pytest.mark.slow
def test_two_processes_share_one_study_without_training_a_run_twice(tmp_path):
    out = tmp_path / "s"
    cmd = [sys.executable, "-m", "stringdiag", "study", ANATOMY, "-d", "M0,M1", *TINY, "--layers", "1",
           "--seeds", "2", "--threads", "1", "-o", str(out)]
    procs = [subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True) for _ in range(2)]
    logs = [p.communicate(timeout=300)[0] for p in procs]
    assert [p.returncode for p in procs] == [0, 0], logs
    trained = [line for log in logs for line in log.splitlines() if ": test perplexity " in line and "after" in line]
    names = sorted(line.split(":")[0] for line in trained)
    assert len(names) == 6 and len(set(names)) == 6, logs  # each of the 6 runs trained by exactly one process
    assert main(["study", ANATOMY, "-d", "M0,M1", *TINY, "--layers", "1", "--seeds", "2", "-o", str(out)]) == 0
    assert len(list(out.glob("*/result.json"))) == 6  # the next command times what is left


@pytest.mark.slow
def test_plan_lists_the_runs_left_with_their_cpu_hours_and_trains_nothing(tmp_path, capsys):
    out = tmp_path / "s"
    base = ["study", ANATOMY, "-d", "M0,M1", *TINY, "--layers", "1-2", "--seeds", "2", "-o", str(out)]
    assert main([*base, "--plan", "--json"]) == 0
    got = json.loads(capsys.readouterr().out)
    assert [r["name"] for r in got["runs"]] == [r.name for r in plan(["M0", "M1", "control"], [1, 2], 2)]
    assert all(r["steps_left"] == 2 and r["cpu_hours"] > 0 for r in got["runs"])
    assert got["cpu_hours"] == pytest.approx(sum(r["cpu_hours"] for r in got["runs"]))
    assert not out.exists()  # nothing trained, nothing written
    assert main(["study", ANATOMY, "-d", "M0", *TINY, "--layers", "1", "-o", str(out)]) == 0  # M0-L1, control-L1
    capsys.readouterr()
    assert main([*base, "--plan"]) == 0
    text = capsys.readouterr().out
    assert "M0-L1 " not in text and "M0-L2 " in text and "(2 trained before)" in text


@pytest.mark.slow
def test_the_gpu_script_runs_end_to_end_on_the_cpu(tmp_path):
    """benchmarks/gpu/mechanisms_study.py: timing shard, sizing, training, timing alone, report."""
    out = tmp_path / "w"
    got = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "gpu" / "mechanisms_study.py"), "--device", "cpu",
                          "--tiny", "--budget", "60", "--pilot", "6", "--processes", "2", "--threads", "1",
                          "--mechanisms", "M0,M1", "--controls", "control,RunningMean", "--tar", "-o", str(out)],
                         capture_output=True, text=True, timeout=240, cwd=ROOT)
    assert got.returncode == 0, got.stdout + got.stderr
    assert "pilot:" in got.stdout and "sizing:" in got.stdout and "4 run(s) trained" in got.stdout
    rows = R.read_csv(out / "study" / "results.csv")
    assert sorted(r["mechanism"] for r in rows) == ["M0", "M1", "RunningMean", "control"]
    assert all(r["seconds_per_epoch"] is not None for r in rows)  # timed
    with __import__("tarfile").open(out / "study.tgz") as tar:
        names = tar.getnames()
    assert "study/results.csv" in names and not any(n.endswith("checkpoint.safetensors") for n in names)


@pytest.mark.slow
def test_retime_times_every_trained_run_again_in_cpu_time(tmp_path, capsys):
    out = tmp_path / "s"
    base = ["study", ANATOMY, "-d", "M1", *TINY, "--layers", "1", "-o", str(out)]
    assert main(base) == 0
    before = json.loads((out / "M1-L1" / "result.json").read_text())
    assert before["timing_clock"] == "cpu" and len(before["seconds_per_epoch_samples"]) == 3
    spent = __import__("time").process_time()
    assert main([*base, "--retime"]) == 0
    spent = __import__("time").process_time() - spent
    assert "timed 2 trained run(s) again" in capsys.readouterr().out
    after = json.loads((out / "M1-L1" / "result.json").read_text())
    assert after["seconds_per_epoch_samples"] != before["seconds_per_epoch_samples"]
    assert after["test_ppl"] == before["test_ppl"]  # only the timing is new
    # CPU seconds of a step cannot exceed the CPU time the whole command took
    steps = after["timing_steps"] * 3 * 2 / after["steps_per_epoch"]
    assert 0 < sum(after["seconds_per_epoch_samples"]) * steps / 3 / 2 < spent
    rows = R.read_csv(out / "results.csv")
    assert {r["timing_clock"] for r in rows} == {"cpu"}


@pytest.mark.slow
def test_report_reads_a_studys_runs_not_a_stale_table(tmp_path, capsys):
    out = tmp_path / "s"
    assert main(["study", ANATOMY, "-d", "M1", *TINY, "--layers", "1", "-o", str(out)]) == 0
    (out / "results.csv").write_text((out / "results.csv").read_text().splitlines()[0] + "\n")  # a stale table
    assert main(["study", "--report", str(out)]) == 0
    rows = R.read_csv(out / "results.csv")
    assert sorted(r["mechanism"] for r in rows) == ["M1", "control"]
    assert "Against control" in (out / "verdict.txt").read_text()


def test_tables_show_each_paired_difference_and_its_interval_recomputed_by_hand():
    """tables.md's cells against the differences computed here: mean, 95 % interval with the printed
    t quantile for 2 degrees of freedom (4.303), one-seed cells without an interval, groups shown."""
    from stringdiag.study.markdown import markdown

    values = {("M1", 1): {0: 230.0, 1: 228.0, 2: 233.0}, ("M2", 1): {0: 220.0, 1: 219.0, 2: 225.0},
              ("C", 1): {0: 236.0, 1: 237.5, 2: 235.0}, ("M2", 2): {0: 210.0}, ("C", 2): {0: 231.0}}
    rows = _rows(values)
    text = markdown(R.summary(rows), R.references(rows), {"M1": "a", "M2": "b", "C": "c"})
    diffs = [220.0 - 230.0, 219.0 - 228.0, 225.0 - 233.0]
    half = 4.303 * statistics.stdev(diffs) / math.sqrt(3)
    m = statistics.mean(diffs)
    want = f"{m:+.1f} [{m - half:+.1f}, {m + half:+.1f}]"
    line = next(l for l in text.splitlines() if l.startswith("| M2 | b |"))
    assert want in line and line.count("|") == 8  # mechanism group family seeds ppl −M1 −C
    assert f"| {statistics.mean([220.0, 219.0, 225.0]):.1f} ± {statistics.stdev([220.0, 219.0, 225.0]):.1f} |" in line
    depth2 = text.split("## 2 layers")[1]
    assert "| M2 | b | dot | 1 | 210.0 | – | -21.0 (one seed) |" in depth2
    assert text.index("## 1 layer") < text.index("## 2 layers")


def test_plan_times_two_depths_of_each_mechanism_and_extrapolates_the_deeper_ones():
    """A step's cost is affine in the depth (one block repeated): the line through depths 1 and 2
    gives 3, 4, 5; never below the deeper measured one (noise can make depth 2 the cheaper)."""
    from types import SimpleNamespace as Run

    from stringdiag.cli.study import extrapolated, measured_depths

    todo = [Run(mechanism=m, layers=d) for m in ("M0", "M1") for d in (3, 1, 5, 2)] + [Run(mechanism="c", layers=4)]
    assert measured_depths(todo) == [("M0", 1), ("M0", 2), ("M1", 1), ("M1", 2), ("c", 4)]
    per_step = {("M0", 1): 1.0, ("M0", 2): 1.5, ("M1", 1): 2.0, ("M1", 2): 1.9, ("c", 4): 0.3}
    assert [extrapolated(per_step, "M0", d) for d in (1, 2, 3, 5)] == [1.0, 1.5, 2.0, 3.0]
    assert extrapolated(per_step, "M1", 4) == 1.9 and extrapolated(per_step, "c", 4) == 0.3
