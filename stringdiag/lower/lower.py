"""Typed graph to a trainable ``torch.fx.GraphModule`` whose code can be printed.

The diagram is expanded down to primitives (keeping the prelude processes that have a
direct array form, such as ``softmax`` and ``layernorm``). Every wire becomes a tensor
with one leading batch axis followed by its type's axes, so a SIMD box is a batched
tensor operation over its indices: no Python loop over positions, except the carried
state of ``scan``. Contractions are ``einsum`` (torch picks the order with opt_einsum's
cost model when it is installed). Learnable boxes become modules registered once per
set of weights: a box used twice shares them.
"""
from __future__ import annotations

import math
import operator
import re
from typing import Any, Mapping

import torch
import torch.nn.functional as F
from torch import fx, nn

from ..errors import DiagError
from ..graph import constants
from ..graph.diagram import Diagram
from ..graph.types import Dim
from ..graph.weights import weight_key
from . import primitives as P
from .approximators import LearnableTensor, Policy, factory
from .fastpath import Attention, CausalLinear, find_attention, find_causal_linear

# prelude definitions lowered directly (stable softmax, fused layer norm) rather than opened
NATIVE = frozenset({"softmax", "ssoftmax", "scale", "mean", "sum", "elu1", "layernorm"})
LETTERS = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"


def compile(diagram: Diagram, dims: Mapping[str, int] | None = None, approximator: Policy = "mlp",
            dtype: torch.dtype | None = None, fast: bool = True, native: bool = True) -> fx.GraphModule:
    """Lower a diagram to a module taking tensors shaped by its input types.

    Inputs may carry extra leading batch axes (the same for every input). ``dims`` gives
    the sizes of the fixed dimensions; seq dimensions are read from the inputs. With
    ``fast``, softmax attention whose attention matrix is not used elsewhere becomes
    ``F.scaled_dot_product_attention``. With ``native`` (the default) the prelude
    definitions in :data:`NATIVE` are lowered to their direct array form; without it they
    are opened like any other definition and their bodies' own primitives are compiled
    (tests/test_primitives.py checks that both agree).
    """
    root = nn.Module()
    gm = Lowering(diagram, dict(dims or {}), factory(approximator), root, {}, fast, native).module()
    return gm.to(dtype) if dtype is not None else gm


def _ident(text: str) -> str:
    s = re.sub(r"\W+", "_", text).strip("_") or "p"
    return s if not s[0].isdigit() else "p" + s


class Lowering:
    def __init__(self, diagram: Diagram, dims: dict[str, int], make, root: nn.Module, registry: dict,
                 fast: bool = True, native: bool = True, path: str = ""):
        self.src = diagram
        self.native_prelude = native  # lower NATIVE definitions directly, or open them
        self.dims = dims
        self.make = make
        self.root = root
        self.registry = registry  # weight set (weights.weight_key) -> attribute name on root
        self.d = diagram.expand(keep=NATIVE if native else frozenset(), path=path)
        self.g = fx.Graph()
        self.env: dict[int, fx.Node] = {}
        self.seq: dict[str, fx.Node] = {}
        self.fast = fast
        self.linear_chunk: int | None = 128
        self._check_dims()

    # -- sizes ----------------------------------------------------------------------
    def _check_dims(self) -> None:
        prog = self.src.program
        names: set[str] = set()
        for w in self.d.wires():
            for dim in self.d.wire_type(w):
                names |= dim.names()
        for b in self.d.boxes():
            for _, dim in self.d.box(b).get("generics", ()):
                names |= dim.names()
        missing = []
        for n in sorted(names):
            decl = prog.lookup_dim(n) if prog is not None else None
            if decl is None or decl.kind == "generic":
                continue
            if decl.kind == "fixed" and n not in self.dims:
                if decl.default is not None:
                    self.dims[n] = decl.default
                else:
                    missing.append(n)
        if missing:
            raise DiagError(f"give sizes for the fixed dimension(s) {', '.join(missing)} of '{self.src.name}' "
                            f"(e.g. dims={{'{missing[0]}': 64}} or --dims {missing[0]}=64)")

    def size(self, dim: Dim) -> Any:
        """A dimension's value: an int, or a graph node when it depends on a seq length."""
        total: Any = 0
        for mono, coeff in dim.terms:
            term: Any = coeff
            if coeff == 1 and mono:  # d, not 1 * d
                term = self.dims.get(mono[0], self.seq.get(mono[0]))
                if term is None:
                    term = 1
                else:
                    mono = mono[1:]
            for n in mono:
                if n in self.dims:
                    v: Any = self.dims[n]
                elif n in self.seq:
                    v = self.seq[n]
                else:
                    raise DiagError(f"the size of dimension '{n}' of '{self.src.name}' is unknown: it is a seq "
                                    "dimension that no input has as an axis of its own")
                term = term * v if isinstance(term, int) and isinstance(v, int) else self.g.call_function(
                    operator.mul, (term, v))
            if isinstance(total, int) and total == 0:
                total = term
            elif isinstance(total, int) and isinstance(term, int):
                total = total + term
            else:
                total = self.g.call_function(operator.add, (total, term))
        return total

    def static(self, dim: Dim, what: str) -> int:
        v = self.size(dim)
        if not isinstance(v, int):
            raise DiagError(f"{what} has a seq dimension ({dim}) in its type; give it a fixed size with dims=")
        return v

    # -- module ---------------------------------------------------------------------
    def module(self) -> fx.GraphModule:
        d, g = self.d, self.g
        flat_inputs = []
        batch = None
        placeholders, taken = [], set()
        for k in range(len(d.inputs)):  # all arguments first, so that no inner value takes their names
            name = _ident(d.input_names[k] if k < len(d.input_names) else f"x{k}")
            while name in taken:  # x and x' are both x_ once made identifiers: one argument each
                name += "_"
            taken.add(name)
            placeholders.append(g.placeholder(name))
        for w, ph in zip(d.inputs, placeholders):
            name = ph.name
            r = len(d.wire_type(w))
            flat = g.call_function(_flatten_batch, (ph, r))
            if batch is None:
                batch = g.call_function(operator.getitem, (flat, 1), name="batch")
                n_batch = g.call_function(operator.getitem, (flat, 2), name="n")
            t = g.call_function(operator.getitem, (flat, 0), name=name + "_")
            self.env[w] = t
            flat_inputs.append(t)
            for axis, dim in enumerate(d.wire_type(w)):
                n = dim.name
                decl = d.program.lookup_dim(n) if (n and d.program is not None) else None
                # seq lengths, and the dimension parameters of a generic diagram, come from the inputs
                if n and n not in self.seq and n not in self.dims and (decl is None or decl.kind == "seq"):
                    self.seq[n] = g.create_node("call_method", "size", (t, axis + 1), name=_ident(n))
        if not flat_inputs:  # a diagram with no inputs (a learnable tensor, a constant) makes one value
            self.ref = g.call_function(torch.zeros, ((),), name="ref")
            batch, n_batch = (), 1
        else:
            self.ref = flat_inputs[0]
        fused = {m.apply: m for m in find_attention(d, self.dims)} if self.fast else {}
        linear = {m.box: m for m in find_causal_linear(d)} if self.fast else {}
        skip = {b for m in [*fused.values(), *linear.values()] for b in m.skipped}
        for b in d.topological_boxes():
            if b in fused:
                self.emit(b, self.sdpa(fused[b]))
            elif b in linear:
                self.emit(b, self.causal_linear(linear[b]))
            elif b not in skip:
                self.lower_box(b)
        outs = [g.call_function(P.unflatten_batch, (self.env[w], batch, n_batch)) for w in d.outputs]
        g.output(outs[0] if len(outs) == 1 else tuple(outs))
        gm = fx.GraphModule(self.root, g, class_name=_ident(self.src.name))
        gm.graph.eliminate_dead_code()  # what fused paths made unnecessary (an unused scale constant, say)
        gm.recompile()
        gm.weight_sets = dict(self.registry)  # weight set -> attribute: what an oracle matches weights by
        return gm

    # -- boxes ----------------------------------------------------------------------
    def aligned(self, b: int) -> list[fx.Node]:
        """Each input as [batch, SIMD axes of the box (size 1 if not indexed), local axes]."""
        node = self.d.box(b)
        all_labels = [lab for lab, _ in node["simd"]]
        out = []
        for port, (w, axes) in enumerate(self.d.box_inputs(b)):
            # a scan's carried state is not iterated by the scanned (innermost) index
            labels = all_labels[:-1] if node.get("scan") and port == 0 else all_labels
            perm = [0]
            missing = []
            for p, lab in enumerate(labels):
                if lab in axes:
                    perm.append(1 + axes.index(lab))
                else:
                    missing.append(1 + p)
            local = sorted((a, i) for i, a in enumerate(axes) if isinstance(a, int))
            perm += [1 + i for _, i in local]
            if perm == list(range(len(perm))) and not missing:
                out.append(self.env[w])
            else:
                out.append(self.g.call_function(P.align, (self.env[w], tuple(perm), tuple(missing))))
        return out

    def local_shapes(self, b: int, outputs: bool) -> list[tuple[int, ...]]:
        d = self.d
        what = f"learnable box '{d.box(b)['op']}'"
        if outputs:
            return [tuple(self.static(x, what) for x in d.local_out_type(b, p)) for p in range(len(d.box_outputs(b)))]
        return [tuple(self.static(x, what) for x in d.local_in_type(b, p)) for p in range(len(d.box_inputs(b)))]

    def emit(self, b: int, value: fx.Node) -> None:
        outs = self.d.box_outputs(b)
        if len(outs) == 1:
            self.env[outs[0]] = value
            return
        for k, w in enumerate(outs):
            self.env[w] = self.g.call_function(operator.getitem, (value, k))

    def lower_box(self, b: int) -> None:
        node = self.d.box(b)
        kind, op, g = node["box"], node["op"], self.g
        name = self.d.graph.nodes[self.d.box_outputs(b)[0]]["name"] if self.d.box_outputs(b) else None
        if kind == "abstract":
            raise DiagError(f"'{op}' is an abstract family: instantiate it (specialise it in a derivation, or "
                            f"replace it by a definition) before compiling", node["pos"], None)
        if kind == "const":
            g_value = self.const_value(node["value"])
            y = g.call_function(P.const, (g_value, self.ref))
            if node["simd"]:  # a constant a rewrite placed inside SIMD boxes: one copy per index
                sizes = [self.size(dim) for _, dim in node["simd"]]
                y = g.create_node("call_method", "expand", (g.create_node("call_method", "view", (y, 1, *[1] * len(sizes))),
                                                           -1, *sizes))
            self.emit(b, y)
            return
        if kind == "contract":
            self.emit(b, self.contract(b))
            return
        if kind == "reindex":
            (x,) = self.aligned(b)
            sizes = [self.size(dim) for _, dim in node["simd"]]
            n_local = len(self.d.local_in_type(b, 0))
            self.emit(b, g.create_node("call_method", "expand", (x, -1, *sizes, *([-1] * n_local)),
                                       name=_ident(name or "r")))
            return
        if node.get("scan"):
            self.emit(b, self.scan(b))
            return
        if kind == "learn":
            self.emit(b, self.learnable(b, name))
            return
        if kind == "diagram":
            self.emit(b, self.native(b))
            return
        self.emit(b, self.fixed(b, name))

    def sdpa(self, m: Attention) -> fx.Node:
        """Fused attention: queries, keys and values arranged as [batch, heads..., position, feature]."""
        g = self.g

        def arrange(wire_roles, order):
            w, roles = wire_roles
            perm = (0, *[1 + roles.index(r) for r in order])
            x = self.env[w]
            return x if perm == tuple(range(len(perm))) else g.call_method("permute", (x, perm))

        q = arrange(m.q, [*m.heads, "i", "f"])
        k = arrange(m.k, [*m.heads, "j", "f"])
        v = arrange(m.v, [*m.heads, "j", "v"])
        y = g.call_function(F.scaled_dot_product_attention, (q, k, v),
                            {"is_causal": m.causal, "scale": m.scale}, name="attention")
        have = [*m.heads, "i", "v"]
        perm = (0, *[1 + have.index(r) for r in m.out_roles])
        return y if perm == tuple(range(len(perm))) else g.call_method("permute", (y, perm))

    def causal_linear(self, m: CausalLinear) -> fx.Node:
        g = self.g

        def arrange(wire_roles, order):
            w, roles = wire_roles
            x = self.env[w]
            present = [r for r in order if r in roles]
            perm = (0, *[1 + roles.index(r) for r in present])
            if perm != tuple(range(len(perm))):
                x = g.call_method("permute", (x, perm))
            for p, r in enumerate(order):  # a head index the values do not carry: broadcast
                if r not in roles:
                    x = g.call_method("unsqueeze", (x, 1 + p))
            return x

        q = arrange(m.q, [*m.heads, "i", "f"])
        k = arrange(m.k, [*m.heads, "j", "f"])
        v = arrange(m.v, [*m.heads, "j", "v"]) if m.v is not None else None
        y = g.call_function(P.causal_linear, (q, k, v, self.linear_chunk), name="linear_attention")
        have = [*m.heads, "i"] + (["v"] if m.v is not None else [])
        perm = (0, *[1 + have.index(r) for r in m.out_roles])
        return y if perm == tuple(range(len(perm))) else g.call_method("permute", (y, perm))

    def const_value(self, c) -> Any:
        return constants.evaluate(c, self.size, lambda fn, args: self.g.call_function(fn, tuple(args)))

    def contract(self, b: int) -> fx.Node:
        node = self.d.box(b)
        letters = iter(LETTERS)
        sym = {lab: next(letters) for lab, _ in tuple(node["simd"]) + tuple(node.get("summed", ()))}
        n_local = len(self.d.local_out_type(b, 0))
        local = [next(letters) for _ in range(n_local)]
        subs, args = [], []
        for w, axes in self.d.box_inputs(b):
            subs.append("..." + "".join(sym[a] if isinstance(a, str) else local[a] for a in axes))
            args.append(self.env[w])
        out = "..." + "".join(sym[lab] for lab, _ in node["simd"]) + "".join(local)
        name = self.d.graph.nodes[self.d.box_outputs(b)[0]]["name"]
        return self.g.call_function(torch.einsum, (",".join(subs) + "->" + out, *args), name=_ident(name or "einsum"))

    def register(self, key: tuple, make) -> str:
        """The attribute holding the module for one set of weights (made on first use);
        ``key`` is the set's identity (``weights.weight_key``), its last part its name."""
        if key not in self.registry:
            attr = _ident(str(key[-1]))
            while hasattr(self.root, attr):
                attr += "_"
            self.root.add_module(attr, make())
            self.registry[key] = attr
        return self.registry[key]

    def learnable(self, b: int, name: str | None) -> fx.Node:
        node = self.d.box(b)
        ins, outs = self.local_shapes(b, False), self.local_shapes(b, True)
        key = weight_key(node)
        if not ins:
            if len(outs) != 1:
                raise DiagError(f"learnable box '{node['op']}' has no inputs and several outputs; declare one "
                                "learnable tensor per output", node["pos"])
            mod = self.register(key, lambda: LearnableTensor(outs[0]))
            return self.g.create_node("call_module", mod, (), name=_ident(name or node["op"]))
        n_in, n_out = sum(math.prod(s) for s in ins), sum(math.prod(s) for s in outs)
        mod = self.register(key, lambda: self.make(n_in, n_out))
        xs = self.aligned(b)
        if len(ins) == 1 and len(ins[0]) == 1 and len(outs) == 1 and len(outs[0]) == 1:
            return self.g.create_node("call_module", mod, (xs[0],), name=_ident(name or node["op"]))
        return self.g.call_function(P.learnable, (self.g.get_attr(mod), xs, [len(s) for s in ins], outs),
                                    name=_ident(name or node["op"]))

    def native(self, b: int) -> fx.Node:
        node = self.d.box(b)
        op, g = node["op"], self.g
        gen = {k: v for k, v in node.get("generics", ())}
        (x,) = self.aligned(b)
        if op == "softmax":
            return g.call_function(torch.softmax, (x, -1))
        if op == "ssoftmax":
            k = self.size(gen["k"])
            return g.call_function(torch.softmax, (g.call_function(operator.truediv, (x, _sqrt(g, k))), -1))
        if op == "scale":
            return g.call_function(operator.truediv, (x, _sqrt(g, self.size(gen["k"]))))
        if op == "mean":
            return g.create_node("call_method", "mean", (x, -1))
        if op == "sum":
            return g.create_node("call_method", "sum", (x, -1))
        if op == "elu1":
            return g.call_function(operator.add, (g.call_function(F.elu, (x,)), 1.0))
        if op == "layernorm":
            n = self.static(gen["n"], "layernorm")
            mod = self.register(("diagram", node["instance"]), lambda: nn.LayerNorm(n))
            return g.call_module(mod, (x,))
        raise AssertionError(op)  # pragma: no cover - NATIVE lists exactly these

    def fixed(self, b: int, name: str | None) -> fx.Node:
        node = self.d.box(b)
        op, g = node["op"], self.g
        gen = [self.size(v) for _, v in node.get("generics", ())]
        xs = self.aligned(b)
        if op in P.ELEMENTWISE:
            y = g.call_function(P.ELEMENTWISE[op], tuple(xs), name=_ident(name or op))
            read = {a for _, axes in self.d.box_inputs(b) for a in axes if isinstance(a, str)}
            if any(lab not in read for lab, _ in node["simd"]):  # iterated over an index no input has
                sizes = [self.size(dim) for _, dim in node["simd"]]
                y = g.create_node("call_method", "expand", (y, -1, *sizes))
            return y
        if op == "hardmax":
            return g.call_function(P.hardmax, (xs[0],))
        if op == "rev":
            return g.create_node("call_method", "flip", (xs[0], -1))
        if op == "cat":
            both = g.call_function(P.broadcast_lead, (xs, [1, 1]))
            return g.call_function(torch.cat, (both, -1))
        if op == "split":
            return g.call_function(P.split, (xs[0], gen[0]))
        if op == "flatten":
            return g.create_node("call_method", "flatten", (xs[0], -2))
        if op == "unflatten":
            return g.create_node("call_method", "unflatten", (xs[0], -1, (gen[0], gen[1])))
        if op == "positions":
            return g.call_function(P.positions, (gen[0], self.ref))
        if op in ("ones", "zeros"):
            return g.call_function(P.filled, ((gen[0],), 1.0 if op == "ones" else 0.0, self.ref))
        if op == "posenc":
            return g.call_function(P.posenc, (gen[0], gen[1], self.ref))
        if op in ("causal",):
            return g.call_function(P.causal, (gen[0], self.ref))
        if op in ("window", "strided"):
            return g.call_function(getattr(P, op), (gen[0], gen[1], self.ref))
        if op == "gauss":
            return g.call_function(P.gauss, (xs[0], xs[1], gen[0]))
        raise DiagError(f"fixed process '{op}' has no implementation to compile; define it as a diagram",
                        node["pos"])

    def scan(self, b: int) -> fx.Node:
        node = self.d.box(b)
        xs = self.aligned(b)
        ins = [self.d.local_in_type(b, p) for p in range(len(xs))]
        outs = [self.d.local_out_type(b, p) for p in range(len(self.d.box_outputs(b)))]
        steps = self.size(node["simd"][-1][1])
        if node["box"] == "learn":
            in_s, out_s = self.local_shapes(b, False), self.local_shapes(b, True)
            n_in, n_out = sum(math.prod(s) for s in in_s), sum(math.prod(s) for s in out_s)
            mod = self.register(weight_key(node), lambda: self.make(n_in, n_out))
            cell = self.g.call_function(P.LearnableCell, (self.g.get_attr(mod), [len(s) for s in in_s], out_s))
        elif node["box"] == "diagram":
            key = node.get("instance", node["op"])
            # the body's local weights belong to this instance: Cell#1/W, not W
            sub = Lowering(node["ref"], self.dims, self.make, self.root, self.registry, native=self.native_prelude,
                           path=f"{key}/")
            cell = self.g.get_attr(self.register(("cell", key), sub.module))
        else:
            raise DiagError(f"'{node['op']}' cannot be scanned by the compiler", node["pos"])
        return self.g.call_function(P.scan, (cell, xs[0], xs[1:], len(ins[0]), [len(t) for t in ins[1:]], steps,
                                             [len(t) for t in outs[1:]]))


def _sqrt(g: fx.Graph, v: Any) -> Any:
    return math.sqrt(v) if isinstance(v, int) else g.call_function(math.sqrt, (v,))


def _flatten_batch(x: torch.Tensor, rank: int):
    """Fold any leading batch axes into one: [*B, ...] -> [N, ...]."""
    batch = tuple(x.shape[: x.dim() - rank])
    n = math.prod(batch)
    return x.reshape(n, *x.shape[x.dim() - rank:]), batch, n

