"""Benchmark: generating through the incremental form (``compile(..., incremental=True)``).

Three measurements, each a ratio within one run, torch at one thread, float32, medians of
repeats interleaved in rounds (each way first in turn), timed by the thread's CPU time
(``--clock cpu``, the default: other processes on a shared machine do not inflate it; torch at
one thread runs every kernel on this thread) or by the wall clock (``--clock wall``):

1. ``hf``: tokens per second of ``stringdiag.generate`` for the GPT of gallery/lm.diag against
   Hugging Face's ``GPT2LMHeadModel.generate`` with its key/value cache, the same sizes and the
   same weights (Hugging Face's random initialisation, ported with ``load_weights``), greedy, a
   prompt of 32 ids and 512 new ids (``--sizes tiny`` is lm.diag's defaults, ``small`` GPT-2
   small's: 12 layers of 768, 50,257 ids). Both produce the same ids (checked, printed).
2. ``flat``: the time of one step at position 4,096 over the time at 256, for the recurrent forms
   of RetNet, gated linear attention and Mamba (gallery/modern/retnet.diag, gla.diag, mamba.diag)
   and causal linear attention (gallery/similarity.diag): their state does not grow; for contrast, Llama of gallery/lm.diag (a key/value cache that does): each
   form brought to the position by one prefill, then steps timed; and the state's size there.
3. ``nocache``: ``generate`` with the incremental form against ``cache=False`` (the whole window
   run for every token), GPT tiny, prompt 32, 512 new ids: the speed-up.

    .venv/bin/python benchmarks/bench_generate.py [--only hf flat nocache] [--sizes tiny small]
        [--repeat 3] [--tokens 512] [--clock cpu|wall]
"""
from __future__ import annotations

import argparse
import json
import statistics
import time
from pathlib import Path

import torch

import stringdiag
from stringdiag.train.run import generate

ROOT = Path(__file__).resolve().parents[1]
LM = ROOT / "gallery" / "lm.diag"
SIZES = {"tiny": dict(v=256, d=64, h=4, k=16, f=256, L=2),  # gallery/lm.diag's defaults
         "small": dict(v=50257, d=768, h=12, k=64, f=3072, L=12)}  # GPT-2 small
# Hugging Face's GPT-2 names -> the compiled GPT's: the shipped map (tests/test_lm_gallery.py reads it too)
GPT2 = json.loads((ROOT / "gallery" / "lm.gpt2.json").read_text())


def clock(kind: str):
    return time.thread_time if kind == "cpu" else time.perf_counter


def interleaved(ways: dict, repeat: int, now) -> dict[str, list[float]]:
    """Each way timed ``repeat`` times, in rounds, each way first in turn."""
    names, times = list(ways), {n: [] for n in ways}
    for r in range(repeat):
        for n in names[r % len(names):] + names[:r % len(names)]:
            t = now()
            ways[n]()
            times[n].append(now() - t)
    return times


def gpt_pair(size: str, incremental: bool = True):
    """Hugging Face's GPT2LMHeadModel and the GPT of gallery/lm.diag with its weights."""
    import transformers

    s = SIZES[size]
    config = transformers.GPT2Config(vocab_size=s["v"], n_embd=s["d"], n_head=s["h"], n_layer=s["L"],
                                     n_inner=s["f"], n_positions=1024, resid_pdrop=0.0, attn_pdrop=0.0,
                                     embd_pdrop=0.0, activation_function="gelu_new", tie_word_embeddings=True,
                                     bos_token_id=0, eos_token_id=0, pad_token_id=0)
    torch.manual_seed(0)
    ref = transformers.GPT2LMHeadModel(config).eval()
    gpt = stringdiag.load(LM)["GPT"]
    ours = stringdiag.compile(gpt, dims=s, approximator="linear", incremental=incremental).eval()
    stringdiag.load_weights(ours.net if incremental else ours, ref.state_dict(), GPT2["map"],
                            transpose=GPT2["transpose"])
    return ref, ours


def bench_hf(sizes: list[str], prompt: int, tokens: int, repeat: int, now) -> None:
    print(f"\n## tokens/s of generate: GPT (gallery/lm.diag) vs Hugging Face GPT2LMHeadModel.generate "
          f"(cache), prompt {prompt}, {tokens} new ids, greedy")
    print(f"{'size':>6} {'stringdiag tok/s':>17} {'HF tok/s':>9} {'ratio':>6}  same ids")
    for size in sizes:
        ref, inc = gpt_pair(size)
        ids = torch.randint(0, SIZES[size]["v"], (1, prompt), generator=torch.Generator().manual_seed(1))
        got = {}

        def ours():
            got["ours"] = generate(inc, ids[0], tokens, temperature=0)

        def theirs():
            out = ref.generate(ids, attention_mask=torch.ones_like(ids), max_new_tokens=tokens,
                               min_new_tokens=tokens, do_sample=False, use_cache=True)
            got["hf"] = out[0, prompt:].tolist()

        with torch.no_grad():
            times = interleaved({"ours": ours, "hf": theirs}, repeat, now)
        a, b = statistics.median(times["ours"]), statistics.median(times["hf"])
        same = sum(x == y for x, y in zip(got["ours"], got["hf"]))
        print(f"{size:>6} {tokens / a:17.1f} {tokens / b:9.1f} {b / a:6.2f}  {same}/{tokens}")


def _form(file: Path, name: str, dims: dict):
    d = stringdiag.load(file)[name]
    inc = stringdiag.compile(d, dims=dims, incremental=True).eval()
    torch.manual_seed(0)
    return d, inc


def bench_flat(repeat: int, now, steps: int = 16) -> None:
    print("\n## time per step at position 4,096 over position 256 (one sequence)")
    print(f"{'form':>22} {'ms/step @256':>13} {'ms/step @4096':>14} {'ratio':>6} {'state @256':>11} {'@4096':>10}")
    heads = {"d": 16, "k": 16}  # each head's key and value widths (dm = 64, h = 4: the files' defaults)
    forms = [(ROOT / "gallery" / "modern" / "retnet.diag", "MSRRecurrent", heads),
             (ROOT / "gallery" / "modern" / "gla.diag", "GLARecurrent", heads),
             (ROOT / "gallery" / "modern" / "mamba.diag", "MambaMixer", {}),
             (ROOT / "gallery" / "similarity.diag", "CausalLinearAttention", {"d": 64, "k": 64}),
             (LM, "Llama", {})]
    for file, name, dims in forms:
        d, inc = _form(file, name, dims)
        vocab = d.id_range(d.inputs[0])
        known = {**{n: decl.default for n, decl in d.program.dims.items() if decl.default is not None}, **dims}
        width = None if vocab is not None else d.input_types[0][1].evaluate(known)
        gen = torch.Generator().manual_seed(2)

        def block(n: int) -> torch.Tensor:
            return (torch.randint(0, 256, (1, n), generator=gen) if vocab is not None
                    else torch.randn(1, n, width, generator=gen))

        states, sizes = {}, {}
        with torch.no_grad():
            for pos in (256, 4096):
                _, states[pos] = inc.prefill(block(pos), inc.initial_state(1))
                sizes[pos] = states[pos].numel() * 4

        def stepper(pos: int):
            def run():
                with torch.no_grad():
                    for _ in range(steps):
                        _, states[pos] = inc.step(block(1)[:, 0], states[pos])
            return run
        times = interleaved({256: stepper(256), 4096: stepper(4096)}, repeat, now)
        a, b = (statistics.median(times[p]) / steps * 1e3 for p in (256, 4096))
        print(f"{name:>22} {a:13.3f} {b:14.3f} {b / a:6.2f} {sizes[256] / 1e3:9.1f}kB {sizes[4096] / 1e3:8.1f}kB")


def bench_nocache(prompt: int, tokens: int, repeat: int, now) -> None:
    print(f"\n## generate with the incremental form vs cache=False (whole window per token), GPT tiny, "
          f"prompt {prompt}, {tokens} new ids")
    _, inc = gpt_pair("tiny")
    par = stringdiag.compile(stringdiag.load(LM)["GPT"], dims=SIZES["tiny"], approximator="linear").eval()
    par.load_state_dict(inc.state_dict())
    ids = torch.randint(0, 256, (prompt,), generator=torch.Generator().manual_seed(1)).tolist()
    got = {}
    times = interleaved({"cache": lambda: got.__setitem__("cache", generate(inc, ids, tokens, temperature=0)),
                         "no cache": lambda: got.__setitem__("none", generate(par, ids, tokens, temperature=0,
                                                                                cache=False))}, repeat, now)
    a, b = statistics.median(times["cache"]), statistics.median(times["no cache"])
    print(f"cache {tokens / a:.1f} tok/s, no cache {tokens / b:.1f} tok/s: speed-up {b / a:.1f}x; "
          f"same ids: {got['cache'] == got['none']}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--only", nargs="+", choices=("hf", "flat", "nocache"), default=["hf", "flat", "nocache"])
    ap.add_argument("--sizes", nargs="+", choices=sorted(SIZES), default=["tiny", "small"])
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--prompt", type=int, default=32)
    ap.add_argument("--tokens", type=int, default=512)
    ap.add_argument("--clock", choices=("cpu", "wall"), default="cpu")
    args = ap.parse_args()
    torch.set_num_threads(1)
    now = clock(args.clock)
    print(f"torch {torch.__version__}, 1 thread, float32, clock: {args.clock}, median of {args.repeat} interleaved")
    if "hf" in args.only:
        bench_hf(args.sizes, args.prompt, args.tokens, args.repeat, now)
    if "flat" in args.only:
        bench_flat(args.repeat, now)
    if "nocache" in args.only:
        bench_nocache(args.prompt, args.tokens, args.repeat, now)


if __name__ == "__main__":
    main()
