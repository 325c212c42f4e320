"""``stringdiag train FILE -d NAME`` when NAME is a whole language model (``[s] of v -> [s, v]``):
the diagram trained as written, with its own embeddings, blocks, norms and head.

Sizes: the vocabulary dimension is the corpus's; every other fixed dimension is --dims', else the
default its file declares (the sizes line marks those), else an error naming it. The options of
the head recipe that build a model around a head (--layers, --heads, --d-ff, --norm-after) have
no meaning here and are refused, and so is --d-model when the model has a dimension named d
(which then sets the schedule's width; else --d-model does); --dims names only fixed dimensions
the model uses; --approximator is refused where every learnable map names its own. The recipe (context, batch, schedule, budget, test) is the head mode's.
"""
from __future__ import annotations

import argparse
import json
import os
from pathlib import Path
from typing import Callable, NamedTuple

from ..errors import DiagError
from . import config, options

HEAD_ONLY = {"layers": 2, "heads": 4, "d_ff": None, "norm_after": None}  # the head recipe's options, defaults
APPROXIMATOR = "mlp"  # --approximator's default
D_MODEL = 128  # --d-model's default: the schedule's width for a model with no dimension d


class HeadParts(NamedTuple):
    """The head mode's parts this mode shares (``cli/train.py``, which imports this module: passed
    in, so that imports run one way)."""

    config: Callable  # (args, started) -> TrainConfig
    test: Callable  # the stride-1 test: (make, corpus, out, args, result, device) -> verdict
    check_windows: Callable  # (corpus, context, batch_size)
    memory_errors: Callable  # a context manager: out of memory is the tool's error
    device: object  # the torch.device training and the test run on
    timing: Callable  # history -> the line saying how long training took
    cut_short: Callable  # history -> what the verdict adds when --time-budget stopped training early


def check_options(args: argparse.Namespace, diagram) -> dict[str, int]:
    """``--dims``, checked to size only fixed dimensions the model uses; the options a whole model
    does not use (the head recipe's, and --d-model when the model has its own d) refused."""
    from ..train.lm import fixed_names

    for name, default in HEAD_ONLY.items():
        if getattr(args, name) != default:
            flag = "--" + name.replace("_", "-")
            raise DiagError(f"{flag} builds the head recipe's model around a head; '{diagram.name}' is a whole "
                            "language model: size its own dimensions with --dims")
    from ..graph.arguments import check_dim_names

    given = options.parse_dims(args.dims)
    fixed = fixed_names(diagram)
    check_dim_names(diagram, given, "--dims", takes=fixed)  # another dimension of the file would size nothing
    if "d" in fixed and args.d_model != D_MODEL:
        raise DiagError(f"--d-model builds the head recipe's model; '{diagram.name}' has its own width d, which "
                        f"the learning-rate schedule follows: give --dims d={args.d_model}")
    return given


def approximator_used(diagram, dims: dict[str, int]) -> bool:
    """Whether ``--approximator`` reaches the model: some learnable map has no ``via`` of its own,
    so the compiled module differs (its tensors' names or shapes) between linear and mlp. Found
    on torch's meta device, allocating nothing; when that cannot be done, assumed so."""
    import torch

    from ..lower import compile

    try:
        with torch.device("meta"):
            a, b = (compile(diagram, dims=dims, approximator=p).state_dict() for p in ("linear", "mlp"))
    except Exception:  # the check is a courtesy: the real build reports its own errors
        return True
    return {k: v.shape for k, v in a.items()} != {k: v.shape for k, v in b.items()}


def run_lm(args: argparse.Namespace, diagram, started: float, recipe: HeadParts) -> int:
    import torch

    from ..data import load_corpus
    from ..train.lm import Spec, WholeModel, sizes, sources
    from ..lower.lower import copy_module
    from ..train import checkpoint
    from ..train.loop import train
    from ..train.run import Tokenizer
    _config, _test, check_windows, memory_errors, device, timing, cut_short = recipe

    given = check_options(args, diagram)
    say = print if int(os.environ.get("RANK", "0")) == 0 else (lambda *a, **k: None)
    corpus = load_corpus(args.data)
    check_windows(corpus, args.context, args.batch_size)
    size = sizes(diagram, given, len(corpus.vocab))
    if args.approximator != APPROXIMATOR and not approximator_used(diagram, size.dims):
        raise DiagError(f"--approximator {args.approximator} would change nothing: every learnable map of "
                        f"'{diagram.name}' names its own approximator (via ...)")
    texts, main = sources(args.file)
    spec = Spec(texts, main, diagram.name, size.dims, args.approximator, size.dims.get("d", args.d_model))

    with memory_errors():  # built (and checked causal) once: training and the test take copies of it
        torch.manual_seed(args.seed)
        built = WholeModel(diagram, spec)
    n = sum(p.numel() for p in built.parameters())

    def make():
        return copy_module(built)

    say(f"corpus {corpus.name}: {len(corpus.vocab):,} words; {corpus.train.numel():,} / {corpus.valid.numel():,} / "
        f"{corpus.test.numel():,} tokens (train / valid / test)")
    baseline = corpus.unigram_perplexity()
    say(f"unigram perplexity on valid: {baseline:.1f}")
    say(f"model: '{diagram.name}' as a whole language model: {n:,} parameters")
    say(size.line() + f"; context {args.context}, batch {args.batch_size}, schedule width {spec.d_model}")
    out = Path(args.out)  # (checked by train.run_folder)
    out.mkdir(parents=True, exist_ok=True)
    style = "shakespeare" if corpus.name == "shakespeare" else "words"
    Tokenizer(tuple(corpus.vocab), style).save(out)
    if int(os.environ.get("RANK", "0")) == 0:
        config.save(args, out)
    with memory_errors():
        history = train(make, corpus.train, corpus.valid, _config(args, started), out_dir=out, resume=args.resume,
                        log=say)
    say(timing(history))
    last = history.rows[-1] if history.rows else {"valid_ppl": None, "step": 0}
    result = {"diagram": diagram.name, "kind": "lm", "parameters": n, "sizes": size.dims, "unigram_ppl": baseline,
              "valid_ppl": last["valid_ppl"], "steps": last["step"]}
    if int(os.environ.get("RANK", "0")) == 0:
        verdict = None if args.no_test else _test(make, corpus, out, args, result, device)
        from ..syntax.source import write_atomic

        write_atomic(out / "result.json", json.dumps(result, indent=2) + "\n")
        say(f"wrote {out / 'log.csv'}, {out / checkpoint.NAME}, {out / 'tokenizer.json'}, "
            f"{out / 'result.json'}")
        if verdict:
            say(verdict + cut_short(history, args.clock))
    return 0
