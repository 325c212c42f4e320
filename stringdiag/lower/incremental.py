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
the new positions. Any other box that reads across positions (attention without a causal mask,
a sum over the sequence, a reversal) has no incremental form: the diagram is refused, with that
box named where it is written. The step is checked against the parallel form in float64 at
every position (tests/test_incremental.py).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable

import torch
import torch.nn.functional as F
from torch import Tensor, fx, nn

from ..errors import DiagError
from ..graph import constants
from ..graph.box import Kind, Repeat, Scan
from ..graph.diagram import Diagram
from ..graph.types import Dim
from ..graph.weights import weight_key
from . import chunked
from . import loops
from . import primitives as P
from .approximators import LearnableTensor
from .fastpath import fused
from .lower import Lowering, PrimitiveCall, _axis_bounds, _ref_not_saved
from .table import _score_scale


# -- state kept by a box ---------------------------------------------------------------------
class Slot(nn.Module):
    """The state one box keeps between calls. Within one call the k-th use of the box reads and
    writes the k-th state, so a layer applied several times (``repeat L shared``) keeps one state
    per application. Held as plain attributes, never as buffers: the state dict is the weights'."""

    def __init__(self) -> None:
        super().__init__()
        self.states: list = []
        self.calls = 0

    def peek(self) -> Any:
        return self.states[self.calls] if self.calls < len(self.states) else None

    def put(self, state: Any) -> None:
        if self.calls < len(self.states):
            self.states[self.calls] = state
        else:
            self.states.append(state)
        self.calls += 1


class Clock(nn.Module):
    """How many positions came before the new ones (shared by every graph of one form)."""

    def __init__(self) -> None:
        super().__init__()
        self.t0 = 0

    def forward(self) -> int:
        return self.t0


def _grown(buf: Tensor | None, n: int, new: Tensor) -> Tensor:
    """``new`` ([..., m, f]) written after the first ``n`` rows of ``buf``, which doubles its
    capacity when full (an append costs O(m f), not a copy of the whole cache)."""
    m = new.shape[-2]
    if buf is None or buf.shape[:-2] != new.shape[:-2] or n + m > buf.shape[-2]:
        cap = max(n + m, 2 * (buf.shape[-2] if buf is not None else 0), 16)
        grown = new.new_empty(*new.shape[:-2], cap, new.shape[-1])
        if buf is not None and n:
            grown[..., :n, :] = buf[..., :n, :]
        buf = grown
    buf[..., n:n + m, :] = new
    return buf


def _block_mask(n: int, m: int, ref: Tensor) -> Tensor | None:
    """Which of the n + m keys each of the m new queries sees (all of them when m == 1)."""
    if m == 1:
        return None
    keys = torch.arange(n + m, device=ref.device)
    return keys[None, :] <= (n + torch.arange(m, device=ref.device))[:, None]


class KVCache(Slot):
    """Causal softmax attention: every key and value so far, O(s (f + e)) per head."""

    def forward(self, q: Tensor, k: Tensor, v: Tensor, scale: float) -> Tensor:
        st = self.peek()
        n, kb, vb = (0, None, None) if st is None else st
        m = k.shape[-2]
        kb, vb = _grown(kb, n, k), _grown(vb, n, v)
        self.put((n + m, kb, vb))
        keys, values = kb[..., :n + m, :], vb[..., :n + m, :]
        return F.scaled_dot_product_attention(q, keys, values, attn_mask=_block_mask(n, m, q), scale=scale)


class WindowCache(Slot):
    """Causal softmax attention in a sliding window i - w < j <= i: the last w - 1 keys and
    values (a window's worth, O(w (f + e)) whatever the length)."""

    def __init__(self, w: int) -> None:
        super().__init__()
        self.w = int(w)

    def forward(self, q: Tensor, k: Tensor, v: Tensor, scale: float) -> Tensor:
        st = self.peek()
        keys, values = (k, v) if st is None else (torch.cat([st[0], k], -2), torch.cat([st[1], v], -2))
        n, m = keys.shape[-2] - k.shape[-2], k.shape[-2]
        j = torch.arange(n + m, device=q.device)[None, :]
        i = (n + torch.arange(m, device=q.device))[:, None]
        mask = (j <= i) & (i - j < self.w)
        keep = max(self.w - 1, 0)
        self.put((keys[..., keys.shape[-2] - keep:, :], values[..., values.shape[-2] - keep:, :]))
        return F.scaled_dot_product_attention(q, keys, values, attn_mask=mask, scale=scale)


class LinearState(Slot):
    """Causal linear attention: S = sum_j k_j v_j^T so far (O(f e)); the normaliser (``v`` None)
    keeps z = sum_j k_j (O(f))."""

    def forward(self, q: Tensor, k: Tensor, v: Tensor | None = None) -> Tensor:
        st = self.peek()
        inside = P.causal_linear(q, k, v)
        if v is None:
            total = k.sum(-2)
            y = inside if st is None else inside + (q * st[..., None, :]).sum(-1)
        else:
            total = k.transpose(-1, -2) @ v
            y = inside if st is None else inside + q @ st
        self.put(total if st is None else st + total)
        return y


class DecayState(Slot):
    """Causal attention decayed by a log gate per position, S_i = exp(l_i) S_{i-1} + k_i v_i^T
    read out q_i S_i (``causal_decay_attention`` takes the rate r = -l): O(f e)."""

    def forward(self, q: Tensor, k: Tensor, v: Tensor, rate: Tensor) -> Tensor:
        q, k, v, l = chunked._common(q, k, v, -rate)
        st = self.peek()
        inside = chunked.causal_decay_linear(q, k, v, l)
        upto = torch.cumsum(l, -1)  # from the block's start to position a, inclusive
        after = torch.flip(torch.cumsum(torch.flip(l, (-1,)), -1), (-1,))
        after = F.pad(after[..., 1:], (0, 1))  # from a (exclusive) to the block's end
        state = (k * torch.exp(after)[..., None]).transpose(-1, -2) @ v
        if st is not None:
            inside = inside + (q * torch.exp(upto)[..., None]) @ st
            state = state + torch.exp(upto[..., -1])[..., None, None] * st
        self.put(state)
        return inside


class Running(Slot):
    """A running sum or product along the sequence: the total so far."""

    def __init__(self, product: bool) -> None:
        super().__init__()
        self.product = product

    def forward(self, x: Tensor) -> Tensor:
        st = self.peek()
        if self.product:
            y = torch.cumprod(x, -1) if st is None else torch.cumprod(torch.cat([st, x], -1), -1)[..., 1:]
        else:
            y = torch.cumsum(x, -1) if st is None else torch.cumsum(torch.cat([st, x], -1), -1)[..., 1:]
        self.put(y[..., -1:])
        return y


class Recent(Slot):
    """The last ``keep`` inputs along the sequence (zeros before the first): what a causal
    convolution of width keep + 1, or a shift by keep, reads of the positions before."""

    def __init__(self, keep: int | None) -> None:
        super().__init__()
        self.keep = keep  # None: read from the kernel's width

    def before(self, x: Tensor, keep: int) -> Tensor:
        st = self.peek()
        if st is None:
            st = x.new_zeros(*x.shape[:-1], keep)
        xx = torch.cat([st.expand(*x.shape[:-1], keep), x], -1)
        self.put(xx[..., xx.shape[-1] - keep:])
        return xx

    def forward(self, x: Tensor, kernel: Tensor | None = None) -> Tensor:
        if kernel is None:  # shift by keep
            return self.before(x, self.keep)[..., :x.shape[-1]]
        w = kernel.shape[-1]
        windows = self.before(x, w - 1).unfold(-1, w, 1)
        return (windows * kernel[..., None, :]).sum(-1)


class Carry(Slot):
    """A scan's carried state: the diagram's initial state at the first position, the state
    the last step left after that."""

    def forward(self, x: Any, keep: bool) -> Any:
        if keep:
            self.put(x[0])
            return x
        st = self.peek()
        return x if st is None else st


# -- what each box that reads across positions becomes ---------------------------------------
def _slot(c: PrimitiveCall, make: Callable[[], Slot], *args) -> fx.Node:
    return c.g.call_module(c.low.slot(make), args)


def _at(c: PrimitiveCall) -> fx.Node:
    return c.g.call_module(c.low.clock_attr(), ())


STEPS: dict[str, Callable[[PrimitiveCall], fx.Node]] = {
    "causal_sdpa": lambda c: _slot(c, KVCache, *c.xs, _score_scale(c)),
    "causal_window_sdpa": lambda c: _slot(c, lambda: WindowCache(c.static("w")), *c.xs, _score_scale(c)),
    "causal_linear_attention": lambda c: _slot(c, LinearState, *c.xs),
    "causal_linear_sum": lambda c: _slot(c, LinearState, *c.xs),
    "causal_decay_attention": lambda c: _slot(c, DecayState, *c.xs),
    "cumsum": lambda c: _slot(c, lambda: Running(False), c.x),
    "cumprod": lambda c: _slot(c, lambda: Running(True), c.x),
    "causal_conv": lambda c: _slot(c, lambda: Recent(None), *c.xs),
    "shift": lambda c: _slot(c, lambda: Recent(c.static("k")), c.x),
    "ones": lambda c: c.call(P.filled, (c.size("n"),), 1.0, c.ref),  # the same at every position
    "zeros": lambda c: c.call(P.filled, (c.size("n"),), 0.0, c.ref),
    "positions": lambda c: c.call(_positions, _at(c), c.size("n"), c.ref),
    "posenc": lambda c: c.call(_posenc, _at(c), c.size("n"), c.static("m"), c.ref),
}
# the port of each entry's input that runs along the sequence in its last local axis but one
# (attention: [s, f]) rather than its last ([s]); the others have no sequence axis (a kernel)
_SEQ_AXIS = {"causal_sdpa": (-2, -2, -2), "causal_window_sdpa": (-2, -2, -2),
             "causal_linear_attention": (-2, -2, -2), "causal_linear_sum": (-2, -2),
             "causal_decay_attention": (-2, -2, -2, -1), "cumsum": (-1,), "cumprod": (-1,),
             "causal_conv": (-1, None), "shift": (-1,), "ones": (), "zeros": (), "positions": (), "posenc": ()}


def _positions(t0: int, m: int, ref: Tensor) -> Tensor:
    return torch.arange(t0, t0 + int(m), dtype=ref.dtype, device=ref.device)[None]


def _posenc(t0: int, m: int, width: int, ref: Tensor) -> Tensor:
    return P.posenc(t0 + int(m), width, ref)[:, t0:]


def _rows(t: Tensor, t0: int, sizes: list, bounds: list, names: list, op: str, stream: list) -> Tensor:
    """A learned table over positions (``where s <= N``) at the new positions' rows."""
    full = P.bounded(t, [t0 + int(n) if s else n for n, s in zip(sizes, stream)], bounds, names, op)
    index = [slice(None)] + [slice(t0, None) if s else slice(None) for s in stream]
    return full[tuple(index)]


# -- the lowering ----------------------------------------------------------------------------
@dataclass
class Shared:
    """What every graph of one incremental form shares: its clock and its slots."""

    clock: Clock = field(default_factory=Clock)
    slots: list[Slot] = field(default_factory=list)


class StepLowering(Lowering):
    """The lowering with the sequence axis holding the new positions only (see the module's
    docstring). A subclass is made per form (:func:`incremental_form`) to carry its
    :class:`Shared`, so that the bodies of repeats and scans, lowered by ``type(low)``, share it."""

    shared: Shared

    def prepare(self, diagram: Diagram) -> Diagram:
        """The fast paths without the chunked form of scans: a scan is its own step."""
        return fused(diagram)

    def module(self) -> fx.GraphModule:
        self.live = _live(self.d)
        return super().module()

    def stream(self, dim: Dim) -> bool:
        """Whether a dimension involves the sequence (a dimension declared ``seq``)."""
        prog = self.src.program
        return any(prog is not None and (decl := prog.lookup_dim(n)) is not None and decl.kind == "seq"
                   for n in dim.names())

    def slot(self, make: Callable[[], Slot]) -> str:
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
        d, axes = self.d, _SEQ_AXIS[self.d.record(b).op]
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
        return self.g.call_function(_rows, (t, self.g.call_module(self.clock_attr(), ()), sizes, list(bounds),
                                            [str(dim) for dim in ty], node.op, stream))

    def scan(self, b: int) -> fx.Node:
        """The scan over the new positions, from the state the last call left."""
        node = loops.scan(self, b)
        name = self.slot(Carry)
        with self.g.inserting_before(node):
            start = self.g.call_module(name, (node.args[1], False))
        node.update_arg(1, start)
        return self.g.call_module(name, (node, True))


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
@dataclass
class State:
    """Where an incremental form stands: positions consumed, and each box's state (a list per
    box, one entry per use in a call). A call consumes the state it is given (caches grow in
    place) and returns the next one."""

    batch_size: int
    position: int = 0
    slots: list[list] = field(default_factory=list)

    def tensors(self) -> list[Tensor]:
        """Every tensor the state holds (what its memory is)."""
        out: list[Tensor] = []

        def walk(x: Any) -> None:
            if isinstance(x, Tensor):
                out.append(x)
            elif isinstance(x, (list, tuple)):
                for y in x:
                    walk(y)
        walk(self.slots)
        return out

    def numel(self) -> int:
        """Entries held: caches by the positions they hold, not their spare capacity."""
        total = 0
        for st in self.slots:
            for entry in st:
                if isinstance(entry, tuple) and entry and isinstance(entry[0], int):  # a cache: (n, K, V)
                    total += sum(t[..., :entry[0], :].numel() for t in entry[1:])
                else:
                    total += sum(t.numel() for t in State(0, 0, [[entry]]).tensors())
        return total


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


def incremental_form(diagram: Diagram, sizes: dict[str, int], make, fast: bool) -> Incremental:
    """The incremental form of ``diagram`` at these sizes (``compile(..., incremental=True)``)."""
    if not fast:
        raise DiagError("the incremental form is found through the fast paths (they are what turns masked "
                        "softmax attention into causal attention); compile it with fast=True, native=True")
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


__all__ = ["Incremental", "State", "STEPS", "incremental_form"]
