"""A study: every mechanism at every depth, trained with one recipe, resumable and shardable.

Layout of the output directory::

    study.json            the recipe, the corpus's fingerprint, each mechanism's hash
    M1-L2/, M1-L2-s1/     one directory per run (mechanism x layers x seed; seed 0 unsuffixed)
        checkpoint.safetensors, log.csv    the train loop's (atomic, checksummed; resumable)
        trained.json      training done and tested (written atomically)
        result.json       timed too: the run is finished (written atomically)
    results.csv           one row per finished run, with values relative to M1
    summary.csv           one row per mechanism and depth: mean and spread over seeds, against the control
    verdict.txt           what the study can say: which mechanisms beat or lose to M1 and each control
    tables.md             the same comparisons as Markdown tables, one per depth (groups.csv: a hand-
                          written structural grouping of the mechanisms, shown as a column, if present)
    perplexity.svg/png, cost.svg/png

A session trains the runs of its share in order: a finished run is skipped, a run with a
checkpoint resumes from it (the loop's resume sees exactly the batches it would have),
the others start. ``time_budget`` bounds the training time of one session: when it is
spent the run in progress is checkpointed and the session stops; the next one continues
(every session trains at least one step, so a small budget still makes progress).
When every run of the share is trained, those not yet timed are timed together,
interleaved (repeat 1 of every run, then repeat 2, ...), so slow drifts of the machine
touch every mechanism alike. Training and testing run on the session's ``device`` (not part of
the recipe, so a study may continue on another machine; ``trained.json`` records it); timing
runs on the recipe's ``timing_device`` (``cuda``: the allocator's peak is the memory).
"""
from __future__ import annotations

import hashlib
import json
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Callable, Iterable, Mapping

import torch

from ..data.corpus import Corpus, lm_windows
from ..data.mqar import Task
from ..errors import DiagError
from ..graph.diagram import Diagram
from ..train import checkpoint
from ..train.loop import TrainConfig, evaluate, recall, train
from ..train.model import STABILISED, LanguageModel
from . import results as R
from .timing import measure

FORMAT = 1
STUDY = "study.json"
CHECKPOINT = checkpoint.NAME  # (with RESULT and TRAINED: the files whose presence says how far a run got)
TRAINED = "trained.json"
RESULT = "result.json"
CSV = "results.csv"
LOCK = ".training.lock"  # a run being trained by some process (its pid inside)


_HELD: dict[Path, int] = {}  # run directory -> the open, flock-ed descriptor of its lock


def claim(d: Path) -> bool:
    """Take the run directory ``d`` for this process, so that several processes can work through
    one study at once (each takes the next run nobody holds). False if a live process holds it.

    The lock file is held with ``flock`` for as long as the run trains, so the kernel releases it
    when its process ends, however it ends: a lock left by a process that is gone (killed, or on a
    machine since restarted) is simply taken, and two processes can never both take one (a pid
    file alone had a window between creating the file and writing the pid in it). The pid is written
    inside for people, and a live pid there is respected even without the ``flock``."""
    import fcntl
    import os

    d.mkdir(parents=True, exist_ok=True)
    lock = d / LOCK
    while True:
        fd = os.open(lock, os.O_CREAT | os.O_RDWR, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            os.close(fd)
            return False
        try:
            same = os.stat(lock).st_ino == os.fstat(fd).st_ino
        except FileNotFoundError:
            same = False
        if same:  # not a file its holder unlinked on release while this process waited on it
            break
        os.close(fd)
    text = os.pread(fd, 64, 0).decode(errors="replace").strip()
    pid = int(text) if text.isdigit() else 0
    if pid and pid != os.getpid() and _alive(pid):
        os.close(fd)
        return False
    os.ftruncate(fd, 0)
    os.pwrite(fd, str(os.getpid()).encode(), 0)
    _HELD[d] = fd
    return True


def release(d: Path) -> None:
    import os

    (d / LOCK).unlink(missing_ok=True)
    fd = _HELD.pop(d, None)
    if fd is not None:
        os.close(fd)


def _alive(pid: int) -> bool:
    import os

    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


@dataclass(frozen=True)
class Recipe:
    """Everything that makes two runs comparable: the model's sizes, the schedule, the
    evaluation and the timing. A study keeps one; resuming with another is refused."""

    d_model: int = 128
    heads: int = 4
    d_ff: int | None = None
    context: int = 35
    batch_size: int = 32
    epochs: int = 1
    max_steps: int | None = None
    lr_scale: float = 1.0
    warmup: int = 200
    eval_every: int = 200
    approximator: str = "mlp"
    dims: tuple[tuple[str, int], ...] = ()
    seed: int = 0
    norm_after: tuple[str, ...] = STABILISED
    test_stride: int = 1
    test_tokens: int | None = None  # score a prefix of the test split (every token of it at test_stride)
    task: str = "lm"                # or "mqar": the corpus is then a data.mqar.Task (its sizes in the fingerprint)
    timing_steps: int = 20
    timing_repeats: int = 3
    timing_device: str = "cpu"   # where runs are timed (training: the session's device, not the recipe's)

    def to_json(self) -> dict:
        d = asdict(self)
        d["dims"] = dict(self.dims)
        d["norm_after"] = list(self.norm_after)
        return d


@dataclass(frozen=True)
class StudyRun:
    """One trained model: a mechanism at a depth, from one seed (an offset added to the recipe's)."""

    mechanism: str
    layers: int
    seed: int = 0

    @property
    def name(self) -> str:
        """Its directory: ``M1-L2`` for seed 0, ``M1-L2-s1`` for seed 1."""
        return f"{self.mechanism}-L{self.layers}" + (f"-s{self.seed}" if self.seed else "")

    def __str__(self) -> str:
        seed = f", seed {self.seed}" if self.seed else ""
        return f"{self.mechanism}, {self.layers} layer{'' if self.layers == 1 else 's'}{seed}"


def plan(mechanisms: Iterable[str], layers: Iterable[int], seeds: int = 1) -> list[StudyRun]:
    """Every (mechanism, layers, seed), sorted by mechanism (M2 before M10), then layers, then seed.

    >>> [r.name for r in plan(["M10", "M2"], [2, 1])]
    ['M2-L1', 'M2-L2', 'M10-L1', 'M10-L2']
    >>> [r.name for r in plan(["M1"], [1], seeds=2)]
    ['M1-L1', 'M1-L1-s1']
    """
    runs = {StudyRun(m, n, k) for m in mechanisms for n in layers for k in range(seeds)}
    return sorted(runs, key=lambda r: (R.natural(r.mechanism), r.layers, r.seed))


def shard(runs: list[StudyRun], k: int, n: int) -> list[StudyRun]:
    """Shard ``k`` of ``n`` (1-based): every n-th run from the k-th. The shards are disjoint and
    cover all runs.

    >>> runs = plan(["M0", "M1"], [1, 2, 3])
    >>> [r.name for r in shard(runs, 1, 2)], [r.name for r in shard(runs, 2, 2)]
    (['M0-L1', 'M0-L3', 'M1-L2'], ['M0-L2', 'M1-L1', 'M1-L3'])
    """
    if not 1 <= k <= n:
        raise DiagError(f"--shard {k}/{n}: expected 1 <= K <= N")
    return runs[k - 1::n]


def fingerprint(corpus: Corpus) -> dict:
    """What identifies a corpus, wherever it lies: its vocabulary and token streams."""
    h = hashlib.sha256("\n".join(corpus.vocab).encode())
    for split in ("train", "valid", "test"):
        h.update(corpus.split(split).contiguous().numpy().tobytes())
    return {"name": corpus.name, "vocab": len(corpus.vocab),
            "tokens": [corpus.split(s).numel() for s in ("train", "valid", "test")], "sha256": h.hexdigest()}


def _differences(there: Mapping, here: Mapping, label: str = "") -> list[str]:
    def show(v) -> str:
        text = json.dumps(v)
        return text if len(text) <= 24 else text[:20] + '..."'

    out = []
    for k in list(here) + [k for k in there if k not in here]:
        a, b = there.get(k, "(absent)"), here.get(k, "(absent)")
        if a != b:
            out.append(f"{label}{k} {show(a)} there, {show(b)} here")
    return out


def compare(there: dict, here: dict) -> list[str]:
    """How two studies' configurations differ (recipe and corpus; not where the corpus lies)."""
    corpus = lambda d: {k: v for k, v in (d.get("corpus") or {}).items() if k not in ("name", "spec")}  # noqa: E731
    defaults = Recipe().to_json()  # a field added since a study began is its default there
    recipe = lambda d: {**defaults, **(d.get("recipe") or {})}  # noqa: E731
    return _differences(recipe(there), recipe(here)) + \
        _differences(corpus(there), corpus(here), "corpus ")


def recipe_hash(description: Mapping) -> str:
    """A study's recipe and corpus (what :func:`compare` compares) as one hash: what every run's
    ``trained.json``/``result.json`` carries, so a run of another recipe shows."""
    corpus = {k: v for k, v in (description.get("corpus") or {}).items() if k not in ("name", "spec")}
    recipe = {**Recipe().to_json(), **(description.get("recipe") or {})}
    text = json.dumps({"recipe": recipe, "corpus": corpus}, sort_keys=True)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def expected(run: StudyRun, description: Mapping) -> dict:
    """What a run's files must say to be this run of the study ``description`` (study.json)."""
    return {"mechanism": run.mechanism, "layers": run.layers, "seed": run.seed,
            "diagram": (description.get("mechanisms") or {}).get(run.mechanism),
            "recipe": recipe_hash(description)}


def check_run_files(d: Path, run: StudyRun, want: Mapping) -> None:
    """Refuse, naming the file, a ``trained.json``/``result.json`` in ``d`` that is another run's
    (copied over, say when shard directories are merged by hand). A file written before runs
    carried their recipe's hash is not refused for lacking it."""
    for name in (RESULT, TRAINED):
        if not (d / name).exists():
            continue
        found = R.read_json(d / name)
        for key, value in want.items():
            if key == "recipe" and key not in found:
                continue
            got = found.get(key, 0 if key == "seed" else None)
            if got != value:
                raise DiagError(f"{d / name} is not the result of {run} (its {key} is {json.dumps(got)}, "
                                f"not {json.dumps(value)}): move it away or remove it, then run again")


def check_study_files(out: Path, description: Mapping) -> None:
    """Every finished run in the study directory ``out`` is the run its directory names, of
    this study (``study --report``)."""
    for path in sorted(out.glob(f"*/{RESULT}")):
        found = R.read_json(path)
        try:
            run = StudyRun(str(found["mechanism"]), int(found["layers"]), int(found.get("seed", 0)))
        except (KeyError, TypeError, ValueError):
            raise DiagError(f"{path} is damaged: it does not name its mechanism, layers and seed") from None
        if run.name != path.parent.name:
            raise DiagError(f"{path} is not the result of the run {path.parent.name} (it is {run}): move it away "
                            "or remove it, then run again")
        check_run_files(path.parent, run, expected(run, description))


def run_rows(out: Path, families: Mapping[str, Iterable[str]] = R.DEFAULT_FAMILIES) -> list[dict]:
    """The rows of every trained run in the study directory ``out``, read from the runs' own files
    (``result.json`` where the run is timed, else ``trained.json``), relative columns filled."""
    rows = []
    for trained in sorted(Path(out).glob(f"*/{TRAINED}")):
        path = trained.with_name(RESULT) if trained.with_name(RESULT).exists() else trained
        result = R.read_json(path)
        try:
            rows.append(R.row(result, families))
        except KeyError as e:
            raise DiagError(f"{path} is damaged: it lacks {e.args[0]!r}") from None
    return R.relative(sorted(rows, key=R.sort_key))


class SweepProgress:
    """One line per run of the sweep, in tqdm's format when it is installed:
    ``run 3/28: M2, 2 layers:   7%|▋         | 2/28 [02:39<34:30, 79.65s/it]``.

    A line is printed (not a bar redrawn in place) because the train loop redraws its own
    progress line on the terminal in between."""

    def __init__(self, total: int, log: Callable[[str], None]):
        self.total, self.log, self.t0 = total, log, time.time()

    def show(self, i: int, run: StudyRun, note: str = "") -> None:
        prefix, elapsed = f"run {i}/{self.total}: {run}{note}", time.time() - self.t0
        try:
            from tqdm import tqdm
        except ImportError:  # the same information, plainer
            frac = (i - 1) / max(self.total, 1)
            bar = "#" * int(24 * frac) + "-" * (24 - int(24 * frac))
            self.log(f"{prefix}: [{bar}] {i - 1}/{self.total} ({elapsed:.0f}s)")
            return
        self.log(tqdm.format_meter(i - 1, self.total, elapsed, prefix=prefix))


@dataclass
class StudyOutcome:
    """What a session did with its share of the runs."""

    runs: list[StudyRun]
    trained: list[StudyRun] = field(default_factory=list)   # trained to the end (and tested) in this session
    resumed: list[StudyRun] = field(default_factory=list)   # of those, continued from a checkpoint
    skipped: list[StudyRun] = field(default_factory=list)   # trained before this session: not trained again
    timed: list[StudyRun] = field(default_factory=list)
    pending: list[StudyRun] = field(default_factory=list)   # left for the next session (time budget spent)
    elsewhere: list[StudyRun] = field(default_factory=list)  # being trained by another process (see claim)
    csv: Path | None = None
    figures: list[Path] = field(default_factory=list)

    @property
    def finished(self) -> bool:
        return not self.pending and not self.elsewhere


class Study:
    """The runs of one recipe over ``heads`` (mechanism name -> head diagram) in ``out``."""

    def __init__(self, heads: Mapping[str, Diagram], corpus: Corpus, recipe: Recipe, out: str | Path,
                 file: str = "", families: Mapping[str, Iterable[str]] = R.DEFAULT_FAMILIES,
                 log: Callable[[str], None] = print, figures: bool = True, control: Diagram | None = None,
                 device: str = "cpu", controls: Mapping[str, Diagram] | None = None):
        self.heads, self.corpus, self.recipe = dict(heads), corpus, recipe
        # the controls every mechanism is measured against (run name -> head): ``control`` alone is
        # the attention-free floor under its historical name 'control'
        controls = dict(controls or {})
        if control is not None:
            controls = {R.CONTROL: control, **controls}
        for name, head in controls.items():
            if name in self.heads:
                what = "the name of the study's control" if name == R.CONTROL else "also the name of a control"
                raise DiagError(f"a mechanism is named '{name}', {what}; rename it")
            self.heads[name] = head
        self.controls = tuple(controls)
        self.out, self.file, self.log, self.figures = Path(out), file, log, figures
        self.device = recipe.timing_device
        self.train_device = device  # where runs train and are tested (not the recipe's: no hash changes)
        self.families = {k: tuple(v) for k, v in families.items()}
        self._description: dict | None = None  # study.json's content, computed once (hashes every mechanism)

    # -- models ---------------------------------------------------------------------
    def make(self, run: StudyRun, approximator: str | None = None, check_causal: bool = True,
             layers: int | None = None) -> LanguageModel:
        r = self.recipe
        return LanguageModel(self.heads[run.mechanism], vocab=len(self.corpus.vocab), d_model=r.d_model,
                             n_layers=layers or run.layers, n_heads=r.heads, d_ff=r.d_ff,
                             approximator=approximator or r.approximator, dims=dict(r.dims),
                             check_causal=check_causal, norm_after=r.norm_after)

    def train_windows(self) -> torch.Tensor:
        """The training windows: the corpus's at stride context // 2 (App. C), or the task's examples."""
        if isinstance(self.corpus, Task):
            return self.corpus.train.windows
        r = self.recipe
        return lm_windows(self.corpus.train, r.context, max(r.context // 2, 1))

    @property
    def steps_per_epoch(self) -> int:
        return self.train_windows().shape[0] // self.recipe.batch_size

    @property
    def total_steps(self) -> int:
        """The train loop's: epochs of steps, cut at max_steps."""
        total = self.steps_per_epoch * self.recipe.epochs
        return total if self.recipe.max_steps is None else min(total, self.recipe.max_steps)

    def train_config(self, budget: float | None, run: StudyRun) -> TrainConfig:
        r = self.recipe
        return TrainConfig(context=r.context, batch_size=r.batch_size, epochs=r.epochs, lr_scale=r.lr_scale,
                           warmup=r.warmup, seed=r.seed + run.seed, eval_every=r.eval_every, time_budget=budget,
                           max_steps=r.max_steps, device=self.train_device)

    @property
    def test_ids(self) -> torch.Tensor:
        """The test split, or its first ``test_tokens`` tokens."""
        n = self.recipe.test_tokens
        return self.corpus.test if n is None else self.corpus.test[:n]

    def hashes(self) -> dict[str, str]:
        """Each mechanism's canonical hash, every definition it uses opened: a changed generator shows."""
        return {m: d.expand().canonical_hash() for m, d in self.heads.items()}

    def identity(self, run: StudyRun) -> dict:
        """What a run's ``trained.json``/``result.json`` must say to be this run of this study."""
        if self._description is None:
            self._description = self.description()
        return expected(run, self._description)

    # -- study.json -------------------------------------------------------------------
    def description(self) -> dict:
        return {"format": FORMAT, "file": self.file, "recipe": self.recipe.to_json(),
                "corpus": fingerprint(self.corpus), "mechanisms": self.hashes(),
                "families": {k: list(v) for k, v in self.families.items()}}

    def open(self) -> None:
        """Start the study in ``out``, or check that the one there has this configuration."""
        path = self.out / STUDY
        mine = self.description()
        if path.exists():
            old = R.read_json(path)
            if old.get("format") != FORMAT:
                raise DiagError(f"{path} was written by another version of stringdiag (format "
                                f"{json.dumps(old.get('format'))}, not {FORMAT})")
            diff = compare(old, mine)
            if diff:
                raise DiagError(f"{self.out} holds a study with another configuration ({'; '.join(diff[:3])}): "
                                f"continue it with the options it was started with (see {path}), or choose another -o")
            known = old.get("mechanisms") or {}
            changed = sorted(m for m in mine["mechanisms"] if m in known and known[m] != mine["mechanisms"][m])
            if changed:
                raise DiagError(f"'{changed[0]}' has changed since the study in {self.out} began (its diagram's hash "
                                f"differs from the one in {path}): its runs there would mix two mechanisms; "
                                "choose another -o")
            mine["mechanisms"] = {**known, **mine["mechanisms"]}
            if mine["mechanisms"] == known and mine["families"] == old.get("families") and \
                    mine["file"] == old.get("file"):
                return
        R.write_json(path, mine)

    # -- a session --------------------------------------------------------------------
    def run(self, runs: list[StudyRun], time_budget: float | None = None) -> StudyOutcome:
        """Train (or resume, or skip) every run in order, time the trained ones, write the results."""
        self.open()
        start = time.time()
        outcome = StudyOutcome(runs=list(runs))
        bar = SweepProgress(len(runs), self.log)
        stopped = started = False
        for i, run in enumerate(runs, 1):
            d = self.out / run.name
            if (d / RESULT).exists() or (d / TRAINED).exists():
                self.check_identity(run)
                outcome.skipped.append(run)
                done = (d / RESULT).exists()
                bar.show(i, run, ": finished, skipped" if done else ": trained, skipped (not yet timed)")
                continue
            left = None if time_budget is None else max(time_budget - (time.time() - start), 0.0)
            if stopped or (started and left == 0.0):  # every session trains at least one step
                stopped = True
                outcome.pending.append(run)
                continue
            if not claim(d):
                bar.show(i, run, ": being trained by another process, skipped")
                outcome.elsewhere.append(run)
                continue
            try:
                if (d / TRAINED).exists():  # finished by another process since we looked
                    outcome.skipped.append(run)
                    continue
                resuming, started = (d / CHECKPOINT).exists(), True
                bar.show(i, run, ": resuming" if resuming else "")
                if self.train_run(run, left):
                    outcome.trained.append(run)
                    if resuming:
                        outcome.resumed.append(run)
                else:
                    stopped = True
                    outcome.pending.append(run)
            finally:
                release(d)
        if outcome.elsewhere:
            self.log(f"{len(outcome.elsewhere)} run(s) were being trained by another process; when they are done, "
                     "run the same command again to time every run and write the results")
        if outcome.pending:
            self.log(f"time budget spent: {len(outcome.pending)} of {len(runs)} run(s) not finished; run the same "
                     "command again to continue")
        if not outcome.pending and not outcome.elsewhere:
            todo = [r for r in runs if not (self.out / r.name / RESULT).exists()]
            if todo:
                self.time_runs(todo)
                outcome.timed = todo
        outcome.csv, outcome.figures = self.write_results()
        return outcome

    def retime(self, runs: list[StudyRun]) -> list[StudyRun]:
        """Time again every trained run among ``runs`` (interleaved, as :meth:`time_runs`), so that
        one study's timings come from one clock and one session; the results are rewritten."""
        self.open()
        trained = [r for r in runs if (self.out / r.name / TRAINED).exists()]
        for run in trained:
            self.check_identity(run)
        if trained:
            self.time_runs(trained)
            self.write_results()
        return trained

    def check_identity(self, run: StudyRun) -> None:
        """A finished run's files must be this run's (not another's copied over, say when shard
        directories are merged by hand): mechanism, depth, seed, diagram and recipe hash."""
        check_run_files(self.out / run.name, run, self.identity(run))

    def train_run(self, run: StudyRun, budget: float | None = None) -> bool:
        """Train one run to the end (resuming its checkpoint) and test it; False if the budget ran out first."""
        d = self.out / run.name
        ckpt = d / CHECKPOINT
        total = self.total_steps
        step = checkpoint.read_meta(ckpt).get("step", 0) if ckpt.exists() else 0
        if not isinstance(step, int) or step < total:
            train(lambda: self.make(run), self.corpus.train, self.corpus.valid, self.train_config(budget, run),
                  out_dir=d, resume=ckpt.exists(), log=self.log)
            step = checkpoint.read_meta(ckpt)["step"]
            if step < total:
                return False
        torch.manual_seed(self.recipe.seed + run.seed)
        model = self.make(run, check_causal=False)
        meta = checkpoint.load(ckpt, model)
        model.to(self.train_device)
        test, accuracy, scored = self.test(run, model)
        history = meta.get("history") or []
        trained = {"mechanism": run.mechanism, "layers": run.layers, "seed": run.seed,
                   "control": run.mechanism in self.controls,
                   "parameters": sum(p.numel() for p in model.parameters()), "steps": step,
                   "valid_ppl": history[-1].get("valid_ppl") if history else None, "test_ppl": test,
                   "test_acc": accuracy, "test_tokens": scored,
                   "unigram_test_ppl": None if accuracy is not None else self.corpus.unigram_perplexity("test"),
                   "uses": R.uses(self.heads[run.mechanism]), "train_device": str(self.train_device),
                   **self.identity(run)}
        R.write_json(d / TRAINED, trained)
        acc = "" if accuracy is None else f", accuracy {accuracy:.3f}"
        self.log(f"{run}: test perplexity {test:.2f}{acc} after {step} steps")
        return True

    def test(self, run: StudyRun, model: LanguageModel) -> tuple[float, float | None, int]:
        """Test perplexity, accuracy (a task's examples only) and the number of targets scored."""
        if isinstance(self.corpus, Task):
            self.log(f"{run}: test recall on {self.corpus.test.numel():,} answers ...")
            score, accuracy = recall(model, self.corpus.test)
            return score.perplexity, accuracy, score.scored
        ids = self.test_ids
        self.log(f"{run}: test perplexity (stride {self.recipe.test_stride}, {ids.numel():,} tokens) ...")
        return evaluate(model, ids, self.recipe.context, stride=self.recipe.test_stride), None, ids.numel()

    def time_runs(self, runs: list[StudyRun]) -> None:
        """Time every run ``timing_repeats`` times, interleaved; write each one's ``result.json``."""
        r = self.recipe
        windows = self.train_windows()
        per_epoch = self.steps_per_epoch
        seconds: dict[StudyRun, list[float]] = {run: [] for run in runs}
        memory: dict[StudyRun, list[int]] = {run: [] for run in runs}
        method = ""
        # on a CPU, the process's CPU time: what a step costs, whatever else the machine is doing
        # (wall-clock ratios on a shared CPU are the machine's load); on a GPU, the wall clock
        cpu = torch.device(self.device).type == "cpu"
        clock = time.process_time if cpu else time.perf_counter
        for rep in range(r.timing_repeats):
            for i, run in enumerate(runs, 1):
                self.log(f"timing {rep + 1}/{r.timing_repeats}, run {i}/{len(runs)}: {run}")
                sec, peak, method = measure(lambda: self.make(run, check_causal=False), windows, r.batch_size,
                                            r.timing_steps, device=self.device, seed=r.seed + rep, clock=clock)
                seconds[run].append(sec * per_epoch)
                memory[run].append(peak)
        for run in runs:
            d = self.out / run.name
            result = R.read_json(d / TRAINED)
            spe, spe_sd = R.summarise(seconds[run])
            mem, mem_sd = R.summarise([float(m) for m in memory[run]])
            result.update({"seconds_per_epoch": spe, "seconds_per_epoch_std": spe_sd,
                           "seconds_per_epoch_samples": seconds[run], "peak_memory_bytes": int(mem),
                           "peak_memory_std": mem_sd, "peak_memory_samples": memory[run], "memory_method": method,
                           "steps_per_epoch": per_epoch, "timing_steps": r.timing_steps,
                           "timing_clock": "cpu" if cpu else "wall",
                           "device": str(torch.device(self.device)), "threads": torch.get_num_threads()})
            R.write_json(d / RESULT, result)

    # -- results --------------------------------------------------------------------
    def results(self) -> list[dict]:
        """The rows of every trained run in ``out`` (this session's or earlier ones'): a run trained
        and tested but not yet timed (its share is not done) has its test metric and empty timings."""
        return run_rows(self.out, self.families)

    def write_results(self) -> tuple[Path, list[Path]]:
        rows = self.results()
        R.write_csv(self.out / CSV, rows)
        R.write_summary(self.out, rows)
        figs: list[Path] = []
        if self.figures and rows:
            from .figures import draw

            figs = draw(rows, self.out)
        return self.out / CSV, figs
