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
"""
from __future__ import annotations

import math
from typing import Iterable

import torch
from torch import nn

from ..graph.box import Kind
from ..lower import compile
from ..lower.approximators import Policy
from ..lower.primitives import posenc
from ..errors import DiagError
from ..graph.diagram import Diagram
from ..graph.program import prelude

STABILISED = ("AttApply", "LinAttApply")  # the default of norm_after: the paper's (Lin)AttApply (App. C)


def head_dims(head: Diagram, d_head: int, overrides: dict[str, int] | None = None) -> dict[str, int]:
    """Sizes for the head's fixed dimensions: its feature dimension is the slice width,
    every other fixed dimension defaults to it too (App. C: 128 everywhere in a head)."""
    if len(head.inputs) != 1 or len(head.outputs) != 1:
        raise DiagError(f"'{head.name}' cannot serve as an attention head: it needs one input and one output "
                        f"of type [s, d], not {head.signature()}")
    t_in, t_out = head.input_types[0], head.output_types[0]
    prog = head.program
    kinds = [prog.lookup_dim(x.name).kind if x.name and prog.lookup_dim(x.name) else None for x in t_in]
    if len(t_in) != 2 or t_in != t_out or kinds != ["seq", "fixed"]:
        raise DiagError(f"'{head.name}' cannot serve as an attention head: its type must be [s, d] -> [s, d] "
                        f"with s seq and d fixed, not {head.signature()}")
    dims = {n: d_head for n, decl in prog.dims.items() if decl.kind == "fixed"}
    dims.update(overrides or {})
    return dims


def _is_fixed(dim, prog) -> bool:
    """Whether a dimension expression is made of fixed dimensions (or constants) only."""
    if prog is None:
        return True
    decls = [prog.lookup_dim(n) for n in dim.names()]
    return all(decl is None or decl.kind == "fixed" for decl in decls)


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
            _, (w2,) = out.add_box(Kind.DIAGRAM, "layernorm", [(w, tuple(lab for lab, _ in simd) + (0,))], [t[-1:]],
                                   simd=simd, generics=(("n", t[-1]),), ref=norm,
                                   clusters=tuple(node.clusters))
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


class Layer(nn.Module):
    def __init__(self, head: Diagram, d_model: int, n_heads: int, d_ff: int, approximator: Policy,
                 dims: dict[str, int]):
        super().__init__()
        self.n_heads = n_heads
        self.heads = nn.ModuleList(compile(head, dims=dims, approximator=approximator) for _ in range(n_heads))
        self.out = nn.Linear(d_model, d_model)
        self.norm1 = nn.LayerNorm(d_model)
        self.ff = nn.Sequential(nn.Linear(d_model, d_ff), nn.ReLU(), nn.Linear(d_ff, d_model))
        self.norm2 = nn.LayerNorm(d_model)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        slices = x.chunk(self.n_heads, dim=-1)
        ys = [h(s) for h, s in zip(self.heads, slices)]
        x = self.norm1(x + self.out(torch.cat(ys, dim=-1)))
        return self.norm2(x + self.ff(x))


class LanguageModel(nn.Module):
    """Decoder-only language model whose attention heads are a compiled diagram."""

    def __init__(self, head: Diagram, vocab: int, d_model: int = 128, n_layers: int = 2, n_heads: int = 4,
                 d_ff: int | None = None, approximator: Policy = "mlp", dims: dict[str, int] | None = None,
                 extra_norm: bool | None = None, check_causal: bool = True,
                 norm_after: Iterable[str] = STABILISED):
        super().__init__()
        if d_model % n_heads:
            raise DiagError(f"--d-model {d_model} is not divisible by --heads {n_heads}")
        hdims = head_dims(head, d_model // n_heads, dims)
        norm_after = tuple(norm_after)
        normed = normed_ops(head, norm_after)
        if extra_norm is None:  # a norm wherever the head uses a named definition
            extra_norm = bool(normed)
        self.config = {"head": head.name, "vocab": vocab, "d_model": d_model, "n_layers": n_layers,
                       "n_heads": n_heads, "d_ff": d_ff or 4 * d_model, "approximator": str(approximator),
                       "norm_after": normed if extra_norm else []}
        if extra_norm:
            head = stabilised(head, norm_after)
        self.embed = nn.Embedding(vocab, d_model)
        self.layers = nn.ModuleList(Layer(head, d_model, n_heads, d_ff or 4 * d_model, approximator, hdims)
                                    for _ in range(n_layers))
        self.unembed = nn.Linear(d_model, vocab)
        self.d_model = d_model
        if check_causal:
            assert_causal(self)

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


@torch.no_grad()
def assert_causal(model: LanguageModel, s: int = 6) -> None:
    """A language model must not see the future: changing later tokens leaves earlier outputs."""
    g = torch.Generator().manual_seed(0)
    vocab = model.config["vocab"]
    a = torch.randint(vocab, (1, s), generator=g)
    b = a.clone()
    b[0, s // 2:] = torch.randint(vocab, (s - s // 2,), generator=g)
    was = model.training
    model.eval()
    ya, yb = model(a)[0, : s // 2], model(b)[0, : s // 2]
    model.train(was)
    if not torch.allclose(ya, yb, atol=1e-5, rtol=1e-4):
        raise DiagError(f"'{model.config['head']}' is not causal: a position's output changes when later tokens "
                        "change. A language model needs a masked head (e.g. MaskedSelfAttention, causal<s>())")
