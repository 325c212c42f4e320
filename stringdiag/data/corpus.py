"""Word-level language-modelling corpora: one return type, the PTB loader, and batching.

A corpus is three 1-D ``LongTensor`` streams of token ids (``<eos>`` ends every sentence)
over one vocabulary, as in the PTB language-modelling setup the paper trains on (App. C).
Batching is done on views of those streams with ``Tensor.unfold``: a window of
``context + 1`` tokens gives ``context`` inputs ``w[:, :-1]`` and their targets ``w[:, 1:]``.
"""
from __future__ import annotations

import math
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterator

import torch

from ..errors import DiagError
from ..syntax.source import read_source

EOS = "<eos>"
UNK = "<unk>"
SPECIALS = (EOS, UNK)  # ids 0 and 1 in every vocabulary
SPLITS = ("train", "valid", "test")


@dataclass
class Corpus:
    """A vocabulary and the train/valid/test id streams over it."""

    vocab: list[str]
    train: torch.Tensor
    valid: torch.Tensor
    test: torch.Tensor
    name: str
    stoi: dict[str, int] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        self.stoi = {w: i for i, w in enumerate(self.vocab)}

    def __repr__(self) -> str:
        return (f"<Corpus {self.name}: {len(self.vocab)} words, {self.train.numel()} / {self.valid.numel()} / "
                f"{self.test.numel()} tokens>")

    def split(self, name: str) -> torch.Tensor:
        """The stream called ``train``, ``valid`` or ``test``."""
        if name not in SPLITS:
            raise DiagError(f"no split '{name}': expected one of {', '.join(SPLITS)}")
        return getattr(self, name)

    def decode(self, ids: torch.Tensor) -> str:
        """Ids back to words (for eyeballing samples)."""
        return " ".join(self.vocab[i] for i in ids.tolist())

    def unigram_perplexity(self, split: str = "valid", alpha: float = 1.0, targets: int | None = None) -> float:
        """Perplexity of the train unigram distribution on ``split``: the baseline a model must beat;
        with ``targets``, on the split's first that many targets (tokens 1, ..., targets), those a
        language model scored when its evaluation stopped early.

        ``alpha`` is add-alpha smoothing over the vocabulary, so a word that never occurs in
        train gives a finite number; on a million train tokens it barely moves the result.
        """
        counts = torch.bincount(self.train, minlength=len(self.vocab)).double() + alpha
        logp = counts.log() - counts.sum().log()
        ids = self.split(split) if targets is None else self.split(split)[1:targets + 1]
        return math.exp(-logp[ids].mean().item())

    def train_windows(self, context: int, stride: int | None = None) -> torch.Tensor:
        """Training windows over ``train`` at stride ``context // 2`` unless given (App. C)."""
        return lm_windows(self.train, context, stride or max(context // 2, 1))

    def eval_windows(self, context: int, split: str = "test", stride: int = 1) -> tuple[torch.Tensor, torch.Tensor]:
        """Evaluation windows over ``split`` and which targets each scores (see ``eval_windows``)."""
        return eval_windows(self.split(split), context, stride)


CORPUS_LIMIT = 2 ** 30  # 1 GiB of text: far beyond PTB (5 MB), short of exhausting memory


def build_vocab(words: list[str], max_size: int | None = None) -> list[str]:
    """``<eos>``, ``<unk>``, then words by falling frequency, ties alphabetical (deterministic)."""
    counts = Counter(words)
    for s in SPECIALS:
        counts.pop(s, None)
    ranked = sorted(counts, key=lambda w: (-counts[w], w))
    return list(SPECIALS) + (ranked if max_size is None else ranked[:max(max_size - len(SPECIALS), 0)])


def read_words(path: Path) -> list[str]:
    """A PTB-format file as words: whitespace-separated tokens, ``<eos>`` after each non-blank line."""
    lines = [line for line in read_source(path, limit=CORPUS_LIMIT).splitlines() if line.strip()]
    return f" {EOS} ".join(lines).split() + ([EOS] if lines else [])


def encode(words: list[str], stoi: dict[str, int]) -> torch.Tensor:
    """Words to ids; a word outside the vocabulary becomes ``<unk>``."""
    unk = stoi[UNK]
    return torch.tensor([stoi.get(w, unk) for w in words], dtype=torch.long)


def load_ptb(directory: str | Path, name: str | None = None, max_vocab: int | None = None) -> Corpus:
    """A PTB-style directory: ``ptb.{train,valid,test}.txt``, already tokenised, one sentence a line.

    The vocabulary comes from train (capped at ``max_vocab`` entries if given); words of
    valid and test that train lacks become ``<unk>``.
    """
    directory = Path(directory)
    paths = {split: directory / f"ptb.{split}.txt" for split in SPLITS}
    missing = [p.name for p in paths.values() if not p.is_file()]
    if missing:
        raise DiagError(f"corpus directory {directory} lacks {', '.join(missing)} "
                        f"(expected ptb.train.txt, ptb.valid.txt and ptb.test.txt)")
    words = {split: read_words(p) for split, p in paths.items()}
    vocab = build_vocab(words["train"], max_vocab)
    stoi = {w: i for i, w in enumerate(vocab)}
    train, valid, test = (encode(words[s], stoi) for s in SPLITS)
    return Corpus(vocab, train, valid, test, name=name or directory.resolve().name)


def lm_windows(ids: torch.Tensor, context: int, stride: int) -> torch.Tensor:
    """Every full window of ``context + 1`` tokens at ``stride``: a ``[n, context + 1]`` view, no copy.

    >>> lm_windows(torch.arange(8), 3, 2)
    tensor([[0, 1, 2, 3],
            [2, 3, 4, 5],
            [4, 5, 6, 7]])
    """
    if context < 1 or stride < 1:
        raise DiagError(f"context and stride must be at least 1 (got {context}, {stride})")
    if ids.numel() < context + 1:
        raise DiagError(f"a stream of {ids.numel()} tokens is shorter than one window of {context + 1}")
    return ids.unfold(0, context + 1, stride)


def eval_windows(ids: torch.Tensor, context: int, stride: int = 1) -> tuple[torch.Tensor, torch.Tensor]:
    """Windows that score every target (all tokens but the first) exactly once.

    Returns ``windows [n, context + 1]`` and ``score [n, context]`` (bool, aligned with
    ``windows[:, 1:]``). The first window scores all its targets; each later one scores only
    those the previous windows did not reach, i.e. its last ``stride``. At stride 1 every
    token after the first ``context`` is predicted from the full ``context`` before it (App. C).
    When the stride does not divide evenly, one extra window ends exactly at the stream's end.

    >>> w, score = eval_windows(torch.arange(6), 3)
    >>> w.tolist(), score.int().tolist()
    ([[0, 1, 2, 3], [1, 2, 3, 4], [2, 3, 4, 5]], [[1, 1, 1], [0, 0, 1], [0, 0, 1]])
    """
    windows = lm_windows(ids, context, stride)
    starts = torch.arange(windows.shape[0]) * stride
    last = ids.numel() - context - 1
    if starts[-1] < last:  # the tail the strided windows miss
        windows = torch.cat([windows, ids[last:][None]])
        starts = torch.cat([starts, torch.tensor([last])])
    first = torch.cat([torch.zeros(1, dtype=torch.long), starts[:-1] + context - starts[1:]])
    return windows, torch.arange(context)[None] >= first[:, None]


def batches(windows: torch.Tensor, batch_size: int, generator: torch.Generator | None = None) -> Iterator[torch.Tensor]:
    """Windows in batches of ``batch_size`` (the last may be short); shuffled if a generator is given."""
    order = torch.randperm(windows.shape[0], generator=generator) if generator is not None else None
    for b0 in range(0, windows.shape[0], batch_size):
        yield windows[b0:b0 + batch_size] if order is None else windows[order[b0:b0 + batch_size]]
