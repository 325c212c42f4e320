"""The incremental form of a causal diagram: new positions in, their outputs out, with the state
the positions before them left behind (a key/value cache, a recurrent state).

It is derived from the diagram as the parallel form is, by the same lowering (``lower.py``) with
one change of reading: the sequence axis of every wire holds only the new positions. A box that
is SIMD over the sequence (a token-wise layer, a head's projection, a norm) is then already its
own incremental form and is lowered as it is. A box that reads across positions is lowered by
its entry in :data:`STEPS`, which keeps what later positions need: causally masked softmax
attention (which the fast paths have made ``causal_sdpa``) a key/value cache; causal linear and
decayed attention their matrix state; a ``scan`` its carried state, its cell run once per new
position; a running sum its total; a causal convolution or shift its last inputs. Positions
(``positions<s>``, hence RoPE; ``posenc``; a learned table ``where s <= N``) read the index of
the new positions. Attention whose causal mask other boxes read (ALiBi, a decay matrix) holds its
scores over every position so far, the values it reads as keys cached (``roles.py``), and is
accepted only where the mask makes the later positions' terms vanish (followed box by box, never
assumed). Any other box that reads across positions (attention without a causal mask, a sum over
the sequence, a reversal) has no incremental form: the diagram is refused, with that box named
where it is written. The step is checked against the parallel form in float64 at
every position (tests/test_incremental.py).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Mapping

import torch
from torch import Tensor, fx, nn

from ..errors import DiagError
from ..graph import constants
from ..graph.box import Kind, Repeat, Scan
from ..graph.budget import MAX_LOWERED, Build, refuse_above
from ..graph.diagram import Diagram
from ..graph.types import Dim, DimKind
from ..graph.weights import weight_key
from . import loops
from . import roles as R
from .approximators import LearnableTensor, Policy, factory
from .fastpath import fused
from . import keys as K
from .keys import KeysLowering
from .interface import interface, need_dtype
from .lower import PrimitiveCall, _axis_bounds, _ref_not_saved, _with_defaults
from .caches import CacheSlot, Carry, Clock, State, rows_at
from .table import STEP_AXES, STEPS


# -- the lowering ----------------------------------------------------------------------------
@dataclass
class Shared:
    """What every graph of one incremental form shares: its clock and its slots."""

    clock: Clock = field(default_factory=Clock)
    slots: list[CacheSlot] = field(default_factory=list)


class StepLowering(KeysLowering):
    """The lowering with the sequence axis holding the new positions only (see the module's
    docstring). A subclass is made per form (:func:`incremental_form`) to carry its
    :class:`Shared`, so that the bodies of repeats and scans, lowered by ``type(low)``, share it."""

    shared: Shared

    @staticmethod
    def prepare(diagram: Diagram, chosen: list) -> Diagram:
        """The fast paths without the chunked form of scans: a scan is its own step."""
        return fused(diagram)

    def module(self) -> fx.GraphModule:
        self.live = _live(self.d)
        self.axes = {w: [self.stream(x) and x.name is not None for x in self.d.wire_type(w)] for w in self.d.wires()}
        self.plan = R.plan(self.d, self.live, self.stream)
        self.venv: dict[tuple, fx.Node] = {}  # (wire, roles) -> its value
        self.flags: dict[tuple, tuple] = {}   # (wire, roles) -> (Z or NEG, row axis, column axis)
        self.roles: dict[str, str] = {}      # the SIMD labels' roles in the box being lowered
        self.ports: dict[int, fx.Node] = {}  # its inputs' values, port by port (a wire read in two roles)
        return super().module()

    def stream(self, dim: Dim) -> bool:
        """Whether a dimension involves the sequence (a dimension declared ``seq``)."""
        prog = self.src.program
        return any(prog is not None and (decl := prog.lookup_dim(n)) is not None and decl.kind is DimKind.SEQ
                   for n in dim.names())

    def slot(self, make: Callable[[], CacheSlot]) -> str:
        mod = make()
        self.shared.slots.append(mod)
        name = f"step_state_{len(self.shared.slots)}"
        self.root.add_module(name, mod)
        return name

    def clock_attr(self) -> str:
        if not hasattr(self.root, "step_clock"):
            self.root.add_module("step_clock", self.shared.clock)
        return "step_clock"

    def refuse(self, b: int, why: str) -> DiagError:
        node = self.d.record(b)
        label = self.out_name(b)
        what = (f"the sum that makes '{label}'" if label else "a sum") if node.kind is Kind.CONTRACT else f"'{node.op}'"
        return DiagError(f"{what} {why}: '{self.src.name}' has no incremental form (only causal "
                         "diagrams do: causal attention, scans, token-wise boxes)", node.pos)

    def crossing(self, b: int) -> str | None:
        """Why box ``b`` reads across positions, or None when it is SIMD over the sequence."""
        d, node = self.d, self.d.record(b)
        for lab, dim in node.summed:
            if self.stream(dim):
                return f"sums over the positions of {dim} (index {lab})"
        labels = node.simd[:-1] if node.scan else node.simd
        for lab, dim in labels:
            if self.stream(dim) and dim.name is None:
                return f"runs over {dim} positions"
        for p in range(len(d.box_inputs(b))):
            if any(self.stream(x) for x in d.local_in_type(b, p)):
                return "reads every position of the sequence at once"
        for p in range(len(d.box_outputs(b))):
            if any(self.stream(x) for x in d.local_out_type(b, p)):
                return "makes values over every position of the sequence"
        if any(self.stream(x) for _, x in node.generics):
            return "is sized by the length of the sequence"
        if node.kind is Kind.CONST and any(self.stream(x) for x in constants.dims_in(node.value)):
            return "is a number computed from the length of the sequence"
        return None

    def lower_box(self, b: int) -> None:
        d, node = self.d, self.d.record(b)
        if b not in self.live:
            if node.kind is Kind.LEARN:  # never read, but its weights are the parallel form's
                self._register(b)
            return
        if not self.plan.keys():
            return self.lower_new(b)
        outs = d.box_outputs(b)
        for labels, local in R.versions(d, b, self.plan, self.axes):
            ins = R.input_roles(d, b, labels, local, self.axes)
            out_roles = [self._out_roles(b, k, labels, local) for k in range(len(outs))]
            self.ports = {k: self.value(b, w, roles) for k, ((w, _), roles) in enumerate(zip(d.box_inputs(b), ins))}
            for (w, _), roles in zip(d.box_inputs(b), ins):
                self.env[w] = self.value(b, w, roles)
            self.roles = labels
            if any(R.A in r for r in ins + out_roles):
                self.emit(b, self.lower_keys(b, ins, out_roles))
            else:
                self.lower_new(b)
            self.roles, self.ports = {}, {}
            for w, roles in zip(outs, out_roles):
                self.venv[(w, roles)] = self.env[w]
                self._keep(w, roles)
                if node.op == "positions" and node.kind is Kind.FIXED and roles[0] is not None:
                    self.flags[(w, roles)] = (K.POS, 0, None)  # the index along its one axis
        for w in outs:  # what the outputs read: the new positions
            new = tuple(R.N if a else None for a in self.axes[w])
            if (w, new) in self.venv:
                self.env[w] = self.venv[(w, new)]

    def lower_new(self, b: int) -> None:
        """A box whose inputs and outputs hold the new positions only."""
        d, node = self.d, self.d.record(b)
        if isinstance(node.loop, Repeat):  # its body is lowered (and checked) by this class
            return super().lower_box(b)
        if isinstance(node.loop, Scan) and self.stream(node.simd[-1][1]):
            why = self.crossing(b)
            if why is not None:
                raise self.refuse(b, why)
            return self.emit(b, self.scan(b))
        why = self.crossing(b)
        if why is None:
            return super().lower_box(b)
        if node.kind is Kind.LEARN and not d.box_inputs(b) and any(_axis_bounds(node)):
            return super().lower_box(b)  # a table of positions: ``bounded`` reads the new rows
        if node.kind in (Kind.FIXED, Kind.DIAGRAM) and node.op in STEPS and self._fits(b):
            return self.emit(b, STEPS[node.op](PrimitiveCall(self, b)))
        raise self.refuse(b, why)

    def _fits(self, b: int) -> bool:
        """Whether the box's sequence axes are where its entry in STEPS reads them (the
        prelude's signature), and nowhere else."""
        d, axes = self.d, STEP_AXES[self.d.record(b).op]
        if len(axes) != len(d.box_inputs(b)):
            return False
        for p, axis in enumerate(axes):
            ty = d.local_in_type(b, p)
            flags = [self.stream(x) for x in ty]
            want = [False] * len(ty)
            if axis is not None:
                if len(ty) < -axis:
                    return False
                want[axis] = True
            if flags != want:
                return False
        return True

    def _register(self, b: int) -> None:
        node = self.d.record(b)
        if self.d.box_inputs(b):
            self.approximator(b)
        else:
            (shape,) = self.local_shapes(b, True)
            self.register(weight_key(node), lambda: LearnableTensor(shape))

    def bounded(self, b: int, t: fx.Node) -> fx.Node:
        node = self.d.record(b)
        bounds, ty = _axis_bounds(node), self.d.local_out_type(b, 0)
        sizes = [self.size(dim) if m else None for dim, m in zip(ty, bounds)]
        stream = [self.stream(dim) for dim in ty]
        if any(s and not m for s, m in zip(stream, bounds)):
            raise self.refuse(b, "is a table over every position with no bound")
        return self.g.call_function(rows_at, (t, self.g.call_module(self.clock_attr(), ()), sizes, list(bounds),
                                            [str(dim) for dim in ty], node.op, stream))

    def scan(self, b: int) -> fx.Node:
        """The scan over the new positions, from the state the last call left."""
        node = loops.scan(self, b)
        name = self.slot(Carry)
        with self.g.inserting_before(node):
            start = self.g.call_module(name, (node.args[1], False))
        node.update_arg(1, start)
        return self.g.call_module(name, (node, True))


    # -- attention whose mask is not one fused process: keys over every position so far ------

def _live(d: Diagram) -> set[int]:
    """The boxes some output depends on."""
    seen: set[int] = set()
    todo = [p for w in d.outputs if (p := d.producer(w)) is not None]
    while todo:
        b = todo.pop()
        if b in seen:
            continue
        seen.add(b)
        todo.extend(p for w, _ in d.box_inputs(b) if (p := d.producer(w)) is not None)
    return seen


# -- the module ------------------------------------------------------------------------------
class Incremental(nn.Module):
    """A causal diagram's incremental form. ``prefill(x, state)`` runs a block of new positions
    (a prompt) in one pass; ``step(x_t, state)`` one position, its sequence axis left out. Both
    return the outputs at the new positions and the state after them, equal to the parallel
    form's outputs at those positions. The weights are the parallel form's, under its names
    (``state_dict`` and ``load_state_dict`` are the compiled diagram's)."""

    def __init__(self, net: fx.GraphModule, shared: Shared, in_axes: list[int], out_axes: list[int],
                 in_ranks: list[int], out_ranks: list[int]):
        super().__init__()
        self.net = net
        self._shared = shared
        self.in_axes, self.out_axes, self.in_ranks, self.out_ranks = in_axes, out_axes, in_ranks, out_ranks

    def state_dict(self, *args, **kwargs):
        return self.net.state_dict(*args, **kwargs)

    def load_state_dict(self, state_dict, strict: bool = True, assign: bool = False):
        return self.net.load_state_dict(state_dict, strict=strict, assign=assign)

    def initial_state(self, batch_size: int) -> State:
        """The state before the first position: nothing cached yet."""
        if batch_size < 1:
            raise DiagError(f"batch_size must be at least 1 (got {batch_size})")
        return State(batch_size, 0, [[] for _ in self._shared.slots])

    def prefill(self, x: Tensor | tuple, state: State) -> tuple[Any, State]:
        """The outputs at the positions of ``x`` (inputs shaped as the parallel form's, a block
        of new positions on the sequence axis), after those ``state`` holds."""
        xs = x if isinstance(x, tuple) else (x,)
        if len(xs) != len(self.in_axes):
            raise DiagError(f"this diagram takes {len(self.in_axes)} input(s), got {len(xs)}")
        batch = [t.shape[:t.dim() - r] for t, r in zip(xs, self.in_ranks)]
        if any(b.numel() != state.batch_size for b in batch):
            raise DiagError(f"the state was made for a batch of {state.batch_size}, the input has batch "
                            f"shape {tuple(batch[0])}")
        lengths = {t.shape[t.dim() - r + a] for t, r, a in zip(xs, self.in_ranks, self.in_axes)}
        if len(lengths) != 1 or 0 in lengths:
            raise DiagError("the inputs must hold the same number of new positions, at least one")
        slots = self._shared.slots
        if len(state.slots) != len(slots):
            raise DiagError("this state was made by another incremental form")
        self._shared.clock.t0 = state.position
        for slot, st in zip(slots, state.slots):
            slot.states, slot.calls = st, 0
        try:
            y = self.net(*xs)
        finally:
            kept = [slot.states for slot in slots]
            for slot in slots:
                slot.states, slot.calls = [], 0
        return y, State(state.batch_size, state.position + lengths.pop(), kept)

    def step(self, x: Tensor | tuple, state: State) -> tuple[Any, State]:
        """One new position: inputs without their sequence axis, outputs without theirs."""
        xs = x if isinstance(x, tuple) else (x,)
        xs = tuple(t.unsqueeze(t.dim() - (r - 1) + a) for t, r, a in zip(xs, self.in_ranks, self.in_axes))
        y, state = self.prefill(xs if len(xs) > 1 else xs[0], state)
        ys = y if isinstance(y, tuple) else (y,)
        ys = tuple(t.squeeze(t.dim() - r + a) for t, r, a in zip(ys, self.out_ranks, self.out_axes))
        return (ys if len(ys) > 1 else ys[0]), state

    def forward(self, x: Tensor | tuple, state: State) -> tuple[Any, State]:
        return self.prefill(x, state)


def compile_incremental(diagram: Diagram, dims: Mapping[str, int] | None = None, approximator: Policy = "mlp",
                        dtype: torch.dtype | None = None, fast: bool = True, native: bool = True,
                        max_boxes: int = MAX_LOWERED) -> "Incremental":
    """``compile(..., incremental=True)``: sized and refused above ``max_boxes`` as ``compile``
    does, then :func:`incremental_form`."""
    sizes = _with_defaults(diagram, dims)
    need_dtype(dtype)
    refuse_above(diagram, Build.LOWERED, max_boxes, "max_boxes, compile --max-boxes", sizes)
    inc = incremental_form(diagram, sizes, factory(approximator), fast and native)
    inc.interface = interface(diagram, sizes)
    return inc.to(dtype) if dtype is not None else inc


def incremental_form(diagram: Diagram, sizes: dict[str, int], make, fast: bool) -> Incremental:
    """The incremental form of ``diagram`` at these sizes (``compile(..., incremental=True)``)."""
    if not fast:
        raise DiagError("the incremental form is found through the fast paths (they are what finds causally "
                        "masked attention); compile it with fast=True, native=True")
    if not diagram.inputs:
        raise DiagError(f"'{diagram.name}' has no incremental form: it has no inputs, so no sequence to "
                        "run along", diagram.pos)
    shared = Shared()
    cls = type("StepLowering", (StepLowering,), {"shared": shared})
    low = cls(diagram, sizes, make, nn.Module(), {}, True, True)
    in_axes = _seq_axes(low, diagram, diagram.input_types, "input")
    out_axes = _seq_axes(low, diagram, diagram.output_types, "output")
    net = low.module()
    net = _ref_not_saved(net)
    return Incremental(net, shared, in_axes, out_axes, [len(t) for t in diagram.input_types],
                       [len(t) for t in diagram.output_types])


def _seq_axes(low: StepLowering, d: Diagram, types, what: str) -> list[int]:
    """Where each input (output) has its sequence axis: exactly one axis of each, one dimension
    declared ``seq`` for all of them."""
    axes, names = [], set()
    for k, ty in enumerate(types):
        found = [a for a, dim in enumerate(ty) if low.stream(dim)]
        if len(found) != 1 or ty[found[0]].name is None:
            raise DiagError(f"'{d.name}' has no incremental form: its {what} {k + 1} ({', '.join(map(str, ty))}) "
                            "needs exactly one sequence axis (a dimension declared seq)", d.pos)
        axes.append(found[0])
        names.add(ty[found[0]].name)
    if len(names) > 1:
        raise DiagError(f"'{d.name}' has no incremental form: its inputs and outputs run over several "
                        f"sequences ({', '.join(sorted(names))}); it is generated along one", d.pos)
    return axes


__all__ = ["Incremental", "State", "compile_incremental", "incremental_form"]

