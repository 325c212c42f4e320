"""Benchmark: a sparse mixture of SwiGLU experts (gallery/modern/mixtral.diag's
MixtralSparseMoeBlock), four ways on the same tokens and weights:

- routed: the compiled block, ``moe_swiglu`` lowered natively (tokens grouped by expert, each
  chosen expert run once on its tokens, results added back in place);
- gathered (with ``--gathered``): the same diagram with ``native=False`` (the prelude's body:
  each token's k chosen weight matrices gathered, then contracted; memory s·k·d·f, so slow that it
  is left out by default: 12.5 s against Hugging Face's 64 ms at the default sizes, measured once);
- dense: every expert on every token, weighted 0 where not chosen (hand-written here: what the
  language computed before ``topk``);
- hf: Hugging Face's ``MixtralSparseMoeBlock`` (eager experts), the reference of the ratios.

Forward and forward + backward, each way timed interleaved with the others in rounds (each way
first in turn), median of repeats, torch at one thread, float32. The dense way's work grows with
e, the others' with k: its ratio grows with e / k.

    .venv/bin/python benchmarks/bench_moe.py [--tokens 512] [--experts 8] [--repeat 5] [--gathered]
    .venv/bin/python benchmarks/bench_moe.py --row    # the speed table's row: fwd+bwd, CPU time
"""
from __future__ import annotations

import argparse
import statistics
import time
from pathlib import Path
from typing import Callable

import torch
import torch.nn.functional as F

import stringdiag
from stringdiag.lower.lower import compile as lower

FILE = Path(__file__).resolve().parent.parent / "gallery" / "modern" / "mixtral.diag"


def dense(x: torch.Tensor, gate: torch.Tensor, gate_up: torch.Tensor, down: torch.Tensor, k: int) -> torch.Tensor:
    """Every expert on every token, the unchosen weighted 0."""
    v, ids = torch.topk(x @ gate.T, k, dim=-1)
    p = torch.zeros(*x.shape[:-1], gate.shape[0], dtype=x.dtype).scatter(-1, ids, torch.softmax(v, dim=-1))
    h = torch.einsum("bsd,efd->bsef", x, gate_up)
    f = h.shape[-1] // 2
    return torch.einsum("bse,edf,bsef->bsd", p, down, F.silu(h[..., :f]) * h[..., f:])


def timed(fn: Callable[[], torch.Tensor], backward: bool) -> float:
    start = time.perf_counter()
    y = fn()
    if backward:
        y.sum().backward()
    return time.perf_counter() - start


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--tokens", type=int, default=512)
    ap.add_argument("--experts", type=int, default=8)
    ap.add_argument("--chosen", type=int, default=2)
    ap.add_argument("--width", type=int, default=256)
    ap.add_argument("--hidden", type=int, default=512)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--gathered", action="store_true", help="also time the prelude's body (slow)")
    ap.add_argument("--row", action="store_true", help="routed against hf, fwd+bwd, by CPU time (cpu_clock)")
    a = ap.parse_args(argv)
    torch.set_num_threads(1)
    if a.row:
        return row(a)
    import transformers
    from transformers.models.mixtral.modeling_mixtral import MixtralSparseMoeBlock

    config = transformers.MixtralConfig(hidden_size=a.width, intermediate_size=a.hidden, num_local_experts=a.experts,
                                        num_experts_per_tok=a.chosen)
    hf = MixtralSparseMoeBlock(config)
    with torch.no_grad():
        for p in hf.parameters():
            p.normal_(0, 0.05)
    dims = {"d": a.width, "f": a.hidden, "e": a.experts, "k": a.chosen}
    block = stringdiag.load(str(FILE))["MixtralSparseMoeBlock"]
    routed = stringdiag.compile(block, dims=dims, approximator="linear")
    gathered = lower(block, dims=dims, approximator="linear", native=False)
    names = {"gate.weight": "gate.weight", "experts.*": "*.weight"}
    for m in (routed, gathered):
        stringdiag.load_weights(m, hf.state_dict(), names)
    x = torch.randn(1, a.tokens, a.width)
    w = {n.split(".")[0]: t for n, t in routed.named_parameters()}
    ways = {"routed": lambda: routed(x), "dense": lambda: dense(x, w["gate"], w["gate_up_proj"], w["down_proj"], a.chosen),
            "hf": lambda: hf(x), **({"gathered": lambda: gathered(x)} if a.gathered else {})}
    with torch.no_grad():
        ref = hf(x)
        for name, fn in ways.items():
            assert torch.allclose(fn(), ref, atol=1e-5), name
    print(f"s = {a.tokens}, e = {a.experts}, k = {a.chosen}, d = {a.width}, f = {a.hidden}, float32, 1 thread; "
          f"median of {a.repeat}, ratio to hf")
    for backward in (False, True):
        times: dict[str, list[float]] = {n: [] for n in ways}
        order = list(ways)
        for r in range(a.repeat):
            for name in order[r % len(order):] + order[:r % len(order)]:
                with torch.set_grad_enabled(backward):
                    times[name].append(timed(ways[name], backward))
        med = {n: statistics.median(t) for n, t in times.items()}
        print("forward + backward" if backward else "forward")
        for name, t in med.items():
            print(f"  {name:<9} {t * 1e3:8.2f} ms   {t / med['hf']:5.2f}x")


def row(a) -> None:
    """The routed block against Hugging Face's, forward + backward, interleaved CPU-time rounds."""
    import sys
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    import cpu_clock as C
    import transformers
    from transformers.models.mixtral.modeling_mixtral import MixtralSparseMoeBlock

    config = transformers.MixtralConfig(hidden_size=a.width, intermediate_size=a.hidden, num_local_experts=a.experts,
                                        num_experts_per_tok=a.chosen)
    hf = MixtralSparseMoeBlock(config)
    with torch.no_grad():
        for p in hf.parameters():
            p.normal_(0, 0.05)
    block = stringdiag.load(str(FILE))["MixtralSparseMoeBlock"]
    routed = stringdiag.compile(block, dims={"d": a.width, "f": a.hidden, "e": a.experts, "k": a.chosen},
                                approximator="linear")
    stringdiag.load_weights(routed, hf.state_dict(), {"gate.weight": "gate.weight", "experts.*": "*.weight"})
    x = torch.randn(1, a.tokens, a.width)
    with torch.no_grad():
        assert torch.allclose(routed(x), hf(x), atol=1e-5)
    p = C.pair(lambda: routed(x).sum().backward(), lambda: hf(x).sum().backward(), max(5, a.repeat))
    C.row(f"Mixtral sparse-MoE block fwd+bwd (s = {a.tokens}, e = {a.experts}, k = {a.chosen}, d = {a.width}, "
          f"f = {a.hidden})", "Hugging Face `MixtralSparseMoeBlock`",
          f"{p.ratio:.2f} ({p.mine * 1e3:.1f} vs {p.ref * 1e3:.1f} ms)", "<= 1.0", p.ratio <= 1.0)


if __name__ == "__main__":
    main()
