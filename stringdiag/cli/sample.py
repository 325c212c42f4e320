"""``stringdiag sample DIR --prompt TEXT --tokens N``: text from a trained language model, generated
through the diagram's incremental form (a key/value cache, a recurrent state) when it has one."""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

from ..errors import DiagError
from . import options
from .options import positive

HELP = "continue a prompt with a language model trained by 'stringdiag train' (a run or a save_pretrained folder)"
EXAMPLES = """\
stringdiag train stringdiag:gallery/lm.diag -d GPT --data synthetic --dims d=16,k=8,f=32 --context 8 \\
    --max-steps 20 -o runs/gpt
stringdiag sample runs/gpt --prompt "w01 w02" --tokens 20
stringdiag sample runs/gpt --prompt "w01 w02" --tokens 20 --temperature 0.8 --top-k 40 --top-p 0.9 --seed 1
stringdiag sample runs/gpt --prompt "w01 w02" --prompt "w03" --tokens 64 --stop "<eos>"
stringdiag sample runs/gpt --prompt "w01 w02" --tokens 64 --no-cache"""


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("folder", metavar="DIR", help="a training run (-o of train) or a save_pretrained folder")
    p.add_argument("--prompt", required=True, action="append", metavar="TEXT",
                   help="the text to continue (give it several times for a batch: one line out each)")
    p.add_argument("--tokens", type=positive, default=20, metavar="N", help="how many tokens to add")
    p.add_argument("--temperature", type=options.number(low=0.0, high=1e6, low_open=False, what="a number >= 0"), default=1.0,
                   metavar="T", help="divides the logits (0: always the likeliest token)")
    p.add_argument("--top-k", type=positive, default=None, metavar="K", help="sample among the K likeliest only")
    p.add_argument("--top-p", type=options.number(low=0.0, high=1.0, what="a probability in (0, 1]"), default=None,
                   metavar="P", help="sample among the likeliest tokens whose probability adds up to P")
    p.add_argument("--stop", action="append", default=[], metavar="WORD",
                   help="end a continuation at this word (kept); may be given several times")
    p.add_argument("--no-cache", action="store_true",
                   help="run the whole model on the window for every token, not its incremental form (to compare)")
    p.add_argument("--seed", type=options.seed, default=0)


def run(args: argparse.Namespace) -> int:
    from ..train import checkpoint
    from ..train.run import from_pretrained, generate, incremental_of, load_run

    folder = Path(args.folder)
    if not folder.is_dir():
        raise DiagError(f"{options.short(args.folder)} is not a folder (give a training run's -o, or a "
                        "save_pretrained folder)")
    if (folder / "config.json").is_file() and not (folder / checkpoint.NAME).is_file():
        model, tokenizer = from_pretrained(folder)
        context = None
    else:
        got = load_run(folder)
        model, tokenizer, context = got.model, got.tokenizer, got.context
    if tokenizer is None:
        raise DiagError(f"{options.short(args.folder)} has no tokenizer.json: nothing turns the prompt into token ids")
    prompts = [tokenizer.encode(text) for text in args.prompt]
    for text, ids in zip(args.prompt, prompts):
        if not ids:
            raise DiagError(f"--prompt: {text!r} has no words the tokenizer reads")
    stop = []
    for word in args.stop:
        if word not in tokenizer.words:
            raise DiagError(f"--stop: {word!r} is not a word of the tokenizer's vocabulary")
        stop.append(tokenizer.words.index(word))
    inc = None
    if not args.no_cache:
        try:
            inc = incremental_of(model)
        except DiagError as e:
            print(f"note: {e}; generating without a cache", file=sys.stderr)
    if inc is not None:
        _check_cache_memory(inc, prompts, args.tokens, context)
    progress = _progress(args.tokens)
    out = generate(model, prompts, args.tokens, args.temperature, args.top_k, args.seed, context, top_p=args.top_p,
                   stop=stop, cache=inc is not None, progress=progress)
    if progress is not None:
        print(file=sys.stderr)
    for ids, got in zip(prompts, out):
        print(f"{tokenizer.decode(ids)} | {tokenizer.decode(got)}")
    return 0


def _check_cache_memory(inc, prompts: list[list[int]], tokens: int, context: int | None) -> None:
    """Refuse before generating when the state at the last position would not fit: measured after
    one position and after two, and extrapolated (a cache grows by the same amount per position)."""
    import torch

    ids = torch.tensor([prompts[0][:1]], device=next(inc.parameters()).device)
    with torch.no_grad():
        _, state = inc.prefill(ids, inc.initial_state(1))
        first = state.numel()  # before the next call, which consumes the state
        _, state = inc.prefill(ids, state)
    per = state.numel() - first
    longest = max(len(p) for p in prompts) + tokens
    positions = min(longest, context) if context else longest
    need = len(prompts) * (first + per * (positions - 1)) * next(inc.parameters()).element_size()
    options.check_memory(need, f"for the state of {len(prompts)} sequence(s) at position {positions:,}")


def _progress(total: int):
    """A progress line on the terminal's stderr for long generations (none when it is not a terminal)."""
    if total < 64 or not sys.stderr.isatty():
        return None

    def show(done: int, of: int) -> None:
        print(f"\r{done}/{of} tokens", end="", file=sys.stderr, flush=True)
    return show
