"""Back from a run: a trained language model rebuilt from its run folder, text sampled from it,
and the Hugging Face layout (``model.safetensors`` + ``config.json``) written and read.

Nothing here executes what it reads: the model is rebuilt from the ``.diag`` sources recorded in
the checkpoint's (or ``config.json``'s) JSON, its tensors read from safetensors, checked against
their checksum and loaded strictly; the tokenizer is a JSON list of words.
"""
from __future__ import annotations

import json
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from safetensors import SafetensorError, safe_open
from safetensors.torch import load_file

from ..data.corpus import UNK
from ..data.shakespeare import tokenize as shakespeare_words
from ..errors import DiagError
from ..lower.tensorfile import checksum, write_atomic
from ..syntax.source import write_atomic as write_text
from . import checkpoint
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
    ckpt = folder / "checkpoint.safetensors"
    if not ckpt.is_file():
        raise DiagError(f"{folder} holds no training run (no checkpoint.safetensors)")
    meta = checkpoint.read_meta(ckpt)
    config = meta.get("config") if isinstance(meta.get("config"), dict) else {}
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


@torch.no_grad()
def generate(model: torch.nn.Module, prompt: "list[int] | torch.Tensor", tokens: int, temperature: float = 1.0,
             top_k: int | None = None, seed: int = 0, context: int | None = None) -> list[int]:
    """``tokens`` ids sampled one by one after ``prompt``, each from the softmax of the last logits
    divided by ``temperature`` (0: the most likely), among the ``top_k`` likeliest when given; the
    model sees the last ``context`` ids. Draws from a generator seeded by ``seed``: reproducible."""
    ids = [int(t) for t in (prompt.flatten().tolist() if isinstance(prompt, torch.Tensor) else prompt)]
    if not ids:
        raise DiagError("the prompt has no tokens to continue")
    g = torch.Generator().manual_seed(seed)
    device = next((p.device for p in model.parameters()), torch.device("cpu"))
    was = model.training
    model.eval()
    for _ in range(tokens):
        window = torch.tensor(ids[-context:] if context else ids, device=device)[None]
        logits = model(window)[0, -1].double().cpu()
        if temperature == 0:
            ids.append(int(logits.argmax()))
            continue
        if top_k is not None and top_k < logits.numel():
            cut = torch.topk(logits, top_k).values[-1]
            logits = logits.masked_fill(logits < cut, float("-inf"))
        ids.append(int(torch.multinomial(torch.softmax(logits / temperature, -1), 1, generator=g)))
    model.train(was)
    return ids[len(ids) - tokens:]


def save_pretrained(model: WholeModel, folder: str | Path, tokenizer: Tokenizer | None = None) -> Path:
    """Hugging Face's layout: ``model.safetensors`` (the compiled diagram's tensors, by its own
    names, with their checksum) and ``config.json`` (the ``.diag`` sources, diagram and sizes
    under ``stringdiag``), and ``tokenizer.json`` when given; each file written atomically."""
    folder = Path(folder)
    tensors = {k: v.detach().contiguous().cpu() for k, v in model.net.state_dict().items()}
    write_atomic(folder / WEIGHTS, tensors, {"format": "pt"}, "model file")
    spec = model.spec
    config = {"model_type": "stringdiag", "architectures": [spec.diagram], "vocab_size": model.config["vocab"],
              "torch_dtype": str(next(iter(tensors.values())).dtype).removeprefix("torch.") if tensors else None,
              "stringdiag": spec.to_json()}
    write_text(folder / CONFIG, json.dumps(config, indent=2) + "\n")
    if tokenizer is not None:
        tokenizer.save(folder)
    return folder


def from_pretrained(folder: str | Path) -> tuple[WholeModel, Tokenizer | None]:
    """What :func:`save_pretrained` wrote: the model rebuilt from its sources, its tensors checked
    against their checksum and loaded strictly (every name, shape and dtype); and the tokenizer."""
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
    if meta.get("checksum") != checksum(tensors):
        raise DiagError(f"{path} is damaged: its tensors do not match their checksum")
    return tensors
