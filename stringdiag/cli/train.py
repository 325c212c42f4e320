"""``stringdiag train FILE -d NAME``: a decoder-only language model with this attention head."""
from __future__ import annotations

import argparse
import json
import os
import time
from contextlib import contextmanager
from pathlib import Path

from ..errors import DiagError
from . import config, options
from ..syntax.source import write_atomic
from .common import load_reporting, pick
from .options import positive
from .outputs import checked, folder
from .train_lm import APPROXIMATOR, D_MODEL  # (whole-model training tells a changed default by them)

MAX_LAYERS = 1024  # for --layers and --heads: each head of each layer is a compiled diagram
# --norm-after's default, the generators App. C follows by a layer norm (train.model.STABILISED;
# repeated here so that building the command line does not import torch)
NORM_AFTER = ("AttApply", "LinAttApply")

EXAMPLES = """stringdiag train stringdiag:gallery/anatomy.diag -d M1 --data synthetic --max-steps 100 -o runs/m1
stringdiag train stringdiag:gallery/anatomy.diag -d M1 --data synthetic -o runs/m1 --max-steps 200 --resume"""
HELP = "train a decoder-only language model whose heads are the diagram (App. C of the paper)"


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("file", metavar="FILE")
    p.add_argument("--config", metavar="FILE.toml", default=None,
                   help="options from a TOML or JSON file, each option a key (max-steps = 200); the command "
                        "line wins. Every run writes its resolved options as -o DIR/run-config.json, which "
                        "--config reads back")
    p.add_argument("-d", "--diagram", metavar="NAME", required=True,
                   help="the head, a diagram [s, d] -> [s, d]; or a whole language model, [s] of v -> [s, v]")
    p.add_argument("--layers", type=options.integer(1, MAX_LAYERS), default=2)
    add_recipe(p, "stop after this many steps")
    p.add_argument("--time-budget", type=options.number(what="a positive number of seconds"), default=None,
                   metavar="SECONDS", help="training stops within this long: 80 %% of it when a test evaluation "
                   "follows (which then scores a fixed number of targets, see --test-tokens); for a run that "
                   "ends the same on any machine, give --max-steps instead")
    p.add_argument("--clock", choices=["wall", "cpu"], default="wall",
                   help="what --time-budget counts: wall-clock seconds, or this process's CPU seconds (all its "
                        "threads; a busy machine then slows the run but does not shorten it)")
    p.add_argument("-o", "--output", dest="out", default=None, metavar="DIR", type=folder,
                   help="checkpoints and log (default: runs/NAME)")
    p.add_argument("--resume", action="store_true", help="continue from the checkpoint in -o/--output")
    p.add_argument("--no-test", action="store_true", help="skip the stride-1 test evaluation at the end")
    p.add_argument("--test-tokens", type=positive, default=None, metavar="N",
                   help=f"score only the first N test tokens (default: all; {BUDGET_TEST_TOKENS:,} under "
                   "--time-budget, so that the verdict does not depend on the machine's load)")
    add_device(p)


def add_device(p: argparse.ArgumentParser) -> None:
    """Where and how training runs (train.device)."""
    p.add_argument("--device", type=device_spec, default="auto", metavar="DEVICE",
                   help="auto (CUDA when torch sees it, else the CPU; default), cpu, cuda, cuda:N or mps")
    p.add_argument("--precision", default="fp32", choices=["fp32", "bf16", "fp16"],
                   help="autocast the forward pass to bf16 or fp16 (fp16 with a gradient scaler); default fp32")
    p.add_argument("--compile", action="store_true", help="torch.compile the model for training")


def device_spec(text: str) -> str:
    """An argparse type: the form of a device (whether it is there is checked when the run starts)."""
    kind, colon, index = text.strip().partition(":")
    if kind in ("auto", "cpu", "mps") and not colon or kind == "cuda" and (
            not colon or index.isascii() and index.isdigit()):
        return text.strip()
    raise argparse.ArgumentTypeError(f"expected auto, cpu, cuda, cuda:N or mps, got {options._show(text)}")


def add_recipe(g, max_steps_help: str) -> None:
    """The options of the App. C recipe, shared by ``train`` and ``study``."""
    g.add_argument("--heads", type=options.integer(1, MAX_LAYERS), default=4)
    g.add_argument("--d-model", type=positive, default=D_MODEL)
    g.add_argument("--d-ff", type=positive, default=None, help="feed-forward width (default 4 x d-model)")
    g.add_argument("--context", type=positive, default=35)
    g.add_argument("--batch-size", type=positive, default=32)
    g.add_argument("--epochs", type=positive, default=1)
    g.add_argument("--max-steps", type=positive, default=None, help=max_steps_help)
    g.add_argument("--lr-scale", type=options.number(high=1e6), default=1.0,
                   help="scale of the Vaswani et al. schedule")
    g.add_argument("--warmup", type=positive, default=200)
    g.add_argument("--eval-every", type=positive, default=200, metavar="STEPS")
    g.add_argument("--approximator", default=APPROXIMATOR, choices=["linear", "mlp"])
    g.add_argument("--dims", default="", metavar="k=32", help="sizes for the heads' other fixed dimensions")
    add_norm_after(g)
    g.add_argument("--data", default="shakespeare", metavar="DIR",
                   help="'shakespeare' (embedded, default), 'synthetic', or a directory with ptb.{train,valid,test}.txt")
    g.add_argument("--seed", type=options.seed, default=0)


def add_norm_after(p: argparse.ArgumentParser) -> None:
    p.add_argument("--norm-after", default=None, metavar="NAMES",
                   help="definitions after whose uses in the head a layer norm is inserted (App. C, after Qin et "
                        f"al.): comma-separated (default: {','.join(NORM_AFTER)}; '' for none)")


def parse_names(text: str, option: str) -> list[str]:
    """``A,B`` -> ['A', 'B']: identifiers, each once; a blank text is no names."""
    if not text.strip():
        return []
    names: list[str] = []
    for part in (p.strip() for p in text.split(",")):
        if not part.isidentifier() or not part.isascii():
            raise options.UsageError(f"--{option}: expected comma-separated names, got {options._show(part)}")
        if part not in names:
            names.append(part)
    return names


def norm_after(text: str | None, prog) -> tuple[str, ...]:
    """The definitions ``--norm-after`` names: the default (AttApply, LinAttApply) when not given,
    which a file need not define; names given must each be a definition in the file's scope."""
    if text is None:
        return NORM_AFTER
    names = parse_names(text, "norm-after")
    for name in names:
        if prog.lookup_def(name) is None:
            raise DiagError(f"--norm-after: no diagram named {name!r} in {options.short(prog.path)}")
    return tuple(names)


TRAINING_SHARE = 0.8  # of --time-budget, when a test evaluation follows
# the test targets scored under --time-budget (unless --test-tokens): a fixed number, so that the last
# line does not depend on the machine's load (what the study scores too)
BUDGET_TEST_TOKENS = 10_000


def run(args: argparse.Namespace) -> int:
    with config.attributed(args):  # an error about a value the --config file set names its key
        return _train(args)


def run_folder(args: argparse.Namespace, name: str) -> None:
    """The run's folder (``-o``, else ``runs/NAME``) in ``args.out``, and with ``--resume`` its
    checkpoint, both checked before the corpus is read and the model made."""
    from ..train import checkpoint

    args.out = checked("-o/--output", folder, args.out or os.path.join("runs", name))
    if args.resume and not os.path.isfile(os.path.join(args.out, checkpoint.NAME)):
        raise DiagError(f"--resume: no checkpoint in {options.short(args.out)} ({checkpoint.NAME}); run without "
                        "--resume to start the run")


def _train(args: argparse.Namespace) -> int:
    from ..data import load_corpus
    from ..train import checkpoint
    from ..train.loop import train

    started = time.monotonic()
    check_test_tokens(args)
    device = _device(args)  # a device that is not there is refused before any work
    prog = load_reporting(args.file)
    (head,) = pick(prog, args.diagram)
    run_folder(args, head.name)
    if any(head.id_range(w) is not None for w in head.inputs):  # token ids in: a whole language model
        from ..train.lm import vocab_dim
        from .train_lm import HeadParts, run_lm

        if vocab_dim(head) is None:
            raise DiagError(f"'{head.name}' reads token ids but is no language model: train takes one of type "
                            f"[s] of v -> [s, v] (not {head.signature().split(' : ', 1)[1]})")
        return run_lm(args, head, started, HeadParts(_config, _test, check_windows, memory_errors, device,
                                                     timing, cut_short))
    dims = options.parse_dims(args.dims, head)
    after = norm_after(args.norm_after, prog)
    feature = head.input_types[0][-1].name if len(head.inputs) == 1 and head.input_types[0] else None
    check_feature(feature, dims, args, "head's")
    rank = int(os.environ.get("RANK", "0"))
    say = print if rank == 0 else (lambda *a, **k: None)
    corpus = load_corpus(args.data)
    check_windows(corpus, args.context, args.batch_size)
    make = _factory(head, len(corpus.vocab), dims, after, args)
    n, memory = check_size(make, args, len(corpus.vocab))
    say(f"corpus {corpus.name}: {len(corpus.vocab):,} words; {corpus.train.numel():,} / {corpus.valid.numel():,} / "
        f"{corpus.test.numel():,} tokens (train / valid / test)")
    baseline = corpus.unigram_perplexity()
    say(f"unigram perplexity on valid: {baseline:.1f}")
    if n is None:  # not counted on the meta device: count a real one
        n = _count_parameters(make, args.seed)
    say(f"model: {args.layers} layer(s) x {args.heads} '{head.name}' heads, d_model {args.d_model}: {n:,} parameters")
    sizes = _sizes(args, _head_sizes(head, dims, args), len(corpus.vocab))
    say(sizes + (f"; memory about {memory}" if memory else ""))
    say(f"device {device}" + (f", {args.precision}" if args.precision != "fp32" else "")
        + (", compiled" if args.compile else ""))
    out = Path(args.out)
    if rank == 0:
        out.mkdir(parents=True, exist_ok=True)
        config.save(args, out)
    with memory_errors():
        history = train(make, corpus.train, corpus.valid, _config(args, started), out_dir=out, resume=args.resume,
                        log=say)
    say(timing(history))
    last = history.rows[-1] if history.rows else {"valid_ppl": None, "step": 0}
    result = {"diagram": head.name, "parameters": n, "unigram_ppl": baseline, "valid_ppl": last["valid_ppl"],
              "steps": last["step"]}
    if rank == 0:
        verdict = None if args.no_test else _test(make, corpus, out, args, result, device)
        write_atomic(out / "result.json", json.dumps(result, indent=2) + "\n")
        say(f"wrote {out / 'log.csv'}, {out / checkpoint.NAME}, {out / 'result.json'}")
        if verdict:
            say(verdict + cut_short(history, args.clock))  # the last line: how the model did
    return 0


def check_test_tokens(args: argparse.Namespace) -> None:
    """--test-tokens must fill one window of --context (scored at stride 1): refused before training."""
    if args.test_tokens is not None and not args.no_test and args.test_tokens < args.context:
        raise options.UsageError(f"--test-tokens {args.test_tokens}: the test scores windows of --context "
                                 f"{args.context} tokens, so give at least {args.context} (or --no-test)")


def _device(args: argparse.Namespace):
    """The device of ``--device``, checked to be there, with ``--precision`` checked on it."""
    from ..train.device import Precision, check_precision, resolve

    device = resolve(args.device)
    check_precision(Precision(args.precision), device)
    return device


def _head_sizes(head, dims: dict[str, int], args: argparse.Namespace):
    from ..train.model import head_sizes

    return head_sizes(head, args.d_model // args.heads, dims)


def check_feature(feature: str | None, dims: dict[str, int], args: argparse.Namespace, whose: str) -> None:
    """``--dims`` may not size the heads' feature dimension: --d-model and --heads do."""
    if feature in dims:
        raise DiagError(f"--dims: '{feature}' is the {whose} feature dimension; its size is --d-model / --heads "
                        f"({args.d_model} / {args.heads} here)")


@contextmanager
def memory_errors():
    """An allocation that fails after all is the tool's error (out of memory), not a traceback."""
    try:
        yield
    except (RuntimeError, MemoryError) as e:
        raise (options.out_of_memory(e) or e) from None


def _factory(head, vocab: int, dims: dict[str, int], after: tuple[str, ...], args: argparse.Namespace):
    """The model of the command line, built on demand: check_size builds it with other layer counts and
    approximators (on the meta device), training and the test each build their own."""
    from ..train.model import LanguageModel

    def make(approximator=args.approximator, check_causal=True, layers=args.layers):
        return LanguageModel(head, vocab=vocab, d_model=args.d_model, n_layers=layers,
                             n_heads=args.heads, d_ff=args.d_ff, approximator=approximator, dims=dims,
                             check_causal=check_causal, norm_after=after)

    return make


def _count_parameters(make, seed: int) -> int:
    import torch

    torch.manual_seed(seed)
    with memory_errors():
        return sum(p.numel() for p in make().parameters())


def _config(args: argparse.Namespace, started: float):
    """The recipe; the time left for training is what remains of --time-budget's share of it."""
    from ..train.loop import TrainConfig

    budget, clock = args.time_budget, getattr(args, "clock", "wall")
    if budget is not None:
        share = budget if args.no_test else TRAINING_SHARE * budget
        spent = time.process_time() if clock == "cpu" else time.monotonic() - started
        budget = max(share - spent, 1e-3)
    return TrainConfig(context=args.context, batch_size=args.batch_size, epochs=args.epochs, lr_scale=args.lr_scale,
                       warmup=args.warmup, seed=args.seed, eval_every=args.eval_every, time_budget=budget,
                       clock=clock, max_steps=args.max_steps, device=args.device, precision=args.precision,
                       compile=args.compile)


BUSY = 0.5  # CPU seconds per wall-clock second (per thread) below which the machine was busy
BUSY_JUDGED = 5.0  # wall-clock seconds of training below which writing files, not the machine, may dominate


def timing(history) -> str:
    """How long training took: steps, wall-clock and CPU seconds."""
    steps = history.rows[-1]["step"] if history.rows else 0
    return (f"trained {steps:,} step{'s' if steps != 1 else ''} in {history.wall_seconds:.1f} s "
            f"({history.cpu_seconds:.1f} s of CPU)")


def cut_short(history, clock: str = "wall") -> str:
    """For the verdict line, when --time-budget stopped training before its steps: how far it got
    and whether the machine was busy (this process had less than half of its threads' time);
    else ''."""
    import torch

    if not history.budget_stopped:
        return ""
    steps = history.rows[-1]["step"] if history.rows else 0
    threads = max(torch.get_num_threads(), 1)
    busy = history.wall_seconds >= BUSY_JUDGED and history.cpu_seconds < BUSY * threads * history.wall_seconds
    why = (f"; the machine was busy ({history.cpu_seconds:.1f} s of CPU in {history.wall_seconds:.1f} s on "
           f"{threads} thread{'s' if threads != 1 else ''})" if busy else "")
    instead = "--max-steps" if clock == "cpu" else "--max-steps or --clock cpu"
    return (f" (--time-budget stopped training after {steps:,} of {history.planned:,} steps{why}; for a verdict "
            f"that does not depend on the machine, give {instead})")


def _sizes(args: argparse.Namespace, sizes, vocab: int) -> str:
    """Every size the model is built with, resolved (defaults included, each saying whence)."""
    from ..train.model import Source

    ff = args.d_ff or 4 * args.d_model
    own = "".join(f", {s.name} {s.value}" + ("" if s.source is Source.GIVEN else f" ({s.source.value})")
                  for s in sizes if s.source is not Source.FEATURE)
    return (f"sizes: vocabulary {vocab:,}, d_model {args.d_model}, heads {args.heads} "
            f"(feature width {args.d_model // args.heads}), d_ff {ff}, context {args.context}, "
            f"batch {args.batch_size}{own}")


def _test(make, corpus, out: Path, args: argparse.Namespace, result: dict, device) -> str:
    """The trained model's test perplexity at stride 1 (over --test-tokens; under a time budget over
    a fixed number of targets, never cut by the clock) and the unigram baseline's on the same
    targets (``unigram_scored_ppl``; the whole split's is ``unigram_test_ppl``), added to
    ``result``; returns the verdict."""
    from ..train import checkpoint
    from ..train.loop import score

    model = make()
    checkpoint.load(out / checkpoint.NAME, model)
    model.to(device)
    tokens = args.test_tokens or (BUDGET_TEST_TOKENS if args.time_budget else None)
    ids = corpus.test if tokens is None else corpus.test[: tokens + 1]
    got = score(model, ids, args.context, stride=1, progress="test (stride 1)")
    total = corpus.test.numel() - 1
    cut = got.scored < total
    unigram = corpus.unigram_perplexity("test", targets=got.scored) if cut else corpus.unigram_perplexity("test")
    result.update(test_ppl=got.perplexity, test_tokens=got.scored, unigram_test_ppl=corpus.unigram_perplexity("test"),
                  unigram_scored_ppl=unigram)
    part = f" over the first {got.scored:,} of {total:,} targets" if cut else ""
    than = "better than" if got.perplexity < unigram else "no better than"
    return f"test perplexity {got.perplexity:.1f}{part}: {than} unigram on the same targets ({unigram:.1f})"


def check_windows(corpus, context: int, batch_size: int) -> None:
    """Every split must hold a window of ``context + 1`` tokens, and train one batch of them."""
    for split in ("train", "valid", "test"):
        n = corpus.split(split).numel()
        if n < context + 1:
            raise DiagError(f"--context {context}: the {split} split of {corpus.name} has {n:,} tokens, "
                            f"fewer than one window of {context + 1}")
    stride = max(context // 2, 1)
    windows = (corpus.train.numel() - context - 1) // stride + 1
    world = int(os.environ.get("WORLD_SIZE", "1"))
    if windows < batch_size * world:
        raise DiagError(f"--batch-size {batch_size}: the train split of {corpus.name} has only {windows:,} windows "
                        f"of {context + 1} tokens" + (f" ({world} processes need {batch_size * world})"
                                                      if world > 1 else ""))


def check_size(make, args: argparse.Namespace, vocab: int) -> tuple[int | None, str | None]:
    """Refuse sizes that cannot be trained in this machine's memory, before allocating anything:
    parameters with their gradients and two Adam moments, and (roughly) the activations of a batch."""
    import torch

    try:  # one layer and two; the others are alike
        n1, n2 = (options.count_parameters(lambda policy: make(policy, check_causal=False, layers=k),
                                           args.approximator) for k in (1, 2))
    except options.TooLarge:
        raise options.too_large() from None
    if n1 is None or n2 is None:
        return None, None
    n = n1 + (args.layers - 1) * (n2 - n1)
    size = torch.get_default_dtype().itemsize
    b, t, d, h = args.batch_size, args.context, args.d_model, args.heads
    ff = args.d_ff or 4 * d
    # per layer: residual stream, norms and head values (~12 d), the feed-forward (2 ff), attention
    # matrices (2 h t); then the logits and their gradient; twice over for the backward pass
    acts = 2 * b * t * (args.layers * (12 * d + 2 * ff + 2 * h * t) + 3 * vocab)
    params, acts = 4 * n * size, acts * size
    options.check_memory(params + acts, f"({options.human(params)} for {n:,} parameters with their gradients and "
                         f"Adam's moments, {options.human(acts)} for activations)")
    return n, f"{options.human(params + acts)} at its peak ({options.human(params)} for parameters, gradients " \
              f"and Adam's moments, {options.human(acts)} for activations)"
