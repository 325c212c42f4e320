"""Back from a run: a trained language model rebuilt from its run folder, text sampled from it,
and the Hugging Face layout (``model.safetensors`` + ``config.json``) written and read.

Nothing here executes what it reads: the model is rebuilt from the ``.diag`` sources recorded in
the checkpoint's (or ``config.json``'s) JSON, its tensors read from safetensors, checked against
their checksum and loaded strictly; the tokenizer is a JSON list of words.
"""
from __future__ import annotations

import json
import tempfile
import weakref
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, TypeAlias

import torch
from safetensors import SafetensorError, safe_open
from safetensors.torch import load_file

from ..data.corpus import UNK
from ..data.shakespeare import tokenize as shakespeare_words
from ..errors import DiagError
from ..lower.tensorfile import checksum, write_atomic
from ..syntax.source import write_atomic as write_text
from . import checkpoint
from .hf import write_remote_code
from .lm import Spec, WholeModel, diagram_of

TOKENIZER = "tokenizer.json"
CONFIG = "config.json"
WEIGHTS = "model.safetensors"
STYLES = ("shakespeare", "words")  # how a text is cut into words: the Shakespeare corpus's rule, or at spaces


@dataclass(frozen=True)
class Tokenizer:
    """A word vocabulary (ids are positions in ``words``) and how a text is cut into words."""

    words: tuple[str, ...]
    style: str = "words"

    def encode(self, text: str) -> list[int]:
        """Words to ids; a word outside the vocabulary is ``<unk>``."""
        stoi = {w: i for i, w in enumerate(self.words)}
        cut = shakespeare_words(text) if self.style == "shakespeare" else text.split()
        return [stoi.get(w, stoi.get(UNK, 0)) for w in cut]

    def decode(self, ids: list[int]) -> str:
        return " ".join(self.words[i] for i in ids)

    def save(self, folder: Path) -> None:
        write_text(folder / TOKENIZER, json.dumps({"style": self.style, "words": list(self.words)}) + "\n")

    @classmethod
    def read(cls, folder: Path) -> "Tokenizer | None":
        path = folder / TOKENIZER
        if not path.is_file():
            return None
        data = _json(path)
        words, style = data.get("words"), data.get("style")
        if not isinstance(words, list) or not all(isinstance(w, str) for w in words) or style not in STYLES:
            raise DiagError(f"{path} is not a stringdiag tokenizer (a JSON object with 'words' and 'style')")
        return cls(tuple(words), style)


@dataclass
class Run:
    """A trained run read back: the model (in evaluation mode), its tokenizer, its training
    context (how many tokens it sees at once), and the run's result when it has one."""

    model: WholeModel
    tokenizer: Tokenizer | None
    context: int | None
    result: dict | None = None


def _json(path: Path) -> dict:
    try:
        data = json.loads(path.read_text())
    except (OSError, UnicodeDecodeError, ValueError) as e:
        raise DiagError(f"cannot read {path}: {e}") from None
    if not isinstance(data, dict):
        raise DiagError(f"{path} is not a JSON object")
    return data


def rebuild(spec: Spec) -> WholeModel:
    """The model a spec describes, with fresh weights (its sources compiled in a scratch folder)."""
    with tempfile.TemporaryDirectory(prefix="stringdiag-model-") as tmp:
        return WholeModel(diagram_of(spec, Path(tmp)), spec, check_causal=False)


def load_run(folder: str | Path) -> Run:
    """The trained language model of a ``stringdiag train -d NAME -o DIR`` run, its tokenizer and
    context: the checkpoint checked (checksum, names, shapes) and loaded into the rebuilt model.
    The global random state is left as it was."""
    folder = Path(folder)
    ckpt = folder / checkpoint.NAME
    if not ckpt.is_file():
        raise DiagError(f"{folder} holds no training run (no {checkpoint.NAME})")
    meta = checkpoint.read_meta(ckpt)
    saved = meta.get("config")
    config = saved if isinstance(saved, dict) else {}
    if config.get("kind") != "lm" or "spec" not in config:
        raise DiagError(f"{folder} is a run of the head recipe (App. C), not of a whole language model; "
                        "load_run reads runs of diagrams [s] of v -> [s, v]")
    model = rebuild(Spec.from_json(config["spec"]))
    rng = torch.get_rng_state()
    try:
        checkpoint.load(ckpt, model)
    finally:
        torch.set_rng_state(rng)
    result = _json(folder / "result.json") if (folder / "result.json").is_file() else None
    context = (meta.get("train") or {}).get("context")
    return Run(model.eval(), Tokenizer.read(folder), context if isinstance(context, int) else None, result)


Prompt: TypeAlias = "list[int] | torch.Tensor"
_FORMS: "weakref.WeakKeyDictionary[torch.nn.Module, Any]" = weakref.WeakKeyDictionary()


def incremental_of(model: torch.nn.Module):
    """The incremental form of a whole language model (``compile(..., incremental=True)`` of the
    diagram its spec records), holding the model's current weights, on its device and in its
    dtype; an incremental form is its own. Compiled once per model. A diagram without one is a
    DiagError that names the box in the way."""
    from ..lower.incremental import Incremental

    if isinstance(model, Incremental):
        return model
    spec = getattr(model, "spec", None)
    if not isinstance(spec, Spec):
        raise DiagError("only a stringdiag language model (a run, a save_pretrained folder, or a "
                        "compile(..., incremental=True) module) has an incremental form here")
    inc = _FORMS.get(model)
    if inc is None:
        from ..lower import compile as lower
        with tempfile.TemporaryDirectory(prefix="stringdiag-model-") as tmp:
            inc = lower(diagram_of(spec, Path(tmp)), dims=spec.dims, approximator=spec.approximator,
                        incremental=True)
        _FORMS[model] = inc
    ref = next(model.parameters(), None)
    if ref is not None:
        inc.to(device=ref.device, dtype=ref.dtype)
    inc.load_state_dict(getattr(model, "net").state_dict())  # a WholeModel's compiled diagram
    return inc.eval()


def _choose(logits: torch.Tensor, temperature: float, top_k: int | None, top_p: float | None,
            g: torch.Generator) -> torch.Tensor:
    """One id per row of ``logits`` ([batch, v], float64 on the CPU): the likeliest at temperature
    0, else drawn from the softmax of logits / temperature among the ``top_k`` likeliest and the
    smallest set of likeliest whose probability reaches ``top_p`` (nucleus sampling)."""
    if temperature == 0:
        return logits.argmax(-1)
    if top_k is not None and top_k < logits.shape[-1]:
        cut = torch.topk(logits, top_k, dim=-1).values[:, -1:]
        logits = logits.masked_fill(logits < cut, float("-inf"))
    # less the largest first: a temperature near 0 (1e-320) would otherwise make inf - inf = nan
    probs = torch.softmax((logits - logits.amax(-1, keepdim=True)) / temperature, -1)
    if top_p is not None and top_p < 1:
        p, order = probs.sort(-1, descending=True)
        drop = p.cumsum(-1) - p >= top_p  # the likeliest always stays
        probs = probs.scatter(-1, order, p.masked_fill(drop, 0.0))
    return torch.multinomial(probs, 1, generator=g)[:, 0]


@torch.no_grad()
def generate(model: torch.nn.Module, prompt: "Prompt | list[Prompt]", tokens: int, temperature: float = 1.0,
             top_k: int | None = None, seed: int = 0, context: int | None = None, *, top_p: float | None = None,
             stop: "tuple[int, ...] | list[int]" = (), cache: bool | None = None,
             progress: "Callable[[int, int], None] | None" = None) -> "list[int] | list[list[int]]":
    """``tokens`` ids sampled one by one after ``prompt`` (a list of prompts: a batch, one list
    each), each from the softmax of the last logits divided by ``temperature`` (0: the most likely),
    among the ``top_k`` likeliest and within ``top_p`` of probability when given; a sequence ends
    at an id of ``stop`` (kept). Draws from a generator seeded by ``seed``: reproducible.

    With ``cache`` (by default, when the model has one) the model runs in its incremental form
    (:func:`incremental_of`):
    the prompt in one pass, then one position per token. It sees every id since the start, up to
    ``context``; there it starts again from the last ``context // 2`` ids in one pass (what
    fits a key/value cache). Without it, each token runs the model on the last ``context`` ids
    (every id when None); the two give the same ids while the sequence fits the context.
    ``progress(done, total)`` is told after each token. Every argument is checked first
    (``lower/interface.py``): a wrong one is a DiagError naming it."""
    from ..lower.interface import need_language_model, need_prompt, need_sampling

    need_prompt(prompt, need_language_model(model, "generate"))
    need_sampling(tokens, temperature, top_k, seed, context,
                  {"top_p": top_p, "stop": stop, "cache": cache, "progress": progress})
    batch = [_ids(p) for p in (prompt if _is_batch(prompt) else [prompt])]
    if not batch or any(not ids for ids in batch):
        raise DiagError("the prompt has no tokens to continue")
    g = torch.Generator().manual_seed(seed)
    was = model.training
    model.eval()
    inc = incremental_of(model) if cache else None if cache is False else _maybe(model)
    outs: list[list[int]] = [[] for _ in batch]
    try:
        for length in sorted({len(ids) for ids in batch}):  # prompts of one length run as one batch
            rows = [k for k, ids in enumerate(batch) if len(ids) == length]
            run = _cached if inc is not None else _uncached
            for k, got in zip(rows, run(inc or model, [batch[k] for k in rows], tokens, temperature, top_k,
                                        top_p, set(stop), g, context, progress)):
                outs[k] = got
    finally:
        model.train(was)
    return outs if _is_batch(prompt) else outs[0]


def _maybe(model: torch.nn.Module):
    try:
        return incremental_of(model)
    except DiagError:
        return None


def _is_batch(prompt) -> bool:
    if isinstance(prompt, torch.Tensor):
        return prompt.dim() == 2 and prompt.shape[0] > 1
    return bool(prompt) and isinstance(prompt[0], (list, tuple, torch.Tensor))


def _ids(prompt) -> list[int]:
    return [int(t) for t in (prompt.flatten().tolist() if isinstance(prompt, torch.Tensor) else prompt)]


def _device(model: torch.nn.Module) -> torch.device:
    return next((p.device for p in model.parameters()), torch.device("cpu"))


def _sampled(rows: list[list[int]], last: torch.Tensor, done: list[bool], settings, g) -> torch.Tensor:
    """Each row's next id (appended unless the row has stopped)."""
    temperature, top_k, top_p, stop = settings
    nxt = _choose(last.double().cpu(), temperature, top_k, top_p, g)
    for k, t in enumerate(nxt.tolist()):
        if not done[k]:
            rows[k].append(t)
            done[k] = t in stop
    return nxt


def _cached(inc, prompts: list[list[int]], tokens: int, temperature, top_k, top_p, stop, g, context,
            progress) -> list[list[int]]:
    device = _device(inc)
    seen = [list(p) for p in prompts]  # what the model has read, per row
    outs: list[list[int]] = [[] for _ in prompts]
    done = [False] * len(prompts)
    window = context if context else None

    def restart(keep: int | None):
        ids = torch.tensor([s[-keep:] if keep else s for s in seen], device=device)
        logits, state = inc.prefill(ids, inc.initial_state(len(seen)))
        return logits[:, -1], state

    last, state = restart(window)
    for n in range(tokens):
        nxt = _sampled(outs, last, done, (temperature, top_k, top_p, stop), g)
        for s, t in zip(seen, nxt.tolist()):
            s.append(t)
        if progress is not None:
            progress(n + 1, tokens)
        if all(done) or n == tokens - 1:
            break
        if window and state.position >= window:
            last, state = restart(max(1, window // 2))
        else:
            y, state = inc.step(nxt.to(device), state)
            last = y
    return outs


def _uncached(model, prompts: list[list[int]], tokens: int, temperature, top_k, top_p, stop, g, context,
              progress) -> list[list[int]]:
    device = _device(model)
    seen = [list(p) for p in prompts]
    outs: list[list[int]] = [[] for _ in prompts]
    done = [False] * len(prompts)
    for n in range(tokens):
        window = torch.tensor([s[-context:] if context else s for s in seen], device=device)
        nxt = _sampled(outs, model(window)[:, -1], done, (temperature, top_k, top_p, stop), g)
        for s, t in zip(seen, nxt.tolist()):
            s.append(t)
        if progress is not None:
            progress(n + 1, tokens)
        if all(done):
            break
    return outs


def save_pretrained(model: WholeModel, folder: str | Path, tokenizer: Tokenizer | None = None) -> Path:
    """Hugging Face's layout: ``model.safetensors`` (the compiled diagram's tensors, by its own
    names, with their checksum) and ``config.json`` (the ``.diag`` sources, diagram and sizes
    under ``stringdiag``), and ``tokenizer.json`` when given; each file written atomically. With
    ``modeling_stringdiag.py`` (train/hf.py), ``transformers`` loads it too:
    ``AutoModelForCausalLM.from_pretrained(folder, trust_remote_code=True)``."""
    if not isinstance(model, WholeModel):
        raise DiagError(f"save_pretrained takes a whole language model (a diagram [s] of v -> [s, v] as "
                        f"load_run(...).model, from_pretrained or train -d NAME give it), not a "
                        f"{type(model).__name__}: a compiled diagram alone does not record the sources that "
                        "rebuild it")
    folder = Path(folder)
    tensors = {k: v.detach().contiguous().cpu() for k, v in model.net.state_dict().items()}
    write_atomic(folder / WEIGHTS, tensors, {"format": "pt"}, "model file")
    spec = model.spec
    config = {"model_type": "stringdiag", "architectures": [spec.diagram], "vocab_size": model.config["vocab"],
              "torch_dtype": str(next(iter(tensors.values())).dtype).removeprefix("torch.") if tensors else None,
              "stringdiag": spec.to_json()}
    write_text(folder / CONFIG, json.dumps(config, indent=2) + "\n")
    write_remote_code(folder, CONFIG)
    if tokenizer is not None:
        tokenizer.save(folder)
    return folder


def from_pretrained(folder: str | Path) -> tuple[WholeModel, Tokenizer | None]:
    """What :func:`save_pretrained` wrote: the model rebuilt from its sources, its tensors checked
    against their checksum and loaded strictly (every name, shape and dtype); and the tokenizer.
    A folder that ``transformers`` saved again has no checksum (only stringdiag writes one): its
    tensors are loaded, still checked by name and shape."""
    folder = Path(folder)
    config = _json(folder / CONFIG)
    if config.get("model_type") != "stringdiag" or not isinstance(config.get("stringdiag"), dict):
        raise DiagError(f"{folder / CONFIG} is not a stringdiag model's configuration")
    model = rebuild(Spec.from_json(config["stringdiag"]))
    tensors = _tensors(folder / WEIGHTS)
    ours = model.net.state_dict()
    wrong = sorted(set(ours) ^ set(tensors)) + [n for n in ours if n in tensors and ours[n].shape != tensors[n].shape]
    if wrong:
        raise DiagError(f"{folder / WEIGHTS} does not fit the model its config describes: {', '.join(wrong[:5])}")
    dtype = next(iter(tensors.values())).dtype if tensors else None
    model = model.to(dtype) if dtype is not None and dtype.is_floating_point else model
    model.net.load_state_dict(tensors, strict=True)
    return model.eval(), Tokenizer.read(folder)


def _tensors(path: Path) -> dict[str, torch.Tensor]:
    try:
        with safe_open(str(path), framework="pt") as f:
            meta: dict[str, Any] = json.loads((f.metadata() or {}).get("stringdiag", "{}"))
        tensors = load_file(str(path))
    except (OSError, ValueError, RuntimeError, SafetensorError) as e:
        raise DiagError(f"cannot read {path}: {e}") from None
    saved = meta.get("checksum") if isinstance(meta, dict) else None
    if saved is not None and saved != checksum(tensors):  # none: written by another tool (transformers)
        raise DiagError(f"{path} is damaged: its tensors do not match their checksum")
    return tensors
