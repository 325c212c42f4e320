"""Typed graph to a trainable ``torch.fx.GraphModule`` whose code can be printed.

The diagram is expanded down to primitives (keeping the prelude definitions that have a
direct array form, :data:`~stringdiag.lower.table.NATIVE`), a ``scan`` that a recurrence law
matches becomes its parallel form (``scans.py``), the fast-path rules put fused attention in
place of its boxes (``fastpath.py``: that parallel form becomes a chunked kernel), and every
box becomes array code: a contraction an ``einsum`` (torch picks the order with opt_einsum's
cost model when it is installed), a learnable box a module registered once per set of weights
(a box used twice shares them), a primitive whatever its entry in the primitive table
(``table.py``) emits.
Every wire becomes a tensor with one leading batch axis followed by its type's axes, so a
SIMD box is a batched tensor operation over its indices: no Python loop over positions,
except the carried state of ``scan``. A ``repeat`` box is a loop over its copies' modules (one
per copy, or one for all when shared), its definition lowered once per copy, never unrolled.
"""
from __future__ import annotations

import copy

import math
import operator
from typing import Any, Mapping

import torch
from torch import fx, nn

from ..errors import DiagError
from ..graph import constants
from ..graph.arguments import need_diagram, need_sizes
from ..graph.diagram import Diagram
from ..graph.box import Box, Kind, Repeat, Scan
from ..graph.budget import MAX_LOWERED
from ..graph.expand import substituted
from ..graph.types import Dim, DimKind
from ..graph.weights import SetKind, WeightSet, weight_key
from . import loops
from . import param_names as N
from . import primitives as P
from .approximators import LearnableTensor, Policy, factory, per_box
from .interface import interface, need_dtype
from .passes import Settings, run_passes
from .scans import Chunked, prepared
from .table import PRIMITIVES

LETTERS = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"


def compile(diagram: Diagram, dims: Mapping[str, int] | None = None, approximator: Policy = "mlp",
            dtype: torch.dtype | None = None, fast: bool = True, native: bool = True,
            max_boxes: int = MAX_LOWERED) -> fx.GraphModule:
    """Lower a diagram to a module taking tensors shaped by its input types.

    Inputs may carry extra leading batch axes (the same for every input). ``dims`` gives
    the sizes of the fixed dimensions; seq dimensions are read from the inputs. With
    ``native`` (the default) the prelude definitions in :data:`NATIVE` are lowered to their
    direct array form; without it they are opened like any other definition and their
    bodies' own primitives are compiled (tests/test_primitives.py checks that both agree).
    With ``fast`` and ``native``, the rules of ``rules/fastpath.rules`` first replace softmax
    and causal linear attention by fused processes (``F.scaled_dot_product_attention``, say).
    A diagram that would lower more than ``max_boxes`` boxes (a stack's copies each count) is
    refused before any work, with the figure (``graph/budget.py``).
    """
    sizes = _with_defaults(diagram, dims)
    need_dtype(dtype)
    gm = Lowering(diagram, sizes, factory(approximator), nn.Module(), {}, fast, native, max_boxes=max_boxes).module()
    gm.interface = interface(diagram, sizes)  # what it computes: generate asks (interface.py)
    return gm.to(dtype) if dtype is not None else gm


_ident = N.ident


def _with_defaults(diagram: Diagram, dims: Mapping[str, int] | None) -> dict[str, int]:
    """The sizes given (a diagram's, positive integers: graph/arguments.py), then the defaults
    the diagram's file declares (``dim L : fixed = 2``) for the rest: they hold in every body
    compiled with it, an imported one's too."""
    need_diagram(diagram, "compile")
    out = need_sizes(dims)
    prog = diagram.program
    for name, decl in (prog.dims.items() if prog is not None else ()):
        if decl.kind is DimKind.FIXED and decl.default is not None:
            out.setdefault(name, decl.default)
    return out


class PrimitiveCall:
    """One primitive box as its entry in the primitive table sees it: inputs aligned as
    [batch, SIMD axes, local axes], dimension parameters by name, the graph to emit into."""

    def __init__(self, low: "Lowering", b: int):
        self.low, self.b = low, b
        self.node = low.d.record(b)
        self.g: fx.Graph = low.g
        self.xs: list[fx.Node] = low.aligned(b)
        self.generics: dict[str, Dim] = dict(self.node.generics)
        outs = low.d.box_outputs(b)
        self.name = _ident((low.d.wire_label(outs[0]) if outs else None) or self.node.op)

    @property
    def x(self) -> fx.Node:
        return self.xs[0]

    @property
    def ref(self) -> fx.Node:
        """A tensor of the inputs' dtype and device, for values made from nothing."""
        return self.low.ref

    def size(self, name: str) -> Any:
        return self.low.size(self.generics[name])

    def static(self, name: str) -> int:
        return self.low.static(self.generics[name], self.node.op)

    def constant(self, c) -> Any:
        return self.low.const_value(c)

    def literal(self, port: int) -> float | None:
        """The value of an input that a constant box gives, known when compiling (layer norm's
        eps), or None if it is computed."""
        d = self.low.d
        p = d.producer(d.box_inputs(self.b)[port][0])
        if p is None or d.record(p).kind is not Kind.CONST:
            return None
        v = self.low.const_value(d.record(p).value)
        return float(v) if isinstance(v, (int, float)) else None

    def sqrt(self, name: str) -> Any:
        return self.constant(constants.ConstOp("sqrt", constants.ConstDim(self.generics[name])))

    def call(self, fn, *args, **kwargs) -> fx.Node:
        return self.g.call_function(fn, args, kwargs or None)

    def method(self, name: str, *args) -> fx.Node:
        return self.g.call_method(name, args)

    def module(self, make, *args) -> fx.Node:
        """A module with parameters, one per instance of the definition (layer norm's gain)."""
        return self.g.call_module(self.low.register(WeightSet(SetKind.DIAGRAM, self.node.instance), make), args)

    def spread(self, y: fx.Node) -> fx.Node:
        """An elementwise result copied over the SIMD indices that no input has."""
        read = {a for _, axes in self.low.d.box_inputs(self.b) for a in axes if isinstance(a, str)}
        if all(lab in read for lab, _ in self.node.simd):
            return y
        return self.method("expand", y, -1, *[self.low.size(dim) for _, dim in self.node.simd])


class Lowering:
    """One diagram being lowered into one fx graph (a scanned definition gets its own)."""

    def __init__(self, diagram: Diagram, dims: dict[str, int], make, root: nn.Module, registry: dict,
                 fast: bool = True, native: bool = True, path: str = "", sites: dict | None = None, max_boxes=None):
        self.src = diagram
        self.native_prelude = native  # lower NATIVE definitions directly, or open them
        self.dims = dims
        self.make = make
        self.root = root
        self.registry = registry  # weight set (weights.weight_key) -> its module, shared by every fx graph
        self.attrs: dict[tuple, str] = {}  # weight set -> its attribute (a dotted path, names.py) on root
        fast = fast and native  # the fused processes are native: opened, they would be their bodies again
        self.fast = fast  # a loop's body (loops.py) is lowered as its caller is
        settings = Settings(fast, native, path, chunk=getattr(self, "prepare", prepared), sizes=dims,
                            max_boxes=max_boxes)
        top, self.d = run_passes(diagram, settings)  # passes.py: the budget, fast paths, definitions opened, fused
        self.chunked: list[Chunked] = settings.chunked  # the scans lowered through their chunked form (scans.py)
        self.sites = N.sites(top) if sites is None else sites
        self.prefix = N.dotted(path[:-1], self.sites) + "." if path else ""  # a scanned body's names are its own
        self.g = fx.Graph()
        self.env: dict[int, fx.Node] = {}
        self.seq: dict[str, fx.Node] = {}
        self._check_dims()

    # -- sizes ----------------------------------------------------------------------
    def _check_dims(self) -> None:
        prog = self.src.program
        names: set[str] = set()
        for w in self.d.wires():
            for dim in self.d.wire_type(w):
                names |= dim.names()
        for b in self.d.boxes():
            node = self.d.record(b)
            consts = constants.dims_in(node.value) if node.kind is Kind.CONST else []
            for dim in [d for _, d in node.generics] + consts:
                names |= dim.names()
            if node.repeat is not None:
                names |= node.repeat.count.names()
        missing = []
        for n in sorted(names):
            decl = prog.lookup_dim(n) if prog is not None else None
            if decl is None or decl.kind is DimKind.GENERIC:
                continue
            if decl.kind is DimKind.FIXED and n not in self.dims:
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
            factors = [self._named(n) for n in mono]
            if coeff != 1 or not factors:  # d, not 1 * d
                factors.insert(0, coeff)
            term = factors[0]
            for v in factors[1:]:
                term = self._combine(operator.mul, term, v)
            total = term if isinstance(total, int) and total == 0 else self._combine(operator.add, total, term)
        return total

    def _named(self, n: str) -> Any:
        if n in self.dims:
            return self.dims[n]
        if n in self.seq:
            return self.seq[n]
        raise DiagError(f"the size of dimension '{n}' of '{self.src.name}' is unknown: it is a seq "
                        "dimension that no input has as an axis of its own")

    def _combine(self, fn, a: Any, b: Any) -> Any:
        """``fn(a, b)`` now if both are ints, else a node computing it at run time."""
        return fn(a, b) if isinstance(a, int) and isinstance(b, int) else self.g.call_function(fn, (a, b))

    def static(self, dim: Dim, what: str) -> int:
        v = self.size(dim)
        if not isinstance(v, int):
            raise DiagError(f"{what} has a seq dimension ({dim}) in its type; give it a fixed size with dims=")
        return v

    # -- module ---------------------------------------------------------------------
    def inputs(self) -> tuple[Any, Any]:
        """Placeholders, flattened to one batch axis; seq lengths read off them. Returns the
        caller's batch shape and its size (nodes), or ``((), 1)`` for a diagram without inputs."""
        d, g = self.d, self.g
        placeholders, taken = [], set()
        for k in range(len(d.inputs)):  # all arguments first, so that no inner value takes their names
            name = _ident(d.input_names[k] if k < len(d.input_names) else f"x{k}")
            while name in taken:  # x and x' are both x_ once made identifiers: one argument each
                name += "_"
            taken.add(name)
            placeholders.append(g.placeholder(name))
        if not placeholders:  # no inputs (a learnable tensor, a constant): one value, in the module's dtype
            self.ref = self.dtype_ref()
            return (), 1
        batch = n_batch = None
        for w, ph in zip(d.inputs, placeholders):
            flat = g.call_function(_flatten_batch, (ph, len(d.wire_type(w))))
            if batch is None:
                batch = g.call_function(operator.getitem, (flat, 1), name="batch")
                n_batch = g.call_function(operator.getitem, (flat, 2), name="n")
            t = self.env[w] = g.call_function(operator.getitem, (flat, 0), name=ph.name + "_")
            for axis, dim in enumerate(d.wire_type(w)):
                n = dim.name
                decl = d.program.lookup_dim(n) if (n and d.program is not None) else None
                # seq lengths, and the dimension parameters of a generic diagram, come from the inputs
                if n and n not in self.seq and n not in self.dims and (decl is None or decl.kind is DimKind.SEQ):
                    self.seq[n] = g.create_node("call_method", "size", (t, axis + 1), name=_ident(n))
        reals = [w for w in d.inputs if d.id_range(w) is None]
        self.ref = self.env[reals[0]] if reals else self.dtype_ref()
        return batch, n_batch

    def dtype_ref(self) -> fx.Node:
        """Where every input is token ids (integers), the dtype and device of the real values
        made from nothing: a buffer of no elements that ``module.to(...)`` converts with the
        weights (not in the state dict)."""
        if not hasattr(self.root, "dtype_ref"):
            self.root.register_buffer("dtype_ref", torch.zeros(()), persistent=False)
        return self.g.get_attr("dtype_ref")

    def module(self) -> fx.GraphModule:
        d, g = self.d, self.g
        batch, n_batch = self.inputs()
        for b in d.topological_boxes():
            self.lower_box(b)
        outs = [g.call_function(P.unflatten_batch, (self.env[w], batch, n_batch)) for w in d.outputs]
        g.output(outs[0] if len(outs) == 1 else tuple(outs))
        gm = _graph_module(self.root, g, _ident(self.src.name))
        gm.weight_sets = dict(self.attrs)  # weight set -> attribute: what an oracle matches weights by
        gm.chunked_scans = list(self.chunked)  # the scans compiled through their chunked form
        return gm

    # -- boxes ----------------------------------------------------------------------
    def aligned(self, b: int) -> list[fx.Node]:
        """Each input as [batch, SIMD axes of the box (size 1 if not indexed), local axes]."""
        node = self.d.record(b)
        all_labels = [lab for lab, _ in node.simd]
        out = []
        for port, (w, axes) in enumerate(self.d.box_inputs(b)):
            # a scan's carried state is not iterated by the scanned (innermost) index
            labels = all_labels[:-1] if node.scan and port == 0 else all_labels
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
        what = f"learnable box '{d.record(b).op}'"
        if outputs:  # a bounded seq axis is sized by its bound (see bounded)
            bounds = _axis_bounds(d.record(b))
            return [tuple(bounds[i] if i < len(bounds) and bounds[i] else self.static(x, what)
                          for i, x in enumerate(d.local_out_type(b, p))) for p in range(len(d.box_outputs(b)))]
        return [tuple(self.static(x, what) for x in d.local_in_type(b, p)) for p in range(len(d.box_inputs(b)))]

    def emit(self, b: int, value: fx.Node) -> None:
        outs = self.d.box_outputs(b)
        if len(outs) == 1:
            self.env[outs[0]] = value
            return
        for k, w in enumerate(outs):
            self.env[w] = self.g.call_function(operator.getitem, (value, k))

    def lower_box(self, b: int) -> None:
        """Dispatch on the kind of box, as torch.fx's Interpreter does on a node's opcode."""
        node = self.d.record(b)
        if node.kind is Kind.ABSTRACT:
            raise DiagError(f"'{node.op}' is an abstract family: instantiate it (specialise it in a derivation, "
                            f"or replace it by a definition) before compiling", node.pos, None)
        self.emit(b, KINDS[type(node.loop) if node.loop is not None else node.kind](self, b))

    def constant(self, b: int) -> fx.Node:
        node, g = self.d.record(b), self.g
        y = g.call_function(P.const, (self.const_value(node.value), self.ref))
        if not node.simd:
            return y
        # a constant a rewrite placed inside SIMD boxes: one copy per index
        sizes = [self.size(dim) for _, dim in node.simd]
        return g.call_method("expand", (g.call_method("view", (y, 1, *[1] * len(sizes))), -1, *sizes))

    def const_value(self, c) -> Any:
        """A constant expression's value (graph/constants.py), as a node if a seq length is in it."""
        return constants.evaluate(c, self.size, lambda fn, args: self.g.call_function(fn, tuple(args)))

    def reindex(self, b: int) -> fx.Node:
        (x,) = self.aligned(b)
        sizes = [self.size(dim) for _, dim in self.d.record(b).simd]
        n_local = len(self.d.local_in_type(b, 0))
        return self.g.create_node("call_method", "expand", (x, -1, *sizes, *([-1] * n_local)),
                                  name=_ident(self.out_name(b) or "r"))

    def out_name(self, b: int) -> str | None:
        outs = self.d.box_outputs(b)
        return self.d.wire_label(outs[0]) if outs else None

    def contract(self, b: int) -> fx.Node:
        node = self.d.record(b)
        letters = iter(LETTERS)
        sym = {lab: next(letters) for lab, _ in tuple(node.simd) + tuple(node.summed)}
        n_local = len(self.d.local_out_type(b, 0))
        local = [next(letters) for _ in range(n_local)]
        subs, args = [], []
        for w, axes in self.d.box_inputs(b):
            subs.append("..." + "".join(sym[a] if isinstance(a, str) else local[a] for a in axes))
            args.append(self.env[w])
        out = "..." + "".join(sym[lab] for lab, _ in node.simd) + "".join(local)
        return self.g.call_function(torch.einsum, (",".join(subs) + "->" + out, *args),
                                    name=_ident(self.out_name(b) or "einsum"))

    def register(self, key: tuple, make) -> str:
        """The attribute holding the module for one set of weights (made on first use, one
        module wherever the set is used); ``key`` is the set's identity
        (``weights.weight_key``), its last part the path that names it (``names.py``)."""
        if key not in self.attrs:
            if key not in self.registry:
                self.registry[key] = make()
            name = N.dotted(str(key[-1]), self.sites)
            name = name[len(self.prefix):] if self.prefix and name.startswith(self.prefix) else name
            self.attrs[key] = N.place(self.root, name, self.registry[key])
        return self.attrs[key]

    def learnable(self, b: int) -> fx.Node:
        node = self.d.record(b)
        name = _ident(self.out_name(b) or node.op)
        if not self.d.box_inputs(b):
            outs = self.local_shapes(b, True)
            if len(outs) != 1:
                raise DiagError(f"learnable box '{node.op}' has no inputs and several outputs; declare one "
                                "learnable tensor per output", node.pos)
            mod = self.register(weight_key(node), lambda: LearnableTensor(outs[0]))
            t = self.g.create_node("call_module", mod, (), name=name)
            return self.bounded(b, t) if any(_axis_bounds(node)) else t
        mod, ins, outs = self.approximator(b)
        xs = self.aligned(b)
        if len(ins) == 1 and len(ins[0]) == 1 and len(outs) == 1 and len(outs[0]) == 1:
            return self.g.create_node("call_module", mod, (xs[0],), name=name)
        return self.g.call_function(P.learnable, (self.g.get_attr(mod), xs, [len(s) for s in ins], outs), name=name)

    def bounded(self, b: int, t: fx.Node) -> fx.Node:
        """A learnable tensor over a bounded seq axis (``where s <= 512``), held at its largest
        length, sliced to the length of the run (an error past the bound)."""
        node = self.d.record(b)
        bounds, ty = _axis_bounds(node), self.d.local_out_type(b, 0)
        sizes = [self.size(dim) if m else None for dim, m in zip(ty, bounds)]
        return self.g.call_function(P.bounded, (t, sizes, list(bounds), [str(dim) for dim in ty], node.op))

    def approximator(self, b: int) -> tuple[str, list, list]:
        """The module of a learnable box's weight set (made by the policy on first use), and
        the box's local input and output shapes."""
        ins, outs = self.local_shapes(b, False), self.local_shapes(b, True)
        n_in, n_out = sum(math.prod(s) for s in ins), sum(math.prod(s) for s in outs)
        make = per_box(getattr(self.d.record(b).ref, "via", None), self.make)
        return self.register(weight_key(self.d.record(b)), lambda: make(n_in, n_out)), ins, outs

    def primitive(self, b: int) -> fx.Node:
        """A fixed primitive or a native definition: its entry in the primitive table."""
        node = self.d.record(b)
        entry = PRIMITIVES.get(node.op)
        if entry is None:
            raise DiagError(f"fixed process '{node.op}' has no implementation to compile; define it as a "
                            "diagram", node.pos)
        return entry(PrimitiveCall(self, b))

    def random(self, b: int) -> fx.Node:
        """A fixed random tensor: drawn from N(0, 1) by its seed with a ``torch.Generator``
        (in float64, so every dtype sees the same draw), a registered buffer when its shape is
        fixed (not a parameter: never trained), drawn again from the seed at run time when a
        seq length is in its shape. One box (name and seed) is one tensor wherever it is used."""
        node = self.d.record(b)
        shape = [self.size(x) for x in self.d.local_out_type(b, 0)]
        if not all(isinstance(n, int) for n in shape):
            return self.g.call_function(P.seeded, (node.seed, shape, self.ref), name=_ident(node.op))
        key = ("random", node.op, node.seed, tuple(shape))
        if key not in self.registry:
            self.registry[key] = P.seeded(node.seed, shape, None)
        # the one tensor, a buffer of every graph that reads it (a scanned or repeated body has its own root)
        attr = next((n for n, t in self.root.named_buffers(recurse=False) if t is self.registry[key]), None)
        if attr is None:
            attr = _ident(f"{node.op}_seed{node.seed}")
            while hasattr(self.root, attr):
                attr += "_"
            self.root.register_buffer(attr, self.registry[key])
        return self.g.call_function(P.like, (self.g.get_attr(attr), self.ref), name=_ident(node.op))



def _graph_module(root: nn.Module, g: fx.Graph, name: str) -> fx.GraphModule:
    """The graph module, its dead code (what fused paths made unnecessary: a mask nothing reads)
    removed first, so that its Python code is written once; a weight only dead code read stays."""
    held = {n.target for n in g.nodes if n.op in ("call_module", "get_attr")}
    g.owning_module = root  # what a module call's purity is read from
    g.eliminate_dead_code()
    gm = fx.GraphModule(root, g, class_name=name)
    for target in sorted(held - {n.target for n in g.nodes}):
        fx.graph_module._copy_attr(root, gm, target)
    return _ref_not_saved(gm)


def _ref_not_saved(gm: nn.Module) -> nn.Module:
    """``dtype_ref`` (made non-persistent) out of the state dict, in ``gm`` and every module in it:
    fx copies buffers as persistent, when it builds a graph module and when it deep-copies one."""
    for m in gm.modules():
        if "dtype_ref" in m._buffers:
            m._non_persistent_buffers_set.add("dtype_ref")
    return gm


def copy_module(module: nn.Module) -> nn.Module:
    """A deep copy of a compiled module, with the same state-dict keys as the original."""
    return _ref_not_saved(copy.deepcopy(module))


def _axis_bounds(node: Box) -> tuple:
    """Per output axis of a learnable box, its largest length (``where s <= 512``) or None."""
    ref = node.ref
    return ref.axis_bounds() if hasattr(ref, "axis_bounds") else ()


def _flatten_batch(x: torch.Tensor, rank: int):
    """Fold any leading batch axes into one: [*B, ...] -> [N, ...]."""
    if x.dim() == rank + 1:  # one batch axis already: nothing to fold (a fixed cost of every call)
        return x, (x.shape[0],), x.shape[0]
    batch = tuple(x.shape[: x.dim() - rank])
    n = math.prod(batch)
    return x.reshape(n, *x.shape[x.dim() - rank:]), batch, n


KINDS = {Kind.CONST: Lowering.constant, Kind.CONTRACT: Lowering.contract, Kind.REINDEX: Lowering.reindex,
         Kind.LEARN: Lowering.learnable, Kind.DIAGRAM: Lowering.primitive, Kind.FIXED: Lowering.primitive,
         Kind.RANDOM: Lowering.random, Scan: loops.scan, Repeat: loops.repeat}
