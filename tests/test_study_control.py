"""A study that can tell mechanisms apart: seeds, the attention-free control, the verdict against it,
run manifests for schedulers, and finished runs that must be the runs they claim to be."""
from __future__ import annotations

import json
import shutil
import statistics
from pathlib import Path

import pytest

from stringdiag.cli.main import main
from stringdiag.study import results as R
from stringdiag.study.runner import plan

ROOT = Path(__file__).resolve().parents[1]
ANATOMY = str(ROOT / "gallery" / "anatomy.diag")
TINY = ["--data", "synthetic", "--heads", "2", "--d-model", "8", "--context", "8", "--batch-size", "8",
        "--max-steps", "3", "--eval-every", "3", "--approximator", "linear", "--timing-steps", "1"]

pytestmark = pytest.mark.usefixtures("one_thread")


@pytest.fixture(scope="module")
def seeded(tmp_path_factory) -> Path:
    """M1 and the control at one layer from two seeds, test scored on a 500-token prefix."""
    out = tmp_path_factory.mktemp("seeded") / "s"
    assert main(["study", ANATOMY, "-d", "M1", *TINY, "--layers", "1", "--seeds", "2", "--test-tokens", "500",
                 "-o", str(out)]) == 0
    return out


@pytest.mark.slow
def test_every_seed_is_its_own_run_with_its_own_weights(seeded):
    runs = sorted(p.name for p in seeded.iterdir() if p.is_dir())
    assert runs == ["M1-L1", "M1-L1-s1", "control-L1", "control-L1-s1"]
    a, b = (json.loads((seeded / r / "result.json").read_text()) for r in ("M1-L1", "M1-L1-s1"))
    assert (a["seed"], b["seed"]) == (0, 1) and a["test_tokens"] == b["test_tokens"] == 500
    assert a["test_ppl"] != b["test_ppl"]          # another seed, another model
    assert a["diagram"] == b["diagram"]
    control = json.loads((seeded / "control-L1" / "result.json").read_text())
    assert control["control"] is True and control["uses"] == []


@pytest.mark.slow
def test_the_summary_gives_mean_spread_and_the_seed_paired_difference_against_the_control(seeded):
    runs = [json.loads(p.read_text()) for p in seeded.glob("*/result.json")]  # full precision
    ppl = {(r["mechanism"], r["seed"]): r["test_ppl"] for r in runs}
    lines = (seeded / "summary.csv").read_text().splitlines()
    assert lines[0].split(",") == R.SUMMARY
    table = [dict(zip(R.SUMMARY, line.split(","))) for line in lines[1:]]
    summary = {(t["mechanism"], t["reference"]): t for t in table}
    m1 = [ppl["M1", 0], ppl["M1", 1]]
    diffs = [ppl["M1", k] - ppl["control", k] for k in (0, 1)]
    row = summary["M1", "control"]
    assert row["metric"] == "test_ppl" and row["seeds"] == row["pairs"] == "2"
    assert float(row["mean"]) == pytest.approx(statistics.mean(m1), rel=1e-5)
    assert float(row["std"]) == pytest.approx(statistics.stdev(m1), rel=1e-4)
    assert float(row["diff_mean"]) == pytest.approx(statistics.mean(diffs), rel=1e-4, abs=1e-6)
    half = 12.7062047 * statistics.stdev(diffs) / 2 ** 0.5  # t(0.975, 1 df) from the printed tables
    assert float(row["diff_low"]) == pytest.approx(statistics.mean(diffs) - half, rel=1e-4, abs=1e-6)
    assert float(row["diff_high"]) == pytest.approx(statistics.mean(diffs) + half, rel=1e-4, abs=1e-6)
    assert summary["control", "M1"]["diff_mean"] != ""  # the control against M1 too
    assert "Seed-paired comparisons" in (seeded / "verdict.txt").read_text()


def _row(mech, layers, seed, ppl):
    return {"mechanism": mech, "family": "control" if mech == "control" else "dot", "layers": layers,
            "seed": seed, "parameters": 10, "test_ppl": ppl}


@pytest.mark.parametrize("m1, control, verdict", [
    ([100.0, 101.0, 99.0], [110.0, 111.2, 108.9], "beats"),   # 10 lower on every seed, spread of pairs 0.15
    ([100.0, 110.0, 90.0], [101.0, 109.0, 92.0], "ties"),     # the pairs disagree in sign
    ([112.0, 113.1, 110.9], [100.0, 101.0, 99.0], "loses"),   # worse than no attention on every seed
    ([90.0], [100.0], "one pair"),                             # one seed: no interval, no verdict
    ([100.0, 101.0, 99.0, 97.0], [110.0, 111.2], "beats"),     # only the seeds both have are paired
])
def test_the_verdict_rule(m1, control, verdict):
    rows = [_row("M1", 1, k, p) for k, p in enumerate(m1)] + [_row("control", 1, k, p) for k, p in enumerate(control)]
    (m1_row,) = [r for r in R.summary(rows) if r["mechanism"] == "M1" and r["reference"] == "control"]
    assert m1_row["verdict"] == verdict and m1_row["pairs"] == min(len(m1), len(control))
    text = R.verdict(rows)
    word = {"beats": "beat control", "ties": "cannot be told from control", "loses": "lose to control",
            "one pair": "one seed shared (no interval)"}[verdict]
    assert f"1 {word}: M1 L1" in text
    tested = "no comparison has two seeds" if verdict == "one pair" else "Holm's correction across all 2 comparisons"
    assert tested in text


def test_list_runs_prints_the_manifest_of_a_slurm_array_task(tmp_path, capsys, monkeypatch):
    base = ["study", ANATOMY, "-d", "M0,M1", *TINY, "--layers", "1-2", "--seeds", "3", "-o", str(tmp_path / "s")]
    assert main([*base, "--list-runs", "--json"]) == 0
    every = json.loads(capsys.readouterr().out)
    names = [r["name"] for r in every["runs"]]
    assert names == [r.name for r in plan(["M0", "M1", "control"], [1, 2], 3)] and len(names) == 18
    assert {r["state"] for r in every["runs"]} == {"todo"} and not (tmp_path / "s").exists()
    shares = []
    for task in range(4):  # an sbatch --array=0-3 of four tasks covers every run once
        monkeypatch.setenv("SLURM_ARRAY_TASK_ID", str(task))
        assert main([*base, "--shard-from-env", "SLURM_ARRAY_TASK_ID", "--shards", "4", "--list-runs", "--json"]) == 0
        got = json.loads(capsys.readouterr().out)
        assert got["shard"] == [task + 1, 4]
        shares.append([r["name"] for r in got["runs"]])
    assert sorted(n for s in shares for n in s) == sorted(names)
    monkeypatch.setenv("SLURM_ARRAY_TASK_ID", "4")
    assert main([*base, "--shard-from-env", "SLURM_ARRAY_TASK_ID", "--shards", "4", "--list-runs"]) == 1
    assert "expected a 0-based index below 4" in capsys.readouterr().err


@pytest.mark.slow
def test_a_result_copied_from_another_run_is_refused(seeded, tmp_path, capsys):
    out = tmp_path / "s"
    shutil.copytree(seeded, out)
    shutil.copy(out / "M1-L1-s1" / "result.json", out / "M1-L1" / "result.json")
    rc = main(["study", ANATOMY, "-d", "M1", *TINY, "--layers", "1", "--seeds", "2", "--test-tokens", "500",
               "-o", str(out)])
    err = capsys.readouterr().err
    assert rc == 1 and "M1-L1/result.json is not the result of M1, 1 layer (its seed is 1, not 0)" in err
    assert len(err.strip().splitlines()) == 1


def test_a_mechanism_may_not_take_the_controls_name(tmp_path, capsys):
    src = tmp_path / "m.diag"
    src.write_text(Path(ANATOMY).read_text().replace("diagram M1(", "diagram control("))
    assert main(["study", str(src), "-d", "control", *TINY, "--layers", "1", "-o", str(tmp_path / "s")]) == 1
    assert "the name of the study's control" in capsys.readouterr().err


@pytest.mark.slow
def test_report_refuses_a_result_copied_from_another_run(seeded, tmp_path, capsys):
    out = tmp_path / "s"
    shutil.copytree(seeded, out)
    assert main(["study", "--report", str(out)]) == 0
    capsys.readouterr()
    shutil.copy(out / "M1-L1-s1" / "result.json", out / "M1-L1" / "result.json")
    assert main(["study", "--report", str(out)]) == 1
    err = capsys.readouterr().err
    assert "M1-L1/result.json is not the result of the run M1-L1 (it is M1, 1 layer, seed 1)" in err
    assert len(err.strip().splitlines()) == 1


@pytest.mark.slow
def test_a_result_of_another_recipe_is_refused_by_the_study_and_its_report(seeded, tmp_path, capsys):
    out = tmp_path / "s"
    shutil.copytree(seeded, out)
    path = out / "M1-L1" / "result.json"
    result = json.loads(path.read_text())
    study = json.loads((out / "study.json").read_text())
    from stringdiag.study.runner import recipe_hash
    assert result["recipe"] == recipe_hash(study)   # every run carries its recipe's hash
    study["recipe"]["lr_scale"] = 2.0
    assert recipe_hash(study) != result["recipe"]   # ... which a changed recipe changes
    path.write_text(json.dumps({**result, "recipe": recipe_hash(study)}))
    assert main(["study", "--report", str(out)]) == 1
    err = capsys.readouterr().err
    assert "M1-L1/result.json is not the result of M1, 1 layer (its recipe is" in err
    assert main(["study", ANATOMY, "-d", "M1", *TINY, "--layers", "1", "--seeds", "2", "--test-tokens", "500",
                 "-o", str(out)]) == 1
    assert "M1-L1/result.json is not the result of M1, 1 layer (its recipe is" in capsys.readouterr().err
