"""No internal errors: every bad command line, file, size or checkpoint is one ``error:`` line.

Each case runs the command line (in-process, and a few as a real process) and asserts
exit status 1 (2 for a bad command line) and a stderr of exactly one line, ``error: MESSAGE`` or
``FILE:LINE:COL: error: MESSAGE``: never a traceback, never "internal error" (status 3).
"""
from __future__ import annotations

import argparse
import csv
import errno
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from stringdiag.cli.main import build_parser, main
from stringdiag.train import checkpoint

ROOT = Path(__file__).resolve().parents[1]
ANATOMY = str(ROOT / "gallery" / "anatomy.diag")
LONG = "a" * 300  # past NAME_MAX (255)
ENOSPC = OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
LINE = re.compile(r"(error: |[^\n]+:\d+:\d+: error: )\S")


pytestmark = pytest.mark.usefixtures("one_thread")


def one_line(err: str) -> str:
    assert "Traceback" not in err and "internal error" not in err, err
    lines = err.splitlines()
    assert len(lines) == 1, err
    assert LINE.match(lines[0]), err
    return lines[0]


def fails(capsys, argv: list[str], code: int = 1) -> str:
    """Run the command line; it must fail cleanly, with status ``code`` (2: the command line
    itself is wrong). Returns its one line of stderr."""
    rc = main([str(a) for a in argv])
    err = capsys.readouterr().err
    assert rc == code, (rc, err)
    return one_line(err)


# -- --dims ---------------------------------------------------------------------------
COMPILE = ["compile", ANATOMY, "-d", "M1"]


@pytest.mark.parametrize("dims, message", [
    ("d=²,k=2", "error: --dims: expected NAME=POSITIVE_INTEGER, got 'd=²'"),
    ("d=١٢,k=2", "error: --dims: expected NAME=POSITIVE_INTEGER, got 'd=١٢'"),
    ("d=1_000,k=2", "error: --dims: expected NAME=POSITIVE_INTEGER, got 'd=1_000'"),
    ("d=+4,k=2", "error: --dims: expected NAME=POSITIVE_INTEGER, got 'd=+4'"),
    ("d=0,k=2", "error: --dims: expected NAME=POSITIVE_INTEGER, got 'd=0'"),
    ("d=-3,k=2", "error: --dims: expected NAME=POSITIVE_INTEGER, got 'd=-3'"),
    ("d=8,k=2,d=9", "error: --dims: 'd' is given twice (d=8 and d=9)"),
    ("d=8,k=2,zz=3", "error: --dims: 'zz' is not a dimension of 'M1' or of its file (it takes d, k, s)"),
    ("d=99999999999999999999999,k=2", "error: --dims: d=99999999999999999999999 is too large (at most 2^63 - 1)"),
])
def test_bad_dims(capsys, dims, message):
    usage = "is not a dimension" not in message  # only that one needs the file to tell
    assert fails(capsys, COMPILE + ["--dims", dims], 2 if usage else 1) == message


@pytest.mark.parametrize("file, name", [("anatomy.diag", "M1"), ("lm.diag", "GPT"), ("lm.diag", "Llama")])
def test_an_unknown_dims_name_lists_every_name_dims_takes(file, name):
    """Brute force: every dimension any gallery file declares, tried one by one; the error's list
    is exactly the names that pass."""
    import stringdiag
    from stringdiag import DiagError
    from stringdiag.cli.options import parse_dims

    d = stringdiag.load(ROOT / "gallery" / file)[name]
    candidates = {"q"} | {n for f in (ROOT / "gallery").glob("*.diag") for n in stringdiag.load(f).dims}
    passing = set()
    for n in sorted(candidates):
        try:
            parse_dims(f"{n}=3", d)
            passing.add(n)
        except DiagError:
            pass
    with pytest.raises(DiagError, match=r"\(it takes (.*)\)$") as e:
        parse_dims("zzz=3", d)
    listed = re.search(r"\(it takes (.*)\)$", str(e.value)).group(1).split(", ")
    assert set(listed) == passing and len(listed) == len(passing)


@pytest.mark.parametrize("dims, approximator", [("d=1000000000000,k=4", "linear"),
                                                ("d=1000000000000,k=1000000000000", "mlp")])
def test_compile_refuses_sizes_it_cannot_allocate(capsys, dims, approximator):
    err = fails(capsys, COMPILE + ["--dims", dims, "--approximator", approximator])
    assert re.fullmatch(r"error: these sizes need about [0-9.e+]+ [kMGTPEZY]B for [0-9,]+ parameters; this machine "
                        r"has .* of memory available \(choose smaller --dims or model sizes\)", err), err


# -- numeric options ------------------------------------------------------------------
TRAIN = ["train", ANATOMY, "-d", "M1", "--data", "synthetic", "--layers", "1", "--heads", "2", "--d-model", "16",
         "--context", "8", "--batch-size", "8", "--approximator", "linear", "--eval-every", "2", "--no-test"]
NORMALIZE = ["normalize", ANATOMY, "-d", "M1", "--rule", "mul_one"]


@pytest.mark.parametrize("argv, option, value, message", [
    (TRAIN, "--eval-every", "0", "expected a positive integer (at least 1), got '0'"),
    (TRAIN, "--eval-every", "²", "expected a positive integer, got '²'"),
    (TRAIN, "--layers", "0", "expected a positive integer (at least 1), got '0'"),
    (TRAIN, "--layers", "1000000000", "expected a positive integer (at most 1024), got '1000000000'"),
    (TRAIN, "--heads", "-1", "expected a positive integer (at least 1), got '-1'"),
    (TRAIN, "--d-model", "0", "expected a positive integer (at least 1), got '0'"),
    (TRAIN, "--d-ff", "0", "expected a positive integer (at least 1), got '0'"),
    (TRAIN, "--context", "0", "expected a positive integer (at least 1), got '0'"),
    (TRAIN, "--batch-size", "0", "expected a positive integer (at least 1), got '0'"),
    (TRAIN, "--epochs", "1.5", "expected a positive integer, got '1.5'"),
    (TRAIN, "--max-steps", "0", "expected a positive integer (at least 1), got '0'"),
    (TRAIN, "--warmup", "0", "expected a positive integer (at least 1), got '0'"),
    (TRAIN, "--seed", "-1", "expected a seed from 0 to 4294967295 (at least 0), got '-1'"),
    (TRAIN, "--seed", "18446744073709551616",
     "expected a seed from 0 to 4294967295 (at most 4294967295), got '18446744073709551616'"),
    (TRAIN, "--lr-scale", "nan", "expected a positive number, got 'nan'"),
    (TRAIN, "--lr-scale", "inf", "expected a positive number, got 'inf'"),
    (TRAIN, "--lr-scale", "1e999", "expected a positive number, got '1e999', which is too large"),
    (TRAIN, "--lr-scale", "0", "expected a positive number (greater than 0 and at most 1e+06), got '0'"),
    (TRAIN, "--lr-scale", "-1", "expected a positive number (greater than 0 and at most 1e+06), got '-1'"),
    (TRAIN, "--time-budget", "nan", "expected a positive number of seconds, got 'nan'"),
    (TRAIN, "--time-budget", "-5", "expected a positive number of seconds (greater than 0), got '-5'"),
    (NORMALIZE, "--max-rounds", "-1", "expected a positive integer (at least 1), got '-1'"),
    (NORMALIZE, "--max-rounds", "３", "expected a positive integer, got '３'"),
    (NORMALIZE, "--max-boxes", "0", "expected a positive integer (at least 1), got '0'"),
])
def test_bad_numeric_options(capsys, argv, option, value, message):
    err = fails(capsys, argv + [option, value], 2)
    assert err == f"error: argument {option}: {message} (see 'stringdiag {argv[0]} --help')"


def test_every_numeric_option_is_checked():
    """No option is parsed by bare int() or float() (which take '²', 'nan', 'inf')."""
    parser = build_parser()
    (sub,) = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    for name, p in sub.choices.items():
        for action in p._actions:
            assert action.type not in (int, float), f"stringdiag {name} {action.option_strings}"


@pytest.mark.parametrize("argv, message", [
    ([], "error: the following arguments are required: COMMAND (see 'stringdiag --help')"),
    (["frob"], "error: argument COMMAND: invalid choice: 'frob'"),
    (["compile", ANATOMY], "error: the following arguments are required: -d/--diagram"),
    (["check", ANATOMY, "--frob"], "error: unrecognized arguments: --frob"),
    (["render", ANATOMY, "--format", "gif"], "error: argument --format: invalid choice: 'gif'"),
])
def test_argparse_errors_are_one_line_and_status_2(capsys, argv, message):
    assert fails(capsys, argv, 2).startswith(message)


@pytest.mark.parametrize("extra, message", [
    (["--dims", "k=1000000000000"], r"error: these sizes need about [0-9.e+]+ [kMGTPEZY]B \([0-9.e+]+ [kMGTPEZY]B "
     r"for [0-9,]+ parameters with their gradients and Adam's moments, .* for activations\); this machine has "),
    (["--d-model", "1000000000", "--heads", "1"], r"error: these sizes are too large: a single tensor of parameters "
     r"would need more than 9.22 EB \(2\^63 bytes\), more than torch can address$"),
    (["--dims", "d=4"], r"error: --dims: 'd' is the head's feature dimension; its size is --d-model / --heads "
     r"\(16 / 2 here\)$"),
    (["--dims", "q=4"], r"error: --dims: 'q' is not a dimension of 'M1' or of its file \(it takes d, k, s\)$"),
    (["--context", "100000"], r"error: --context 100000: the train split of synthetic-0 has 20,000 tokens, "
     r"fewer than one window of 100001$"),
    (["--batch-size", "100000"], r"error: --batch-size 100000: the train split of synthetic-0 has only [0-9,]+ "
     r"windows of 9 tokens$"),
])
def test_train_refuses_sizes_before_allocating(capsys, tmp_path, extra, message):
    err = fails(capsys, TRAIN + ["-o", tmp_path / "run"] + extra)
    assert re.match(message, err), err
    assert not (tmp_path / "run").exists()


# -- input files ----------------------------------------------------------------------
def test_device_fifo_directory_and_huge_file(capsys, tmp_path):
    assert fails(capsys, ["check", "/dev/zero"]) == "error: cannot read /dev/zero: it is a device, not a regular file"
    fifo = tmp_path / "pipe.diag"
    os.mkfifo(fifo)
    assert fails(capsys, ["compile", fifo, "-d", "M1"]) == (f"error: cannot read {fifo}: it is a FIFO, "
                                                           "not a regular file")
    folder = tmp_path / "folder.diag"
    folder.mkdir()
    assert fails(capsys, ["info", folder]) == f"error: cannot read {folder}: it is a directory"
    big = tmp_path / "big.diag"
    with big.open("wb") as f:
        f.truncate(16 * 2 ** 20 + 1)
    assert fails(capsys, ["render", big]) == (f"error: cannot read {big}: it is 16,777,217 bytes, more than the 16 MiB "
                                              "this tool reads from one file")
    deriv = tmp_path / "big.deriv"
    deriv.symlink_to(big)
    assert fails(capsys, ["derive", deriv]).startswith(f"error: cannot read {deriv}: it is 16,777,217 bytes")
    assert fails(capsys, ["derive", folder]) == f"error: cannot read {folder}: it is a directory"


def test_a_source_is_read_whole_whatever_its_size_says(tmp_path):
    """read_source asks for what the file holds (and a byte more), not its 16 MiB limit, each read;
    a file whose size says nothing (/proc's) or that is exactly at the limit is still read whole."""
    from stringdiag.errors import DiagError
    from stringdiag.syntax.source import read_source

    for size in (0, 1, 65535, 65536, 65537, 300_001):
        text = "".join(chr(97 + i % 26) if i % 80 else "\n" for i in range(size))
        (tmp_path / "a.diag").write_text(text)
        assert read_source(tmp_path / "a.diag") == text
        assert read_source(tmp_path / "a.diag", limit=size) == text
        if size:
            with pytest.raises(DiagError, match="more than the"):
                read_source(tmp_path / "a.diag", limit=size - 1)
    if sys.platform == "linux":  # a file whose size says nothing
        assert Path("/proc/self/status").stat().st_size == 0 and "\nVmPeak:" in read_source("/proc/self/status")


def test_fifo_and_bad_option_as_a_real_process(tmp_path):
    """The console script: no hang on a FIFO (no writer ever comes), no traceback, status 1 (2 for
    a bad option)."""
    exe = Path(sys.executable).parent / "stringdiag"
    fifo = tmp_path / "pipe.diag"
    os.mkfifo(fifo)
    r = subprocess.run([str(exe), "check", str(fifo)], capture_output=True, text=True, timeout=60)
    assert r.returncode == 1 and one_line(r.stderr) == f"error: cannot read {fifo}: it is a FIFO, not a regular file"
    r = subprocess.run([str(exe), *TRAIN, "--lr-scale", "nan"], capture_output=True, text=True, timeout=120)
    assert r.returncode == 2 and one_line(r.stderr) == ("error: argument --lr-scale: expected a positive number, got "
                                                        "'nan' (see 'stringdiag train --help')")


@pytest.mark.parametrize("data, line, col, byte", [
    (b"dim s : seq\ndim d : fixed\n# caf\xe9\n", 3, 6, "e9"),
    (b"# \xc3\xa9\xff\n", 1, 4, "ff"),
    (b"\x80", 1, 1, "80"),
    (b"dim s : seq\r\n\r\n  \xc0\xaf", 3, 3, "c0"),
])
def test_non_utf8_reports_the_first_bad_byte(capsys, tmp_path, data, line, col, byte):
    src = tmp_path / "bad.diag"
    src.write_bytes(data)
    assert fails(capsys, ["check", src]) == (f"{src}:{line}:{col}: error: not UTF-8 text: byte 0x{byte} "
                                             "cannot be decoded")


def test_non_utf8_rules_used_by_a_derivation(capsys, tmp_path):
    (tmp_path / "bad.rules").write_bytes(b"# \xff\n")
    deriv = tmp_path / "x.deriv"
    deriv.write_text(f'start {ANATOMY}:M1\nuse "bad.rules"\n')
    err = fails(capsys, ["derive", deriv])
    assert "bad.rules:1:3: error: not UTF-8 text: byte 0xff cannot be decoded" in err, err


def test_file_names_too_long(capsys, tmp_path):
    long = tmp_path / LONG
    for argv in (["check", f"{long}.diag"], ["compile", f"{long}.diag", "-d", "M1"], ["derive", f"{long}.deriv"]):
        err = fails(capsys, argv)
        assert err.startswith(f"error: cannot read {str(tmp_path)[:20]}") and "..." in err, err  # the long name kept by its two ends
        assert err.endswith(f"aaa{Path(argv[1]).suffix}: the file name is too long"), err
    assert fails(capsys, COMPILE + ["--dims", "d=4,k=4", "-o", f"{long}.py"], 2).startswith(  # a .py: usage
        f"error: cannot write {str(tmp_path)[:20]}")
    assert "File name too long" in fails(capsys, COMPILE + ["--dims", "d=4,k=4", "-o", f"{long}/m"])
    assert "File name too long" in fails(capsys, ["render", ANATOMY, "-d", "M1", "-o", f"{long}.svg"])
    assert "File name too long" in fails(capsys, ["derive", ROOT / "gallery" / "hardmax.deriv", "-o", f"{long}.svg"])
    assert "File name too long" in fails(capsys, TRAIN + ["--max-steps", "1", "-o", long])
    assert not [p for p in tmp_path.iterdir()]  # no temporary files left behind


# -- checkpoints ----------------------------------------------------------------------
@pytest.fixture(scope="module")
def trained(tmp_path_factory) -> Path:
    """A run of 4 steps, checkpointed at step 4 (log rows at 2 and 4)."""
    out = tmp_path_factory.mktemp("trained") / "run"
    assert main(TRAIN + ["--max-steps", "4", "-o", str(out)]) == 0
    assert _log_steps(out) == [2, 4]
    return out


def _log_steps(out: Path) -> list[int]:
    with (out / "log.csv").open(newline="") as f:
        rows = list(csv.reader(f))
    assert all(len(r) == len(rows[0]) for r in rows), rows  # no half rows
    return [int(r[0]) for r in rows[1:]]


def _copy(trained: Path, tmp_path: Path) -> Path:
    run = tmp_path / "run"
    shutil.copytree(trained, run)
    return run


def _rewrite(path: Path, tensors=None, meta=None, rehash: bool = True) -> None:
    """Edit a checkpoint's tensors and metadata; with ``rehash``, its checksum still matches."""
    from safetensors.torch import load_file, save_file

    t, m = load_file(str(path)), checkpoint.read_meta(path)
    if tensors:
        tensors(t)
    if meta:
        meta(m)
    if rehash:
        m["checksum"] = checkpoint.checksum(t)
    save_file(t, str(path), metadata={"stringdiag": json.dumps(m)})


def _flip_last_byte(path: Path) -> None:
    data = bytearray(path.read_bytes())
    data[-3] ^= 0x10  # in the tensor data, after the JSON header
    path.write_bytes(bytes(data))


def _pop_optimizer_tensor(t):
    t.pop(next(k for k in sorted(t) if k.endswith(".exp_avg_sq")))


CORRUPTIONS = {
    "wrong-shape": (dict(tensors=lambda t: t.update({"model.embed.weight": torch.zeros(26, 8)})),
                    "does not fit this model: 'embed.weight' is float32 [26, 8] there, float32 [26, 16] here"),
    "wrong-dtype": (dict(tensors=lambda t: t.update({"model.unembed.bias": t["model.unembed.bias"].double()})),
                    "does not fit this model: 'unembed.bias' is float64 [26] there, float32 [26] here"),
    "unknown-tensor": (dict(tensors=lambda t: t.update({"model.extra": torch.zeros(1)})),
                       "does not fit this model (missing [], unexpected ['extra'])"),
    "other-config": (dict(meta=lambda m: m["config"].update(d_model=32)),
                     "does not fit this model (d_model 32 there, 16 here)"),
    "fractional-step": (dict(meta=lambda m: m.update(step=9.5)),
                        "is not a valid checkpoint: its step is 9.5, not a whole number of steps"),
    "string-step": (dict(meta=lambda m: m.update(step="10")),
                    "is not a valid checkpoint: its step is \"10\", not a whole number of steps"),
    "negative-step": (dict(meta=lambda m: m.update(step=-1)),
                      "is not a valid checkpoint: its step is -1, not a whole number of steps"),
    "history-ahead": (dict(meta=lambda m: m["history"].append({**m["history"][-1], "step": 6})),
                      "is not a valid checkpoint: its history has a row at step 6 (the checkpoint is at step 4)"),
    "no-optimizer-groups": (dict(meta=lambda m: m.update(param_groups=[])),
                            "is not a valid checkpoint: it has 0 optimizer parameter group(s) where the optimizer "
                            "has 1"),
    "optimizer-group-missing-setting": (dict(meta=lambda m: m["param_groups"][0].pop("eps")),
                                        "is not a valid checkpoint: optimizer group 0 has no setting 'eps'"),
    "optimizer-group-nan-lr": (dict(meta=lambda m: m["param_groups"][0].update(lr=float("nan"))),
                               "is not a valid checkpoint: optimizer group 0 has lr = NaN"),
    "optimizer-state-missing": (dict(tensors=_pop_optimizer_tensor),
                                "lacks exp_avg_sq"),
    "optimizer-state-shape": (dict(tensors=lambda t: t.update({"optim.0.exp_avg": torch.zeros(3)})),
                              "is not a valid checkpoint: the optimizer's 'exp_avg' for parameter 0 is float32 [3], "
                              "its parameter float32 [26, 16]"),
    "optimizer-step": (dict(tensors=lambda t: t.update({"optim.0.step": torch.tensor(2.5)})),
                       "is not a valid checkpoint: the optimizer step of parameter 0 is not a whole number"),
    "optimizer-no-parameter": (dict(tensors=lambda t: t.update({"optim.999.exp_avg": torch.zeros(1)})),
                               "is not a valid checkpoint: optimizer tensor 'optim.999.exp_avg' belongs to no "
                               "parameter"),
    "rng-random": (dict(tensors=lambda t: t.update({"rng.torch": torch.full_like(t["rng.torch"], 7)})),
                   "is not a valid checkpoint: its random-number generator state is unusable (Invalid mt19937 "
                   "state)"),
    "rng-short": (dict(tensors=lambda t: t.update({"rng.torch": t["rng.torch"][:100].clone()})),
                  "is not a valid checkpoint: its random-number generator state is unusable"),
    "rng-float": (dict(tensors=lambda t: t.update({"rng.torch": t["rng.torch"].float()})),
                  "is not a valid checkpoint: its random-number generator state is unusable (float32 [5056], not "
                  "bytes)"),
    "rng-missing": (dict(tensors=lambda t: t.pop("rng.torch")),
                    "is not a valid checkpoint: it has no random-number generator state"),
    "no-checksum": (dict(meta=lambda m: m.pop("checksum"), rehash=False),
                    "is not a valid checkpoint: it has no checksum"),
    "edited-without-checksum": (dict(tensors=lambda t: t["model.unembed.bias"].add_(1.0), rehash=False),
                                "is damaged: its tensors do not match the checksum saved with them"),
}


@pytest.mark.parametrize("case", list(CORRUPTIONS))
def test_resume_from_a_bad_checkpoint(capsys, trained, tmp_path, case):
    edit, message = CORRUPTIONS[case]
    run = _copy(trained, tmp_path)
    _rewrite(run / "checkpoint.safetensors", **edit)
    before = (run / "log.csv").read_bytes()
    err = fails(capsys, TRAIN + ["--max-steps", "8", "--resume", "-o", run])
    assert err.startswith(f"error: {run / 'checkpoint.safetensors'} ") and message in err, err
    assert (run / "log.csv").read_bytes() == before


@pytest.mark.parametrize("damage", ["flip", "truncate", "junk"])
def test_resume_from_a_damaged_file(capsys, trained, tmp_path, damage):
    run = _copy(trained, tmp_path)
    path = run / "checkpoint.safetensors"
    if damage == "flip":
        _flip_last_byte(path)
    elif damage == "truncate":
        path.write_bytes(path.read_bytes()[:-100])
    else:
        path.write_bytes(b"\xff" * 64)
    err = fails(capsys, TRAIN + ["--max-steps", "8", "--resume", "-o", run])
    expected = {"flip": "is damaged: its tensors do not match the checksum saved with them",
                "truncate": "is not a", "junk": "is not a stringdiag checkpoint"}[damage]
    assert err.startswith(f"error: {path} ") and expected in err, err


def test_nothing_is_applied_unless_everything_fits(trained, tmp_path):
    """A checkpoint whose last part (the RNG state) is bad leaves model, optimizer and RNG as they were."""
    from stringdiag import DiagError
    from stringdiag.elaborate.loader import load
    from stringdiag.train.model import LanguageModel

    run = _copy(trained, tmp_path)
    zeros = torch.zeros(5056, dtype=torch.uint8)
    _rewrite(run / "checkpoint.safetensors", tensors=lambda t: t.update({"rng.torch": zeros}))
    model = LanguageModel(load(ANATOMY)["M1"], vocab=26, d_model=16, n_layers=1, n_heads=2, approximator="linear")
    opt = torch.optim.Adam(model.parameters(), lr=0.0, betas=(0.9, 0.98), eps=1e-9, weight_decay=1e-4)
    params = {k: v.clone() for k, v in model.state_dict().items()}
    rng = torch.get_rng_state()
    with pytest.raises(DiagError, match="random-number generator state is unusable"):
        checkpoint.load(run / "checkpoint.safetensors", model, opt)
    assert all(torch.equal(v, params[k]) for k, v in model.state_dict().items())
    assert not opt.state and torch.equal(torch.get_rng_state(), rng)


# -- a full disk ----------------------------------------------------------------------
def test_full_disk_while_checkpointing(capsys, trained, tmp_path, monkeypatch):
    run = _copy(trained, tmp_path)

    def full(tensors, filename, metadata=None):
        Path(filename).write_bytes(b"half a checkpoi")
        raise ENOSPC

    from stringdiag.lower import tensorfile  # where checkpoints are written

    monkeypatch.setattr(tensorfile, "save_file", full)
    err = fails(capsys, TRAIN + ["--max-steps", "6", "--resume", "-o", run])
    assert err == (f"error: cannot write checkpoint {run / 'checkpoint.safetensors'}: No space left on device "
                   "(the previous checkpoint, if any, is kept)")
    assert checkpoint.read_meta(run / "checkpoint.safetensors")["step"] == 4
    assert _log_steps(run) == [2, 4]  # the log does not run ahead of the checkpoint
    assert sorted(p.name for p in run.iterdir()) == ["checkpoint.safetensors", "log.csv", "result.json",
                                                    "run-config.json"]


def test_full_disk_while_logging_then_resume(capsys, trained, tmp_path, monkeypatch):
    from stringdiag.train import loop

    run = _copy(trained, tmp_path)
    real = csv.DictWriter

    class Full(real):  # the third row goes half-way onto the disk, then the disk is full
        def writerows(self, rows):
            rows = list(rows)
            if len(rows) < 3:
                return super().writerows(rows)
            super().writerows(rows[:2])
            self.writer.writerow([rows[2]["step"], "0.0"])  # noqa: the start of a row
            raise ENOSPC

    monkeypatch.setattr(loop.csv, "DictWriter", Full)
    err = fails(capsys, TRAIN + ["--max-steps", "6", "--resume", "-o", run])
    assert err == (f"error: cannot write {run / 'log.csv'}: No space left on device (the previous log is kept)")
    assert _log_steps(run) == [2, 4]  # no half row: the old log, behind the checkpoint
    assert checkpoint.read_meta(run / "checkpoint.safetensors")["step"] == 6
    assert sorted(p.name for p in run.iterdir()) == ["checkpoint.safetensors", "log.csv", "result.json",
                                                    "run-config.json"]
    monkeypatch.undo()

    with (run / "log.csv").open("a") as f:  # a row from beyond the checkpoint (a run that died)
        f.write("99,1.0,1.0,1.0,1.0,1.0,1\n")
    assert main(TRAIN + ["--max-steps", "6", "--resume", "-o", str(run)]) == 0
    assert "resumed from" in capsys.readouterr().out
    assert _log_steps(run) == [2, 4, 6]  # exactly the checkpoint's history
