"""An evaluator of diagrams in NumPy (float64), written for the tests and sharing no code with the
compiler: the reference the gallery's compiled modules are compared with (``test_gallery.py``), and the
judge of every equation step in ``test_soundness.py`` and of the iteration laws.

It reads boxes, SIMD labels, wire axes and loops straight from the typed graph, opens every use of a
definition (the prelude's too: a softmax is its body, amax, exp and a sum), and computes each fixed
primitive from the prelude's own description of it (``stringdiag/prelude/prelude.diag``). Learnable
boxes read the weights of the module under test, found by their weight set (a global learnable by
its name, a local one by the path of instances it lies in), and apply them with NumPy.

Every array is ``[batch..., *wire type]``; a box's inputs are aligned to ``[batch..., one axis per
SIMD label, local axes]`` before it applies, as the paper's SIMD boxes say (App. A).
"""
from __future__ import annotations

import hashlib
import math
from typing import Callable, Mapping

import numpy as np
import torch

from stringdiag.graph.box import Global, Kind, Local, Repeat, Scan


class Weights:
    """The weights a compiled module holds, by weight set: ``("learn", local, path)`` -> the
    module of a learnable box (an ``nn.Linear``, an MLP, a learnable tensor), ``("diagram", path)``
    -> the module a native definition became (torch's layer norm, whose gain and bias are the
    definition's ``gamma`` and ``beta``)."""

    def __init__(self, registry: Mapping[tuple, torch.nn.Module]):
        self.registry = dict(registry)
        self.read: set[tuple] = set()

    def module(self, key: tuple):
        if key in self.registry:
            self.read.add(key)
            return self.registry[key]
        *_, path = key
        head, _, param = path.rpartition("/")
        norm = self.registry.get(("diagram", head))
        if isinstance(norm, torch.nn.LayerNorm) and param in ("gamma", "beta"):
            self.read.add(("diagram", head))
            return norm.weight if param == "gamma" else norm.bias
        raise KeyError(f"no weights for {key}; the module has {sorted(map(str, self.registry))}")


class Seeded:
    """A weight set made on first use: numbers drawn from a seed that is the set's identity, so
    that two diagrams (a diagram and its rewritten form) compute with the same weights wherever
    they name the same set."""

    def __init__(self, key: tuple):
        self.key = key

    def draw(self, *shape: int) -> np.ndarray:
        seed = int.from_bytes(hashlib.sha256(repr((self.key, shape)).encode()).digest()[:8], "little")
        return np.random.default_rng(seed).normal(size=shape) / math.sqrt(max(shape[0], 1))


class SeededWeights(Weights):
    """Every weight set :class:`Seeded`, none held by a module. ``rename`` maps instance paths a
    step renamed back to the ones they had (a fold makes ``H#1`` into ``G#1/H#1``), so that a
    local set keeps its numbers across the step."""

    def __init__(self, rename: Mapping[str, str] | None = None):
        super().__init__({})
        self.rename = dict(rename or {})

    def module(self, key: tuple):
        if key[:2] == ("learn", True):
            key = ("learn", True, renamed(key[2], self.rename))
        self.read.add(key)
        return Seeded(key)


def renamed(path: str, rename: Mapping[str, str]) -> str:
    for new, old in rename.items():
        if path == new or path.startswith(new + "/"):
            return old + path[len(new):]
    return path


def array(t) -> np.ndarray:
    return t.detach().to(torch.float64).cpu().numpy()


# -- learnable boxes ------------------------------------------------------------------------------
def approximate(module, x: np.ndarray) -> np.ndarray:
    """A learnable box's module on the flattened inputs ``[..., n_in]``: affine maps and ReLUs; a
    seeded one is tanh of an affine map, nonlinear so that a law true of linear maps only shows."""
    if isinstance(module, Seeded):
        w = module.draw(x.shape[-1] + 1, module.n_out)
        return np.tanh(x @ w[:-1] + w[-1])
    if isinstance(module, torch.nn.Linear):
        y = x @ array(module.weight).T
        return y + array(module.bias) if module.bias is not None else y
    if isinstance(module, torch.nn.ReLU):
        return np.maximum(x, 0.0)
    if isinstance(module, torch.nn.Sequential):
        for m in module:
            x = approximate(m, x)
        return x
    raise NotImplementedError(f"approximator {type(module).__name__}")


def tensor(module, local: list[int]) -> np.ndarray:
    """A learnable tensor (a box without inputs), cut to the run's lengths where an axis is a
    bounded seq one (held at its bound)."""
    if isinstance(module, Seeded):
        return module.draw(*local) if local else module.draw(1)[0]
    w = array(module.weight if hasattr(module, "weight") else module)
    return w[tuple(slice(0, n) for n in local)]


# -- fixed primitives: each as the prelude describes it ---------------------------------------------
def _erf(x):
    return np.vectorize(math.erf, otypes=[float])(x)


def _hardmax(x):
    hit = (x == x.max(axis=-1, keepdims=True)).astype(float)
    return hit / hit.sum(axis=-1, keepdims=True)


def _grid(n):
    i = np.arange(n)
    return i[:, None], i[None, :]


def _posenc(n, m):
    pos, f = np.arange(n)[:, None], np.arange(m)[None, :]
    angle = pos / 10000.0 ** ((f - f % 2) / m)   # features 2i and 2i + 1 share the frequency of 2i
    return np.where(f % 2 == 0, np.sin(angle), np.cos(angle))


def _shift(x, k):
    y = np.zeros_like(x)
    if k < x.shape[-1]:
        y[..., k:] = x[..., : x.shape[-1] - k]
    return y


def _causal_conv(x, kernel):
    n, w = x.shape[-1], kernel.shape[-1]
    y = np.zeros(np.broadcast_shapes(x.shape, kernel.shape[:-1] + (n,)))
    for j in range(n):
        for u in range(w):
            if 0 <= j + u - w + 1 < n:
                y[..., j] += kernel[..., u] * x[..., j + u - w + 1]
    return y


def _embed(ids, table):
    lead = np.broadcast_shapes(ids.shape, table.shape[:-2])
    ids, table = np.broadcast_to(ids, lead), np.broadcast_to(table, lead + table.shape[-2:])
    out = np.empty(lead + table.shape[-1:])
    for at in np.ndindex(*lead):
        out[at] = table[at][int(ids[at])]
    return out


def _bucket(x, n):
    assert not np.isnan(x).any()
    return np.clip(np.round(x), 0, n - 1).astype(np.int64)  # np.round: halves to even


def _topk(x, k):
    order = np.argsort(-x, axis=-1, kind="stable")[..., :k]
    return np.take_along_axis(x, order, -1), order


def _lead_matched(xs):
    """Arrays whose leading axes (all but the last) are broadcast to one shape."""
    lead = np.broadcast_shapes(*(x.shape[:-1] for x in xs))
    return [np.broadcast_to(x, lead + x.shape[-1:]) for x in xs]


def _softplus(x):
    return np.logaddexp(0.0, x)


SCALAR: dict[str, Callable] = {
    "add": np.add, "sub": np.subtract, "mul": np.multiply, "div": np.divide, "neg": np.negative,
    "exp": np.exp, "log": np.log, "sqrt": np.sqrt, "sin": np.sin, "cos": np.cos, "pow": np.power,
    "floor": np.floor, "relu": lambda x: np.maximum(x, 0.0),
    "elu": lambda x: np.where(x > 0, x, np.expm1(np.minimum(x, 0.0))),
    "sigmoid": lambda x: 1.0 / (1.0 + np.exp(-x)), "tanh": np.tanh, "softplus": _softplus, "erf": _erf,
    "gelu": lambda x: 0.5 * x * (1.0 + _erf(x / math.sqrt(2.0))),
    "gelu_tanh": lambda x: 0.5 * x * (1.0 + np.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * x ** 3))),
    "max": np.maximum, "min": np.minimum, "clamp": lambda x, lo, hi: np.minimum(np.maximum(x, lo), hi),
    "detach": lambda x: x, "dropout": lambda x, p: x,  # evaluation: the identity
    "where": lambda x, m: np.where(m != 0, x, -np.inf), "lt": lambda a, b: (a < b).astype(float),
}


def fixed(op: str, xs: list[np.ndarray], g: Mapping[str, int]) -> list[np.ndarray]:
    """A fixed primitive on local arrays (any leading axes); ``g`` its generic sizes."""
    if op in SCALAR:
        return [SCALAR[op](*xs)]
    x = xs[0] if xs else None
    table: dict[str, Callable] = {
        "hardmax": lambda: _hardmax(x), "amax": lambda: x.max(axis=-1),
        "cumsum": lambda: np.cumsum(x, axis=-1), "cumprod": lambda: np.cumprod(x, axis=-1),
        "ones": lambda: np.ones(g["n"]), "zeros": lambda: np.zeros(g["n"]),
        "cat": lambda: np.concatenate(_lead_matched(xs), axis=-1),
        "rev": lambda: x[..., ::-1],
        "flatten": lambda: x.reshape(x.shape[:-2] + (x.shape[-2] * x.shape[-1],)),
        "unflatten": lambda: x.reshape(x.shape[:-1] + (g["n"], g["m"])),
        "pick": lambda: x[..., g["a"]],
        "narrow": lambda: x[..., g["a"]: g["a"] + g["m"]],
        "shift": lambda: _shift(x, g["k"]),
        "causal_conv": lambda: _causal_conv(*xs),
        "embed": lambda: _embed(*xs),
        "bucket": lambda: _bucket(x, g["n"]),
        "positions": lambda: np.arange(g["n"], dtype=float),
        "posenc": lambda: _posenc(g["n"], g["m"]),
        "causal": lambda: (lambda i, j: (j <= i).astype(float))(*_grid(g["n"])),
        "window": lambda: (lambda i, j: (abs(i - j) < g["w"]).astype(float))(*_grid(g["n"])),
        "strided": lambda: (lambda i, j: (((i - j) % g["w"] == 0) & (j <= i)).astype(float))(*_grid(g["n"])),
        "global": lambda: (lambda i, j: ((i < g["g"]) | (j < g["g"])).astype(float))(*_grid(g["n"])),
        "gauss": lambda: np.exp(-(np.arange(g["n"]) - xs[0][..., None]) ** 2 / (2 * xs[1][..., None] ** 2)),
    }
    if op == "split":
        return [x[..., : g["n"]], x[..., g["n"]:]]
    if op == "topk":
        return list(_topk(x, g["k"]))
    if op not in table:
        raise NotImplementedError(f"fixed primitive {op}")
    return [table[op]()]


# -- constants --------------------------------------------------------------------------------------
CONST_OPS = {"add": lambda a, b: a + b, "sub": lambda a, b: a - b, "mul": lambda a, b: a * b,
             "div": lambda a, b: np.divide(a, b), "neg": lambda a: -a, "sqrt": np.sqrt, "exp": np.exp,
             "log": np.log}


def constant(c, sizes: Mapping[str, int]) -> float:
    if c[0] == "num":
        return float(c[1])
    if c[0] == "dim":
        return float(c[1].evaluate(sizes))
    return float(CONST_OPS[c[0]](*(constant(a, sizes) for a in c[1:])))


# -- the graph ----------------------------------------------------------------------------------------
def evaluate(d, inputs: list[np.ndarray], sizes: Mapping[str, int], weights: Weights,
             prefix: str = "") -> list[np.ndarray]:
    """The outputs of diagram ``d`` on ``inputs`` (``[batch..., *input type]`` each, one batch
    shape for all); ``sizes`` gives every dimension the diagram's types name."""
    val = dict(zip(d.inputs, inputs))
    batch = inputs[0].shape[: inputs[0].ndim - len(d.wire_type(d.inputs[0]))] if inputs else ()
    for b in _order(d):
        box = d.record(b)
        ins = d.box_inputs(b)
        outs = d.box_outputs(b)
        simd = [(lab, dim.evaluate(sizes)) for lab, dim in box.simd]
        types = [[dim.evaluate(sizes) for dim in d.wire_type(w)] for w in outs]
        if box.kind is Kind.CONTRACT:
            res = [_contract(box, [(val[w], axes) for w, axes in ins], simd, sizes, len(types[0]) - len(simd))]
        else:
            xs = [_aligned(val[w], axes, simd, len(batch)) for w, axes in ins]
            res = _apply(box, xs, tuple(batch), simd, types, sizes, weights, prefix)
        for w, y, t in zip(outs, res, types):
            val[w] = np.broadcast_to(y, tuple(batch) + tuple(t))
    return [val[w] for w in d.outputs]


def _order(d) -> list[int]:
    """The boxes in an order where every input is computed first."""
    import networkx as nx
    return [n for n in nx.topological_sort(d.graph) if d.is_box(n)]


def _aligned(x: np.ndarray, axes: tuple, simd: list, nb: int) -> np.ndarray:
    """The input as [batch, one axis per SIMD label of the box (1 where the wire lacks it), local axes]."""
    order, shape = [], []
    for lab, size in simd:
        if lab in axes:
            order.append(nb + axes.index(lab))
        shape.append(size if lab in axes else 1)
    local = sorted((k, i) for i, k in enumerate(axes) if isinstance(k, int))
    y = np.transpose(x, list(range(nb)) + order + [nb + i for _, i in local])
    return y.reshape(x.shape[:nb] + tuple(shape) + tuple(x.shape[nb + i] for _, i in local))


def _contract(box, ins, simd, sizes, n_local) -> np.ndarray:
    letters = iter("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ")
    sym = {lab: next(letters) for lab, _ in list(simd) + [(lab, None) for lab, _ in box.summed]}
    local = [next(letters) for _ in range(n_local)]
    subs = ["..." + "".join(sym[a] if isinstance(a, str) else local[a] for a in axes) for _, axes in ins]
    out = "..." + "".join(sym[lab] for lab, _ in simd) + "".join(local)
    return np.einsum(",".join(subs) + "->" + out, *[x for x, _ in ins])


def _generics(box, sizes) -> dict[str, int]:
    return {name: dim.evaluate(sizes) for name, dim in box.generics}


def _weight_key(box, prefix: str) -> tuple:
    w = box.weights
    if isinstance(w, Global):
        return ("learn", False, w.param)
    assert isinstance(w, Local), box
    return ("learn", True, prefix + w.param)


def _learn(module, xs: list[np.ndarray], lead: tuple, locals_out: list[list[int]]) -> list[np.ndarray]:
    if isinstance(module, Seeded):
        module.n_out = sum(math.prod(t) for t in locals_out)
    flat = np.concatenate([np.broadcast_to(x, lead + x.shape[len(lead):]).reshape(lead + (-1,)) for x in xs], -1)
    y = approximate(module, flat)
    outs, k = [], 0
    for t in locals_out:
        m = math.prod(t)
        outs.append(y[..., k:k + m].reshape(lead + tuple(t)))
        k += m
    return outs


def _apply(box, xs, batch, simd, types, sizes, weights, prefix) -> list[np.ndarray]:
    lead = batch + tuple(n for _, n in simd)
    locals_out = [t[len(simd):] for t in types]
    if isinstance(box.loop, Scan):  # the state is not indexed by the scanned label
        locals_out = [types[0][len(simd) - 1:]] + locals_out[1:]
        return _scan(box, xs, batch, simd, locals_out, sizes, weights, prefix)
    if box.kind is Kind.CONST:
        return [np.full(lead, constant(box.value, sizes))]
    if box.kind is Kind.REINDEX:
        return [xs[0]]
    if box.kind is Kind.FIXED:
        return fixed(box.op, xs, _generics(box, sizes))
    if box.kind is Kind.RANDOM:
        gen = torch.Generator().manual_seed(box.seed)
        return [torch.randn(tuple(locals_out[0]), generator=gen, dtype=torch.float64).numpy()]
    if box.kind is Kind.LEARN:
        module = weights.module(_weight_key(box, prefix))
        if not xs:
            return [tensor(module, locals_out[0])]
        return _learn(module, xs, lead, locals_out)
    if box.kind is Kind.DIAGRAM:
        inner = {**sizes, **_generics(box, sizes)}
        xs = [np.broadcast_to(x, lead + x.shape[len(lead):]) for x in xs]
        if isinstance(box.loop, Repeat):
            return _repeat(box, xs, inner, weights, prefix, box.loop.count.evaluate(sizes))
        return evaluate(box.ref, xs, inner, weights, prefix + box.instance + "/")
    raise NotImplementedError(f"{box.kind} box '{box.op}'")


def _repeat(box, xs, inner, weights, prefix, count: int) -> list[np.ndarray]:
    x, rest = xs[0], xs[1:]
    for k in range(count):
        path = f"{prefix}{box.instance}/" + ("" if box.loop.shared else f"{k}/")
        (x,) = evaluate(box.ref, [x, *rest], inner, weights, path)
    return [x]


def _scan(box, xs, batch, simd, locals_out, sizes, weights, prefix) -> list[np.ndarray]:
    """The innermost SIMD index run in sequence: the state (port 0) carried from step to step,
    the other outputs one per step."""
    nb, steps = len(batch), simd[-1][1]
    axis = nb + len(simd) - 1
    lead = batch + tuple(n for _, n in simd[:-1])
    state = np.broadcast_to(np.take(xs[0], 0, axis=axis), lead + xs[0].shape[axis + 1:])
    ys: list[list[np.ndarray]] = [[] for _ in locals_out[1:]]
    for t in range(steps):
        step = [np.take(x, t if x.shape[axis] > 1 else 0, axis=axis) for x in xs[1:]]
        step = [np.broadcast_to(x, lead + x.shape[axis:]) for x in step]
        if box.kind is Kind.LEARN:
            state, *out = _learn(weights.module(_weight_key(box, prefix)), [state, *step], lead, locals_out)
        else:
            inner = {**sizes, **_generics(box, sizes)}
            state, *out = evaluate(box.ref, [state, *step], inner, weights, prefix + box.instance + "/")
        for acc, y in zip(ys, out):
            acc.append(y)
    return [state] + [np.stack(acc, axis=axis) for acc in ys]
