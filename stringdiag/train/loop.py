"""Training and evaluation of language models (seed 003, App. C), on one process or many.

Training windows are ``context + 1`` tokens long with stride ``context // 2``; their
order in each epoch is a permutation drawn from ``seed + epoch``, so a run resumed from
a checkpoint (which records the step) sees exactly the batches it would have seen.
Evaluation scores every token once; at stride 1 each gets the maximal context.
Under ``torchrun`` (``WORLD_SIZE > 1``) the model is wrapped in DistributedDataParallel
over gloo, each process takes its share of every batch, and process 0 evaluates and
writes checkpoints and the log.
"""
from __future__ import annotations

import csv
import math
import os
import sys
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Callable

import torch
import torch.distributed as dist
import torch.nn.functional as F

from ..data.corpus import eval_windows, lm_windows
from . import checkpoint


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
    max_steps: int | None = None


@dataclass
class History:
    rows: list[dict] = field(default_factory=list)


@torch.no_grad()
def evaluate(model: torch.nn.Module, ids: torch.Tensor, context: int, stride: int | None = None,
             batch_size: int = 256) -> float:
    """Perplexity with every target scored once; stride 1 gives each the maximal context."""
    was = model.training
    model.eval()
    w, score = eval_windows(ids, context, stride or context)
    nll, count = 0.0, 0
    hidden = getattr(model, "hidden", None)
    for b0 in range(0, w.shape[0], batch_size):
        chunk, keep = w[b0:b0 + batch_size], score[b0:b0 + batch_size]
        targets = chunk[:, 1:][keep]
        if hidden is not None:  # unembed only the scored positions (1 in 35 at stride 1)
            logits = model.unembed(hidden(chunk[:, :-1])[keep])
        else:
            logits = model(chunk[:, :-1])[keep]
        nll += F.cross_entropy(logits, targets, reduction="sum").double().item()
        count += int(keep.sum())
    model.train(was)
    mean = nll / count
    return math.exp(mean) if mean < 700 else float("inf")  # a diverged model: no OverflowError


def vaswani_lr(step: int, d_model: int, warmup: int, scale: float) -> float:
    step = max(step, 1)
    return scale * d_model ** -0.5 * min(step ** -0.5, step * warmup ** -1.5)


class Progress:
    """One line per report; redrawn in place on a terminal."""

    def __init__(self, total: int, every: int = 10):
        self.total, self.every, self.t0 = total, every, time.time()
        self.tty = sys.stdout.isatty()

    def update(self, step: int, text: str) -> None:
        if step % self.every and step != self.total:
            return
        frac = step / max(self.total, 1)
        bar = "#" * int(24 * frac) + "-" * (24 - int(24 * frac))
        line = f"[{bar}] {step}/{self.total} {text} {time.time() - self.t0:6.0f}s"
        print(("\r" + line) if self.tty else line, end="" if self.tty else "\n", flush=True)

    def close(self) -> None:
        if self.tty:
            print()


def distributed() -> tuple[int, int]:
    world = int(os.environ.get("WORLD_SIZE", "1"))
    if world > 1 and not dist.is_initialized():
        dist.init_process_group("gloo")
    return (dist.get_rank(), world) if world > 1 else (0, 1)


def train(make_model: Callable[[], torch.nn.Module], train_ids: torch.Tensor, valid_ids: torch.Tensor,
          cfg: TrainConfig, out_dir: str | Path | None = None, resume: bool = False,
          log: Callable[[str], None] = print) -> History:
    """Train; checkpoints and the curve (``log.csv``) go to ``out_dir`` when given."""
    rank, world = distributed()
    torch.manual_seed(cfg.seed)
    model = make_model()
    d_model = model.config["d_model"]
    opt = torch.optim.Adam(model.parameters(), lr=0.0, betas=(0.9, 0.98), eps=1e-9, weight_decay=cfg.weight_decay)
    out = Path(out_dir) if out_dir else None
    if out and rank == 0:
        out.mkdir(parents=True, exist_ok=True)
    ckpt = out / "checkpoint.safetensors" if out else None
    step, history = 0, History()
    if resume:
        if ckpt is None or not ckpt.exists():
            from ..errors import DiagError

            raise DiagError(f"--resume: no checkpoint at {ckpt}")
        meta = checkpoint.load(ckpt, model, opt)
        step = meta["step"]
        history.rows = meta.get("history", [])
        if rank == 0:  # the log as of the checkpoint: rows a failed run wrote after it are dropped
            _write_log(out / "log.csv", history.rows)
        log(f"resumed from {ckpt} at step {step}")
    net = torch.nn.parallel.DistributedDataParallel(model) if world > 1 else model
    w = lm_windows(train_ids, cfg.context, max(cfg.context // 2, 1))
    per_epoch = w.shape[0] // (cfg.batch_size * world)
    if per_epoch < 1:
        from ..errors import DiagError

        raise DiagError(f"the training data has {w.shape[0]:,} windows of {cfg.context + 1} tokens, fewer than one "
                        f"batch of {cfg.batch_size * world}")
    total = per_epoch * cfg.epochs if cfg.max_steps is None else min(per_epoch * cfg.epochs, cfg.max_steps)
    valid = valid_ids[: cfg.valid_tokens] if cfg.valid_tokens else valid_ids
    bar = Progress(total) if rank == 0 else None
    t0, tokens, loss_acc = time.time(), 0, []

    def record(kind: str) -> None:
        ppl = evaluate(model, valid, cfg.context) if rank == 0 else float("nan")
        row = {"step": step, "epoch": round(step / max(per_epoch, 1), 3), "train_loss": _mean(loss_acc),
               "valid_ppl": ppl, "lr": opt.param_groups[0]["lr"], "seconds": round(time.time() - t0, 1),
               "tokens_per_s": round(tokens / max(time.time() - t0, 1e-9))}
        history.rows.append(row)
        loss_acc.clear()
        if rank == 0:
            if bar and bar.tty:
                print()
            log(f"step {step}: train loss {row['train_loss']:.3f}, valid ppl {ppl:.1f} ({kind})")
            if out:  # the checkpoint first: the log never runs ahead of it
                checkpoint.save(ckpt, model, opt, {"step": step, "config": model.config, "train": asdict(cfg),
                                                   "history": history.rows})
                _write_log(out / "log.csv", history.rows)
        if world > 1:
            dist.barrier()

    stopped = False
    while step < total and not stopped:
        epoch, offset = divmod(step, per_epoch)
        g = torch.Generator().manual_seed(cfg.seed * 100003 + epoch)
        order = torch.randperm(w.shape[0], generator=g)[: per_epoch * cfg.batch_size * world]
        batches = order.view(per_epoch, world, cfg.batch_size)
        for b in range(offset, per_epoch):
            if step >= total:
                break
            batch = w[batches[b, rank]]
            step += 1
            for group in opt.param_groups:
                group["lr"] = vaswani_lr(step, d_model, cfg.warmup, cfg.lr_scale)
            logits = net(batch[:, :-1])
            loss = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), batch[:, 1:].reshape(-1))
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            loss_acc.append(loss.item())
            tokens += batch[:, 1:].numel() * world
            if bar:
                bar.update(step, f"loss {loss.item():.3f} {tokens / max(time.time() - t0, 1e-9):,.0f} tok/s")
            if step % cfg.eval_every == 0:
                record("periodic")
            if cfg.time_budget is not None and time.time() - t0 > cfg.time_budget:
                stopped = True
                break
    if bar:
        bar.close()
    if step % cfg.eval_every:
        record("final")
    return history


def _mean(xs: list[float]) -> float:
    return sum(xs) / len(xs) if xs else float("nan")


def _write_log(path: Path, rows: list[dict]) -> None:
    """The whole log, written beside it and then renamed over it: never a half row.

    A failure to write (a full disk) is the tool's error; the previous log stays."""
    from ..errors import DiagError

    tmp = path.with_name(f".{path.name}.tmp")
    try:
        if not rows:
            if path.exists():
                path.unlink()
            return
        with tmp.open("w", newline="") as f:
            wr = csv.DictWriter(f, fieldnames=list(rows[0]))
            wr.writeheader()
            wr.writerows(rows)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except OSError as e:
        raise DiagError(f"cannot write {path}: {e.strerror or e} (the previous log is kept)") from None
    finally:
        if tmp.exists():
            tmp.unlink()
