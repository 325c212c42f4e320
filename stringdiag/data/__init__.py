"""Corpora for training language models: embedded Shakespeare, a user's PTB directory, synthetic.

>>> c = load_corpus("synthetic")
>>> c.vocab[:2], c.train.shape, c.train_windows(context=8).shape
(['<eos>', '<unk>'], torch.Size([20000]), torch.Size([4998, 9]))
"""
from __future__ import annotations

from pathlib import Path

from ..errors import DiagError
from .corpus import EOS, SPECIALS, SPLITS, UNK, Corpus, batches, build_vocab, eval_windows, lm_windows, load_ptb
from .shakespeare import load_shakespeare
from .synthetic import synthetic_corpus

__all__ = ["EOS", "UNK", "SPECIALS", "SPLITS", "Corpus", "load_corpus", "load_ptb", "load_shakespeare",
           "synthetic_corpus", "build_vocab", "lm_windows", "eval_windows", "batches"]


def load_corpus(spec: str | Path = "shakespeare") -> Corpus:
    """``'shakespeare'`` (the default, embedded), ``'synthetic'``, or a PTB-style directory.

    The names win over a directory of the same name; write ``./shakespeare`` for the directory.
    """
    if isinstance(spec, str) and spec == "shakespeare":
        return load_shakespeare()
    if isinstance(spec, str) and spec == "synthetic":
        return synthetic_corpus()
    if not Path(spec).is_dir():
        raise DiagError(f"no corpus '{spec}': expected 'shakespeare', 'synthetic', or a directory with "
                        f"ptb.train.txt, ptb.valid.txt and ptb.test.txt")
    return load_ptb(spec)
