"""A tiny synthetic corpus for tests: a few fixed sentences, repeated in random order, with noise.

A model that has seen a sentence's first word or two can predict the rest, so even a tiny
model's perplexity falls far below the unigram baseline within a few hundred steps; the
noise keeps the task from being trivially deterministic. Generation is vectorised and
depends only on the seed.
"""
from __future__ import annotations

import torch

from .corpus import EOS, SPECIALS, Corpus


def synthetic_corpus(seed: int = 0, words: int = 24, sentences: int = 12, min_len: int = 3, max_len: int = 8,
                     noise: float = 0.05, sizes: tuple[int, int, int] = (20_000, 2_000, 2_000)) -> Corpus:
    """``sentences`` templates of ``min_len``..``max_len`` words over ``w00``.. drawn i.i.d., each ended by ``<eos>``.

    The stream is templates chosen uniformly at random; each non-``<eos>`` token is then
    replaced by a uniform random word with probability ``noise``. ``sizes`` are the
    train/valid/test token counts, cut from one stream.
    """
    g = torch.Generator().manual_seed(seed)
    vocab = list(SPECIALS) + [f"w{i:02d}" for i in range(words)]
    first, eos = len(SPECIALS), vocab.index(EOS)
    lengths = torch.randint(min_len, max_len + 1, (sentences,), generator=g)
    templates = torch.randint(first, len(vocab), (sentences, max_len + 1), generator=g)
    templates[torch.arange(sentences), lengths] = eos
    keep = torch.arange(max_len + 1)[None] <= lengths[:, None]   # words and their <eos>
    total = sum(sizes)
    picks = torch.randint(sentences, (total // (min_len + 1) + 1,), generator=g)  # enough for total tokens
    stream = templates[picks][keep[picks]][:total]
    flip = (torch.rand(total, generator=g) < noise) & (stream != eos)
    stream[flip] = torch.randint(first, len(vocab), (int(flip.sum()),), generator=g)
    train, valid, test = stream.split(list(sizes))
    return Corpus(vocab, train.clone(), valid.clone(), test.clone(), name=f"synthetic-{seed}")
