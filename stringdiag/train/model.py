"""A decoder-only language model around any attention diagram (Khatri et al. (2024), Sec. 5, App. C).

The construction is the Transformer decoder's: token embedding plus sinusoidal position,
then N layers of (multi-head mechanism, residual, layer norm, feed-forward, residual,
layer norm). Multi-head splits the model dimension into H slices; the head diagram —
any diagram of type ``[s, d] -> [s, d]`` — runs on each slice with its own weights, the
slices are concatenated and mixed by W_O. As in the paper (App. C, after Qin et al.),
every use of a chosen definition in the head (``norm_after``; by default ``AttApply`` and
``LinAttApply``, the generators the paper names) is followed by an extra layer norm over
the last axis of each of its outputs, inserted into the diagram itself, right where the
output leaves the box. Which definitions those are is data the caller gives (the command
line's ``--norm-after``), never a name this module matches by itself.

The h heads of a layer run as one module (:class:`BatchedHeads`): the head is compiled once
per head as the paper's per-head weights require, the weights are stacked on a leading head
axis, and the head's code runs over that axis: rewritten onto it where every operation has a
head-axis form (``lower/headaxis.py``: what ``torch.compile`` then traces is the heads' own
operations), else by ``torch.vmap``. A head whose code cannot be batched (it draws random numbers when it runs, like BigBird's random keys) keeps one module
per head, run one after another.
"""
from __future__ import annotations

import copy
import math
import warnings
from dataclasses import dataclass
from enum import Enum
from typing import Any, Iterable

import torch
from torch import fx, nn
from torch.func import functional_call

from ..graph.box import Box, Kind
from ..lower import compile
from ..lower.approximators import Policy
from ..lower.headaxis import head_axis
from ..lower.primitives import posenc
from ..errors import DiagError
from ..graph.diagram import Diagram
from ..graph.dimuse import fixed_dims_used
from ..graph.types import DimKind
from ..elaborate.loader import prelude

# vmap runs CPU flash attention head by head (torch has no batching rule for it): no slower than
# separate heads, and said once in NOTES, not at every run
warnings.filterwarnings("ignore", message="There is a performance drop because we have not yet implemented the "
                        "batching rule for aten::_scaled_dot_product_flash_attention_for_cpu")

STABILISED = ("AttApply", "LinAttApply")  # the default of norm_after: the paper's (Lin)AttApply (App. C)


class Source(Enum):
    """Where the size of one of a head's fixed dimensions comes from (the sizes line says it)."""

    FEATURE = "feature width"        # the head's own feature dimension: --d-model / --heads
    GIVEN = "--dims"
    DECLARED = "declared default"    # dim k : fixed = 32
    HEAD_WIDTH = "head width"        # App. C: every width inside a head is the head's (128 in the paper)


@dataclass(frozen=True)
class Size:
    name: str
    value: int
    source: Source


def head_sizes(head: Diagram, d_head: int, overrides: dict[str, int] | None = None) -> list[Size]:
    """The size of every fixed dimension the head uses, and where it comes from: its feature
    dimension is the slice width; any other is sized by ``overrides`` (``--dims``), else by its
    declaration's default, else, when it is a width (some wire's axis), by the head width as in
    App. C. A dimension used only as a count (a window, a number of global tokens) has no such
    default: unsized, it is an error naming it."""
    if len(head.inputs) != 1 or len(head.outputs) != 1:
        raise DiagError(f"'{head.name}' cannot serve as an attention head: it needs one input and one output "
                        f"of type [s, d], not {head.signature()}")
    t_in, t_out = head.input_types[0], head.output_types[0]
    prog = head.program
    kinds = [prog.lookup_dim(x.name).kind if x.name and prog.lookup_dim(x.name) else None for x in t_in]
    if len(t_in) != 2 or t_in != t_out or kinds != ["seq", "fixed"]:
        raise DiagError(f"'{head.name}' cannot serve as an attention head: its type must be [s, d] -> [s, d] "
                        f"with s seq and d fixed, not {head.signature()}")
    given, feature, use = overrides or {}, t_in[-1].name, fixed_dims_used(head)
    sizes, missing = [], []
    for name in use.widths + use.counts:
        default = prog.lookup_dim(name).default
        if name == feature:
            sizes.append(Size(name, d_head, Source.FEATURE))
        elif name in given:
            sizes.append(Size(name, given[name], Source.GIVEN))
        elif default is not None:
            sizes.append(Size(name, default, Source.DECLARED))
        elif name in use.widths:
            sizes.append(Size(name, d_head, Source.HEAD_WIDTH))
        else:
            missing.append(name)
    if missing:
        names = " and ".join(", ".join(repr(n) for n in missing).rsplit(", ", 1))
        one = len(missing) == 1
        raise DiagError(f"'{head.name}' uses {names} only as {'a count' if one else 'counts'}, not as "
                        f"{'a width' if one else 'widths'}, and nothing sizes {'it' if one else 'them'}: give "
                        f"--dims {missing[0]}=N, or declare a default (dim {missing[0]} : fixed = N)")
    return sizes


def head_dims(head: Diagram, d_head: int, overrides: dict[str, int] | None = None) -> dict[str, int]:
    """Sizes for the head's fixed dimensions (:func:`head_sizes`), with ``overrides`` kept."""
    return {**(overrides or {}), **{s.name: s.value for s in head_sizes(head, d_head, overrides)}}


def _is_fixed(dim, prog) -> bool:
    """Whether a dimension expression is made of fixed dimensions (or constants) only."""
    if prog is None:
        return True
    decls = [prog.lookup_dim(n) for n in dim.names()]
    return all(decl is None or decl.kind is DimKind.FIXED for decl in decls)


def stabilised(head: Diagram, after: Iterable[str] = STABILISED) -> Diagram:
    """The head with a layer norm after every use of a definition named in ``after`` (App. C:
    AttApply / LinAttApply, the default), over the last axis of each of its outputs.

    Only the head's own boxes are looked at (a definition used inside another definition is
    not opened). An output whose last axis is a sequence dimension cannot be normalised:
    that is an error naming the definition."""
    names = frozenset(after)
    out = head.copy()
    norm = prelude()["layernorm"]
    for b in list(out.boxes()):
        node = out.record(b)
        if node.op not in names or node.kind is not Kind.DIAGRAM:
            continue
        for w in list(out.box_outputs(b)):
            t = out.wire_type(w)
            if not t or not _is_fixed(t[-1], head.program):
                raise DiagError(f"--norm-after: '{node.op}' outputs {_show_type(t)}; a layer norm needs a last "
                                "axis of a fixed dimension")
            readers = out.consumers(w)
            simd = tuple((f"n{k}", dim) for k, dim in enumerate(t[:-1]))
            _, (w2,) = out.emit(Box(Kind.DIAGRAM, "layernorm", simd, generics=(("n", t[-1]),), ref=norm,
                                    clusters=tuple(node.clusters)),
                                [(w, tuple(lab for lab, _ in simd) + (0,))], [t[-1:]])
            for r, port in readers:  # (read before the norm was added: it reads w)
                out.rewire(r, port, w2)
            out.outputs = [w2 if o == w else o for o in out.outputs]
    return out


def _show_type(t) -> str:
    return "[" + ", ".join(str(d) for d in t) + "]"


def normed_ops(head: Diagram, after: Iterable[str] = STABILISED) -> list[str]:
    """The definitions named in ``after`` that the head uses as its own boxes, sorted."""
    names = frozenset(after)
    return sorted({head.record(b).op for b in head.boxes()
                   if head.record(b).op in names and head.record(b).kind is Kind.DIAGRAM})


class BatchedHeads(nn.Module):
    """The h heads of a layer as one module: every weight stacked on a leading head axis, the head's
    code run once over all of them, on the head axis (``lower/headaxis.py``) where every op has a
    head-axis form, else by ``torch.vmap`` (the paper's multi-head is a SIMD box over heads
    with per-head weights), so one set of kernels runs all heads.

    The heads are compiled and initialised one after another, exactly as the per-head path does,
    and only then stacked: a seed gives the same weights, and consumes the same random numbers,
    either way. Weight ``NAME`` of head i is row i of ``NAME`` here (``heads.i.NAME`` per head)."""

    def __init__(self, heads: list[fx.GraphModule]):
        super().__init__()
        self.n_heads = len(heads)
        self.head = copy.deepcopy(heads[0])  # the code, and the holder of the stacked weights
        for name, _ in list(self.head.named_parameters()):
            _replace(self.head, name, nn.Parameter(torch.stack([h.get_parameter(name).detach() for h in heads])))
        for name, _ in list(self.head.named_buffers()):
            _replace(self.head, name, torch.stack([h.get_buffer(name) for h in heads]))
        # the head's code on a leading head axis where lower/headaxis.py has every operation's form
        # (torch.compile then traces no vmap), else vmap; the weights stay in self.head either way
        got = head_axis(heads[0])
        self.stacked: tuple = (got[0], tuple(_owner(self.head, n) for n in got[1])) if got else ()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """``[..., h * w]`` -> ``[..., h * w]``: head i reads and writes the i-th slice of width w."""
        xs = x.unflatten(-1, (self.n_heads, -1)).movedim(-2, 0)
        if self.stacked:
            fn, where = self.stacked
            return fn(xs, *[getattr(m, leaf) for m, leaf in where]).movedim(0, -2).flatten(-2)
        state = {**dict(self.head.named_parameters()), **dict(self.head.named_buffers())}
        return torch.vmap(self._one, randomness="error")(state, xs).movedim(0, -2).flatten(-2)

    def _one(self, state: dict[str, torch.Tensor], x: torch.Tensor) -> torch.Tensor:
        return functional_call(self.head, state, (x,))


def _owner(module: nn.Module, name: str) -> tuple[nn.Module, str]:
    """The submodule holding the parameter or buffer ``name``, and its attribute there."""
    owner_name, _, leaf = name.rpartition(".")
    return module.get_submodule(owner_name), leaf


def _replace(module: nn.Module, name: str, value: torch.Tensor) -> None:
    """Put ``value`` where the parameter or buffer ``name`` was (a buffer keeps its persistence)."""
    owner, leaf = _owner(module, name)
    if isinstance(value, nn.Parameter):
        setattr(owner, leaf, value)
    else:
        owner.register_buffer(leaf, value, persistent=leaf not in owner._non_persistent_buffers_set)


def batchable(heads: BatchedHeads, width: int) -> bool:
    """Whether vmap runs the head: not when its code draws random numbers per call (the heads would
    draw differently from the per-head path), calls ``.item()`` or another op vmap cannot batch.
    Tried on a tiny input, leaving the random-number generators as they were."""
    if any(p.is_meta for p in heads.parameters()):
        return True  # only counted (cli.options.count_parameters), never run
    p = next(heads.parameters(), None)
    x = torch.zeros(1, 3, heads.n_heads * width, dtype=p.dtype if p is not None else None)
    with torch.random.fork_rng(devices=[]), torch.no_grad():
        try:
            heads(x)
        except (RuntimeError, NotImplementedError, TypeError, ValueError):
            return False
    return True


class Layer(nn.Module):
    def __init__(self, head: Diagram, d_model: int, n_heads: int, d_ff: int, approximator: Policy,
                 dims: dict[str, int], batch_heads: bool = True):
        super().__init__()
        self.n_heads = n_heads
        compiled = [compile(head, dims=dims, approximator=approximator) for _ in range(n_heads)]
        self.heads: nn.Module = nn.ModuleList(compiled)
        if batch_heads:
            batched = BatchedHeads(compiled)
            if batchable(batched, d_model // n_heads):  # else the per-head path, on the same weights
                self.heads = batched
        self.out = nn.Linear(d_model, d_model)
        self.norm1 = nn.LayerNorm(d_model)
        self.ff = nn.Sequential(nn.Linear(d_model, d_ff), nn.ReLU(), nn.Linear(d_ff, d_model))
        self.norm2 = nn.LayerNorm(d_model)

    @property
    def batched(self) -> bool:
        """Whether one module runs all heads (else a list of modules, one per head, run in turn)."""
        return not isinstance(self.heads, nn.ModuleList)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if isinstance(self.heads, nn.ModuleList):  # not batched: one module per head, in turn
            y = torch.cat([h(s) for h, s in zip(self.heads, x.chunk(self.n_heads, dim=-1))], dim=-1)
        else:
            y = self.heads(x)
        x = self.norm1(x + self.out(y))
        return self.norm2(x + self.ff(x))


class LanguageModel(nn.Module):
    """Decoder-only language model whose attention heads are a compiled diagram."""

    def __init__(self, head: Diagram, vocab: int, d_model: int = 128, n_layers: int = 2, n_heads: int = 4,
                 d_ff: int | None = None, approximator: Policy = "mlp", dims: dict[str, int] | None = None,
                 extra_norm: bool | None = None, check_causal: bool = True,
                 norm_after: Iterable[str] = STABILISED, batch_heads: bool = True):
        super().__init__()
        if d_model % n_heads:
            raise DiagError(f"--d-model {d_model} is not divisible by --heads {n_heads}")
        hdims = head_dims(head, d_model // n_heads, dims)
        norm_after = tuple(norm_after)
        normed = normed_ops(head, norm_after)
        if extra_norm is None:  # a norm wherever the head uses a named definition
            extra_norm = bool(normed)
        self.config: dict[str, Any] = {"head": head.name, "vocab": vocab, "d_model": d_model, "n_layers": n_layers,
                       "n_heads": n_heads, "d_ff": d_ff or 4 * d_model, "approximator": str(approximator),
                       "norm_after": normed if extra_norm else []}
        if extra_norm:
            head = stabilised(head, norm_after)
        self.embed = nn.Embedding(vocab, d_model)
        self.layers = nn.ModuleList(Layer(head, d_model, n_heads, d_ff or 4 * d_model, approximator, hdims,
                                          batch_heads) for _ in range(n_layers))
        self.unembed = nn.Linear(d_model, vocab)
        self.d_model = d_model
        if check_causal:
            assert_causal(self)

    def upgrade_checkpoint(self, tensors: dict[str, torch.Tensor], meta: dict) -> tuple[dict, dict]:
        """A checkpoint written with one module per head (before heads were batched), in this
        model's layout: each weight of a layer's heads stacked, and so its Adam moments; the
        optimizer's parameter numbers renumbered. Anything else (another model's checkpoint, a
        damaged one) is returned as it is, for validation to say what is wrong with it."""
        layers = list(_batched_layers(self))
        old = [k for k in tensors if any(_per_head_key(k, prefix) for prefix, _, _ in layers)]
        if not old:
            return tensors, meta
        try:
            return _stack_heads(self, tensors, meta, layers, set(old))
        except (KeyError, ValueError, RuntimeError, IndexError):
            return tensors, meta

    def hidden(self, tokens: torch.Tensor) -> torch.Tensor:
        """tokens ``[batch, s]`` -> the last layer's states ``[batch, s, d_model]``."""
        x = self.embed(tokens) * math.sqrt(self.d_model)
        x = x + posenc(tokens.shape[-1], self.d_model, x)[0]
        for layer in self.layers:
            x = layer(x)
        return x

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        """tokens ``[batch, s]`` -> next-token logits ``[batch, s, vocab]``."""
        return self.unembed(self.hidden(tokens))


def _batched_layers(model: nn.Module):
    """(state-dict prefix, weight and buffer names, head count) of every batched set of heads."""
    for name, mod in model.named_modules():
        if isinstance(mod, BatchedHeads):
            yield f"{name}.", list(mod.head.state_dict()), mod.n_heads


def _per_head_key(key: str, prefix: str) -> bool:
    """Whether ``key`` names one head's weight in the per-head layout (``model.layers.0.heads.3.W``)."""
    rest = key.removeprefix(f"model.{prefix}")
    return rest != key and rest.split(".", 1)[0].isdigit()


def _stack_heads(model: nn.Module, tensors: dict, meta: dict, layers: list, old: set[str]) -> tuple[dict, dict]:
    """:meth:`LanguageModel.upgrade_checkpoint`'s work (any key or shape that does not fit raises)."""
    order = _per_head_order(model)
    out = {k: v for k, v in tensors.items() if k not in old and not k.startswith("optim.")}
    for prefix, names, n in layers:
        for name in names:
            out[f"model.{prefix}head.{name}"] = torch.stack([tensors[f"model.{prefix}{i}.{name}"] for i in range(n)])
    moments: dict[tuple[int, str], list[tuple[int, torch.Tensor]]] = {}
    for k, v in tensors.items():
        if k.startswith("optim."):
            _, pid, what = k.split(".", 2)
            new, i = order[int(pid)]
            moments.setdefault((new, what), []).append((i, v))
    for (new, what), parts in moments.items():
        parts.sort(key=lambda p: p[0])
        one = what == "step" or parts[0][0] < 0  # a step count is the same for every head
        out[f"optim.{new}.{what}"] = parts[0][1] if one else torch.stack([v for _, v in parts])
    groups = meta.get("param_groups")
    if isinstance(groups, list) and len(groups) == 1 and isinstance(groups[0], dict) and \
            groups[0].get("params") == list(range(len(order))):
        meta = {**meta, "param_groups": [{**groups[0], "params": list(range(sum(1 for _ in model.parameters())))}]}
    return out, meta


def _per_head_order(model: nn.Module) -> list[tuple[int, int]]:
    """For each parameter number of the per-head layout: (its number here, its head, or -1 for a
    parameter outside the heads). The per-head layout lists head 0's weights, then head 1's, ...,
    where this one lists each stacked weight once."""
    number = {name: k for k, (name, _) in enumerate(model.named_parameters())}
    heads = {prefix: (n, [prefix + w for w, _ in mod_params]) for prefix, n, mod_params in
             ((f"{name}.head.", mod.n_heads, list(mod.head.named_parameters()))
              for name, mod in model.named_modules() if isinstance(mod, BatchedHeads))}
    order: list[tuple[int, int]] = []
    for name in number:
        prefix = next((p for p in heads if name.startswith(p)), None)
        if prefix is None:
            order.append((number[name], -1))
        elif name == heads[prefix][1][0]:  # the first weight of a set of heads: all of them, head by head
            n, names = heads[prefix]
            order += [(number[w], i) for i in range(n) for w in names]
    return order


@torch.no_grad()
def assert_causal(model: nn.Module, s: int = 6) -> None:
    """A language model must not see the future: changing later tokens leaves earlier outputs."""
    g = torch.Generator().manual_seed(0)
    config: dict[str, Any] = getattr(model, "config")  # a LanguageModel's or lm.WholeModel's
    vocab = config["vocab"]
    a = torch.randint(vocab, (1, s), generator=g)
    b = a.clone()
    b[0, s // 2:] = torch.randint(vocab, (s - s // 2,), generator=g)
    was = model.training
    model.eval()
    ya, yb = model(a)[0, : s // 2], model(b)[0, : s // 2]
    model.train(was)
    if not torch.allclose(ya, yb, atol=1e-5, rtol=1e-4):
        raise DiagError(f"'{config['head']}' is not causal: a position's output changes when later tokens "
                        "change. A language model needs a masked head (e.g. MaskedSelfAttention, causal<s>())")
