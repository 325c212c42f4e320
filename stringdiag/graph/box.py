"""What a box and a wire are, typed: a box's :class:`Kind`, and the records a diagram stores.

A diagram stores one record per node (``hypergraph.py``): a :class:`Box` (kind, name, SIMD,
summed and generic dimensions, definition, loop, weights, value) or a :class:`Wire` (type,
name, id range). Records are frozen; an edit stores a new one (``Hypergraph.update`` goes
through ``_replace``, so a misspelt field is an error, not a silently dropped key).
:meth:`Box.identity` says which function a box computes: the one definition that
isomorphism, rule loading, reduction checking and the matcher's conditions compare.

Loops and weights are small records rather than flags: a box runs its body once, as a
:class:`Scan` or as a :class:`Repeat`; it computes with :class:`Global` weights (one set per
name, everywhere), :class:`Local` ones (fresh in each instance of its definition) or, for a
use of a definition, the weights of its :class:`Instance`.
"""

from enum import Enum
from typing import Any, Mapping, NamedTuple

from ..syntax.records import Record
from .clusters import Cluster


class Kind(str, Enum):
    """The class of a box. A ``str`` enum, so a kind is stored and printed as its name."""

    LEARN = "learn"        # a universal approximator (a typed hole, filled by training)
    ABSTRACT = "abstract"  # a family to instantiate (``sim``)
    FIXED = "fixed"        # a primitive process of the prelude or a user declaration
    DIAGRAM = "diagram"    # a definition used as a box
    CONTRACT = "contract"  # sum over summed indices of the product of the inputs
    REINDEX = "reindex"    # transpose, broadcast
    CONST = "const"        # a symbolic number
    RANDOM = "random"      # a tensor drawn from N(0, 1) by its seed, never trained

    def __str__(self) -> str:
        return self.value

    @property
    def is_process(self) -> bool:
        """A process (a function of its ports): what a rule's box variable may stand for."""
        return self in _PROCESSES

    @property
    def is_hole(self) -> bool:
        """A box a reduction may specialise: a learnable box or an abstract family."""
        return self in _HOLES


_PROCESSES = frozenset({Kind.LEARN, Kind.ABSTRACT, Kind.FIXED, Kind.DIAGRAM})
_HOLES = frozenset({Kind.LEARN, Kind.ABSTRACT})
KINDS = tuple(Kind)  # in the order boxes are listed (summaries)


# -- loops ------------------------------------------------------------------------------------
class Scan(Record):
    """The innermost SIMD index iterated in sequence, a state carried on port 0."""

    def tag(self) -> str:
        return "scan"


class Repeat(Record):
    """The definition applied ``count`` times in sequence (one weight set if ``shared``)."""

    count: Any  # a Dim
    shared: bool = False

    def tag(self) -> str:
        return f"repeat {self.count}{' shared' if self.shared else ''}"


Loop = Scan | Repeat


# -- weights ----------------------------------------------------------------------------------
class Global(Record):
    """A learnable's weights, one set per name wherever the name appears."""

    param: str


class Local(Record):
    """A learnable's weights, fresh in each instance of the definition declaring it."""

    param: str


class Instance(Record):
    """A use of a definition: the weights of that instance (``""``: its loop's own)."""

    path: str


Weights = Global | Local | Instance


class Identity(NamedTuple):
    """Which function a box computes, up to the names of its labels. Each reader compares the
    parts its notion of sameness needs: isomorphism the ``name`` (local weight sets are
    joined by edges, not named), reductions the ``weights``, the matcher the ``op``."""

    kind: Kind
    op: str
    name: str  # op; a global learnable's weight set; a random tensor's op@seed
    weights: Weights | None
    ref: Any  # the definition a diagram box uses (compare with ``is``), else None
    simd: tuple  # (label, Dim): the labels are names, the dims structure
    summed: tuple  # (label, Dim)
    generics: tuple  # (generic, Dim)
    loop: str  # loop_tag
    value: Any  # a constant's value (None: not a constant)

    def dims(self, pairs: tuple, drop: "frozenset | set" = frozenset()) -> tuple:
        """The dimensions of ``simd`` or ``summed`` pairs, leaving out the labels in ``drop``."""
        return tuple(d for lab, d in pairs if lab not in drop)


_identity = Identity._make


class Box(NamedTuple):
    """A box node's record (see the module docstring). A named tuple: frozen, slotted,
    and quick to make, since boxes are read many times over."""

    kind: Kind
    op: str
    simd: tuple = ()
    summed: tuple = ()
    generics: tuple = ()
    ref: Any = None  # the Diagram of a ``diagram`` box, the declaration of a ``fixed`` one
    pos: Any = None
    loop: Loop | None = None
    weights: Weights | None = None
    value: Any = None  # a ``const`` box's value (None: not a constant)
    seed: int | None = None
    display: Mapping | None = None  # pictures only: display names of labels
    clusters: tuple[Cluster, ...] = ()  # pictures only: the frames drawn around the box
    var: bool = False   # pattern side: a rule's box variable (``given f``)
    cell: bool = False  # pattern side: a rule's cell pattern (``where diagram``)

    @property
    def scan(self) -> bool:
        return isinstance(self.loop, Scan)

    @property
    def repeat(self) -> Repeat | None:
        return self.loop if isinstance(self.loop, Repeat) else None

    @property
    def count(self) -> Any:
        """A repeat's number of copies (a Dim), None for a box that is not a repeat."""
        return self.loop.count if isinstance(self.loop, Repeat) else None

    @property
    def shared(self) -> bool:
        """A repeat whose copies share one set of weights."""
        return isinstance(self.loop, Repeat) and self.loop.shared

    @property
    def local(self) -> bool:
        """A learnable whose weights are fresh in each instance."""
        return isinstance(self.weights, Local)

    @property
    def param(self) -> str | None:
        """A learnable's weight set (its name, or a path to it), else None."""
        return self.weights.param if isinstance(self.weights, (Global, Local)) else None

    @property
    def instance(self) -> str | None:
        """The instance a use of a definition computes with, else None."""
        return self.weights.path if isinstance(self.weights, Instance) else None

    @property
    def name(self) -> str:
        """The name that tells this box's function apart from others of its kind: a global
        learnable's weight set, a random tensor's seed, else its op."""
        if isinstance(self.weights, Global):
            return self.weights.param
        if self.kind is Kind.RANDOM:
            return f"{self.op}@{self.seed}"  # the seed is part of which tensor it is
        return self.op

    def same_process(self, other: "Box") -> bool:
        """The same kind and op: how a step's picture tells an untouched box (its weights
        and axes may have been renamed) from one the step put in."""
        return self.kind is other.kind and self.op == other.op

    def identity(self) -> Identity:
        """Which function this box computes (see :class:`Identity`): the one definition of
        what a box is, for isomorphism, rules, reductions and the matcher."""
        kind, loop = self.kind, self.loop  # (read for every box of a diagram: no more calls than needed)
        return _identity((kind, self.op, self.name, self.weights, self.ref if kind is Kind.DIAGRAM else None,
                          tuple(self.simd), tuple(self.summed), tuple(self.generics), "" if loop is None else loop.tag(),
                          self.value))


class Wire(NamedTuple):
    """A wire node read as a record: the tensor type it carries, and what names it."""

    type: tuple  # a TensorType: its dims, outermost first
    name: str | None = None
    pos: Any = None
    of: Any = None  # a Dim: it carries token ids in 0, ..., of - 1 (``[s] of v``), not real numbers
    scope: str | None = None  # the instance path of the definition whose use named it (``rewrite/names.py``)


def loop_tag(box: Box) -> str:
    """How a box runs its body beyond SIMD, as part of which function it is: ``''``,
    ``'scan'``, or ``'repeat t'`` (``'repeat t shared'``)."""
    return "" if box.loop is None else box.loop.tag()


__all__ = ["Kind", "KINDS", "Box", "Wire", "Identity", "Scan", "Repeat", "Loop", "Global", "Local", "Instance",
           "Weights", "loop_tag"]
