"""A decoder-only language model around any attention diagram (seed 003, Sec. 5, App. C).

The construction is the Transformer decoder's: token embedding plus sinusoidal position,
then N layers of (multi-head mechanism, residual, layer norm, feed-forward, residual,
layer norm). Multi-head splits the model dimension into H slices; the head diagram —
any diagram of type ``[s, d] -> [s, d]`` — runs on each slice with its own weights, the
slices are concatenated and mixed by W_O. As in the paper (App. C, after Qin et al.),
every ``AttApply`` or ``LinAttApply`` box in the head is followed by an extra layer norm,
inserted into the diagram itself, right where the generator's output leaves it.
"""
from __future__ import annotations

import math

import torch
from torch import nn

from ..lower import compile
from ..lower.approximators import Policy
from ..lower.primitives import posenc
from ..errors import DiagError
from ..graph.diagram import Diagram

STABILISED = ("AttApply", "LinAttApply")


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


def stabilised(head: Diagram) -> Diagram:
    """The head with a layer norm after every AttApply / LinAttApply box (App. C)."""
    from ..graph.program import prelude
    from ..rewrite.dpo import copy_diagram

    out = copy_diagram(head)
    norm = prelude()["layernorm"]
    for b in list(out.boxes()):
        node = out.box(b)
        if node["op"] not in STABILISED or node["box"] != "diagram":
            continue
        (w,) = out.box_outputs(b)
        t = out.wire_type(w)
        readers = out.consumers(w)
        simd = tuple((f"n{k}", dim) for k, dim in enumerate(t[:-1]))
        _, (w2,) = out.add_box("diagram", "layernorm", [(w, tuple(lab for lab, _ in simd) + (0,))], [t[-1:]],
                               simd=simd, generics=(("n", t[-1]),), ref=norm,
                               clusters=tuple(node.get("clusters", ())))
        for r, port in readers:
            axes = out.graph.edges[w, r, port]["axes"]
            out.graph.remove_edge(w, r, key=port)
            out.graph.add_edge(w2, r, key=port, axes=axes)
        out.outputs = [w2 if o == w else o for o in out.outputs]
    return out


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
                 extra_norm: bool | None = None, check_causal: bool = True):
        super().__init__()
        if d_model % n_heads:
            raise DiagError(f"--d-model {d_model} is not divisible by --heads {n_heads}")
        self.config = {"head": head.name, "vocab": vocab, "d_model": d_model, "n_layers": n_layers,
                       "n_heads": n_heads, "d_ff": d_ff or 4 * d_model, "approximator": str(approximator)}
        hdims = head_dims(head, d_model // n_heads, dims)
        if extra_norm is None:
            extra_norm = any(head.box(b)["op"] in STABILISED for b in head.boxes())
        if extra_norm:
            head = stabilised(head)
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
