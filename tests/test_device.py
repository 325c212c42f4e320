"""Training on any device (train/device.py), in any precision, with the kept libraries: a device
that is not there refused before any work, autocast and loss scaling, the DDP backend, the
LambdaLR schedule kept in (and rebuilt for older) checkpoints, tqdm lines in a piped log, one
atomic writer, a test evaluation whose size never depends on the clock, and sizes never guessed."""
from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file, save_file

import stringdiag
from stringdiag import DiagError
from stringdiag.cli.main import main
from stringdiag.train import device as D
from stringdiag.train import loop
from stringdiag.train.loop import TrainConfig, train
from stringdiag.train.model import LanguageModel, Size, Source, head_sizes

ROOT = Path(__file__).resolve().parents[1]
ANATOMY = ROOT / "gallery" / "anatomy.diag"
TINY = ["--data", "synthetic", "--layers", "1", "--heads", "2", "--d-model", "16", "--context", "8",
        "--batch-size", "8", "--approximator", "linear"]


def no_cuda(monkeypatch) -> None:
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)


# -- devices --------------------------------------------------------------------------------
@pytest.mark.parametrize("spec", ["cuda", "cuda:0", "cuda:1"])
def test_cuda_where_there_is_none_fails_before_any_work(spec, tmp_path, capsys, monkeypatch):
    no_cuda(monkeypatch)
    out = tmp_path / "run"
    assert main(["train", str(ANATOMY), "-d", "M1", *TINY, "--device", spec, "-o", str(out)]) == 1
    captured = capsys.readouterr()
    assert captured.err == f"error: --device {spec}: torch sees no CUDA device on this machine (try --device cpu)\n"
    assert captured.out == "" and not out.exists()  # nothing loaded, nothing written


@pytest.mark.parametrize("spec", ["gpu", "cuda:", "cuda:one", "cpu:0", ""])
def test_a_device_of_no_known_form_is_a_usage_error(spec, capsys):
    assert main(["train", str(ANATOMY), "-d", "M1", "--device", spec]) == 2
    assert "argument --device: expected auto, cpu, cuda, cuda:N or mps" in capsys.readouterr().err


def test_auto_is_cuda_when_there_is_one(monkeypatch):
    no_cuda(monkeypatch)
    assert D.resolve("auto") == torch.device("cpu")
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 2)
    monkeypatch.delenv("LOCAL_RANK", raising=False)
    assert D.resolve("auto") == torch.device("cuda", 0) and D.resolve("cuda:1") == torch.device("cuda", 1)
    with pytest.raises(DiagError, match=r"--device cuda:2: this machine has 2 CUDA device\(s\)"):
        D.resolve("cuda:2")
    monkeypatch.setenv("LOCAL_RANK", "1")
    monkeypatch.setenv("WORLD_SIZE", "2")
    assert D.resolve("cuda") == torch.device("cuda", 1)  # under torchrun: the process's own GPU
    with pytest.raises(DiagError, match="under torchrun every process takes its own GPU"):
        D.resolve("cuda:0")


def test_the_process_group_is_nccl_on_cuda_and_gloo_elsewhere(monkeypatch):
    made = []
    monkeypatch.setenv("WORLD_SIZE", "2")
    monkeypatch.setattr(loop.dist, "is_initialized", lambda: False)
    monkeypatch.setattr(loop.dist, "init_process_group", made.append)
    monkeypatch.setattr(loop.dist, "get_rank", lambda: 1)
    assert loop.distributed(torch.device("cuda", 0)) == (1, 2)
    assert loop.distributed(torch.device("cpu")) == (1, 2)
    assert made == ["nccl", "gloo"]


# -- precision, compile, schedule -------------------------------------------------------------
def tokens(n: int = 1500) -> torch.Tensor:
    return torch.randint(12, (n,), generator=torch.Generator().manual_seed(0))


def small() -> LanguageModel:
    return LanguageModel(stringdiag.load(ANATOMY)["M1"], vocab=12, d_model=16, n_layers=1, n_heads=2,
                         approximator="linear")


CFG = dict(context=8, batch_size=4, warmup=5, eval_every=2, valid_tokens=40, device="cpu")


@pytest.mark.parametrize("precision, dtype", [("bf16", torch.bfloat16), ("fp16", torch.float16)])
def test_reduced_precision_autocasts_the_forward_pass(precision, dtype, tmp_path):
    seen = []

    def make():
        m = small()
        m.unembed.register_forward_hook(lambda mod, args, out: seen.append(out.dtype))
        return m

    history = train(make, tokens(), tokens(200), TrainConfig(**CFG, max_steps=4, precision=precision),
                    out_dir=tmp_path, log=lambda _: None)
    assert seen[0] == dtype  # the first call is a training step's
    assert all(torch.isfinite(torch.tensor(r["train_loss"])) for r in history.rows)
    meta = json.loads(load_meta(tmp_path))
    assert ("scaler" in meta) == (precision == "fp16")  # fp16's gradient scaler is checkpointed
    more = train(make, tokens(), tokens(200), TrainConfig(**CFG, max_steps=6, precision=precision),
                 out_dir=tmp_path, resume=True, log=lambda _: None)
    assert [r["step"] for r in more.rows] == [2, 4, 6]


def load_meta(run: Path) -> str:
    from safetensors import safe_open

    with safe_open(str(run / "checkpoint.safetensors"), framework="pt") as f:
        return f.metadata()["stringdiag"]


def test_compile_option_compiles_the_training_model(monkeypatch):
    compiled = []
    monkeypatch.setattr(torch, "compile", lambda m: compiled.append(m) or m)
    train(small, tokens(), tokens(200), TrainConfig(**CFG, max_steps=2, compile=True), log=lambda _: None)
    assert len(compiled) == 1 and isinstance(compiled[0], LanguageModel)


def test_the_schedule_is_a_lambda_lr_kept_in_the_checkpoint(tmp_path):
    history = train(small, tokens(), tokens(200), TrainConfig(**CFG, max_steps=4), out_dir=tmp_path,
                    log=lambda _: None)
    meta = json.loads(load_meta(tmp_path))
    assert meta["scheduler"]["last_epoch"] == 4
    # the rate of each logged step is Vaswani et al.'s at that step, d_model 16
    for row in history.rows:
        s = row["step"]
        assert row["lr"] == 16 ** -0.5 * min(s ** -0.5, s * 5 ** -1.5)


def test_a_checkpoint_from_before_the_schedule_was_kept_resumes_exactly(tmp_path):
    whole = train(small, tokens(), tokens(200), TrainConfig(**CFG, max_steps=6), log=lambda _: None)
    train(small, tokens(), tokens(200), TrainConfig(**CFG, max_steps=4), out_dir=tmp_path, log=lambda _: None)
    path = tmp_path / "checkpoint.safetensors"
    meta = json.loads(load_meta(tmp_path))
    del meta["scheduler"]
    for group in meta["param_groups"]:  # what the loop wrote before: the rate set by hand, no base rate
        del group["initial_lr"]
        group["lr"] = 16 ** -0.5 * min(4 ** -0.5, 4 * 5 ** -1.5)
    save_file(load_file(str(path)), str(path), metadata={"stringdiag": json.dumps(meta)})
    resumed = train(small, tokens(), tokens(200), TrainConfig(**CFG, max_steps=6), out_dir=tmp_path, resume=True,
                    log=lambda _: None)
    assert resumed.rows[-1]["train_loss"] == whole.rows[-1]["train_loss"]
    assert resumed.rows[-1]["lr"] == whole.rows[-1]["lr"]


# -- progress, atomic writes, the test evaluation -----------------------------------------------
def test_a_piped_log_gets_whole_progress_lines(capsys, monkeypatch):
    monkeypatch.setattr(loop, "LINE_EVERY", 0.0)
    train(small, tokens(), tokens(200), TrainConfig(**CFG, max_steps=4), log=print)
    err = capsys.readouterr().err
    assert "\r" not in err and "4/4" in err and all(line.strip() for line in err.splitlines())


def test_one_atomic_writer_for_the_whole_package():
    """Every file is written by syntax.source.write_atomic; only it makes temporary files
    (directories swapped whole, as an export or the corpus cache, are another matter)."""
    users = sorted(str(p.relative_to(ROOT / "stringdiag")) for p in (ROOT / "stringdiag").rglob("*.py")
                   if "mkstemp(" in p.read_text() or "os.replace(" in p.read_text())
    assert users == ["lower/export.py", "syntax/source.py"]
    assert "mkstemp(" not in (ROOT / "stringdiag" / "lower" / "export.py").read_text()


def test_under_a_time_budget_the_test_scores_a_fixed_number_of_targets(tmp_path, capsys, monkeypatch):
    """However long training took, the verdict is over the same targets: the last line does not
    depend on the machine's load."""
    from stringdiag.cli import train as cli_train

    monkeypatch.setattr(cli_train, "BUDGET_TEST_TOKENS", 300)
    for budget in ("1000", "0.001"):
        out = tmp_path / budget
        assert main(["train", str(ANATOMY), "-d", "M1", *TINY, "--max-steps", "3", "--time-budget", budget,
                     "-o", str(out)]) == 0
        result = json.loads((out / "result.json").read_text())
        assert result["test_tokens"] == 300
        last = capsys.readouterr().out.strip().splitlines()[-1]
        assert "over the first 300 of 1,999 targets:" in last, last


# -- sizes ---------------------------------------------------------------------------------
SIZED = stringdiag.loads("""\
dim s : seq
dim d, k : fixed
dim m : fixed = 6
dim w : fixed
diagram Win(x: [s, d]) -> [s, d] {
  learn Q, K : [d] -> [k]
  learn V : [d] -> [m]
  learn O : [m] -> [d]
  e[i, j] = sum_f Q(x)[i, f] * K(x)[j, f]
  a = softmax(where(e, window<s, w>()))
  y[i] = sum_j a[i, j] * V(x)[j]
  return O(y)
}
""", "sized.diag")


def test_every_size_says_where_it_comes_from():
    got = head_sizes(SIZED["Win"], 8, {"w": 2})
    assert got == [Size("d", 8, Source.FEATURE), Size("k", 8, Source.HEAD_WIDTH),
                   Size("m", 6, Source.DECLARED), Size("w", 2, Source.GIVEN)]
    assert head_sizes(SIZED["Win"], 8, {"w": 2, "m": 3})[2] == Size("m", 3, Source.GIVEN)


def test_a_count_with_no_size_and_no_default_is_an_error_naming_it():
    with pytest.raises(DiagError, match=r"'Win' uses 'w' only as a count, not as a width, and nothing sizes it: "
                                        r"give --dims w=N, or declare a default \(dim w : fixed = N\)"):
        head_sizes(SIZED["Win"], 8, {})


def test_the_sizes_line_lists_every_default(tmp_path, capsys):
    assert main(["train", str(ANATOMY), "-d", "M0", *TINY, "--max-steps", "1", "--no-test",
                 "-o", str(tmp_path / "run")]) == 0
    (line,) = [x for x in capsys.readouterr().out.splitlines() if x.startswith("sizes:")]
    assert ", k 8 (head width);" in line
    assert main(["train", str(ANATOMY), "-d", "M0", *TINY, "--max-steps", "1", "--no-test", "--dims", "k=4",
                 "-o", str(tmp_path / "run2")]) == 0
    (line,) = [x for x in capsys.readouterr().out.splitlines() if x.startswith("sizes:")]
    assert ", k 4;" in line


def test_every_unsized_count_is_named():
    big = stringdiag.load(ROOT / "gallery" / "taxonomy_sparse.diag")["BigBird"]  # r: inside a constant, r / n
    with pytest.raises(DiagError, match=r"'BigBird' uses 'w', 'g' and 'r' only as counts, not as widths, and "
                                        r"nothing sizes them: give --dims w=N"):
        head_sizes(big, 8, {})
    assert [s.name for s in head_sizes(big, 8, {"w": 2, "g": 1, "r": 1})] == ["d", "k", "w", "g", "r"]
