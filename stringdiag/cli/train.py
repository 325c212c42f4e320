"""``stringdiag train FILE -d NAME``: a decoder-only language model with this attention head."""
from __future__ import annotations

import argparse
import json
import os
from pathlib import Path

from ..errors import DiagError
from .common import load_reporting, pick
from .compile import parse_dims

HELP = "train a decoder-only language model whose heads are the diagram (App. C of the paper)"


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("file", metavar="FILE")
    p.add_argument("-d", "--diagram", metavar="NAME", required=True, help="the head: a diagram [s, d] -> [s, d]")
    p.add_argument("--layers", type=int, default=2)
    p.add_argument("--heads", type=int, default=4)
    p.add_argument("--d-model", type=int, default=128)
    p.add_argument("--d-ff", type=int, default=None, help="feed-forward width (default 4 x d-model)")
    p.add_argument("--context", type=int, default=35)
    p.add_argument("--batch-size", type=int, default=32)
    p.add_argument("--epochs", type=int, default=1)
    p.add_argument("--max-steps", type=int, default=None, help="stop after this many steps")
    p.add_argument("--time-budget", type=float, default=None, metavar="SECONDS", help="stop after this long")
    p.add_argument("--lr-scale", type=float, default=1.0, help="scale of the Vaswani et al. schedule")
    p.add_argument("--warmup", type=int, default=200)
    p.add_argument("--eval-every", type=int, default=200, metavar="STEPS")
    p.add_argument("--approximator", default="mlp", choices=["linear", "mlp"])
    p.add_argument("--dims", default="", metavar="k=32", help="sizes for the head's other fixed dimensions")
    p.add_argument("--data", default="shakespeare", metavar="DIR",
                   help="'shakespeare' (embedded, default), 'synthetic', or a directory with ptb.{train,valid,test}.txt")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("-o", "--out", default=None, metavar="DIR", help="checkpoints and log (default: runs/NAME)")
    p.add_argument("--resume", action="store_true", help="continue from the checkpoint in --out")
    p.add_argument("--no-test", action="store_true", help="skip the stride-1 test evaluation at the end")


def run(args: argparse.Namespace) -> int:
    import torch

    from ..data import load_corpus
    from ..train.loop import TrainConfig, evaluate, train
    from ..train.model import LanguageModel

    prog = load_reporting(args.file)
    (head,) = pick(prog, args.diagram)
    for name in ("layers", "heads", "d_model", "context", "batch_size", "epochs"):
        if getattr(args, name) < 1:
            raise DiagError(f"--{name.replace('_', '-')} must be at least 1")
    rank = int(os.environ.get("RANK", "0"))
    say = print if rank == 0 else (lambda *a, **k: None)
    corpus = load_corpus(args.data)
    say(f"corpus {corpus.name}: {len(corpus.vocab):,} words; {corpus.train.numel():,} / {corpus.valid.numel():,} / "
        f"{corpus.test.numel():,} tokens (train / valid / test)")
    baseline = corpus.unigram_perplexity()
    say(f"unigram perplexity on valid: {baseline:.1f}")
    dims = parse_dims(args.dims)

    def make():
        return LanguageModel(head, vocab=len(corpus.vocab), d_model=args.d_model, n_layers=args.layers,
                             n_heads=args.heads, d_ff=args.d_ff, approximator=args.approximator, dims=dims)

    torch.manual_seed(args.seed)
    n = sum(p.numel() for p in make().parameters())
    say(f"model: {args.layers} layer(s) x {args.heads} '{head.name}' heads, d_model {args.d_model}: {n:,} parameters")
    out = Path(args.out or Path("runs") / head.name)
    cfg = TrainConfig(context=args.context, batch_size=args.batch_size, epochs=args.epochs, lr_scale=args.lr_scale,
                      warmup=args.warmup, seed=args.seed, eval_every=args.eval_every, time_budget=args.time_budget,
                      max_steps=args.max_steps)
    history = train(make, corpus.train, corpus.valid, cfg, out_dir=out, resume=args.resume, log=say)
    result = {"diagram": head.name, "parameters": n, "unigram_ppl": baseline,
              "valid_ppl": history.rows[-1]["valid_ppl"] if history.rows else None, "steps": history.rows[-1]["step"]
              if history.rows else 0}
    if rank == 0 and not args.no_test:
        from ..train import checkpoint

        model = make()
        checkpoint.load(out / "checkpoint.safetensors", model)
        say("test perplexity (stride 1: every token with its maximal context) ...")
        result["test_ppl"] = evaluate(model, corpus.test, args.context, stride=1)
        result["unigram_test_ppl"] = corpus.unigram_perplexity("test")
        say(f"test perplexity {result['test_ppl']:.1f} (unigram on test {result['unigram_test_ppl']:.1f})")
    if rank == 0:
        (out / "result.json").write_text(json.dumps(result, indent=2) + "\n")
        say(f"wrote {out / 'log.csv'}, {out / 'checkpoint.safetensors'}, {out / 'result.json'}")
    return 0
