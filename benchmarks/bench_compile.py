"""Benchmark: what ``torch.compile`` costs for the study's language model with M1 heads compiled
from the diagram (batched), against the same model with the heads written by hand
(``bench_heads.py``'s ``HandHeads``: the same parameters), and what it is given to trace.

For each model: the graphs dynamo makes of one forward pass, its graph breaks (and their reasons)
and the operations it traced (``torch._dynamo.explain``); then the first training step under
``torch.compile`` (forward, backward, Adam) by CPU time, less one eager step of the same round:
the compile's own CPU time. The two models are compiled in interleaved rounds (each first in
turn, after one untimed compile of each; ``torch._dynamo.reset()`` before each compile,
Inductor's caches off), the ratio is the median of the rounds' ratios. The default backend is ``aot_eager`` (dynamo's tracing and AOT
autograd's forward and backward graphs: the part the lowering decides, seconds of CPU);
``--backend inductor`` adds Inductor's code generation and C++ compiler (children's CPU counted
too; minutes a round on a 2-core machine).

    .venv/bin/python benchmarks/bench_compile.py [--rounds 5] [--backend aot_eager|inductor] [--vmap]

``--vmap`` adds the same model with its heads run by ``torch.vmap`` (the layout before
``lower/headaxis.py``), in the same rounds.
"""
from __future__ import annotations

import argparse
import resource
import statistics
import sys
import time
from pathlib import Path

import torch

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import bench_heads as H  # noqa: E402
import cpu_clock as C  # noqa: E402

import stringdiag  # noqa: E402
from stringdiag.train.model import LanguageModel  # noqa: E402


def cpu_now() -> float:
    """This process's CPU seconds and those of its finished children (Inductor's compiler runs)."""
    kids = resource.getrusage(resource.RUSAGE_CHILDREN)
    return time.process_time() + kids.ru_utime + kids.ru_stime


def tokens() -> torch.Tensor:
    return torch.randint(H.CONFIG["vocab"], (H.BATCH, H.CONTEXT + 1), generator=torch.Generator().manual_seed(0))


def traced(model: torch.nn.Module) -> tuple[int, int, int, list[str]]:
    """Dynamo's graphs, graph breaks and traced operations for one forward pass; break reasons."""
    torch._dynamo.reset()
    out = torch._dynamo.explain(model)(tokens()[:, :-1])
    reasons = sorted({str(b.reason).splitlines()[0][:120] for b in out.break_reasons})
    return out.graph_count, out.graph_break_count, out.op_count, reasons


def compile_cpu(model: torch.nn.Module, backend: str) -> float:
    """CPU seconds of the first compiled training step less those of one eager step."""
    x = torch.randint(H.CONFIG["vocab"], (H.BATCH, H.CONTEXT + 1), generator=torch.Generator().manual_seed(0))
    opt = torch.optim.Adam(model.parameters(), lr=1e-4)
    H.step(model, opt, x)  # warm: the eager kernels' first-call costs are not the compile's
    t = cpu_now()
    H.step(model, opt, x)
    eager = cpu_now() - t
    torch._dynamo.reset()
    fast = torch.compile(model, backend=backend)
    t = cpu_now()
    H.step(fast, opt, x)
    return cpu_now() - t - eager


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--backend", default="aot_eager", choices=["aot_eager", "inductor"])
    ap.add_argument("--no-header", action="store_true")
    ap.add_argument("--vmap", action="store_true", help="also the heads run by torch.vmap, as before")
    a = ap.parse_args(argv)
    torch.set_num_threads(1)
    import torch._inductor.config as inductor
    inductor.fx_graph_cache = False  # every round compiles afresh
    inductor.compile_threads = 1
    head = stringdiag.load(H.GALLERY / "anatomy.diag")["M1"]
    torch.manual_seed(0)
    models = {"M1": LanguageModel(head, **H.CONFIG), "hand-written": H.hand_written(head)}
    assert all(layer.batched for layer in models["M1"].layers), "M1 must batch"
    if a.vmap:  # the heads as they ran before lower/headaxis.py: torch.vmap over functional_call
        torch.manual_seed(0)
        models["M1 by vmap"] = LanguageModel(head, **H.CONFIG)
        for layer in models["M1 by vmap"].layers:
            layer.heads.stacked = ()
    for name, model in models.items():
        graphs, breaks, ops, why = traced(model)
        print(f"{name}: {graphs} graph(s), {breaks} graph break(s), {ops} traced operations"
              + (f"; breaks: {why}" if why else ""), flush=True)
    if not a.no_header:
        C.header()
    got: dict[str, list[float]] = {name: [] for name in models}
    names = list(models)
    for name in names:  # one untimed compile each: dynamo's and AOT's own first-use costs fall on neither
        compile_cpu(models[name], a.backend)
    for r in range(a.rounds):
        for name in names[r % len(names):] + names[:r % len(names)]:
            got[name].append(compile_cpu(models[name], a.backend))
        print(f"round {r + 1}: " + ", ".join(f"{n} {got[n][-1]:.2f} s" for n in names), file=sys.stderr, flush=True)
    ratio = statistics.median(x / y for x, y in zip(got["M1"], got["hand-written"]))
    C.row(f"`torch.compile` ({a.backend}) CPU time, M1 language model (2 layers x 4 heads, d_model 128)",
          f"hand-written heads ({statistics.median(got['hand-written']):.2f} s CPU)",
          f"{ratio:.2f} ({statistics.median(got['M1']):.2f} s CPU; median of {a.rounds})", "<= 1.2", ratio <= 1.2)
    if a.vmap:
        old = statistics.median(x / y for x, y in zip(got["M1 by vmap"], got["hand-written"]))
        C.row(f"`torch.compile` ({a.backend}) CPU time, M1 language model, heads by vmap (before)",
              "hand-written heads", f"{old:.2f} ({statistics.median(got['M1 by vmap']):.2f} s CPU)", "-", None)


if __name__ == "__main__":
    main()
