"""``stringdiag study FILE --layers 1-3 -o DIR``: every mechanism of a file as a language model, at
several depths, with one recipe (Khatri et al. (2024), Sec. 5 and App. C; Figs. 2 and 4).

``stringdiag study --report DIR [DIR ...]`` redraws the figures from the results, merging
the directories of several shards.
"""
from __future__ import annotations

import argparse
import os
import re
import sys
from pathlib import Path

from ..errors import DiagError
from . import options, outputs
from .common import load_reporting, pick
from .options import positive
from .train import (MAX_LAYERS, add_recipe, check_feature, check_size, check_windows, memory_errors, norm_after,
                    device_spec, parse_names)

EXAMPLES = """stringdiag study stringdiag:gallery/mechanisms.diag --layers 1-2 --data synthetic --max-steps 50 -o runs/study
stringdiag study stringdiag:gallery/anatomy.diag -d M0,M1 --layers 1-3 --seeds 3 --plan
stringdiag study stringdiag:gallery/anatomy.diag -d M1 --control mixing --layers 1 --seeds 3 -o runs/mixing
stringdiag study stringdiag:gallery/anatomy.diag -d M0,M1 --task mqar --layers 2 -o runs/mqar
stringdiag study stringdiag:gallery/anatomy.diag --layers 1-3 --shard-from-env SLURM_ARRAY_TASK_ID --shards 8 -o runs/s
stringdiag study --report runs/study"""
HELP = "train every mechanism of a file at several depths with one recipe; tabulate and plot (Figs. 2, 4)"
DEFAULT_OUT = "runs/study"
FAMILIES = "linear=LinAttPrep,LinAttApply;dot=AttPrep,AttApply"  # results.DEFAULT_FAMILIES, written out
RESERVED = ("both", "none", "control")
CONTROL_SPEC = "control=stringdiag:gallery/control.diag:TokenFF"  # shipped beside the gallery's mechanisms
MIXING = ",".join(f"stringdiag:gallery/control.diag:{d}" for d in ("RunningMean", "ShortConv", "CausalMixer"))


def layer_counts(text: str) -> list[int]:
    """``1-3`` -> [1, 2, 3]; ``1,2,4``; ``1-2,5``: layer counts from 1 to MAX_LAYERS, sorted."""
    what = f"layer counts such as 1-3 or 1,2,4 (each from 1 to {MAX_LAYERS})"
    counts: set[int] = set()
    for part in text.split(","):
        m = re.fullmatch(r"\s*([0-9]+)\s*(?:-\s*([0-9]+)\s*)?", part)
        if not m:
            raise argparse.ArgumentTypeError(f"expected {what}, got {options._show(text)}")
        lo, hi = int(m[1]), int(m[2] or m[1])
        if lo < 1 or hi > MAX_LAYERS:
            raise argparse.ArgumentTypeError(f"expected {what}, got {options._show(text)}")
        if hi < lo:
            raise argparse.ArgumentTypeError(f"expected {what}, got {options._show(text)} (a range runs upwards)")
        counts.update(range(lo, hi + 1))
    return sorted(counts)


layer_counts.__name__ = "layer counts"


def shard_spec(text: str) -> tuple[int, int]:
    """``K/N`` with 1 <= K <= N: this machine's share of the runs."""
    m = re.fullmatch(r"\s*([0-9]+)\s*/\s*([0-9]+)\s*", text)
    if not m or not 1 <= int(m[1]) <= int(m[2]) or int(m[2]) > 10 ** 6:
        raise argparse.ArgumentTypeError(f"expected K/N with 1 <= K <= N, such as 1/2, got {options._show(text)}")
    return int(m[1]), int(m[2])


shard_spec.__name__ = "shard"


def parse_families(text: str) -> dict[str, tuple[str, ...]]:
    """``linear=LinAttPrep,LinAttApply;dot=AttPrep,AttApply`` -> {'linear': (...), 'dot': (...)}."""
    fams: dict[str, tuple[str, ...]] = {}
    owner: dict[str, str] = {}
    for part in filter(None, (p.strip() for p in text.split(";"))):
        name, eq, gens = (s.strip() for s in part.partition("="))
        if not eq or not re.fullmatch(r"[A-Za-z0-9_-]+", name):
            raise options.UsageError(f"--families: expected FAMILY=NAME,NAME;FAMILY=..., got {options._show(part)}")
        if name in RESERVED:
            raise DiagError(f"--families: '{name}' is reserved (a mechanism with generators of several families "
                            "is 'both', of none 'none')")
        if name in fams:
            raise DiagError(f"--families: the family '{name}' is given twice")
        names = parse_names(gens, "families")
        if not names:
            raise DiagError(f"--families: the family '{name}' has no generators")
        for g in names:
            if g in owner:
                raise DiagError(f"--families: '{g}' is in two families ('{owner[g]}' and '{name}')")
            owner[g] = name
        fams[name] = tuple(names)
    return fams


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("file", metavar="FILE", nargs="?", help="the mechanisms' file (not with --report)")
    p.add_argument("-d", "--diagram", metavar="M0,M1,...", default=None,
                   help="the mechanisms (default: every diagram of type [s, d] -> [s, d] that is causal)")
    p.add_argument("--layers", type=layer_counts, default=[1, 2], metavar="1-3",
                   help="layer counts: a range, a list, or both (default 1-2)")
    p.add_argument("-o", "--output", dest="out", default=None, metavar="DIR", type=outputs.folder,
                   help=f"the study's directory (default {DEFAULT_OUT}); with several --report directories, where "
                        "the merged results go (default: 'merged' beside the first)")
    p.add_argument("--seeds", type=options.integer(1, 100, "an integer from 1 to 100"), default=1,
                   help="train each (mechanism, layers) from this many seeds (the recipe's --seed, +1, ...); "
                        "results give the mean and spread")
    p.add_argument("--control", default=CONTROL_SPEC, metavar="[NAME=]FILE:DIAGRAM,...",
                   help="the controls trained at every depth beside the mechanisms, each run under NAME (default: "
                        "its diagram's name); every mechanism is compared with each, paired by seed. Default: the "
                        "shipped token-wise approximator, which mixes no tokens, as 'control' "
                        f"({CONTROL_SPEC}); 'mixing' adds the shipped token-mixing controls ({MIXING}); "
                        "'none': no control")
    p.add_argument("--shard", type=shard_spec, default=None, metavar="K/N",
                   help="run the K-th of N disjoint shares of the runs (sorted by mechanism, layers and seed, "
                        "every N-th from the K-th; default: all runs)")
    p.add_argument("--shard-from-env", default=None, metavar="VAR",
                   help="take the shard from a 0-based index in this environment variable and the count from "
                        "--shards, e.g. --shard-from-env SLURM_ARRAY_TASK_ID --shards 8 (a Slurm array 0-7)")
    p.add_argument("--shards", type=options.integer(1, 10 ** 6), default=None, metavar="N",
                   help="the number of shards, with --shard-from-env")
    p.add_argument("--list-runs", action="store_true",
                   help="print the runs this command would train (this shard's), without training")
    p.add_argument("--retime", action="store_true",
                   help="time every trained run of this share again (interleaved; on a CPU, the process's CPU "
                        "time) and rewrite the results: one clock and one session for a study's Fig. 4")
    p.add_argument("--plan", action="store_true",
                   help="print the runs still to train (this shard's) and the CPU-hours each will take, measured "
                        "on this machine from a few training steps of each mechanism and depth; trains nothing")
    p.add_argument("--json", action="store_true", help="with --list-runs or --plan: as JSON")
    p.add_argument("--report", nargs="+", default=None, metavar="DIR",
                   help="redraw the figures from these studies' results.csv without training (several: merged)")
    p.add_argument("--earlier", default=None, metavar="DIR",
                   help="with --report: a shorter study of the same mechanisms; ranking.md says whether its "
                        "order of the mechanisms holds in the reported one")
    add_recipe_and_session(p)


def add_recipe_and_session(p: argparse.ArgumentParser) -> None:
    """The recipe's options (recorded in study.json) and this session's."""
    g = p.add_argument_group("the recipe (recorded in DIR/study.json; a study resumes only with the same)")
    add_recipe(g, "train each run for at most this many steps")
    g.add_argument("--test-stride", type=positive, default=1,
                   help="stride of the test evaluation (default 1: every token with its maximal context, App. C)")
    g.add_argument("--task", default="lm", choices=["lm", "mqar"],
                   help="lm: next-word prediction on --data (App. C); mqar: multi-query associative recall "
                        "(Arora et al. 2023), accuracy on the answers, generated with a fixed seed")
    g.add_argument("--mqar", default="", metavar="SPEC",
                   help="with --task mqar, its sizes: pairs=16,queries=16,keys=64,values=64,train=20000,valid=1000,"
                        "test=2000,seed=0 (any subset; the context is the sequence length, 2 x (pairs + queries) - 1)")
    g.add_argument("--test-tokens", type=positive, default=None, metavar="N",
                   help="score only the first N tokens of the test split (default: all of it)")
    g.add_argument("--timing-steps", type=positive, default=20,
                   help="training steps per timing repeat (seconds per epoch = their mean x steps per epoch)")
    g.add_argument("--timing-repeats", type=options.integer(3, 1000, "an integer from 3 to 1000"), default=3,
                   help="timing repeats per run, interleaved across runs (median and standard deviation)")
    g.add_argument("--timing-device", default="cpu", choices=["cpu", "cuda"],
                   help="where the runs are timed (part of the recipe: Fig. 4's ratios are per device)")
    s = p.add_argument_group("this session")
    s.add_argument("--time-budget", type=options.number(what="a positive number of seconds"), default=None,
                   metavar="SECONDS", help="stop training after this long (the run in progress is checkpointed; "
                                           "the same command continues)")
    s.add_argument("--families", default=FAMILIES, metavar="SPEC",
                   help=f"which generators make a family, for the table and colours (default '{FAMILIES}')")
    s.add_argument("--threads", type=options.integer(1, 1024), default=None, help="torch's CPU threads")
    s.add_argument("--device", type=device_spec, default="auto", metavar="DEVICE",
                   help="where this session trains and tests its runs: auto (CUDA when torch sees it, else the "
                        "CPU; default), cpu, cuda, cuda:N or mps. Not part of the recipe: a study may be "
                        "continued on another machine; each run's trained.json records where it trained")


def run(args: argparse.Namespace) -> int:
    if args.report is not None:
        if args.file is not None:
            raise options.UsageError(f"--report reads study directories, not a FILE (got {options.short(args.file)})")
        return report(args)
    if args.earlier is not None:
        raise options.UsageError("--earlier goes with --report (it compares two studies' finished runs)")
    if args.file is None:
        raise options.UsageError("the following arguments are required: FILE (or --report DIR ...) "
                        "(see 'stringdiag study --help')")
    families = parse_families(args.families)

    import torch

    from ..data import load_corpus
    from ..study.runner import Study

    if args.threads:
        torch.set_num_threads(args.threads)
    prog = load_reporting(args.file)
    heads = select(prog, args.diagram)
    dims = _dims(prog, heads, args)
    after = norm_after(args.norm_after, prog)
    if args.families != FAMILIES:
        _check_families(prog, families)
    corpus = _task(args) if args.task == "mqar" else load_corpus(args.data)  # --mqar without it: refused below
    _check_recipe(corpus, args)
    from ..train.device import resolve

    device = resolve(args.device)  # a device that is not there is refused before any work
    out = Path(args.out or DEFAULT_OUT)
    study = Study(heads, corpus, _recipe(args, dims, after), out, file=str(args.file), families=families,
                  controls=load_controls(args.control), device=str(device))
    # sizes this machine cannot hold are refused before anything is allocated; then causality
    _check_sizes(study, args, len(corpus.vocab))
    _drop_non_causal(study, dims, args)
    if set(study.heads) <= set(study.controls):
        raise DiagError(f"{options.short(prog.path)} has no causal diagram of type [s, d] -> [s, d] to study")
    if args.list_runs:
        return list_runs(study, args)
    if args.plan:
        return show_plan(study, args)
    if args.retime:
        from ..study.runner import plan

        mine, _, _ = my_share(plan(study.heads, args.layers, args.seeds), args)
        timed = study.retime(mine)
        print(f"timed {len(timed)} trained run(s) again; wrote {study.out / 'results.csv'}")
        return 0
    study.open()  # a study already in `out` must have this configuration
    _run_share(study, args, corpus.name, out)
    return 0


def control_specs(text: str) -> list[tuple[str, str, str]]:
    """``[NAME=]FILE:DIAGRAM,...`` -> [(run name, file, diagram)]; ``mixing`` stands for the shipped
    token-mixing controls (after the floor unless named alone), ``none`` for no control.

    >>> control_specs("control=stringdiag:gallery/control.diag:TokenFF,b.diag:Mix")
    [('control', 'stringdiag:gallery/control.diag', 'TokenFF'), ('Mix', 'b.diag', 'Mix')]
    >>> [name for name, _, _ in control_specs("mixing")]
    ['control', 'RunningMean', 'ShortConv', 'CausalMixer']
    """
    if text.strip() == "none":
        return []
    parts = [p.strip() for p in text.split(",") if p.strip()]
    if parts == ["mixing"]:
        parts = [CONTROL_SPEC, *MIXING.split(",")]
    out: list[tuple[str, str, str]] = []
    for part in (q for p in parts for q in (MIXING.split(",") if p == "mixing" else [p])):
        name, eq, rest = part.partition("=")
        if not eq:
            name, rest = "", part
        file, colon, diagram = rest.rpartition(":")
        if not colon or not file or not diagram or (eq and not re.fullmatch(r"[A-Za-z][A-Za-z0-9_]*", name.strip())):
            raise DiagError(f"--control: expected [NAME=]FILE:DIAGRAM, got {options._show(part)}")
        name = name.strip() or diagram
        if any(name == n for n, _, _ in out):
            raise DiagError(f"--control: two controls are named '{name}' (name one with NAME=FILE:DIAGRAM)")
        out.append((name, file, diagram))
    if not out:
        raise DiagError("--control: no control given (write 'none' for a study without one)")
    return out


def load_controls(text: str) -> dict:
    """The controls' heads by run name (``stringdiag:`` names a file shipped with stringdiag)."""
    from ..elaborate.loader import load

    heads, files = {}, {}
    for name, file, diagram in control_specs(text):
        if file not in files:
            files[file] = load(file)
        (heads[name],) = pick(files[file], diagram)
    return heads


def my_share(runs: list, args: argparse.Namespace) -> tuple[list, int, int]:
    """This process's runs: ``--shard K/N``, or ``--shard-from-env VAR --shards N`` (0-based)."""
    import os

    from ..study.runner import shard

    if args.shard_from_env is None:
        if args.shards is not None:
            raise options.UsageError("--shards goes with --shard-from-env (or write --shard K/N)")
        k, n = args.shard or (1, 1)
        return shard(runs, k, n), k, n
    if args.shard is not None or args.shards is None:
        raise options.UsageError("--shard-from-env VAR needs --shards N, and no --shard")
    value = os.environ.get(args.shard_from_env)
    if value is None or not value.strip().isdigit() or int(value) >= args.shards:
        raise DiagError(f"--shard-from-env {args.shard_from_env}: expected a 0-based index below {args.shards} "
                        f"in that variable, found {options._show(value) if value is not None else 'it unset'}")
    return shard(runs, int(value) + 1, args.shards), int(value) + 1, args.shards


def list_runs(study, args: argparse.Namespace) -> int:
    """``--list-runs [--json]``: the manifest of this share, and what is finished already."""
    import json

    from ..study.runner import CHECKPOINT, RESULT, TRAINED, plan

    mine, k, n = my_share(plan(study.heads, args.layers, args.seeds), args)
    rows = []
    for run in mine:
        d = study.out / run.name
        state = "finished" if (d / RESULT).exists() else "trained" if (d / TRAINED).exists() else \
            "started" if (d / CHECKPOINT).exists() else "todo"
        rows.append({"name": run.name, "mechanism": run.mechanism, "layers": run.layers, "seed": run.seed,
                     "directory": str(d), "state": state})
    if args.json:
        print(json.dumps({"shard": [k, n], "steps_per_run": study.total_steps, "runs": rows}, indent=2))
        return 0
    for r in rows:
        print(f"{r['name']:<16} {r['state']:<9} {r['directory']}")
    print(f"{len(rows)} run(s) in shard {k}/{n}, {study.total_steps:,} steps each")
    return 0


PLAN_STEPS = 3  # timed training steps per mechanism and depth for --plan (after one warm-up step)


def measured_depths(todo) -> list[tuple[str, int]]:
    """The (mechanism, depth) pairs ``--plan`` times: each mechanism at its two smallest depths left.
    Depth repeats one block, so a step's cost is affine in it; timing the others too would build and
    step the largest models for an estimate (half a minute for App. C's depths 1-5)."""
    depths: dict[str, set[int]] = {}
    for run in todo:
        depths.setdefault(run.mechanism, set()).add(run.layers)
    return [(m, d) for m, ds in depths.items() for d in sorted(ds)[:2]]


def extrapolated(per_step: dict[tuple[str, int], float], mechanism: str, layers: int) -> float:
    """Seconds per step at ``layers``: measured, or on the line through the two measured depths."""
    if (mechanism, layers) in per_step:
        return per_step[mechanism, layers]
    (d1, t1), (d2, t2) = sorted((d, t) for (m, d), t in per_step.items() if m == mechanism)
    return max(t2 + (t2 - t1) * (layers - d2) / (d2 - d1), t2)


def show_plan(study, args: argparse.Namespace) -> int:
    """``--plan``: every run of this share not yet trained, with its steps left and its CPU-hours:
    CPU seconds per step measured here (one thread, as the study trains) times the steps left, plus
    its test (the test windows' forward passes, costed as a third of a training step each batch)."""
    import json
    import time

    import torch

    from ..study.runner import CHECKPOINT, TRAINED, StudyRun, plan
    from ..study.timing import measure
    from ..train import checkpoint
    from ..data.corpus import eval_windows

    mine, k, n = my_share(plan(study.heads, args.layers, args.seeds), args)
    todo = [r for r in mine if not (study.out / r.name / TRAINED).exists()]
    windows, r = study.train_windows(), study.recipe
    threads = torch.get_num_threads()
    torch.set_num_threads(args.threads or 1)
    per_step: dict[tuple[str, int], float] = {}
    for key in measured_depths(todo):
        print(f"timing {key[0]} at {key[1]} layer(s) ...", file=sys.stderr)
        per_step[key] = measure(lambda: study.make(StudyRun(*key), check_causal=False), windows, r.batch_size,
                                PLAN_STEPS, warmup=1, clock=time.process_time)[0]
    torch.set_num_threads(threads)
    per_step |= {(run.mechanism, run.layers): extrapolated(per_step, run.mechanism, run.layers) for run in todo}
    if study.recipe.task == "lm":
        test_batches = -(-eval_windows(study.test_ids, r.context, r.test_stride)[0].shape[0] // 256)
        test_steps = test_batches * 256 / r.batch_size / 3  # a forward pass of one window: a third of a step
    else:
        test_steps = study.corpus.test.windows.shape[0] / r.batch_size / 3
    rows = []
    for run in todo:
        ckpt = study.out / run.name / CHECKPOINT
        done = checkpoint.read_meta(ckpt).get("step", 0) if ckpt.exists() else 0
        left = max(study.total_steps - int(done or 0), 0)
        hours = per_step[run.mechanism, run.layers] * (left + test_steps) / 3600
        rows.append({"name": run.name, "state": "started" if done else "todo", "steps_left": left,
                     "cpu_hours": hours})
    total = sum(x["cpu_hours"] for x in rows)
    if args.json:
        print(json.dumps({"shard": [k, n], "finished": len(mine) - len(todo), "runs": rows,
                          "cpu_hours": total}, indent=2))
        return 0
    for x in rows:
        print(f"{x['name']:<22} {x['state']:<8} {x['steps_left']:>7,} steps  {x['cpu_hours']:6.2f} CPU-hours")
    print(f"{len(rows)} run(s) to train in shard {k}/{n} ({len(mine) - len(todo)} trained before): about "
          f"{total:.1f} CPU-hours at {args.threads or 1} thread(s), measured from {PLAN_STEPS} steps of each mechanism "
          f"at its two smallest depths here (deeper ones extrapolated: a step costs the same again per layer), "
          f"testing included; {total / max(os.cpu_count() or 1, 1):.1f} hours on "
          f"{os.cpu_count()} cores (one process per core)")
    return 0


def _dims(prog, heads: dict, args: argparse.Namespace) -> dict[str, int]:
    """``--dims``: sizes of the file's fixed dimensions, never of the heads' feature dimension."""
    from ..graph.types import DimKind

    dims = options.parse_dims(args.dims)
    for name in dims:
        decl = prog.lookup_dim(name)
        if decl is None or decl.kind is not DimKind.FIXED:
            raise DiagError(f"--dims: '{name}' is not a fixed dimension of {options.short(prog.path)}")
    for head in heads.values():
        check_feature(head.input_types[0][-1].name, dims, args, "heads'")
    return dims


def _check_families(prog, families: dict[str, tuple[str, ...]]) -> None:
    """Families given on the command line name definitions of the file (the default's need not)."""
    for gens in families.values():
        for g in gens:
            if prog.lookup_def(g) is None:
                raise DiagError(f"--families: no diagram named {g!r} in {options.short(prog.path)}")


def _task(args: argparse.Namespace):
    """The MQAR task of ``--mqar``; its sequence length sets the context."""
    from ..data.mqar import mqar, parse_spec

    spec = parse_spec(args.mqar)
    task = mqar(**{k: getattr(spec, k) for k in spec.__dataclass_fields__})
    args.context = task.context
    if task.train.windows.shape[0] < args.batch_size:
        raise DiagError(f"--mqar: {task.train.windows.shape[0]:,} training examples, fewer than one batch of "
                        f"{args.batch_size}")
    return task


def _check_recipe(corpus, args: argparse.Namespace) -> None:
    """The recipe against the corpus and this machine, before any run starts."""
    import torch

    if args.mqar and args.task != "mqar":
        raise options.UsageError("--mqar gives the sizes of --task mqar; add --task mqar")
    if args.task == "lm":
        check_windows(corpus, args.context, args.batch_size)
    if args.test_stride > args.context:
        raise DiagError(f"--test-stride {args.test_stride}: at most --context ({args.context}), or some test "
                        "tokens would never be scored")
    if args.timing_device == "cuda" and not torch.cuda.is_available():
        raise DiagError("--timing-device cuda: torch sees no CUDA device on this machine")
    if args.d_model % args.heads:
        raise DiagError(f"--d-model {args.d_model} is not divisible by --heads {args.heads}")


def _recipe(args: argparse.Namespace, dims: dict[str, int], after: tuple[str, ...]):
    from ..study.runner import Recipe

    return Recipe(d_model=args.d_model, heads=args.heads, d_ff=args.d_ff, context=args.context,
                  batch_size=args.batch_size, epochs=args.epochs, max_steps=args.max_steps, lr_scale=args.lr_scale,
                  warmup=args.warmup, eval_every=args.eval_every, approximator=args.approximator,
                  dims=tuple(sorted(dims.items())), seed=args.seed, norm_after=tuple(after),
                  test_stride=args.test_stride, test_tokens=args.test_tokens, task=args.task, timing_steps=args.timing_steps, timing_repeats=args.timing_repeats,
                  timing_device=args.timing_device)


def _check_sizes(study, args: argparse.Namespace, vocab: int) -> None:
    """Every mechanism at the deepest layer count must fit this machine's memory."""
    from ..study.runner import StudyRun

    deepest = max(args.layers)
    sizes = argparse.Namespace(approximator=args.approximator, layers=deepest, batch_size=args.batch_size,
                               context=args.context, d_model=args.d_model, heads=args.heads, d_ff=args.d_ff)
    for name in study.heads:
        def make(approximator=args.approximator, check_causal=False, layers=deepest, name=name):
            return study.make(StudyRun(name, layers), approximator=approximator, check_causal=check_causal)

        with memory_errors():
            check_size(make, sizes, vocab)


def _drop_non_causal(study, dims: dict[str, int], args: argparse.Namespace) -> None:
    """Build each mechanism at one layer: one that is not causal is an error when named by ``-d``,
    else a warning, and it leaves the study."""
    from ..study.runner import StudyRun
    from ..train.model import head_dims

    for name, head in list(study.heads.items()):
        head_dims(head, args.d_model // args.heads, dims)
        try:
            study.make(StudyRun(name, 1))
        except DiagError as e:
            if args.diagram is not None:
                raise
            print(f"warning: {e.message}; '{name}' is left out of the study", file=sys.stderr)
            del study.heads[name]


def _run_share(study, args: argparse.Namespace, corpus: str, out: Path) -> None:
    """This shard's runs, trained and timed, with a line before and a summary after."""
    from ..study.runner import plan

    runs = plan(study.heads, args.layers, args.seeds)
    mine, k, n = my_share(runs, args)
    share = f" (shard {k}/{n} of {len(runs)})" if n > 1 else ""
    print(f"study of {', '.join(study.heads)} at {_layers(args.layers)} on {corpus}: {len(mine)} run(s){share}, "
          f"{study.total_steps:,} steps each, in {out}")
    if not mine:
        print(f"shard {k}/{n} has no runs: there are {len(runs)} runs for {n} shards")
    outcome = study.run(mine, time_budget=args.time_budget)
    done = len(mine) - len(outcome.pending) - len(outcome.elsewhere)
    print(f"{done} of {len(mine)} run(s) finished: {len(outcome.trained)} trained now "
          f"({len(outcome.resumed)} resumed), {len(outcome.skipped)} trained before; {len(outcome.timed)} timed")
    print(f"wrote {outcome.csv}" + (f", {', '.join(str(f) for f in outcome.figures)}" if outcome.figures else ""))


def _layers(counts: list[int]) -> str:
    return f"{counts[0]} layer" if counts == [1] else f"{', '.join(map(str, counts))} layers"


def select(prog, names: str | None) -> dict:
    """The mechanisms: those named by ``-d``, each checked; else every diagram of the file of type
    [s, d] -> [s, d] (causality is checked later, on a built model)."""
    from ..train.model import head_dims

    if names is None:
        chosen = {}
        for name, d in prog.diagrams.items():
            try:
                head_dims(d, 1)
            except DiagError:
                continue
            chosen[name] = d
        if not chosen:
            raise DiagError(f"{options.short(prog.path)} has no diagram of type [s, d] -> [s, d] (s seq, d fixed) "
                            "to study")
        return chosen
    listed = parse_names(names, "diagram")
    if not listed:
        raise DiagError("--diagram: no names given")
    chosen = {}
    for name in listed:
        (d,) = pick(prog, name)
        head_dims(d, 1)
        chosen[name] = d
    return chosen


def _ranking(earlier: Path, rows: list[dict], later: Path, out: Path, groups: dict) -> Path:
    """``ranking.md``: the earlier (shorter) study's order of the mechanisms against this one's."""
    from ..study import results as R
    from ..study.ranking import markdown
    from ..syntax.source import write_atomic
    from ..study.runner import STUDY, run_rows

    if not (earlier / STUDY).is_file():
        raise DiagError(f"--earlier {options.short(earlier)}: not a study's directory (it holds no {STUDY})")
    recipe = R.read_json(earlier / STUDY)
    families = {k: tuple(v) for k, v in (recipe.get("families") or R.DEFAULT_FAMILIES).items()}
    path = out / "ranking.md"
    from ..study.markdown import read_groups

    groups = groups or read_groups(earlier)  # a hand-written grouping kept beside the earlier study serves both
    write_atomic(path, markdown(run_rows(earlier, families), rows, later, groups))
    return path


def report(args: argparse.Namespace) -> int:
    """Merge the studies' results.csv and redraw the figures; no training."""
    from ..study import results as R
    from ..study.figures import draw
    from ..study.markdown import read_groups
    from ..study.runner import CSV, STUDY, check_study_files, compare, run_rows

    dirs = [Path(d) for d in args.report]
    sources, studies = [], []
    for d in dirs:
        path = d / CSV if d.is_dir() else d
        if d.is_dir() and (d / STUDY).is_file():  # a study's directory: its runs' own files, the newest
            studies.append((d, R.read_json(d / STUDY)))
            check_study_files(d, studies[-1][1])  # every result.json is the run its directory names
            families = {k: tuple(v) for k, v in (studies[-1][1].get("families") or R.DEFAULT_FAMILIES).items()}
            sources.append((str(d), run_rows(d, families)))
            continue
        if not path.is_file():
            raise DiagError(f"{options.short(d)} holds no {CSV} (is it a study's directory?)")
        sources.append((str(d), R.read_csv(path)))
    for d, s in studies[1:]:
        diff = compare(studies[0][1], s)
        if diff:
            raise DiagError(f"{options.short(studies[0][0])} and {options.short(d)} are different studies "
                            f"({'; '.join(diff[:3])}): their results cannot be merged")
    notes: list[str] = []
    rows = R.merge(sources, notes=notes)
    for note in notes:
        print(f"note: {note}")
    if args.out:
        out = Path(args.out)
    elif len(dirs) == 1:
        out = dirs[0] if dirs[0].is_dir() else dirs[0].parent
    else:
        out = dirs[0].parent / "merged"
    resolved = out.resolve()
    if len(dirs) > 1 and any(d.is_dir() and d.resolve() == resolved for d in dirs):
        raise DiagError(f"-o {options.short(out)}: the merged results would replace that study's own {CSV}; "
                        "choose another directory")
    wrote = []
    same = len(dirs) == 1 and (dirs[0] / CSV if dirs[0].is_dir() else dirs[0]).resolve() == (out / CSV).resolve()
    if not same or studies:  # a study's results.csv is rewritten from its runs
        R.write_csv(out / CSV, rows)
        wrote.append(out / CSV)
    groups = read_groups(out) or next((read_groups(d) for d in dirs if d.is_dir() and read_groups(d)), {})
    R.write_summary(out, rows, groups)
    wrote += [out / "summary.csv", out / "verdict.txt", out / "tables.md", *draw(rows, out)]
    if args.earlier:
        if len(studies) != 1:
            raise DiagError("--earlier compares one study's directory with another (give --report one study)")
        wrote.append(_ranking(Path(args.earlier), rows, studies[0][0], out, groups))
    print(f"{len(rows)} run(s) from {len(dirs)} stud{'y' if len(dirs) == 1 else 'ies'}; wrote "
          f"{', '.join(str(w) for w in wrote)}")
    return 0
