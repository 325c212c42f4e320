"""What the parts of one diagram's elaboration share: values seen through index views, the
indices of a statement, the graph being built, and the messages.

The elaborator is assembled from parts (``statements.py``; ``expressions.py``; ``calls.py``:
box applications), each a mixin over :class:`ElabState`.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable

from ..errors import DiagError, DiagWarning, Pos
from ..graph.box import Box, Kind
from ..graph.constants import show
from ..graph.decls import BoxDecl, Definition, Program
from ..graph.diagram import Diagram
from ..graph.types import Dim, TensorType
from ..syntax.records import Mutable, field

TOO_DEEP = "expressions are nested too deeply to check; split them into named wires"


class Val(Mutable, frozen=False):
    """A value in a statement: a wire seen through an index view, or a constant.

    ``view`` has one entry per axis of the wire: a statement index label (that axis is
    indexed) or ``None`` (a local axis, still part of the value's type).
    """

    wire: int | None
    view: tuple[str | None, ...] = ()
    const: Any = None  # a constant expression tree (graph/constants.py's Const), when wire is None

    def labels(self) -> set[str]:
        return {v for v in self.view if v is not None}

    @property
    def placed(self) -> int:
        """The wire of a value that is on one (not a constant still folding)."""
        assert self.wire is not None, "a constant where a wire is needed"
        return self.wire


class Scope(Mutable, frozen=False):
    """Indices of one statement: user name -> label, and label -> range."""

    ranges: dict[str, Dim | None] = field(default_factory=dict)
    order: list[str] = field(default_factory=list)
    active: dict[str, str] = field(default_factory=dict)
    display: dict[str, str] = field(default_factory=dict)
    first_use: dict[str, Pos] = field(default_factory=dict)

    def bind(self, name: str) -> str:
        label = name
        while label in self.ranges:
            label += "'"
        self.ranges[label] = None
        self.order.append(label)
        self.active[name] = label
        self.display[label] = name
        return label

    def rank(self, label: str) -> int:
        return self.order.index(label)

    def shown(self, labels) -> dict:
        """How labels are written in pictures: as the user named the index."""
        return {lab: self.display.get(lab, lab) for lab in labels}


class ElabState:
    """One definition being elaborated: its graph, its named wires and local boxes."""

    if TYPE_CHECKING:  # the methods each mixin calls of the others (expressions.py, calls.py)
        expr: Callable[..., Val]
        call: Callable[..., list[Val]]
        apply: Callable[..., list[Val]]
        apply_prim: Callable[..., Val]

    def __init__(self, defn: Definition):
        self.defn = defn
        self.prog: Program = defn.program
        self.file = self.prog.path
        self.generics = set(defn.generics)
        self.d = Diagram(name=defn.name, generics=defn.generics, pos=defn.pos,
                         source=self.prog.path, program=self.prog)
        self.names: dict[str, int] = {}
        self.name_pos: dict[str, Pos] = {}
        self.local_boxes: dict[str, BoxDecl] = {}
        self.used_local: set[str] = set()
        self.uses: dict[str, int] = {}  # definition -> how many uses so far (instance numbers)

    def err(self, msg: str, pos: Pos | None) -> DiagError:
        return DiagError(msg, pos, self.prog.source)

    def warn(self, msg: str, pos: Pos | None) -> None:
        self.prog.warnings.append(DiagWarning(msg, pos, self.prog.source))

    def type_of(self, v: Val) -> TensorType:
        return self.d.wire_type(v.placed)

    def local_type(self, v: Val) -> TensorType:
        if v.wire is None:
            return ()
        return tuple(dim for lab, dim in zip(v.view, self.type_of(v)) if lab is None)

    def axes_for(self, v: Val, implicit: dict[int, str]) -> tuple:
        """Input axes of a box: statement labels stay, local axes number from 0.

        ``implicit`` maps positions among the local axes to implicit SIMD labels.
        """
        axes: list[str | int] = []
        k, j = 0, 0
        for lab in v.view:
            if lab is not None:
                axes.append(lab)
            elif j in implicit:
                axes.append(implicit[j])
                j += 1
            else:
                axes.append(k)
                k += 1
                j += 1
        return tuple(axes)

    def materialize(self, v: Val, pos: Pos) -> Val:
        _, (w,) = self.d.emit(Box(Kind.CONST, show(v.const), pos=pos, value=v.const), [], [()])
        return Val(w, ())

    def wired(self, vals: list[Val], pos: Pos) -> list[Val]:
        """Constants become boxes where a box reads them."""
        return [self.materialize(v, pos) if v.wire is None else v for v in vals]
