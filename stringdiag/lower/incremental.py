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
import operator
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
from . import roles as R
from . import loops
from . import primitives as P
from .approximators import LearnableTensor
from .fastpath import fused
from .lower import LETTERS, Lowering, PrimitiveCall, _axis_bounds, _ref_not_saved
from .table import PRIMITIVES, _score_scale
from .param_names import ident as N_ident


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


class KeyCache(Slot):
    """A per-position value read over every position so far (the keys of attention whose mask
    is not one fused process): every position's, O(s) per sequence."""

    def forward(self, x: Tensor, axis: int) -> Tensor:
        st = self.peek()
        n, buf = (0, None) if st is None else st
        moved = x.movedim(axis, -1)[..., None]  # [..., m, 1]
        buf = _grown(buf, n, moved)
        self.put((n + moved.shape[-2], buf))
        return buf[..., :n + moved.shape[-2], 0].movedim(-1, axis)


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



Z, NEG = "Z", "NEG"  # entries after the row's position: zero, or minus infinity
_POSITIONAL = frozenset({"positions", "ones", "zeros", "causal", "window"})


def _mask(op: str, rows: tuple, cols: tuple, w: int | None, ref: Tensor) -> Tensor:
    """causal (j <= i) or window (|i - j| < w) for the rows and columns (start, length) given."""
    i = torch.arange(int(rows[0]), int(rows[0]) + int(rows[1]), device=ref.device)[:, None]
    j = torch.arange(int(cols[0]), int(cols[0]) + int(cols[1]), device=ref.device)[None, :]
    m = (j <= i) if op == "causal" else ((i - j).abs() < w)
    return m.to(ref.dtype)[None]


def _rows_roles(t: Tensor, t0: int, m: int, bounds: list, names: list, op: str, roles: list) -> Tensor:
    """A learned table over positions at the rows each axis's role says (new, or all so far)."""
    full = P.bounded(t, [t0 + int(m) if r is not None else None for r in roles], bounds, names, op)
    index = [slice(None)] + [slice(t0, None) if r == R.N else slice(None) for r in roles]
    return full[tuple(index)]


def _scalar_flag(op: str, flags: list, c) -> tuple | None:
    """The mask an elementwise process keeps: a product with a zero is zero; where(x, mask)
    is minus infinity where the mask is zero; exp, relu, sigmoid and softplus of minus infinity
    are zero; a sum with minus infinity is minus infinity, a sum of zeros zero."""
    fz = [f for f in flags if f and f[0] == Z]
    fn = [f for f in flags if f and f[0] == NEG]
    if op == "mul" and fz:
        return fz[0]
    if op == "where" and len(flags) == 2 and flags[1] and flags[1][0] == Z:
        return (NEG, flags[1][1], flags[1][2])
    if op == "add" and fn:
        return fn[0]
    if op in ("add", "sub") and flags and len(fz) == len(flags) and len({f[1:] for f in fz}) == 1:
        return fz[0]  # zero plus zero
    if op == "sub" and flags and flags[0] and flags[0][0] == NEG and not (len(flags) > 1 and flags[1]):
        return flags[0]
    if op == "div" and flags and flags[0] and flags[0][0] == NEG and c is not None and (c.literal(1) or 0) > 0:
        return flags[0]
    if op in ("exp", "relu", "sigmoid", "softplus") and flags and flags[0] and flags[0][0] == NEG:
        return (Z, flags[0][1], flags[0][2])
    if op in ("relu", "neg") and flags and flags[0] and flags[0][0] == Z:
        return flags[0]
    return None


class _Call(PrimitiveCall):
    """A primitive's call, its SIMD labels sized by their roles (the new positions, or all)."""

    def spread(self, y: fx.Node) -> fx.Node:
        read = {a for _, axes in self.low.d.box_inputs(self.b) for a in axes if isinstance(a, str)}
        if all(lab in read for lab, _ in self.node.simd):
            return y
        return self.method("expand", y, -1, *[self.low.label_size(lab, dim) for lab, dim in self.node.simd])

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
        for w in outs:  # what the outputs read: the new positions
            new = tuple(R.N if a else None for a in self.axes[w])
            if (w, new) in self.venv:
                self.env[w] = self.venv[(w, new)]

    def aligned(self, b: int) -> list[fx.Node]:
        """Lowering.aligned, each input read as its port's role asks (one wire may be read twice:
        p[i] - p[j], the new positions and all of them)."""
        if not getattr(self, "ports", None):
            return super().aligned(b)
        saved = dict(self.env)
        try:
            out = []
            for port, (w, _) in enumerate(self.d.box_inputs(b)):
                self.env[w] = self.ports[port]
                out.append(super().aligned(b)[port])
            return out
        finally:
            self.env.update(saved)

    def contract(self, b: int) -> fx.Node:
        if not getattr(self, "ports", None):
            return super().contract(b)
        node = self.d.record(b)
        letters = iter(LETTERS)
        sym = {lab: next(letters) for lab, _ in tuple(node.simd) + tuple(node.summed)}
        n_local = len(self.d.local_out_type(b, 0))
        local = [next(letters) for _ in range(n_local)]
        subs, args = [], []
        for port, (w, axes) in enumerate(self.d.box_inputs(b)):
            subs.append("..." + "".join(sym[a] if isinstance(a, str) else local[a] for a in axes))
            args.append(self.ports[port])
        out = "..." + "".join(sym[lab] for lab, _ in node.simd) + "".join(local)
        return self.g.call_function(torch.einsum, (",".join(subs) + "->" + out, *args),
                                    name=N_ident(self.out_name(b) or "einsum"))

    def _out_roles(self, b: int, k: int, labels: dict, local: tuple) -> tuple:
        node, w = self.d.record(b), self.d.box_outputs(b)[k]
        n = len(node.simd) - (1 if node.scan and k == 0 else 0)
        ax = self.axes[w]
        head = [labels.get(lab, R.N) if ax[i] else None for i, (lab, _) in enumerate(node.simd[:n])]
        tail = [(local[i] if k == 0 and i < len(local) and local[i] is not None else R.N) if ax[n + i] else None
                for i in range(len(ax) - n)]
        return tuple(head + tail)

    def value(self, b: int, w: int, roles: tuple) -> fx.Node:
        """Wire ``w`` read in ``roles``: as lowered, or, for a diagram's input, as given (and
        cached when read over every position so far)."""
        if (w, roles) not in self.venv and w in self.d.inputs:
            new = tuple(R.N if a else None for a in self.axes[w])
            self.venv[(w, new)] = self.env[w]
            self._keep(w, new)
        if (w, roles) not in self.venv:
            raise self.refuse(b, "reads a value of two sequence axes over every position so far, which comes "
                              "in for the new positions only")
        return self.venv[(w, roles)]

    def _keep(self, w: int, new: tuple) -> None:
        """A cached wire: its new positions appended to what the earlier ones left (role A)."""
        if w in self.plan.cached and R.A not in new and (w, new) in self.venv:
            axis = 1 + self.axes[w].index(True)
            full = tuple(R.A if a else None for a in self.axes[w])
            self.venv[(w, full)] = self.g.call_module(self.slot(KeyCache), (self.venv[(w, new)], axis))

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


    # -- attention whose mask is not one fused process: keys over every position so far ------
    def full_size(self) -> fx.Node:
        """t0 + m: the positions so far, the new ones included."""
        return self.g.call_function(operator.add, (self.g.call_module(self.clock_attr(), ()), self._named_seq()))

    def _named_seq(self) -> Any:
        names = [n for n in self.seq if (decl := self.src.program.lookup_dim(n)) is not None and decl.kind == "seq"]
        return self.seq[names[0]] if names else self.size(Dim.var(next(iter(self.seq))))

    def label_size(self, lab: str, dim: Dim) -> Any:
        return self.full_size() if self.roles.get(lab) == R.A else self.size(dim)

    def reindex(self, b: int) -> fx.Node:
        (x,) = self.aligned(b)
        sizes = [self.label_size(lab, dim) for lab, dim in self.d.record(b).simd]
        n_local = len(self.d.local_in_type(b, 0))
        return self.g.create_node("call_method", "expand", (x, -1, *sizes, *([-1] * n_local)),
                                  name=N_ident(self.out_name(b) or "r"))

    def primitive(self, b: int) -> fx.Node:
        node = self.d.record(b)
        entry = PRIMITIVES.get(node.op)
        if entry is None:
            raise DiagError(f"fixed process '{node.op}' has no implementation to compile; define it as a "
                            "diagram", node.pos)
        return entry(_Call(self, b))

    def lower_keys(self, b: int, ins: list, outs: list) -> fx.Node:
        """A box that reads or makes values over every position so far (role A)."""
        d, node = self.d, self.d.record(b)
        if node.kind is Kind.ABSTRACT:
            return Lowering.lower_box(self, b)  # refused, as the parallel form refuses it
        flags = [self._in_flag(b, p, roles) for p, roles in enumerate(ins)]
        why = self.crossing(b)
        out_flag = None
        if node.loop is not None or node.op in STEPS and node.op not in _POSITIONAL:
            raise self.refuse(b, "reads every position so far in a way its incremental form does not keep")
        if not d.box_inputs(b) and node.kind is Kind.FIXED and node.op in _POSITIONAL:
            y = self._positional(b, outs[0])
            if node.op == "causal" and outs[0] == (R.N, R.A):
                out_flag = (Z, 0, 1)
        elif not d.box_inputs(b) and node.kind is Kind.LEARN and any(_axis_bounds(node)):
            y = self._table(b, outs[0])
        elif node.kind is Kind.CONTRACT:
            out_flag = self._summed(b, flags)
            y = self.contract(b)
        elif node.op in R.ROW_WISE and node.kind in (Kind.FIXED, Kind.DIAGRAM):
            f = flags[0]
            row = [lab for lab, _ in node.simd if self.roles.get(lab) == R.N]
            if not (f and f[0] == NEG and f[2] == 0 and len(row) == 1 and f[1] == row[0]):
                raise self.refuse(b, "reads every position so far with no causal mask on it (later positions "
                                  "would count)")
            y = self.primitive(b)
            out_flag = (Z, row[0], 0)
        elif why is not None:
            raise self.refuse(b, why)
        else:
            y = {Kind.CONST: self.constant, Kind.CONTRACT: self.contract, Kind.LEARN: self.learnable,
                 Kind.RANDOM: self.random, Kind.REINDEX: self.reindex}.get(node.kind, self.primitive)(b)
            out_flag = _scalar_flag(node.op, flags, _Call(self, b) if node.kind is Kind.FIXED else None)
            if node.kind is Kind.REINDEX:
                out_flag = flags[0]
        if out_flag is not None and len(d.box_outputs(b)) == 1:
            kind, row, col = out_flag
            where = self._out_axis(b, row), self._out_axis(b, col)
            if None not in where:
                self.flags[(d.box_outputs(b)[0], outs[0])] = (kind, *where)
        return y

    def _in_flag(self, b: int, p: int, roles: tuple):
        """Input p's mask, as (Z or NEG, row, column) in the box's own terms (labels, local axes)."""
        w, ax = self.d.box_inputs(b)[p]
        f = self.flags.get((w, roles))
        return None if f is None else (f[0], ax[f[1]], ax[f[2]])

    def _out_axis(self, b: int, ref) -> int | None:
        node = self.d.record(b)
        labels = [lab for lab, _ in node.simd]
        if isinstance(ref, str):
            return labels.index(ref) if ref in labels else None
        return len(labels) + ref

    def _summed(self, b: int, flags: list):
        """A product summed over every position so far: sound only where a factor is zero after
        each new position (a causal mask), so that the positions not yet seen would add nothing."""
        node = self.d.record(b)
        summed = {lab for lab, dim in node.summed if self.stream(dim)}
        for j in summed:
            if not any(f and f[0] == Z and f[2] == j and self.roles.get(f[1]) == R.N for f in flags):
                raise self.refuse(b, f"sums over the positions of the sequence (index {j}) with no causal "
                                  "mask on the sum (later positions would count)")
        kept = [f for f in flags if f and f[0] == Z and f[1] not in summed and f[2] not in summed]
        return kept[0] if kept else None

    def _positional(self, b: int, roles: tuple) -> fx.Node:
        """positions, ones, zeros, causal, window over the positions each axis's role says."""
        node = self.d.record(b)
        c = _Call(self, b)
        spans = [(self.g.call_module(self.clock_attr(), ()), self._named_seq()) if r == R.N else (0, self.full_size())
                 for r in roles if r is not None]
        if node.op in ("ones", "zeros"):
            return c.call(P.filled, (spans[0][1],), float(node.op == "ones"), c.ref)
        if node.op == "positions":
            return c.call(_positions, *spans[0], c.ref)
        w = c.static("w") if node.op == "window" else None
        return c.call(_mask, node.op, spans[0], spans[1], w, c.ref)

    def _table(self, b: int, roles: tuple) -> fx.Node:
        node = self.d.record(b)
        (shape,) = self.local_shapes(b, True)
        mod = self.register(weight_key(node), lambda: LearnableTensor(shape))
        t = self.g.create_node("call_module", mod, (), name=N_ident(self.out_name(b) or node.op))
        bounds, ty = _axis_bounds(node), self.d.local_out_type(b, 0)
        t0 = self.g.call_module(self.clock_attr(), ())
        return self.g.call_function(_rows_roles, (t, t0, self._named_seq(), list(bounds), [str(x) for x in ty],
                                                  node.op, list(roles)))



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
