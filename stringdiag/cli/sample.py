"""``stringdiag sample DIR --prompt TEXT --tokens N``: text from a trained language model."""
from __future__ import annotations

import argparse
from pathlib import Path

from ..errors import DiagError
from . import options
from .options import positive

HELP = "continue a prompt with a language model trained by 'stringdiag train' (a run or a save_pretrained folder)"
EXAMPLES = """stringdiag sample runs/gpt --prompt "the king" --tokens 20
stringdiag sample runs/gpt --prompt "the king" --tokens 20 --temperature 0.8 --top-k 40 --seed 1"""


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("folder", metavar="DIR", help="a training run (-o of train) or a save_pretrained folder")
    p.add_argument("--prompt", required=True, metavar="TEXT", help="the text to continue")
    p.add_argument("--tokens", type=positive, default=20, metavar="N", help="how many tokens to add")
    p.add_argument("--temperature", type=options.number(low=0.0, high=1e6, low_open=False, what="a number >= 0"), default=1.0,
                   metavar="T", help="divides the logits (0: always the likeliest token)")
    p.add_argument("--top-k", type=positive, default=None, metavar="K", help="sample among the K likeliest only")
    p.add_argument("--seed", type=options.seed, default=0)


def run(args: argparse.Namespace) -> int:
    from ..train.run import from_pretrained, generate, load_run

    folder = Path(args.folder)
    if not folder.is_dir():
        raise DiagError(f"{options.short(args.folder)} is not a folder (give a training run's -o, or a "
                        "save_pretrained folder)")
    if (folder / "config.json").is_file() and not (folder / "checkpoint.safetensors").is_file():
        model, tokenizer = from_pretrained(folder)
        context = None
    else:
        got = load_run(folder)
        model, tokenizer, context = got.model, got.tokenizer, got.context
    if tokenizer is None:
        raise DiagError(f"{options.short(args.folder)} has no tokenizer.json: nothing turns the prompt into token ids")
    prompt = tokenizer.encode(args.prompt)
    if not prompt:
        raise DiagError(f"--prompt: {args.prompt!r} has no words the tokenizer reads")
    out = generate(model, prompt, args.tokens, args.temperature, args.top_k, args.seed, context)
    print(f"{tokenizer.decode(prompt)} | {tokenizer.decode(out)}")
    return 0
