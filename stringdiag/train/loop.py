"""Training and evaluation of language models (Khatri et al. (2024), App. C), on one process or many.

Training windows are ``context + 1`` tokens long with stride ``context // 2``; their
order in each epoch is a permutation drawn from ``seed + epoch``, so a run resumed from
a checkpoint (which records the step) sees exactly the batches it would have seen.
Evaluation scores every token once; at stride 1 each gets the maximal context.
Under ``torchrun`` (``WORLD_SIZE > 1``) the model is wrapped in DistributedDataParallel
(over nccl on CUDA, gloo elsewhere), each process takes its share of every batch, and
process 0 evaluates and writes checkpoints and the log.

The model is built (and initialised) on the CPU, then moved to the configured device, so a
seed gives the same weights on every device; batches move as they are used. The learning
rate follows Vaswani et al.'s schedule as a ``LambdaLR``, whose state the checkpoint keeps.
"""
from __future__ import annotations

import csv
import io
import math
import os
import sys
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Callable

import torch
import torch.distributed as dist
import torch.nn.functional as F
from tqdm import tqdm

from ..data.corpus import eval_windows, lm_windows
from ..data.mqar import Examples
from ..errors import DiagError
from ..syntax.source import write_atomic
from . import checkpoint
from .device import Precision, autocast, backend, check_precision, resolve, scaler


@dataclass
class TrainConfig:
    context: int = 35
    batch_size: int = 32
    epochs: int = 1
    lr_scale: float = 1.0
    warmup: int = 200
    weight_decay: float = 1e-4
    seed: int = 0
    eval_every: int = 200          # steps between validation runs
    valid_tokens: int | None = 20000  # validate on a prefix, for speed (None: all of it)
    time_budget: float | None = None  # seconds; stop (and checkpoint) when spent
    clock: str = "wall"            # what time_budget counts: "wall" clock or this process's "cpu" time
    max_steps: int | None = None
    device: str = "cpu"            # auto, cpu, cuda, cuda:N, mps (train.device.resolve)
    precision: str = "fp32"        # fp32, bf16, fp16 (train.device.Precision)
    compile: bool = False          # torch.compile the training model


CLOCKS: dict[str, Callable[[], float]] = {"wall": time.monotonic, "cpu": time.process_time}


@dataclass
class History:
    """The log's rows, and how the run ended: the steps it was to take, whether the time budget
    stopped it before them, and the wall-clock and CPU seconds its training took."""

    rows: list[dict] = field(default_factory=list)
    planned: int = 0
    budget_stopped: bool = False
    wall_seconds: float = 0.0
    cpu_seconds: float = 0.0


@dataclass(frozen=True)
class Elapsed:
    """Seconds of training (wall clock, this process's CPU) that a checkpoint records, so that a
    resumed run's clock goes on from them rather than from zero."""

    wall: float = 0.0
    cpu: float = 0.0

    @classmethod
    def of(cls, meta: dict, rows: list[dict]) -> "Elapsed":
        """A checkpoint's; one from before they were recorded: its log's last wall-clock time, no CPU."""
        saved = meta.get("elapsed")
        if isinstance(saved, dict):
            wall, cpu = _seconds(saved.get("wall")), _seconds(saved.get("cpu"))
            if wall is not None and cpu is not None:
                return cls(wall, cpu)
        last = _seconds(rows[-1].get("seconds")) if rows and isinstance(rows[-1], dict) else None
        return cls(last or 0.0, 0.0)


def _seconds(x: Any) -> float | None:
    """``x`` as a number of seconds, when it is one (finite, not negative)."""
    ok = isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x) and x >= 0
    return float(x) if ok else None


@dataclass(frozen=True)
class Score:
    """A perplexity, and over how many of the split's targets it was measured."""

    perplexity: float
    scored: int
    total: int


def evaluate(model: torch.nn.Module, ids: torch.Tensor, context: int, stride: int | None = None,
             batch_size: int = 256) -> float:
    """Perplexity with every target scored once; stride 1 gives each the maximal context."""
    return score(model, ids, context, stride, batch_size).perplexity


def score(model: torch.nn.Module, ids: torch.Tensor, context: int, stride: int | None = None,
          batch_size: int = 256, deadline: float | None = None, progress: str | None = None,
          clock: Callable[[], float] = time.monotonic) -> Score:
    """:func:`evaluate`, stopping after the batch that passes ``deadline`` (on ``clock``) and
    showing a progress bar named ``progress``: a time budget covers evaluation too."""
    was = model.training
    model.eval()
    w, keep_all = eval_windows(ids, context, stride or context)
    nll, count, total = 0.0, 0, int(keep_all.sum())
    starts = range(0, w.shape[0], batch_size)
    for b0 in tqdm(starts, desc=progress, unit="batch", disable=progress is None or not sys.stderr.isatty(),
                   leave=False):
        nll += _nll(model, w[b0:b0 + batch_size], keep_all[b0:b0 + batch_size])
        count += int(keep_all[b0:b0 + batch_size].sum())
        if deadline is not None and clock() > deadline:
            break
    model.train(was)
    mean = nll / max(count, 1)
    return Score(math.exp(mean) if mean < 700 else float("inf"), count, total)  # diverged: no OverflowError


def recall(model: torch.nn.Module, data: Examples, batch_size: int = 256) -> tuple[Score, float]:
    """Perplexity over the scored targets of fixed examples, and the fraction of them whose most
    likely prediction is right (MQAR's accuracy)."""
    was = model.training
    model.eval()
    nll, right, dev = 0.0, 0, _device(model)
    with torch.no_grad():
        for b0 in range(0, data.windows.shape[0], batch_size):
            w, keep = data.windows[b0:b0 + batch_size].to(dev), data.scored[b0:b0 + batch_size].to(dev)
            logits, targets = model(w[:, :-1])[keep], w[:, 1:][keep]
            nll += F.cross_entropy(logits, targets, reduction="sum").double().item()
            right += int((logits.argmax(-1) == targets).sum())
    model.train(was)
    n = data.numel()
    mean = nll / max(n, 1)
    return Score(math.exp(mean) if mean < 700 else float("inf"), n, n), right / max(n, 1)


def _nll(model: torch.nn.Module, chunk: torch.Tensor, keep: torch.Tensor) -> float:
    """Summed negative log-likelihood of the scored targets of one batch of windows."""
    dev = _device(model)
    chunk, keep = chunk.to(dev), keep.to(dev)
    targets = chunk[:, 1:][keep]
    hidden = getattr(model, "hidden", None)
    with torch.no_grad():
        if hidden is not None:  # unembed only the scored positions (1 in 35 at stride 1)
            logits = getattr(model, "unembed")(hidden(chunk[:, :-1])[keep])  # the head a hidden goes with
        else:
            logits = model(chunk[:, :-1])[keep]
        return F.cross_entropy(logits, targets, reduction="sum").double().item()


def _device(model: torch.nn.Module) -> torch.device:
    p = next(model.parameters(), None)
    return p.device if p is not None else torch.device("cpu")


def vaswani_lr(step: int, d_model: int, warmup: int, scale: float) -> float:
    step = max(step, 1)
    return scale * d_model ** -0.5 * min(step ** -0.5, step * warmup ** -1.5)


LINE_EVERY = 30.0  # seconds between progress lines when stderr is not a terminal


class _Lines(io.TextIOBase):
    """tqdm's frames as whole lines (a piped log gets lines, never ``\\r`` redraws)."""

    def __init__(self, stream):
        self.stream = stream

    def write(self, text: str) -> int:
        line = text.replace("\r", "").strip()
        if line:
            self.stream.write(line + "\n")
        return len(text)

    def flush(self) -> None:
        self.stream.flush()


def progress_bar(total: int, initial: int) -> tqdm:
    """The training bar on stderr: redrawn in place on a terminal; elsewhere one line every
    :data:`LINE_EVERY` seconds (none for a run shorter than that)."""
    if sys.stderr.isatty():
        return tqdm(total=total, initial=initial, unit="step", dynamic_ncols=True)
    return tqdm(total=total, initial=initial, unit="step", file=_Lines(sys.stderr), ascii=True,
                mininterval=LINE_EVERY, delay=LINE_EVERY, ncols=100)


def distributed(device: torch.device | None = None) -> tuple[int, int]:
    """This process's rank and the world size; under torchrun the process group is made here,
    over the backend ``device`` needs (nccl on CUDA, gloo elsewhere)."""
    world = int(os.environ.get("WORLD_SIZE", "1"))
    if world > 1 and not dist.is_initialized():
        dist.init_process_group(backend(device or torch.device("cpu")))
    return (dist.get_rank(), world) if world > 1 else (0, 1)


def train(make_model: Callable[[], torch.nn.Module], train_ids: torch.Tensor | Examples,
          valid_ids: torch.Tensor | Examples, cfg: TrainConfig, out_dir: str | Path | None = None,
          resume: bool = False, log: Callable[[str], None] = print) -> History:
    """Train; checkpoints and the curve (``log.csv``) go to ``out_dir`` when given.

    A token stream is cut into language-model windows (every target scored); :class:`Examples`
    (MQAR) are used as they are, only their scored targets in the loss and the validation."""
    run = _Training(make_model, cfg, out_dir, log)
    if resume:
        run.resume()
    run.prepare(train_ids, valid_ids)
    while run.step < run.total:
        if run.epoch():  # the time budget is spent
            run.history.budget_stopped = run.step < run.total
            break
    run.finish()
    return run.history


class _Training:
    """The state that the steps of one ``train`` share: model, optimiser, step, the loss and
    tokens since the last record, the clock, and (on process 0) the progress bar."""

    def __init__(self, make_model: Callable[[], torch.nn.Module], cfg: TrainConfig, out_dir: str | Path | None,
                 log: Callable[[str], None]):
        self.device, self.precision = resolve(cfg.device), Precision(cfg.precision)
        check_precision(self.precision, self.device)
        if self.device.type == "cuda":
            torch.cuda.set_device(self.device)
        self.rank, self.world = distributed(self.device)
        torch.manual_seed(cfg.seed)
        self.model = make_model().to(self.device)  # built on the CPU: the same weights on every device
        self.d_model: int = _config(self.model)["d_model"]
        self.cfg, self.log = cfg, log
        self.opt = torch.optim.Adam(self.model.parameters(), lr=1.0, betas=(0.9, 0.98), eps=1e-9,
                                    weight_decay=cfg.weight_decay)
        self.sched = self.schedule()
        self.lr = self.opt.param_groups[0]["lr"]  # the rate of the last step taken
        self.scaler = scaler(self.device, self.precision)
        self.out = Path(out_dir) if out_dir else None
        if self.out and self.rank == 0:
            self.out.mkdir(parents=True, exist_ok=True)
        self.ckpt = self.out / checkpoint.NAME if self.out else None
        self.step, self.history = 0, History()
        self.before = Elapsed()  # the training time of the sessions before this one (a resumed run)

    def resume(self) -> None:
        """Continue from the checkpoint: weights, optimiser, step and the log as of it."""
        if self.ckpt is None or not self.ckpt.exists():
            raise DiagError(f"--resume: no checkpoint at {self.ckpt}")
        meta = checkpoint.load(self.ckpt, self.model, self.opt)
        self.step = meta["step"]
        self.history.rows = meta.get("history", [])
        self.before = Elapsed.of(meta, self.history.rows)
        self.sched = self.schedule(self.step, meta.get("scheduler"))
        if self.scaler.is_enabled() and isinstance(meta.get("scaler"), dict):
            self.scaler.load_state_dict(meta["scaler"])
        if self.rank == 0 and self.out:  # the log as of the checkpoint: rows a failed run wrote after it are dropped
            _write_log(self.out / "log.csv", self.history.rows)
        self.log(f"resumed from {self.ckpt} at step {self.step}")

    def schedule(self, step: int = 0, state: dict | None = None) -> torch.optim.lr_scheduler.LambdaLR:
        """Vaswani et al.'s rate as a ``LambdaLR`` (the optimiser's base rate is 1), at ``step``
        steps done: its saved ``state`` when the checkpoint has one, else rebuilt from the step
        (a checkpoint from before the schedule was kept)."""
        cfg, d = self.cfg, self.d_model

        def rate(done: int) -> float:  # the rate of step done + 1
            return vaswani_lr(done + 1, d, cfg.warmup, cfg.lr_scale)

        sched = torch.optim.lr_scheduler.LambdaLR(self.opt, rate, last_epoch=step - 1)
        if state is not None:
            if not isinstance(state, dict) or state.get("last_epoch") != step or \
                    state.get("base_lrs") != sched.state_dict()["base_lrs"]:
                raise DiagError(f"{self.ckpt} is not a valid checkpoint: its learning-rate schedule is not at "
                                f"step {step}")
            sched.load_state_dict({**state, "lr_lambdas": [None]})
        return sched

    def prepare(self, train_ids: torch.Tensor | Examples, valid_ids: torch.Tensor | Examples) -> None:
        """The training windows, the steps they make, and the validation prefix; the clock starts."""
        cfg = self.cfg
        self.net: Callable[..., torch.Tensor] = self.model
        if self.world > 1:
            ids = [self.device.index] if self.device.type == "cuda" else None
            self.net = torch.nn.parallel.DistributedDataParallel(self.model, device_ids=ids)
        if cfg.compile:
            self.net = torch.compile(self.net)
        self.scored: torch.Tensor | None
        if isinstance(train_ids, Examples):
            self.windows, self.scored = train_ids.windows, train_ids.scored
        else:
            self.windows, self.scored = lm_windows(train_ids, cfg.context, max(cfg.context // 2, 1)), None
        self.per_epoch = self.windows.shape[0] // (cfg.batch_size * self.world)
        if self.per_epoch < 1:
            raise DiagError(f"the training data has {self.windows.shape[0]:,} windows of {cfg.context + 1} tokens, "
                            f"fewer than one batch of {cfg.batch_size * self.world}")
        steps = self.per_epoch * cfg.epochs
        self.total = steps if cfg.max_steps is None else min(steps, cfg.max_steps)
        self.valid = valid_ids if isinstance(valid_ids, Examples) or not cfg.valid_tokens else \
            valid_ids[: cfg.valid_tokens]
        self.bar = progress_bar(self.total, self.step) if self.rank == 0 else None
        self.t0, self.tokens, self.losses = time.time(), 0, list[float]()
        self.clock = CLOCKS[cfg.clock]
        self.c0, self.cpu0, self.history.planned = self.clock(), time.process_time(), self.total

    def epoch(self) -> bool:
        """The rest of the current epoch, in the order ``seed + epoch`` draws (so a resumed run sees
        the batches it would have); True when the time budget is spent."""
        cfg = self.cfg
        epoch, offset = divmod(self.step, self.per_epoch)
        g = torch.Generator().manual_seed(cfg.seed * 100003 + epoch)
        order = torch.randperm(self.windows.shape[0], generator=g)[: self.per_epoch * cfg.batch_size * self.world]
        batches = order.view(self.per_epoch, self.world, cfg.batch_size)
        for b in range(offset, self.per_epoch):
            if self.step >= self.total:
                break
            rows = batches[b, self.rank]
            batch = self.windows[rows].to(self.device, non_blocking=True)
            self.train_step(batch, None if self.scored is None else self.scored[rows].to(self.device))
            if self.step % cfg.eval_every == 0:
                self.record("periodic")
            if cfg.time_budget is not None and self.clock() - self.c0 > cfg.time_budget:
                return True
        return False

    def train_step(self, batch: torch.Tensor, scored: torch.Tensor | None = None) -> None:
        self.step += 1
        self.lr = self.opt.param_groups[0]["lr"]
        with autocast(self.device, self.precision):
            logits = self.net(batch[:, :-1])
            if scored is None:
                loss = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), batch[:, 1:].reshape(-1))
            else:
                loss = F.cross_entropy(logits[scored], batch[:, 1:][scored])
        self.opt.zero_grad(set_to_none=True)
        self.scaler.scale(loss).backward()
        self.scaler.step(self.opt)  # at fp32 and bf16 (no scaling), just the optimiser's step
        self.scaler.update()
        self.sched.step()
        value = loss.item()
        self.losses.append(value)
        self.tokens += batch[:, 1:].numel() * self.world
        if self.bar:
            self.bar.set_postfix_str(f"loss {value:.3f} {self.tokens_per_s():,.0f} tok/s", refresh=False)
            self.bar.update()

    def tokens_per_s(self) -> float:
        return self.tokens / max(time.time() - self.t0, 1e-9)

    def finish(self) -> None:
        """A last record unless the last step made one."""
        if self.bar:
            self.bar.close()
        if self.step % self.cfg.eval_every:
            self.record("final")
        self.history.wall_seconds, self.history.cpu_seconds = self.elapsed()

    def elapsed(self) -> tuple[float, float]:
        """Wall-clock and CPU seconds of training since the run began, earlier sessions included."""
        return self.before.wall + time.time() - self.t0, self.before.cpu + time.process_time() - self.cpu0

    def validate(self) -> float:
        """Validation perplexity; under a time budget only what the budget leaves (at least one
        batch), so that validating a large model cannot overrun it."""
        budget = self.cfg.time_budget
        deadline = None if budget is None else self.c0 + budget
        if isinstance(self.valid, Examples):
            return recall(self.model, self.valid)[0].perplexity
        return score(self.model, self.valid, self.cfg.context, deadline=deadline, clock=self.clock).perplexity

    def record(self, kind: str) -> None:
        """Validate (process 0) and add a row to the log; process 0 checkpoints, the others wait."""
        ppl = self.validate() if self.rank == 0 else float("nan")
        first = self.step - len(self.losses) + 1
        row = {"step": self.step, "epoch": round(self.step / max(self.per_epoch, 1), 3),
               "train_loss": _mean(self.losses), "valid_ppl": ppl, "lr": self.lr,
               "seconds": round(self.elapsed()[0], 1),
               "tokens_per_s": round(self.tokens_per_s())}
        self.history.rows.append(row)
        self.losses.clear()
        if self.rank == 0:
            steps = f"steps {first}-{self.step}" if first < self.step else f"step {self.step}"
            with tqdm.external_write_mode(file=sys.stderr):  # the bar steps aside for the line
                self.log(f"step {self.step}: mean train loss {row['train_loss']:.3f} over {steps}, "
                         f"valid ppl {ppl:.1f} ({kind})")
            if self.out:
                self.save()
        if self.world > 1:
            dist.barrier()

    def save(self) -> None:
        """The checkpoint first: the log never runs ahead of it (nothing without an output folder)."""
        if self.out is None or self.ckpt is None:
            return
        meta = {"step": self.step, "config": _config(self.model), "train": asdict(self.cfg),
                "history": self.history.rows, "scheduler": _json_state(self.sched.state_dict())}
        meta["elapsed"] = dict(zip(("wall", "cpu"), self.elapsed()))
        if self.scaler.is_enabled():
            meta["scaler"] = self.scaler.state_dict()
        checkpoint.save(self.ckpt, self.model, self.opt, meta)
        _write_log(self.out / "log.csv", self.history.rows)


def _config(model: torch.nn.Module) -> dict[str, Any]:
    """The settings a model of ``train/`` was built with (``LanguageModel``, ``WholeModel``)."""
    config = getattr(model, "config", None)
    if not isinstance(config, dict):
        raise DiagError(f"{type(model).__name__} has no config: train/ trains the models it builds")
    return config


def _mean(xs: list[float]) -> float:
    return sum(xs) / len(xs) if xs else float("nan")


def _json_state(state: dict) -> dict:
    """The scheduler's state without its rate function (code, which is never saved)."""
    return {k: v for k, v in state.items() if k != "lr_lambdas"}


def _write_log(path: Path, rows: list[dict]) -> None:
    """The whole log, written beside it and then renamed over it: never a half row.

    A failure to write (a full disk) is the tool's error; the previous log stays."""
    if not rows:
        path.unlink(missing_ok=True)
        return
    text = io.StringIO()
    try:
        wr = csv.DictWriter(text, fieldnames=list(rows[0]))
        wr.writeheader()
        wr.writerows(rows)
    except OSError as e:
        raise DiagError(f"cannot write {path}: {e.strerror or e} (the previous log is kept)") from None
    write_atomic(path, text.getvalue(), " (the previous log is kept)")
