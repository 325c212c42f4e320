"""Multi-query associative recall (MQAR), a task on which attention mechanisms differ.

After Arora et al. (2023), "Zoology: measuring and improving recall in efficient language models",
Sec. 3: a sequence lists key-value pairs, then asks for the values of some of its keys; a model
must recall each value from the context. Softmax attention solves it with little width; linear
attention and other fixed-size states degrade as the pairs outnumber what the state holds; a model
that never mixes tokens is at chance (1 / values). Our layout (one of several in use; Zoology places
the queries at random positions among filler tokens)::

    k1 v1 k2 v2 ... kP vP  q1 a1 q2 a2 ... qQ aQ

keys are distinct within a sequence (drawn from ``keys`` key tokens), values uniform over ``values``
value tokens, the queries ``Q`` distinct keys of the sequence in random order, ``a_j`` the value
paired with ``q_j``. A causal language model reads the sequence; only the answers are scored (the
target after each query). Generation is vectorised and depends only on the seed.

>>> task = mqar(pairs=2, queries=2, keys=4, values=4, train=3, valid=1, test=1)
>>> task.train.windows.shape, task.train.scored[0].int().tolist()
(torch.Size([3, 8]), [0, 0, 0, 0, 1, 0, 1])
"""
from __future__ import annotations

from dataclasses import asdict, dataclass

import torch

from ..errors import DiagError


@dataclass(frozen=True)
class Examples:
    """Fixed-length examples and the targets that count.

    ``windows [n, L + 1]``: the model reads ``windows[:, :-1]`` and predicts ``windows[:, 1:]``;
    ``scored [n, L]`` (bool, aligned with the targets): which predictions the loss and the metrics use.
    """

    windows: torch.Tensor
    scored: torch.Tensor

    def numel(self) -> int:
        """The scored targets: what a metric over these examples averages over."""
        return int(self.scored.sum())


@dataclass(frozen=True)
class MqarSpec:
    """The sizes of an MQAR task (the defaults fit a CPU study: 64-token sequences)."""

    pairs: int = 16
    queries: int = 16
    keys: int = 64
    values: int = 64
    train: int = 20_000
    valid: int = 1_000
    test: int = 2_000
    seed: int = 0

    def check(self) -> None:
        if min(self.pairs, self.queries, self.keys, self.values, self.train, self.valid, self.test) < 1:
            raise DiagError("mqar: every size must be at least 1")
        if self.pairs > self.keys or self.queries > self.pairs:
            raise DiagError(f"mqar: need queries <= pairs <= keys (got {self.queries}, {self.pairs}, {self.keys})")


@dataclass(frozen=True)
class Task:
    """A corpus-like task: a vocabulary and train/valid/test examples (see ``Corpus``)."""

    vocab: list[str]
    train: Examples
    valid: Examples
    test: Examples
    name: str
    spec: MqarSpec

    @property
    def context(self) -> int:
        """Tokens a model reads per example."""
        return self.train.windows.shape[1] - 1

    def split(self, name: str) -> torch.Tensor:
        """The examples of a split, as one tensor (for fingerprints)."""
        ex = getattr(self, name)
        return torch.cat([ex.windows.flatten(), ex.scored.flatten().long()])

    def chance(self) -> float:
        """The accuracy of a guess among the values."""
        return 1.0 / self.spec.values

    def to_json(self) -> dict:
        return asdict(self.spec)


def examples(spec: MqarSpec, n: int, g: torch.Generator) -> Examples:
    """``n`` sequences of ``spec``, drawn from ``g``."""
    p, q = spec.pairs, spec.queries
    keys = torch.rand(n, spec.keys, generator=g).argsort(dim=1)[:, :p]                  # distinct keys
    values = spec.keys + torch.randint(spec.values, (n, p), generator=g)
    asked = torch.rand(n, p, generator=g).argsort(dim=1)[:, :q]                         # distinct queries
    seq = torch.empty(n, 2 * (p + q), dtype=torch.long)
    seq[:, 0:2 * p:2], seq[:, 1:2 * p:2] = keys, values
    seq[:, 2 * p::2], seq[:, 2 * p + 1::2] = keys.gather(1, asked), values.gather(1, asked)
    scored = torch.zeros(n, seq.shape[1] - 1, dtype=torch.bool)
    scored[:, 2 * p::2] = True                                                          # the target after a query
    return Examples(seq, scored)


def mqar(**sizes) -> Task:
    """An MQAR task; keyword arguments are :class:`MqarSpec`'s fields. Train, valid and test are drawn
    from one generator seeded by ``seed``, in that order: the same sizes give the same task."""
    spec = MqarSpec(**sizes)
    spec.check()
    g = torch.Generator().manual_seed(spec.seed)
    vocab = [f"k{i}" for i in range(spec.keys)] + [f"v{i}" for i in range(spec.values)]
    train, valid, test = (examples(spec, n, g) for n in (spec.train, spec.valid, spec.test))
    name = f"mqar-{spec.pairs}x{spec.queries}-seed{spec.seed}"
    return Task(vocab, train, valid, test, name, spec)


def parse_spec(text: str) -> MqarSpec:
    """``pairs=16,queries=8``: sizes of :class:`MqarSpec` by name (the rest default)."""
    fields = MqarSpec.__dataclass_fields__
    sizes: dict[str, int] = {}
    for part in filter(None, (p.strip() for p in text.split(","))):
        name, eq, value = (s.strip() for s in part.partition("="))
        if not eq or name not in fields or not value.isdigit():
            raise DiagError(f"--mqar: expected NAME=INTEGER,... with NAME one of {', '.join(fields)}, "
                            f"got {part!r}")
        sizes[name] = int(value)
    spec = MqarSpec(**sizes)
    spec.check()
    return spec
