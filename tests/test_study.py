"""``stringdiag study``: a sweep of mechanisms x depths, resumable, shardable, tabulated and plotted.

Everything is tiny (d_model 8, two heads, context 8, four steps, the synthetic corpus) so
that a whole study takes seconds; what is checked is the bookkeeping, not the numbers.
"""
from __future__ import annotations

import csv
import json
import re
import shutil
from pathlib import Path

import pytest
import torch

import stringdiag
from stringdiag import DiagError
from stringdiag.cli.main import main
from stringdiag.data import synthetic_corpus
from stringdiag.study import results as R
from stringdiag.study.runner import Recipe, StudyRun, Study, plan, shard
from stringdiag.train.model import LanguageModel

ROOT = Path(__file__).resolve().parents[1]
ANATOMY = str(ROOT / "gallery" / "anatomy.diag")
TINY = ["--data", "synthetic", "--heads", "2", "--d-model", "8", "--context", "8", "--batch-size", "8",
        "--max-steps", "4", "--eval-every", "2", "--approximator", "linear", "--timing-steps", "1"]
STUDY = ["study", ANATOMY, "-d", "M0,M1", *TINY]
RUNS = ["M0-L1", "M0-L2", "M1-L1", "M1-L2", "control-L1", "control-L2"]  # the control always runs
FIGURES = ["perplexity.svg", "perplexity.png", "cost.svg", "cost.png"]
LINE = re.compile(r"error: \S")


pytestmark = pytest.mark.usefixtures("one_thread")


@pytest.fixture(scope="module")
def study(tmp_path_factory) -> Path:
    """M0 and M1 at depths 1 and 2, run once through the command line."""
    out = tmp_path_factory.mktemp("study") / "s"
    assert main([*STUDY, "--layers", "1-2", "-o", str(out)]) == 0
    return out


def read(path: Path) -> list[dict]:
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


def fails(capsys, argv: list, status: int = 1) -> str:
    """One positioned error line and ``status``: 1 for bad input, 2 for a bad command line."""
    rc = main([str(a) for a in argv])
    err = capsys.readouterr().err
    assert rc == status, (rc, err)
    assert "Traceback" not in err and "internal error" not in err, err
    lines = err.splitlines()
    assert len(lines) == 1 and LINE.match(lines[0]), err
    return lines[0]


def mtimes(out: Path, name: str) -> dict[str, int]:
    return {run: (out / run / name).stat().st_mtime_ns for run in RUNS if (out / run / name).exists()}


# -- the table and the figures ---------------------------------------------------------
@pytest.mark.slow
def test_results_csv_has_a_row_per_run_with_the_columns(study):
    with open(study / "results.csv", newline="") as f:
        assert next(csv.reader(f)) == R.COLUMNS
    rows = read(study / "results.csv")
    assert [(r["mechanism"], int(r["layers"])) for r in rows] == [("M0", 1), ("M0", 2), ("M1", 1), ("M1", 2),
                                                                  ("control", 1), ("control", 2)]
    assert [r["family"] for r in rows] == ["linear", "linear", "dot", "dot", "control", "control"]
    assert {r["seed"] for r in rows} == {"0"}
    for r in rows:
        assert int(r["parameters"]) > 0 and int(r["steps"]) == 4 and int(r["timing_repeats"]) == 3
        # a perplexity is at least 1; four steps from a fresh model leave it near the uniform one (the
        # vocabulary's size): far above it, the test scored something else or the model diverged
        assert 1 < float(r["test_ppl"]) < 1.5 * len(synthetic_corpus().vocab)
        assert float(r["seconds_per_epoch"]) > 0 and float(r["seconds_per_epoch_std"]) >= 0
        assert int(float(r["peak_memory_bytes"])) > 0
        assert r["device"] == "cpu"
    by = {(r["mechanism"], r["layers"]): r for r in rows}
    assert int(by["M0", "2"]["parameters"]) > int(by["M0", "1"]["parameters"])
    for depth in ("1", "2"):
        m1, m0 = by["M1", depth], by["M0", depth]
        for col in ("test_ppl_rel", "seconds_per_epoch_rel", "peak_memory_rel"):
            assert float(m1[col]) == 1.0
        assert float(m0["test_ppl_rel"]) == pytest.approx(float(m0["test_ppl"]) / float(m1["test_ppl"]), rel=1e-4)
        assert float(m0["seconds_per_epoch_rel"]) == pytest.approx(
            float(m0["seconds_per_epoch"]) / float(m1["seconds_per_epoch"]), rel=1e-4)
        assert float(m0["seconds_per_epoch_rel_std"]) == pytest.approx(
            float(m0["seconds_per_epoch_std"]) / float(m1["seconds_per_epoch"]), rel=1e-3, abs=1e-9)


@pytest.mark.slow
def test_each_run_has_its_checkpoint_and_result_and_the_study_its_configuration(study):
    import json

    assert sorted(p.name for p in study.iterdir() if p.is_dir()) == RUNS
    for run in RUNS:
        assert (study / run / "checkpoint.safetensors").is_file() and (study / run / "log.csv").is_file()
        result = json.loads((study / run / "result.json").read_text())
        assert len(result["seconds_per_epoch_samples"]) == 3 and result["memory_method"]
    config = json.loads((study / "study.json").read_text())
    assert config["recipe"]["d_model"] == 8 and config["recipe"]["max_steps"] == 4
    assert config["recipe"]["norm_after"] == ["AttApply", "LinAttApply"]
    assert config["corpus"]["name"] == "synthetic-0" and set(config["mechanisms"]) == {"M0", "M1", "control"}


@pytest.mark.slow
def test_figures_are_written_as_svg_and_png(study):
    for name in FIGURES:
        path = study / name
        assert path.is_file() and path.stat().st_size > 1000, name
    assert (study / "perplexity.svg").read_text().lstrip().startswith("<?xml")
    assert (study / "cost.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


# -- resuming ---------------------------------------------------------------------------
@pytest.mark.slow
def test_an_interrupted_study_continues_and_skips_finished_runs(study, tmp_path, capsys):
    out = tmp_path / "s"
    shutil.copytree(study, out)
    for name in ("result.json", "trained.json", "checkpoint.safetensors", "log.csv"):
        (out / "M1-L2" / name).unlink()      # never trained
    (out / "M0-L2" / "result.json").unlink()  # trained, not timed
    for name in ("result.json", "trained.json"):
        (out / "M1-L1" / name).unlink()      # stopped after its last checkpoint, before its test
    results, checkpoints = mtimes(out, "result.json"), mtimes(out, "checkpoint.safetensors")
    capsys.readouterr()
    assert main([*STUDY, "--layers", "1-2", "-o", str(out)]) == 0
    text = capsys.readouterr().out
    assert "run 1/6: M0, 1 layer: finished, skipped" in text
    assert "run 2/6: M0, 2 layers: trained, skipped (not yet timed)" in text
    assert "run 3/6: M1, 1 layer: resuming" in text and "resumed from" not in text  # nothing left to train
    assert "run 4/6: M1, 2 layers" in text and "2 trained now (1 resumed), 4 trained before; 3 timed" in text
    # the finished run was neither retrained nor timed again; no checkpoint was written again
    now = mtimes(out, "result.json")
    assert now["M0-L1"] == results["M0-L1"] and set(now) == set(RUNS)
    now = mtimes(out, "checkpoint.safetensors")
    assert {k: now[k] for k in checkpoints} == checkpoints and "M1-L2" in now
    assert len(read(out / "results.csv")) == 6
    # a third time: nothing to do
    stamps = mtimes(out, "result.json"), mtimes(out, "checkpoint.safetensors")
    assert main([*STUDY, "--layers", "1-2", "-o", str(out)]) == 0
    assert "0 trained now (0 resumed), 6 trained before; 0 timed" in capsys.readouterr().out
    assert (mtimes(out, "result.json"), mtimes(out, "checkpoint.safetensors")) == stamps


@pytest.mark.slow
def test_a_run_stopped_by_the_time_budget_resumes_from_its_checkpoint(tmp_path):
    torch.manual_seed(0)
    corpus = synthetic_corpus()
    heads = stringdiag.load(ANATOMY)
    recipe = Recipe(d_model=8, heads=2, context=8, batch_size=8, max_steps=12, eval_every=4,
                    approximator="linear", timing_steps=1, timing_repeats=3)
    lines: list[str] = []
    study = Study({"M1": heads["M1"]}, corpus, recipe, tmp_path / "s", log=lines.append, figures=False)
    runs = plan(["M1"], [1, 2])
    first = study.run(runs, time_budget=1e-9)   # spent at once: one step, a checkpoint, stop
    assert first.pending == runs and not first.trained and not first.timed
    assert (tmp_path / "s" / "M1-L1" / "checkpoint.safetensors").exists()
    assert not (tmp_path / "s" / "M1-L1" / "result.json").exists() and not (tmp_path / "s" / "M1-L2").exists()
    assert any("time budget spent" in line for line in lines)
    assert R.read_csv(tmp_path / "s" / "results.csv") == []
    lines.clear()
    second = study.run(runs)
    assert second.trained == runs and second.resumed == [runs[0]] and second.timed == runs
    assert any(re.match(r"resumed from .*M1-L1.* at step [1-9]", line) for line in lines)
    meta = stringdiag.train.checkpoint.read_meta(tmp_path / "s" / "M1-L1" / "checkpoint.safetensors")
    assert meta["step"] == 12
    stamp = (tmp_path / "s" / "M1-L1" / "result.json").stat().st_mtime_ns
    third = study.run(runs)
    assert third.skipped == runs and not third.trained and not third.timed
    assert (tmp_path / "s" / "M1-L1" / "result.json").stat().st_mtime_ns == stamp
    rows = R.read_csv(tmp_path / "s" / "results.csv")
    assert [(r["mechanism"], r["layers"], r["steps"]) for r in rows] == [("M1", 1, 12), ("M1", 2, 12)]
    assert [r["test_ppl_rel"] for r in rows] == [1.0, 1.0]


@pytest.mark.slow
def test_resuming_with_another_configuration_is_refused(study, tmp_path, capsys):
    out = tmp_path / "s"
    shutil.copytree(study, out)
    before = mtimes(out, "checkpoint.safetensors")
    err = fails(capsys, [*STUDY, "--layers", "1-2", "-o", out, "--max-steps", "6"])
    assert err.startswith(f"error: {out} holds a study with another configuration (max_steps 4 there, 6 here)")
    assert mtimes(out, "checkpoint.safetensors") == before


def test_a_changed_mechanism_is_refused(tmp_path):
    anatomy = stringdiag.load(ANATOMY)
    recipe = Recipe(d_model=8, heads=2, context=8, batch_size=8, max_steps=2)
    Study({"M1": anatomy["M1"]}, synthetic_corpus(), recipe, tmp_path).open()
    Study({"M0": anatomy["M0"]}, synthetic_corpus(), recipe, tmp_path).open()  # another mechanism joins
    with pytest.raises(DiagError, match=f"'M1' has changed since the study in {tmp_path} began"):
        Study({"M1": anatomy["M0"]}, synthetic_corpus(), recipe, tmp_path).open()
    with pytest.raises(DiagError, match=r"another configuration \(corpus sha256 \"53cf872accd79f69c00\.\.\.\" there, "):
        Study({"M1": anatomy["M1"]}, synthetic_corpus(seed=1), recipe, tmp_path).open()


# -- shards and reports -----------------------------------------------------------------
def test_shards_are_disjoint_and_cover_every_run():
    runs = plan([f"M{i}" for i in range(14)], [1, 2, 3])
    for n in (1, 2, 3, 5, 50):
        shares = [shard(runs, k, n) for k in range(1, n + 1)]
        assert sorted((r for s in shares for r in s), key=runs.index) == runs
        assert sum(len(s) for s in shares) == len(runs)
    assert [r.name for r in runs[:4]] == ["M0-L1", "M0-L2", "M0-L3", "M1-L1"]
    assert runs.index(StudyRun("M2", 1)) < runs.index(StudyRun("M10", 1))


@pytest.mark.slow
def test_two_shards_then_a_merged_report(tmp_path, capsys):
    a, b, merged = tmp_path / "a", tmp_path / "b", tmp_path / "merged"
    assert main([*STUDY, "--layers", "1", "-o", str(a), "--shard", "1/2"]) == 0
    assert main([*STUDY, "--layers", "1", "-o", str(b), "--shard", "2/2"]) == 0
    assert "(shard 2/2 of 3)" in capsys.readouterr().out
    ra, rb = read(a / "results.csv"), read(b / "results.csv")
    assert [r["mechanism"] for r in ra] == ["M0", "control"] and [r["mechanism"] for r in rb] == ["M1"]
    assert ra[0]["seconds_per_epoch_rel"] == "" and ra[0]["test_ppl_rel"] == ""  # no M1 in shard 1
    assert sorted(p.name for p in a.iterdir() if p.is_dir()) == ["M0-L1", "control-L1"]
    assert sorted(p.name for p in b.iterdir() if p.is_dir()) == ["M1-L1"]
    assert main(["study", "--report", str(a), str(b)]) == 0   # merged, by default beside the first
    rows = read(merged / "results.csv")
    assert [r["mechanism"] for r in rows] == ["M0", "M1", "control"]
    assert float(rows[1]["seconds_per_epoch_rel"]) == 1.0 and rows[0]["seconds_per_epoch_rel"] != ""
    assert float(rows[0]["test_ppl_rel"]) == pytest.approx(float(rows[0]["test_ppl"]) / float(rows[1]["test_ppl"]),
                                                           rel=1e-4)
    for name in FIGURES:
        assert (merged / name).is_file()
    assert read(a / "results.csv") == ra   # the shards' own tables are left alone
    err = fails(capsys, ["study", "--report", a, b, "-o", a])
    assert err.startswith(f"error: -o {a}: the merged results would replace that study's own results.csv")


@pytest.mark.slow
def test_report_redraws_the_figures_without_training(study, tmp_path, capsys):
    out = tmp_path / "s"
    shutil.copytree(study, out)
    for name in FIGURES:
        (out / name).unlink()
    before = mtimes(out, "checkpoint.safetensors"), mtimes(out, "result.json")
    table = (out / "results.csv").read_text()
    assert main(["study", "--report", str(out)]) == 0
    assert "6 run(s) from 1 study" in capsys.readouterr().out
    assert all((out / name).is_file() for name in FIGURES)
    assert (mtimes(out, "checkpoint.safetensors"), mtimes(out, "result.json")) == before
    assert (out / "results.csv").read_text() == table


def test_merging_conflicting_results_is_refused(tmp_path):
    row = {"mechanism": "M1", "family": "dot", "layers": 1, "parameters": 10, "steps": 4, "test_ppl": 5.0,
           "seconds_per_epoch": 1.0, "seconds_per_epoch_std": 0.1, "peak_memory_bytes": 100, "peak_memory_std": 1.0}
    assert len(R.merge([("a", [row]), ("b", [dict(row)])])) == 1  # the same run twice, agreeing: once
    with pytest.raises(DiagError, match="M1 with 1 layer\\(s\\), seed 0, has different results in a and b"):
        R.merge([("a", [row]), ("b", [{**row, "test_ppl": 6.0}])])
    notes: list[str] = []  # the same training timed again elsewhere: one row, the first timing, a note
    merged = R.merge([("a", [row]), ("b", [{**row, "seconds_per_epoch": 3.0, "peak_memory_bytes": 90}])], notes=notes)
    assert [(r["seconds_per_epoch"], r["peak_memory_bytes"]) for r in merged] == [(1.0, 100)]
    assert notes == ["M1 with 1 layer(s), seed 0: trained alike in a and b, timed differently; the timing of a is kept"]
    for column in ("parameters", "steps", "family", "test_acc"):  # what training gave must agree (a task's accuracy too)
        with pytest.raises(DiagError, match="has different results in a and b"):
            R.merge([("a", [{**row, "test_acc": 0.5}]), ("b", [{**row, "test_acc": 0.5, column: row.get(column, 0.5) * 2}])])
    (tmp_path / "x.csv").write_text("mechanism,layers\nM1,1\n")
    with pytest.raises(DiagError, match="is not a study's results.csv \\(it lacks the column\\(s\\) family, "):
        R.read_csv(tmp_path / "x.csv")


# -- families and relative values ------------------------------------------------------
def test_families_are_data():
    anatomy = stringdiag.load(ANATOMY)
    used = R.uses(anatomy["M1"])   # every definition, the prelude's (softmax, ...) too
    assert {"AttApply", "AttPrep", "softmax"} <= set(used) and "LinAttPrep" not in used
    assert R.family(R.uses(anatomy["M0"])) == "linear" and R.family(R.uses(anatomy["M1"])) == "dot"
    mixed = {"AttPrep", "LinAttApply"}
    assert R.family(mixed) == "both" and R.family({"ConcatFF"}) == "none"
    assert R.family(R.uses(anatomy["M1"]), {"softmax": ("AttPrep",), "values": ("AttApply",)}) == "both"
    assert R.family(R.uses(anatomy["M1"]), {"mine": ("AttPrep", "AttApply")}) == "mine"


def test_relative_columns_are_empty_without_the_reference():
    rows = [{"mechanism": m, "layers": 1, "test_ppl": p, "seconds_per_epoch": s, "seconds_per_epoch_std": 0.5,
             "peak_memory_bytes": 100, "peak_memory_std": 0.0} for m, p, s in (("M0", 8.0, 4.0), ("M1", 4.0, 2.0))]
    m0, m1 = R.relative(rows)
    assert (m0["test_ppl_rel"], m0["seconds_per_epoch_rel"], m0["seconds_per_epoch_rel_std"]) == (2.0, 2.0, 0.25)
    assert (m1["test_ppl_rel"], m1["seconds_per_epoch_rel"], m1["peak_memory_rel"]) == (1.0, 1.0, 1.0)
    (alone,) = R.relative(rows[:1])
    assert alone["test_ppl_rel"] is None and alone["peak_memory_rel_std"] is None


# -- --norm-after ------------------------------------------------------------------------
def test_layer_norms_go_after_the_definitions_the_user_names():
    anatomy = stringdiag.load(ANATOMY)

    def norms(head, **kw):
        torch.manual_seed(0)
        m = LanguageModel(anatomy[head], vocab=12, d_model=16, n_layers=1, n_heads=2, approximator="linear", **kw)
        return len([x for x in m.layers[0].heads.modules() if isinstance(x, torch.nn.LayerNorm)]), m.config

    count, config = norms("M1")   # the default: App. C's AttApply and LinAttApply
    assert count == 1 and config["norm_after"] == ["AttApply"]
    assert norms("M1", norm_after=()) == (0, {**config, "norm_after": []})
    assert norms("M0", norm_after=("LinAttApply",))[0] == 1
    assert norms("M0", norm_after=("AttApply",))[0] == 0       # M0 has no AttApply
    assert norms("M0", norm_after=("LinAttPrep",))[0] == 2     # one after each of its two outputs
    with pytest.raises(DiagError, match=r"--norm-after: 'AttPrep' outputs \[s, s\]; a layer norm needs a last axis"):
        norms("M1", norm_after=("AttPrep",))


def test_train_and_study_take_norm_after(tmp_path, capsys):
    err = fails(capsys, ["train", ANATOMY, "-d", "M1", *TINY[:-2], "--norm-after", "Nope", "-o", tmp_path / "t"])
    assert err == f"error: --norm-after: no diagram named 'Nope' in {ANATOMY}"
    err = fails(capsys, [*STUDY, "--norm-after", "AttApply,", "-o", tmp_path / "s"], status=2)
    assert err == "error: --norm-after: expected comma-separated names, got ''"
    assert main(["train", ANATOMY, "-d", "M1", *TINY[:-2], "--norm-after", "", "--no-test",
                 "-o", str(tmp_path / "t")]) == 0
    meta = stringdiag.train.checkpoint.read_meta(tmp_path / "t" / "checkpoint.safetensors")
    assert meta["config"]["norm_after"] == []


# -- bad command lines -----------------------------------------------------------------
@pytest.mark.parametrize("extra, message", [
    (["--shard", "3/2"], "error: argument --shard: expected K/N with 1 <= K <= N, such as 1/2, got '3/2'"),
    (["--shard", "0/2"], "error: argument --shard: expected K/N with 1 <= K <= N, such as 1/2, got '0/2'"),
    (["--shard", "1"], "error: argument --shard: expected K/N with 1 <= K <= N, such as 1/2, got '1'"),
    (["--shard", "1/x"], "error: argument --shard: expected K/N with 1 <= K <= N, such as 1/2, got '1/x'"),
    (["--layers", "0"], "error: argument --layers: expected layer counts such as 1-3 or 1,2,4 (each from 1 to 1024), "
                        "got '0'"),
    (["--layers", "3-1"], "error: argument --layers: expected layer counts such as 1-3 or 1,2,4 (each from 1 to "
                          "1024), got '3-1' (a range runs upwards)"),
    (["--layers", "1-x"], "error: argument --layers: expected layer counts such as 1-3 or 1,2,4 (each from 1 to "
                          "1024), got '1-x'"),
    (["--layers", "1-2000"], "error: argument --layers: expected layer counts such as 1-3 or 1,2,4 (each from 1 to "
                             "1024), got '1-2000'"),
    (["--timing-repeats", "2"], "error: argument --timing-repeats: expected an integer from 3 to 1000 (at least 3), "
                                "got '2'"),
])
def test_bad_shard_and_layers_are_one_line_errors(capsys, tmp_path, extra, message):
    err = fails(capsys, [*STUDY, "-o", tmp_path / "s", *extra], status=2)  # a bad command line
    assert err == f"{message} (see 'stringdiag study --help')"
    assert not (tmp_path / "s").exists()


@pytest.mark.parametrize("argv, message", [
    (["study"], "error: the following arguments are required: FILE (or --report DIR ...)"),
    (["study", ANATOMY, "--report", "x"], f"error: --report reads study directories, not a FILE (got {ANATOMY})"),
    (["study", "--report", "/nonexistent/x"], "error: /nonexistent/x holds no results.csv"),
    ([*STUDY, "-d", "AttApply"], "error: 'AttApply' cannot serve as an attention head"),
    ([*STUDY, "-d", "M9"], "error: no diagram named 'M9'"),
    ([*STUDY, "--families", "linear"], "error: --families: expected FAMILY=NAME,NAME;FAMILY=..., got 'linear'"),
    ([*STUDY, "--families", "both=AttPrep"], "error: --families: 'both' is reserved"),
    ([*STUDY, "--families", "a=AttPrep;b=AttPrep"], "error: --families: 'AttPrep' is in two families ('a' and 'b')"),
    ([*STUDY, "--families", "a=Nope"], "error: --families: no diagram named 'Nope'"),
    ([*STUDY, "--test-stride", "9"], "error: --test-stride 9: at most --context (8)"),
    ([*STUDY, "--dims", "d=4"], "error: --dims: 'd' is the heads' feature dimension"),
    ([*STUDY, "--dims", "s=4"], "error: --dims: 's' is not a fixed dimension of"),
])
def test_bad_study_inputs_are_one_line_errors(capsys, tmp_path, argv, message):
    usage = argv == ["study"] or "--report" in argv and len(argv) > 3 or argv[-1] == "linear"
    assert fails(capsys, [*argv, "-o", tmp_path / "s"], status=2 if usage else 1).startswith(message)
    assert not (tmp_path / "s").exists()


# -- where a study trains ----------------------------------------------------------------
@pytest.mark.slow
def test_each_run_records_the_device_it_trained_on(study):
    want = "cuda:0" if torch.cuda.is_available() else "cpu"  # --device auto
    for run in RUNS:
        assert json.loads((study / run / "trained.json").read_text())["train_device"] == want


@pytest.mark.skipif(torch.cuda.is_available(), reason="this machine has CUDA")
def test_a_device_that_is_not_there_is_refused_before_any_work(capsys, tmp_path):
    line = fails(capsys, [*STUDY, "--device", "cuda", "-o", tmp_path / "s"])
    assert line.startswith("error: --device cuda: torch sees no CUDA device on this machine"), line
    assert not (tmp_path / "s").exists()
    assert "expected auto, cpu, cuda, cuda:N or mps" in fails(capsys, [*STUDY, "--device", "tpu"], status=2)


def test_the_device_is_not_part_of_the_recipe(tmp_path):
    """A study begun on one machine continues on another: the runs' identity is the same."""
    anatomy = stringdiag.load(ANATOMY)
    recipe = Recipe(d_model=8, heads=2, context=8, batch_size=8, max_steps=2, eval_every=2, approximator="linear")
    here = Study({"M1": anatomy["M1"]}, synthetic_corpus(), recipe, tmp_path, device="cpu")
    there = Study({"M1": anatomy["M1"]}, synthetic_corpus(), recipe, tmp_path, device="cuda")
    assert here.identity(StudyRun("M1", 1)) == there.identity(StudyRun("M1", 1))
