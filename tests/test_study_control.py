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


def test_every_seed_is_its_own_run_with_its_own_weights(seeded):
    runs = sorted(p.name for p in seeded.iterdir() if p.is_dir())
    assert runs == ["M1-L1", "M1-L1-s1", "control-L1", "control-L1-s1"]
    a, b = (json.loads((seeded / r / "result.json").read_text()) for r in ("M1-L1", "M1-L1-s1"))
    assert (a["seed"], b["seed"]) == (0, 1) and a["test_tokens"] == b["test_tokens"] == 500
    assert a["test_ppl"] != b["test_ppl"]          # another seed, another model
    assert a["diagram"] == b["diagram"]
    control = json.loads((seeded / "control-L1" / "result.json").read_text())
    assert control["control"] is True and control["uses"] == []


def test_the_summary_gives_mean_and_spread_over_seeds_against_the_control(seeded):
    rows = R.read_csv(seeded / "results.csv")
    ppl = {(r["mechanism"], r["seed"]): r["test_ppl"] for r in rows}
    lines = (seeded / "summary.csv").read_text().splitlines()
    assert lines[0].split(",") == R.SUMMARY
    summary = {line.split(",")[0]: dict(zip(R.SUMMARY, line.split(","))) for line in lines[1:]}
    m1 = [ppl["M1", 0], ppl["M1", 1]]
    ctl = [ppl["control", 0], ppl["control", 1]]
    assert summary["M1"]["metric"] == "test_ppl"
    assert float(summary["M1"]["mean"]) == pytest.approx(statistics.mean(m1), rel=1e-5)
    assert float(summary["M1"]["std"]) == pytest.approx(statistics.stdev(m1), rel=1e-4)
    assert float(summary["M1"]["control_mean"]) == pytest.approx(statistics.mean(ctl), rel=1e-5)
    gap = statistics.mean(ctl) - statistics.mean(m1)
    wins = gap >= 0.03 * statistics.mean(ctl) and gap > 2 * max(statistics.stdev(m1), statistics.stdev(ctl))
    assert summary["M1"]["beats_control"] == str(wins).lower()
    assert summary["control"]["beats_control"] == "" and summary["M1"]["seeds"] == "2"
    assert "beats the control" in (seeded / "verdict.txt").read_text()


def _row(mech, layers, seed, ppl):
    return {"mechanism": mech, "family": "control" if mech == "control" else "dot", "layers": layers,
            "seed": seed, "parameters": 10, "test_ppl": ppl}


@pytest.mark.parametrize("m1, control, beats", [
    ([100.0, 101.0, 99.0], [110.0, 111.0, 109.0], True),    # 9 % better, spread 1
    ([100.0, 101.0, 99.0], [102.0, 103.0, 101.0], False),   # 2 % better: below the 3 % margin
    ([100.0, 110.0, 90.0], [115.0, 116.0, 114.0], False),   # 13 % better, but spread 10: 15 < 2 x 10
    ([105.0], [100.0], False),                              # worse than no attention
    ([90.0], [100.0], True),                                # one seed: the margin alone
])
def test_the_verdict_rule(m1, control, beats):
    rows = [_row("M1", 1, k, p) for k, p in enumerate(m1)] + [_row("control", 1, k, p) for k, p in enumerate(control)]
    (m1_row,) = [r for r in R.summary(rows) if r["mechanism"] == "M1"]
    assert m1_row["beats_control"] is beats
    text = R.verdict(rows)
    assert ("too small to compare" in text) is (not beats)


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
